"""Checkers for notebook 02's exercises: gradients of a batch too large for the device.

Both checkers hand the learner a model that stands for a small device: its layers record how many
examples they ran on at once, whichever way the model was called (``model(x)``, ``model.call(x)``,
inside a ``tf.function``), and which helper module ran it. More rows than the device holds (the
whole batch, or micro-batches joined with ``tf.concat``), a model that never saw every example, or
a model run by ``helpers.accumulation`` fails the check with a hint. Each case has a small
micro-batch unlike the others, so weighting mistakes show.

Fixtures for the hidden tests: :func:`device_case` (a model and data) and :func:`device_rule`.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import tensorflow as tf
import keras

from helpers.exercises._core import CheckFailed, call_learner, expect, passed
from helpers.exercises._guards import Record, RecordingDense

__all__ = ["check_accumulate", "check_means_gradient", "device_case", "device_rule"]

_TOLERANCE = 1e-5
_WATCHED = ("accumulation.py", "gradient_accumulator.py")


def device_case(n: int, seed: int) -> tuple[keras.Model, Record, np.ndarray, np.ndarray]:
    """``(model, record, x, y)``: ``n`` examples whose last two are unlike the rest (so a small last
    micro-batch's weight matters), and a model whose layers record how they were run.

    >>> model, record, x, y = device_case(6, seed=1)
    >>> x.shape, y.shape, record.rows
    ((6, 3), (6, 1), 0)
    """
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3)).astype("float32")
    y = (x @ np.array([[1.5], [-2.0], [0.5]], dtype="float32") + 0.3).astype("float32")
    y[-2:] += 4.0
    keras.utils.set_random_seed(seed)
    record = Record(watched=_WATCHED)
    model = keras.Sequential([keras.Input((3,)), RecordingDense(4, record, first=True, activation="tanh"),
                              RecordingDense(1, record)])
    return model, record, x, y


def device_rule(record: Record, limit: int, n: int, name: str, *, counted: bool = True) -> str:
    """The device's rule as a hint if the recorded run broke it, else ``""`` (``counted=False``: the
    examples the model saw are not counted yet)."""
    if record.helpers:
        return (f"`{name}` called {record.helpers[0]} to run the model: this exercise is to write that loop "
                "yourself, with tf.GradientTape")
    if record.most > limit:
        return (f"your code ran the model on {record.most} examples at once, but this device holds at most "
                f"{limit}: run the model on one micro-batch at a time (no tf.concat of micro-batches)")
    if counted and record.rows < n:
        return (f"your code ran the model on {record.rows} of the {n} examples: the gradient must come from "
                "the model run on every example, one micro-batch at a time")
    return ""


def _gradient(model: keras.Model, loss: Callable, x, y) -> list[np.ndarray]:
    with tf.GradientTape() as tape:
        value = loss(y, model(x, training=True))
    return [g.numpy() for g in tape.gradient(value, model.trainable_variables)]


def _max_diff(a, b) -> float:
    return max(float(np.max(np.abs(np.asarray(u) - np.asarray(v)))) for u, v in zip(a, b))


def _run(fn: Callable, name: str, model: keras.Model, record: Record, limit: int, n: int,
         *args: Any) -> list[np.ndarray]:
    """Call the learner's ``fn(model, *args)``; its gradients as arrays, once checked: the device's rule
    kept, one gradient per trainable variable, shaped like it, and the weights left as they were."""
    before = [v.numpy().copy() for v in model.trainable_variables]
    got = call_learner(fn, model, *args, name=name)
    broken = device_rule(record, limit, n, name, counted=False)
    expect(not broken, broken)
    arrays = _as_gradients(got, model, name)
    broken = device_rule(record, limit, n, name)
    expect(not broken, broken)
    expect(_max_diff(before, [v.numpy() for v in model.trainable_variables]) == 0.0,
           "the model's weights changed: compute the gradient only, do not apply it")
    return arrays


def _as_gradients(got: Any, model: keras.Model, name: str) -> list[np.ndarray]:
    """The learner's result as arrays, after the checks every gradient list must pass."""
    variables = model.trainable_variables
    expect(isinstance(got, (list, tuple)),
           f"{name} must return a list with one gradient per trainable variable, got {type(got).__name__}")
    expect(len(got) == len(variables),
           f"the model has {len(variables)} trainable variables, {name} returned {len(got)} gradients")
    expect(all(g is not None for g in got), f"{name} returned None for a gradient: did every variable get one?")
    try:
        arrays = [np.asarray(tf.convert_to_tensor(g), dtype=np.float64) for g in got]
    except (TypeError, ValueError) as error:
        raise CheckFailed(f"{name} returned something that is not a list of tensors: {error}") from None
    expect(all(a.shape == tuple(v.shape) for a, v in zip(arrays, variables)),
           f"{name}'s gradients do not have the shapes of model.trainable_variables, in the same order")
    return arrays


def check_accumulate(accumulate: Callable) -> None:
    """``accumulate(model, loss_fn, x, y, max_examples)``: the gradient of ``loss_fn`` over the whole
    batch ``(x, y)``, running the model on at most ``max_examples`` examples at a time."""
    mse = keras.losses.MeanSquaredError()
    for n, limit, seed in [(12, 5, 7), (9, 4, 3)]:
        model, record, x, y = device_case(n, seed)
        got = _run(accumulate, "accumulate", model, record, limit, n, mse, tf.constant(x), tf.constant(y), limit)
        full = _gradient(model, mse, x, y)
        if _max_diff(got, full) <= _TOLERANCE:
            continue
        sizes = [min(limit, n - start) for start in range(0, n, limit)]
        parts = [_gradient(model, mse, x[a:a + s], y[a:a + s]) for a, s in zip(range(0, n, limit), sizes)]
        described = ", ".join(map(str, sizes))
        expect(_max_diff(got, [np.mean(g, axis=0) for g in zip(*parts)]) > _TOLERANCE,
               f"you averaged {len(sizes)} micro-batches of sizes {described} equally. The last one holds only "
               f"{sizes[-1]} of the {n} examples: how much of the batch's mean loss does each micro-batch carry?")
        expect(_max_diff(got, [np.sum(g, axis=0) for g in zip(*parts)]) > _TOLERANCE,
               f"your gradient is the sum of the {len(sizes)} micro-batch gradients: the batch's loss is a mean "
               "over examples, so the result must be on the scale of one batch's gradient")
        expect(False, f"with {n} examples and at most {limit} at a time, your gradient differs from the whole "
                      f"batch's by up to {_max_diff(got, full):.3g}: one GradientTape per micro-batch, on that "
                      "micro-batch's loss, combined so that every example counts the same")
    passed("gradients of 12 examples, 5 at a time (and of 9, 4 at a time), equal the whole batch's "
           f"(max |Δ| < {_TOLERANCE:.0e}).")


def _means_loss(y_true, y_pred):
    """The exercise's loss: the squared difference of the mean prediction and the mean target."""
    return tf.square(tf.reduce_mean(y_pred) - tf.reduce_mean(tf.cast(y_true, y_pred.dtype)))


def check_means_gradient(means_gradient: Callable) -> None:
    """``means_gradient(model, micro_batches)``: the gradient of ``(mean(prediction) - mean(target))**2``
    over all examples of all micro-batches, running the model on one micro-batch at a time."""
    for sizes, seed in [((5, 5, 2), 11), ((4, 4, 4, 1), 5)]:
        n, limit = sum(sizes), max(sizes)
        model, record, x, y = device_case(n, seed)
        bounds = np.cumsum((0,) + sizes)
        parts = [(tf.constant(x[a:b]), tf.constant(y[a:b])) for a, b in zip(bounds[:-1], bounds[1:])]
        got = _run(means_gradient, "means_gradient", model, record, limit, n, parts)
        full = _gradient(model, _means_loss, x, y)
        if _max_diff(got, full) <= _TOLERANCE:
            continue
        per_part = [np.stack(g) for g in zip(*[_gradient(model, _means_loss, x[a:b], y[a:b])
                                                for a, b in zip(bounds[:-1], bounds[1:])])]
        combined = {"equally": np.full(len(sizes), 1 / len(sizes)), "by size": np.array(sizes) / n,
                    "summed": np.ones(len(sizes))}
        for how, weights in combined.items():
            expect(_max_diff(got, [np.tensordot(weights, g, axes=1) for g in per_part]) > _TOLERANCE,
                   f"you combined the gradients of each micro-batch's own loss ({how}): those losses use each "
                   "micro-batch's means, not the loss of the whole batch's means. Which numbers must be complete "
                   "before the loss can be computed, and how much does each micro-batch contribute to them?")
        expect(_max_diff(got, [2 * g for g in full]) > _TOLERANCE and _max_diff(got, [g / 2 for g in full]) > _TOLERANCE,
               "your gradient is off by a factor of 2: the derivative of d**2 is 2*d")
        expect(False, f"your gradient differs from the whole batch's by up to {_max_diff(got, full):.3g}: "
                      "follow the two passes of Proof (2)")
    passed("the gradient of (mean prediction - mean target)**2 over micro-batches of 5, 5, 2 (and 4, 4, 4, 1) "
           f"equals the whole batch's (max |Δ| < {_TOLERANCE:.0e}).")
