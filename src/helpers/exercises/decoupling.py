"""Checker for notebook 01's exercise: a line-search loop that dequeues each batch exactly once."""

from __future__ import annotations

import math
from typing import Callable

import keras

from helpers import decoupling, molecules
from helpers.exercises._core import call_learner, expect, passed

_BATCHES, _ITERATIONS = 3, 8


def check_fit_batches(fit_batches: Callable) -> None:
    """``fit_batches(iterator, model, loss_fn, num_batches, max_iterations)`` must take
    ``num_batches`` batches from ``iterator``, one at a time, run L-BFGS on each, and return
    the list of final losses (one float per batch)."""
    dataset = molecules.molecule_dataset(40, batch_size=6, seed=11)
    loss_fn = keras.losses.MeanSquaredError(dtype="float64")
    first = next(iter(dataset))
    theirs, ours = molecules.PerAtomEnergy(hidden=8), molecules.PerAtomEnergy(hidden=8)
    theirs(first[0]), ours(first[0])
    ours.set_weights(theirs.get_weights())

    iterator = decoupling.CountingIterator(iter(dataset))
    losses = call_learner(fit_batches, iterator, theirs, loss_fn, _BATCHES, _ITERATIONS, name="fit_batches")

    expect(isinstance(losses, (list, tuple)), f"return a list of losses, one per batch; got {type(losses).__name__}")
    expect(iterator.advances == _BATCHES,
           f"asked for {_BATCHES} batches, your loop took {iterator.advances} from the iterator: "
           "take each batch exactly once, before the optimizer starts, and reuse it for every evaluation")
    expect(len(losses) == _BATCHES, f"asked for {_BATCHES} batches, got {len(losses)} losses")
    expect(all(isinstance(l, (int, float)) and math.isfinite(l) for l in losses),
           "each loss should be a finite Python float (use float(...))")

    expected = []
    for batch in dataset.take(_BATCHES):
        expected.append(float(decoupling.minimize_on_batch(ours, loss_fn, batch, max_iterations=_ITERATIONS).fun))
    for k, (got, want) in enumerate(zip(losses, expected)):
        expect(math.isclose(got, want, rel_tol=1e-3, abs_tol=1e-6),
               f"batch {k}: your loss {got:.4g} is not the loss L-BFGS reaches on that batch: optimise with "
               f"max_iterations as given, keep the model's parameters from one batch to the next, and "
               "return the loss at the optimum, not the starting loss")
    passed(f"{_BATCHES} batches dequeued once each; every loss matches L-BFGS on its batch.")
