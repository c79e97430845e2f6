"""Checkers for notebook 05's exercises: the soft (Polyak) update with the mean teacher's warm-up, and
a complete in-memory snapshot.

``remember``'s model is one that no helper can copy: a subclassed model whose ``__init__`` takes an
argument and that has no ``get_config()`` (``snapshots.snapshot``, ``keras.models.clone_model`` and
``copy.deepcopy`` all refuse it), so a second network is not an option; and it has Dropout, whose
random-seed state is a variable that ``get_weights()`` leaves out, so a ``get_weights`` copy misses
state. The exercise's rule ("work with the variables themselves") is checked by what ``restore()``
brings back, not by the names the answer uses.

Fixtures for the hidden tests: :func:`network_pair`, :func:`trainable`, :func:`values`,
:func:`uncopyable_network`, :func:`train` and :func:`state`.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import tensorflow as tf
import keras

from helpers import snapshots
from helpers.exercises._core import CheckFailed, call_learner, expect, passed

__all__ = ["check_soft_update", "check_remember", "network_pair", "trainable", "values",
           "uncopyable_network", "train", "state"]

_TAU = 0.25


# --------------------------------------------------------------------------- soft update


def network_pair(seeds: tuple[int, int] = (101, 202), width: int = 4) -> tuple[keras.Model, keras.Model]:
    """Two networks of the same structure whose weights differ everywhere (no zeros: every weight
    must visibly move).

    >>> current, past = network_pair()
    >>> len(trainable(current)) == len(trainable(past)) == 4
    True
    """
    def net(seed: int) -> keras.Model:
        keras.utils.set_random_seed(seed)
        model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(width, activation="relu"),
                                  keras.layers.Dense(2)])
        for variable in model.trainable_variables:
            variable.assign(np.random.default_rng(seed).uniform(-1, 1, variable.shape).astype("float32"))
        return model

    return net(seeds[0]), net(seeds[1])


def trainable(model: keras.Model) -> list:
    """The model's trainable variables, in structural order."""
    return [entry.variable for entry in snapshots.state_paths(model) if entry.trainable]


def values(variables: list) -> list[np.ndarray]:
    """Copies of the variables' values now."""
    return [np.array(v.numpy(), copy=True) for v in variables]


def _rate(tau: float, step: int) -> float:
    return max(tau, 1.0 / (step + 1))


def check_soft_update(soft_update: Callable) -> None:
    """``soft_update(source_vars, target_vars, tau, step)`` must move every target variable the share
    ``max(tau, 1 / (step + 1))`` of the way toward its source variable (the mean teacher's warm-up), in
    place, and leave the sources alone."""
    untouched = "your function changed the source variables: only the targets (the past network) may change"
    # (tau, step): tau once it exceeds 1/(step + 1), the warm-up's 1/(step + 1) before, its full copy at step 0; tau = 1
    for tau, step in ((_TAU, 10), (_TAU, 1), (_TAU, 0), (1.0, 5)):
        current, past = network_pair()
        sources, targets = trainable(current), trainable(past)
        src0, dst0 = values(sources), values(targets)
        rate = _rate(tau, step)
        call_learner(soft_update, sources, targets, tau, step, name="soft_update")
        src1, dst1 = values(trainable(current)), values(trainable(past))  # the networks' own variables
        expect(all(np.array_equal(a, b) for a, b in zip(src0, src1)), untouched)
        expect(all(np.all(np.isfinite(n)) for n in dst1),
               f"with tau={tau}, step={step} the past weights are no longer finite: is there a division by zero?")
        expect(not all(np.array_equal(a, b) for a, b in zip(dst0, dst1)),
               "the target variables did not change: write the new value into each target variable "
               "(variable.assign); computing or returning it is not enough")
        still = sum(np.array_equal(a, b) for a, b in zip(dst0, dst1))
        expect(still == 0, f"{still} of {len(targets)} target variables did not move: the update applies to every one")
        expected = [t + rate * (s - t) for s, t in zip(src0, dst0)]
        if all(np.allclose(n, e, rtol=1e-5, atol=1e-6) for n, e in zip(dst1, expected)):
            continue
        gap = np.concatenate([(s - t).ravel() for s, t in zip(src0, dst0)])
        moved = np.concatenate([(n - t).ravel() for n, t in zip(dst1, dst0)])
        fraction = float(np.sum(moved * gap) / np.sum(gap * gap))  # least-squares share of the gap covered
        where = f"with tau={tau}, step={step} every past weight should move {rate:.0%} of its distance to the current weight"
        if rate < 1 and abs(fraction - (1 - rate)) < 1e-3:
            raise CheckFailed(f"{where}; yours moved {fraction:.0%}: the rate is the share the *current* "
                              "network gets in the mix")
        if rate > tau and abs(fraction - tau) < 1e-3:
            raise CheckFailed(f"{where}; yours moved {fraction:.0%}, tau's share: at this step the warm-up "
                              "rate 1/(step + 1) is larger than tau and wins")
        if step and abs(fraction - max(tau, 1 / step)) < 1e-3:
            raise CheckFailed(f"{where}; yours moved {fraction:.0%}: the steps count from 0 (a full copy), "
                              f"so at step {step} the warm-up rate is 1/{step + 1}")
        raise CheckFailed(f"{where}; yours moved about {fraction:.0%} on average"
                          + ("" if abs(fraction - rate) > 1e-3 else ", but not every weight by the same share"))
    passed(f"tau={_TAU}: {_TAU:.0%} of the way at step 10, half the way at step 1, a full copy at step 0; "
           "tau=1 copies exactly; sources untouched.")


# --------------------------------------------------------------------------- remember and restore


class _Uncopyable(keras.Model):
    """``blocks`` times Dense + BatchNorm, then Dropout and Dense: a subclassed model that takes
    arguments and has no ``get_config()``, so no helper can rebuild it."""

    def __init__(self, width: int, rate: float, blocks: int = 1):
        super().__init__(name="net")
        self.blocks = []
        for k in range(blocks):
            suffix = "" if k == 0 else f"_{k + 1}"
            self.blocks.append((keras.layers.Dense(width, activation="relu", name=f"hidden{suffix}"),
                                keras.layers.BatchNormalization(name=f"norm{suffix}")))
        self.dropout = keras.layers.Dropout(rate, name="dropout")
        self.head = keras.layers.Dense(1, name="head")

    def call(self, x, training=None):
        for dense, norm in self.blocks:
            x = norm(dense(x), training=training)
        return self.head(self.dropout(x, training=training))


def uncopyable_network(seed: int = 303, width: int = 6, rows: int = 32,
                       blocks: int = 1) -> tuple[keras.Model, np.ndarray, np.ndarray]:
    """``(model, x, y)``: the model (built, trained a little so that BatchNorm's statistics and the
    Dropout seed are far from their start) and data, the features far from BatchNorm's 0 / 1.

    >>> model, x, y = uncopyable_network()
    >>> len(state(model)), len(model.get_weights())
    (9, 8)
    """
    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    x = rng.normal(2.0, 3.0, size=(rows, 4)).astype("float32")
    y = rng.normal(size=(rows, 1)).astype("float32")
    model = _Uncopyable(width, 0.25, blocks)
    model(x)
    train(model, x, y)
    return model, x, y


def train(model: keras.Model, x: np.ndarray, y: np.ndarray, steps: int = 3) -> None:
    """SGD steps in training mode: the weights, BatchNorm's moving statistics and the Dropout seed move."""
    expect(bool(model.trainable_variables), "after remember(), the model has no trainable variables: "
           "remember() should leave the model as it was (did it freeze it?)")
    optimizer = keras.optimizers.SGD(0.05)
    for _ in range(steps):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(x, training=True) - y) ** 2)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))



def state(model: keras.Model) -> dict[str, np.ndarray]:
    """Every state variable's value now, by label (``net/norm/moving_mean`` ...)."""
    return {e.label: np.array(e.variable.numpy(), copy=True) for e in snapshots.state_paths(model)}


def _differ(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> list[str]:
    return [label for label in a if not np.array_equal(a[label], b[label])]


def _missed(remembered: dict[str, np.ndarray], model: keras.Model, when: str) -> None:
    missed = _differ(remembered, state(model))
    if not missed:
        return
    total = len(remembered)
    if len(missed) == total and when.startswith("After training again"):
        raise CheckFailed(
            f"the first restore() worked, the second left all {total} state variables where training had "
            "moved them: does restore() use up or overwrite what remember() saved?")
    if len(missed) == total:
        raise CheckFailed(
            f"{when} restore() left all {total} state variables where training had moved them: did you "
            "keep the *values* of the variables at remember() time, or the variables themselves (which "
            "keep changing)?")
    trainable = {e.label for e in snapshots.state_paths(model) if e.trainable}
    seeds = {label for label in missed if "seed_generator" in label}
    hint = ""
    if seeds and set(missed) == seeds:
        hint = (" get_weights() does not include a Dropout layer's random-seed state, yet it decides the dropout "
                "masks of the next training step: a snapshot must hold it too.")
    elif not set(missed) & trainable:
        hint = (" They are not trainable, so model.trainable_variables does not list them, yet they decide "
                "the output at inference: a snapshot must hold them too.")
    raise CheckFailed(f"{when} restore() left {len(missed)} of {total} state variables where training had "
                      f"moved them: {', '.join(missed)}.{hint}")


def check_remember(remember: Callable) -> None:
    """``remember(model)`` must return a function ``restore()`` that puts back **all** of the
    model's state as it was when ``remember`` was called, however often the model trains and
    ``restore()`` is called, and ``remember`` itself must change nothing. The model cannot be copied
    by any helper, and part of its state (the Dropout seed) is not in ``get_weights()``."""
    model, x, y = uncopyable_network()
    remembered = state(model)

    restore = call_learner(remember, model, name="remember")
    expect(callable(restore), f"remember(model) should return a function restore(), got {type(restore).__name__}")
    expect(not _differ(remembered, state(model)),
           "remember(model) changed the model's state: it should only take note of it")
    output = model(x, training=False).numpy()

    for when in ("After one round of training,", "After training again, a second"):
        train(model, x, y)
        call_learner(restore, name="restore")
        _missed(remembered, model, when)
    expect(np.array_equal(model(x, training=False).numpy(), output),
           "after restore() the model's output at inference differs from the remembered one")
    passed(f"restore() brings back all {len(remembered)} state variables (BatchNorm's moving statistics "
           "and the Dropout layer's random-number state included), every time it is called.")
