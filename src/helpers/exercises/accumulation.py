"""Checkers for notebook 02's exercises: gradients of a batch too large for the device.

Both checkers hand the learner a model that holds at most a few examples at a time, as a small
device would: running it on more rows (the whole batch, or micro-batches joined with ``tf.concat``)
fails the check with a hint. Each case has a small micro-batch unlike the others, so weighting
mistakes show.
"""

from __future__ import annotations

import os
import traceback
from typing import Any, Callable

import numpy as np
import tensorflow as tf
import keras

from helpers.exercises._core import CheckFailed, call_learner, expect, passed

_TOLERANCE = 1e-5


class _SmallDevice:
    """The checker's model: a Keras model that refuses to run on more than ``limit`` examples at once.

    Everything else (``trainable_variables``, ``training=True`` ...) is the wrapped model's.
    """

    def __init__(self, model: keras.Model, limit: int):
        self._model, self._limit = model, limit

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def __call__(self, x, *args, **kwargs):
        rows = tf.convert_to_tensor(x).shape[0]
        if rows is None:  # traced by the learner's tf.function without a static batch size
            tf.debugging.assert_less_equal(tf.shape(x)[0], self._limit, message=self._hint("more than"))
        else:
            expect(rows <= self._limit, self._hint(rows))
        return self._model(x, *args, **kwargs)

    def _hint(self, rows) -> str:
        return (f"your code ran the model on {rows} examples at once, but this device holds at most "
                f"{self._limit}: run the model on one micro-batch at a time (no tf.concat of micro-batches)")


def _case(n: int, seed: int):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3)).astype("float32")
    y = (x @ np.array([[1.5], [-2.0], [0.5]], dtype="float32") + 0.3).astype("float32")
    y[-2:] += 4.0  # the last examples are unlike the rest, so the small micro-batch's weight matters
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="tanh"), keras.layers.Dense(1)])
    return model, x, y


def _gradient(model: keras.Model, loss: Callable, x, y) -> list[np.ndarray]:
    with tf.GradientTape() as tape:
        value = loss(y, model(x, training=True))
    return [g.numpy() for g in tape.gradient(value, model.trainable_variables)]


def _max_diff(a, b) -> float:
    return max(float(np.max(np.abs(np.asarray(u) - np.asarray(v)))) for u, v in zip(a, b))


def _run(fn: Callable, name: str, model: keras.Model, limit: int, *args: Any) -> list[np.ndarray]:
    """Call the learner's ``fn(small device, *args)``; its gradients as arrays, once checked: one per
    trainable variable, shaped like it, and the weights left as they were."""
    before = [w.copy() for w in model.get_weights()]
    got = call_learner(_own_loop_only(fn, name), _SmallDevice(model, limit), *args, name=name)
    arrays = _as_gradients(got, model, name)
    expect(_max_diff(before, model.get_weights()) == 0.0,
           "the model's weights changed: compute the gradient only, do not apply it")
    return arrays


_HELPER_FILES = tuple(os.path.join("helpers", f) for f in ("accumulation.py", "gradient_accumulator.py"))


def _own_loop_only(fn: Any, name: str) -> Any:
    """``fn``, except that an error raised inside ``helpers.accumulation`` (which refuses the checker's
    small device, not being a plain Keras model) becomes the exercise's rule instead of the helper's
    message. Anything else, the stub's ``NotImplementedError`` included, goes to ``call_learner``."""
    if not callable(fn):
        return fn

    def run(*args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as error:  # noqa: BLE001 - re-raised unless the helpers raised it
            if any(frame.filename.endswith(_HELPER_FILES) for frame in traceback.extract_tb(error.__traceback__)):
                raise CheckFailed(f"`{name}` called helpers.accumulation, which this exercise's small device does "
                                  "not accept: write the loop yourself, with tf.GradientTape") from None
            raise

    return run


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
        model, x, y = _case(n, seed)
        got = _run(accumulate, "accumulate", model, limit, mse, tf.constant(x), tf.constant(y), limit)
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
        model, x, y = _case(n, seed)
        bounds = np.cumsum((0,) + sizes)
        parts = [(tf.constant(x[a:b]), tf.constant(y[a:b])) for a, b in zip(bounds[:-1], bounds[1:])]
        got = _run(means_gradient, "means_gradient", model, limit, parts)
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
