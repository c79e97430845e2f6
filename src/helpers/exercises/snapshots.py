"""Checker for notebook 05's exercise: the soft (Polyak) update of a past network."""

from __future__ import annotations

from typing import Callable

import numpy as np
import keras

from helpers import snapshots
from helpers.exercises._core import CheckFailed, call_learner, expect, passed

_TAU = 0.25


def _pair_of_networks() -> tuple[keras.Model, keras.Model]:
    def net(seed: int) -> keras.Model:
        keras.utils.set_random_seed(seed)
        model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(4, activation="relu"), keras.layers.Dense(2)])
        for variable in model.trainable_variables:  # no zeros: every weight must visibly move
            variable.assign(np.random.default_rng(seed).uniform(-1, 1, variable.shape).astype("float32"))
        return model

    return net(101), net(202)


def _trainable(model: keras.Model) -> list:
    return [entry.variable for entry in snapshots.state_paths(model) if entry.trainable]


def _values(variables: list) -> list[np.ndarray]:
    return [np.array(v.numpy(), copy=True) for v in variables]


def check_soft_update(soft_update: Callable) -> None:
    """``soft_update(source_vars, target_vars, tau)`` must move every target variable the fraction
    ``tau`` of the way toward its source variable, in place, and leave the sources alone."""
    current, past = _pair_of_networks()
    sources, targets = _trainable(current), _trainable(past)
    src0, dst0 = _values(sources), _values(targets)
    untouched = "your function changed the source variables: only the targets (the past network) may change"

    # 1. a known tau.
    call_learner(soft_update, sources, targets, _TAU, name="soft_update")
    src1, dst1 = _values(sources), _values(targets)
    expect(all(np.array_equal(a, b) for a, b in zip(src0, src1)), untouched)
    expect(not all(np.array_equal(a, b) for a, b in zip(dst0, dst1)),
           "the target variables did not change: write the new value into each target variable "
           "(variable.assign); computing or returning it is not enough")
    gap = np.concatenate([(s - t).ravel() for s, t in zip(src0, dst0)])
    moved = np.concatenate([(n - t).ravel() for n, t in zip(dst1, dst0)])
    fraction = float(np.sum(moved * gap) / np.sum(gap * gap))  # least-squares share of the gap covered
    expected = [t + _TAU * (s - t) for s, t in zip(src0, dst0)]
    if not all(np.allclose(n, e, rtol=1e-5, atol=1e-6) for n, e in zip(dst1, expected)):
        if abs(fraction - (1 - _TAU)) < 1e-3:
            raise CheckFailed(
                f"with tau={_TAU} your past network moved {fraction:.0%} of the way toward the current "
                f"one instead of {_TAU:.0%}: tau is the share the *current* network gets in the mix"
            )
        raise CheckFailed(
            f"with tau={_TAU} every past weight should move {_TAU:.0%} of its distance to the current "
            f"weight; yours moved about {fraction:.0%} on average"
            + ("" if abs(fraction - _TAU) > 1e-3 else ", but not every weight by the same share")
        )

    # 2. tau = 1 is a hard copy, from a fresh past network.
    for variable, value in zip(targets, dst0):
        variable.assign(value)
    call_learner(soft_update, sources, targets, 1.0, name="soft_update")
    src2, dst2 = _values(sources), _values(targets)
    expect(all(np.array_equal(a, b) for a, b in zip(src0, src2)), untouched)
    expect(all(np.allclose(t, s, rtol=0, atol=1e-6) for t, s in zip(dst2, src0)),
           "with tau=1 the past network must become an exact copy of the current one, and it did not")
    passed(f"tau={_TAU} moves every past weight {_TAU:.0%} of the way; tau=1 copies exactly; sources untouched.")
