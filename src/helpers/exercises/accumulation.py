"""Checker for notebook 02's exercise: accumulate micro-batch gradients into the large-batch gradient."""

from __future__ import annotations

from typing import Callable

import numpy as np
import tensorflow as tf
import keras

from helpers import accumulation
from helpers.exercises._core import call_learner, expect, passed

_SIZES = (5, 5, 2)
_TOLERANCE = 1e-5


def _case(seed: int = 7):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(sum(_SIZES), 3)).astype("float32")
    y = (x @ np.array([[1.5], [-2.0], [0.5]], dtype="float32") + 0.3).astype("float32")
    y[-2:] += 4.0  # the small micro-batch is unlike the rest, so its weight matters
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="tanh"), keras.layers.Dense(1)])
    return model, keras.losses.MeanSquaredError(), x, y


def _gradient(model, loss_fn, x, y):
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    return [g.numpy() for g in tape.gradient(loss, model.trainable_variables)]


def _max_diff(a, b) -> float:
    return max(float(np.max(np.abs(np.asarray(u) - np.asarray(v)))) for u, v in zip(a, b))


def check_accumulate(accumulate: Callable) -> None:
    """``accumulate(model, loss_fn, micro_batches)`` must return, one tensor per trainable variable,
    the gradient of the mean loss over every example of every micro-batch, computing one
    micro-batch at a time."""
    model, loss_fn, x, y = _case()
    parts = accumulation.micro_batches((tf.constant(x), tf.constant(y)), list(_SIZES))
    weights_before = [w.copy() for w in model.get_weights()]

    got = call_learner(accumulate, model, loss_fn, parts, name="accumulate")

    expect(isinstance(got, (list, tuple)),
           f"return a list with one gradient per trainable variable, got {type(got).__name__}")
    expect(len(got) == len(model.trainable_variables),
           f"the model has {len(model.trainable_variables)} trainable variables, you returned {len(got)} gradients")
    expect(all(g is not None for g in got), "one of your gradients is None: did every variable get a gradient?")
    got = [np.asarray(tf.convert_to_tensor(g)) for g in got]
    shapes_ok = all(g.shape == tuple(v.shape) for g, v in zip(got, model.trainable_variables))
    expect(shapes_ok, "your gradients do not have the shapes of the variables, in the same order")
    expect(_max_diff(weights_before, model.get_weights()) == 0.0,
           "the model's weights changed: compute gradients only, do not apply them")

    full = _gradient(model, loss_fn, x, y)
    per_part = [_gradient(model, loss_fn, px, py) for px, py in parts]
    plain_mean = [np.mean(gs, axis=0) for gs in zip(*per_part)]
    plain_sum = [np.sum(gs, axis=0) for gs in zip(*per_part)]
    if _max_diff(got, full) <= _TOLERANCE:
        passed(f"micro-batches of sizes {', '.join(map(str, _SIZES))} give the full batch's gradient "
               f"(max |Δ| < {_TOLERANCE:.0e}).")
        return
    sizes = ", ".join(map(str, _SIZES))
    expect(_max_diff(got, plain_mean) > _TOLERANCE,
           f"your accumulator averaged {len(_SIZES)} micro-batches of sizes {sizes} equally. The last one "
           f"holds only {_SIZES[-1]} of the {sum(_SIZES)} examples: how much of the full batch's mean loss "
           "does each micro-batch contribute?")
    expect(_max_diff(got, plain_sum) > _TOLERANCE,
           f"your gradient is the sum of the {len(_SIZES)} micro-batch gradients: the full batch's loss is a "
           "mean over examples, so the combined gradient must be on the scale of one batch's gradient")
    expect(False, f"your gradient differs from the full batch's by up to {_max_diff(got, full):.3g}: use a "
                  "GradientTape per micro-batch on the loss of that micro-batch, and combine the gradients "
                  "so that every example counts the same")
