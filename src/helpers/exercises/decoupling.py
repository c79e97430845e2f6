"""Checkers for notebook 01's exercises: a line search and a gradient check, each dequeuing once per batch.

* :func:`check_armijo_step`: one backtracking (Armijo) line-search step on one batch.
* :func:`check_gradient_check`: a finite-difference gradient check on batches of different sizes,
  with one compiled function traced once.

Each builds its own data and models, runs the learner's function on one model and checks what it
returned against losses and gradients computed on a twin with the same weights, and fails with one
line saying what is wrong (never what the code should be).

Fixtures for the hidden tests: :func:`twin_models`, :func:`counting_pipeline`,
:func:`recording_model` and :func:`weights`.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import keras
import numpy as np
import tensorflow as tf

from helpers import decoupling, molecules
from helpers.exercises._core import CheckFailed, call_learner, expect, passed

__all__ = ["check_armijo_step", "check_gradient_check", "twin_models", "counting_pipeline", "recording_model",
           "weights"]


def twin_models(batch: tuple, seed: int, hidden: int = 8, **kwargs: Any) -> tuple[keras.Model, keras.Model]:
    """Two built per-atom energy models with the same weights: one for the learner, one for the check."""
    keras.utils.set_random_seed(seed)
    theirs, ours = (molecules.PerAtomEnergy(hidden=hidden, **kwargs), molecules.PerAtomEnergy(hidden=hidden, **kwargs))
    theirs(batch[0]), ours(batch[0])
    ours.set_weights(theirs.get_weights())
    return theirs, ours


class _Pipeline(decoupling.CountingIterator):
    """The checker's input pipeline: counts the batches taken, and says so when it runs dry."""

    def __init__(self, dataset: tf.data.Dataset, needed: int):
        super().__init__(iter(dataset))
        self._needed = needed

    def __next__(self):
        try:
            return super().__next__()
        except StopIteration:
            raise CheckFailed(
                f"your function asked the iterator for batch {self.advances + 1} and ran it dry, but it needs "
                f"only {self._needed}: take each batch once and evaluate every point on it") from None


def counting_pipeline(dataset: tf.data.Dataset, needed: int) -> _Pipeline:
    """An iterator over ``dataset`` that counts the batches taken (``.advances``) and fails with a
    hint when the learner's code runs it dry (it needs only ``needed``)."""
    return _Pipeline(dataset, needed)


def weights(model: keras.Model) -> list[np.ndarray]:
    """Copies of the model's trainable weights now."""
    return [np.array(v.numpy()) for v in model.trainable_variables]


_weights = weights


def _loss_and_gradient(model: keras.Model, loss_fn: Callable, batch: tuple,
                       at: list[np.ndarray] | None = None) -> tuple[float, list[np.ndarray]]:
    """Loss and gradient of ``model`` (in inference mode) on ``batch``, at the weights ``at`` if given
    (they stay in the model)."""
    if at is not None:
        for variable, value in zip(model.trainable_variables, at):
            variable.assign(value)
    with tf.GradientTape() as tape:
        loss = loss_fn(batch[1], model(batch[0], training=False))
    return float(loss), [g.numpy() for g in tape.gradient(loss, model.trainable_variables)]


def _close(a: list[np.ndarray], b: list[np.ndarray], rtol: float = 1e-9) -> bool:
    return all(np.allclose(x, y, rtol=rtol, atol=1e-12) for x, y in zip(a, b))


# --------------------------------------------------------------------------- exercise 1


def _accepts(ours: keras.Model, loss_fn: Callable, batch: tuple, start: list[np.ndarray], f0: float,
             g: list[np.ndarray], trial: float, c: float) -> bool:
    """Whether the Armijo condition holds at step ``trial`` from ``start``, where the loss is ``f0`` and
    the gradient ``g`` (``ours`` is left at the trial point)."""
    moved = [w - trial * d for w, d in zip(start, g)]
    return _loss_and_gradient(ours, loss_fn, batch, moved)[0] <= f0 - c * trial * sum(float(np.sum(d * d)) for d in g)


def _is_first_accepted(t: float, ours: keras.Model, loss_fn: Callable, batch: tuple, start: list[np.ndarray],
                       shrink: float, c: float, max_tries: int) -> bool:
    """Whether ``t`` is the first of 1, shrink, shrink**2 ... (max_tries of them) that the condition
    accepts, or 0.0 when it accepts none of them."""
    trials = [shrink ** k for k in range(max_tries)]
    matches = [k for k, trial in enumerate(trials) if math.isclose(t, trial, rel_tol=1e-9, abs_tol=0.0)]
    if t != 0.0 and not matches:
        return False
    f0, g = _loss_and_gradient(ours, loss_fn, batch, start)  # once: every trial starts from here
    if t == 0.0:
        return not any(_accepts(ours, loss_fn, batch, start, f0, g, trial, c) for trial in trials)
    return (_accepts(ours, loss_fn, batch, start, f0, g, t, c)
            and not any(_accepts(ours, loss_fn, batch, start, f0, g, trial, c) for trial in trials[:matches[0]]))


def check_armijo_step(armijo_step: Callable) -> None:
    """``armijo_step(iterator, model, loss_fn, shrink, c, max_tries)`` takes one batch, backtracks
    t = 1, shrink, shrink**2, ... until f(theta - t g) <= f0 - c t |g|^2, leaves the model at
    theta - t g and returns t (0.0, model unchanged, when no t is accepted in max_tries)."""
    dataset = molecules.molecule_dataset(24, batch_size=8, seed=7)
    loss_fn = keras.losses.MeanSquaredError(dtype="float64")
    cases = [(0, 0.5, 1e-4, 30), (1, 0.25, 0.3, 30), (2, 0.5, 1e-4, 1)]  # (batch, shrink, c, max_tries)
    for index, shrink, c, max_tries in cases:
        batch = next(iter(dataset.skip(index)))
        theirs, ours = twin_models(batch, seed=index)
        start = _weights(theirs)
        iterator = _Pipeline(dataset.skip(index), needed=1)
        t = call_learner(armijo_step, iterator, theirs, loss_fn, shrink, c, max_tries, name="armijo_step")
        expect(iterator.advances == 1,
               f"one line-search step took {iterator.advances} batches from the iterator: take the batch once, "
               "before the search, and evaluate every trial step on that same batch")
        expect(isinstance(t, (int, float)) and not isinstance(t, bool),
               f"return the accepted step size t as a float, got {type(t).__name__}")
        start_weights = _weights(ours)
        expect(_is_first_accepted(float(t), ours, loss_fn, batch, start_weights, shrink, c, max_tries),
               f"with shrink={shrink}, c={c}, max_tries={max_tries} you returned t={t:.6g}, which is not the "
               "first of 1, shrink, shrink**2, ... that satisfies f(theta - t*g) <= f0 - c*t*|g|^2"
               + (" (or 0.0 when none does within max_tries)" if max_tries == 1 else ""))
        if t == 0.0:
            expect(_close(_weights(theirs), start),
                   "when no step is accepted, put the model back at the weights it started from")
        else:
            _, g = _loss_and_gradient(ours, loss_fn, batch, start_weights)
            expect(_close(_weights(theirs), [w - t * d for w, d in zip(start_weights, g)]),
                   f"t={t:.6g} is right, but the model is not at theta - t*g: leave it at the accepted point")
    passed("one batch per step; the accepted steps and the weights match a backtracking search "
           "(including a search that accepts nothing).")


# --------------------------------------------------------------------------- exercise 2


def _trace_recorder(seed: int, batch: tuple, hidden: int = 8) -> tuple[keras.Model, dict]:
    """A model with Dropout that records each graph it is traced into, its eager calls and ``training``."""
    record: dict[str, Any] = {"graphs": [], "eager": 0, "training": set()}

    class Recorded(molecules.PerAtomEnergy):
        def call(self, atoms, training=None):
            if tf.executing_eagerly():
                record["eager"] += 1
            elif not any(g is tf.compat.v1.get_default_graph() for g in record["graphs"]):
                record["graphs"].append(tf.compat.v1.get_default_graph())
            record["training"].add(bool(training))
            return super().call(atoms, training=training)

    keras.utils.set_random_seed(seed)
    model = Recorded(hidden=hidden, dropout=0.25)
    model(batch[0])
    record.update(graphs=[], eager=0, training=set())  # building the model may trace it once
    return model, record


def recording_model(seed: int, batch: tuple, hidden: int = 8) -> tuple[keras.Model, dict]:
    """``(model, record)``: a per-atom model with Dropout that records each graph it is traced into
    (``record["graphs"]``), its eager calls and the ``training`` values it ran with."""
    return _trace_recorder(seed, batch, hidden)


def _central_differences(model: keras.Model, loss_fn: Callable, batches: list, h: float) -> list[tuple[float, float]]:
    """For each batch at the model's weights: (|g|, (L(w + h u) - L(w - h u)) / (2 h)), u = g / |g|."""
    start = _weights(model)
    pairs = []
    for batch in batches:
        _, g = _loss_and_gradient(model, loss_fn, batch, start)
        norm = math.sqrt(sum(float(np.sum(d * d)) for d in g))
        ends = [_loss_and_gradient(model, loss_fn, batch, [w + sign * h * d / norm for w, d in zip(start, g)])[0]
                for sign in (1.0, -1.0)]
        pairs.append((norm, (ends[0] - ends[1]) / (2 * h)))
    for variable, value in zip(model.trainable_variables, start):
        variable.assign(value)
    return pairs


def check_gradient_check(gradient_check: Callable) -> None:
    """``gradient_check(iterator, model, loss_fn, num_batches, h)`` returns, for each of
    ``num_batches`` batches taken once, ``(|g|, central difference of the loss along g/|g|)``;
    one compiled function, traced once for all batch shapes, in inference mode; weights unchanged."""
    dataset = molecules.molecule_dataset(12, batch_size=5, min_atoms=3, max_atoms=10, seed=21)
    batches = list(dataset)  # sizes 5, 5, 2 with different atom counts
    loss_fn = keras.losses.MeanSquaredError(dtype="float64")
    h = 0.05  # large enough that the central difference and |g| differ visibly (by about 1e-3)
    theirs, record = _trace_recorder(3, batches[0])
    keras.utils.set_random_seed(3)
    ours = molecules.PerAtomEnergy(hidden=8, dropout=0.25)
    ours(batches[0][0])
    ours.set_weights(theirs.get_weights())
    start = _weights(theirs)

    iterator = _Pipeline(dataset, needed=len(batches))
    pairs = call_learner(gradient_check, iterator, theirs, loss_fn, len(batches), h, name="gradient_check")
    sizes = [int(x.nrows()) for x, _ in batches]
    expect(iterator.advances == len(batches),
           f"asked for {len(batches)} batches, your function took {iterator.advances} from the iterator: "
           "take each batch once and evaluate every point on it")
    expect(isinstance(pairs, (list, tuple)) and len(pairs) == len(batches),
           f"return a list with one (gradient norm, finite difference) pair per batch ({len(batches)} pairs)")
    expect(all(isinstance(p, (list, tuple)) and len(p) == 2 and all(isinstance(v, (int, float)) for v in p)
               for p in pairs), "each pair should hold two Python floats (use float(...))")
    expect(True not in record["training"],
           "the model ran with training=True: Dropout then changes the loss from one evaluation to the next, "
           "so a finite difference measures noise. Evaluate with training=False")
    traces = len(record["graphs"])
    expect(traces > 0, f"the model ran {record['eager']} times eagerly and never inside tf.function: "
                       "compile your loss-and-gradient function")
    expect(traces == 1,
           f"your compiled function was traced {traces} times for batches of {sizes} molecules: give it an "
           "input signature whose batch and atom dimensions are None, so that one trace serves every batch, "
           "or you made a new compiled function per batch: make one, before the loop")
    expect(_close(_weights(theirs), start, rtol=0.0),
           "the weights are not exactly what they were before: save them first and assign the saved values back")
    for k, (got, want) in enumerate(zip(pairs, _central_differences(ours, loss_fn, batches, h))):
        expect(math.isclose(got[0], want[0], rel_tol=1e-8),
               f"batch {k}: gradient norm {got[0]:.6g} is not the norm of the loss's gradient at the start weights")
        expect(got[1] != got[0] or math.isclose(got[1], want[1], rel_tol=1e-6),
               f"batch {k}: your finite difference is exactly the gradient norm; with h={h} they differ: compute it "
               "from the loss at the two points theta + h*u and theta - h*u")
        expect(math.isclose(got[1], want[1], rel_tol=1e-6),
               f"batch {k}: finite difference {got[1]:.6g} is off: use (L(theta + h*u) - L(theta - h*u)) / (2*h) "
               "with u = g/|g| and theta the weights you started from")
    passed(f"{len(batches)} batches of {sizes} molecules, each taken once; one trace; weights restored; "
           f"the norms and central differences (h={h}) agree with the checker's own to 1e-6.")
