"""Checker for notebook 04's exercise: a validation loss that is the mean over *examples*."""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import tensorflow as tf
import keras

from helpers.exercises._core import call_learner, expect, passed

# Ten examples in batches of 4, 4 and 2. The model predicts 0, so an example's squared error is
# y**2: 1 for the first eight examples, 9 for the last two (the smaller last batch).
_TARGETS = np.array([1.0] * 8 + [3.0] * 2, dtype=np.float32)
_BATCH = 4


def _case() -> tuple[keras.Model, tf.data.Dataset, dict]:
    """A zero model, a generator-backed dataset (size unknown to TensorFlow) and a pass counter."""
    model = keras.Sequential([
        keras.Input((2,)),
        keras.layers.Dense(1, kernel_initializer="zeros", bias_initializer="zeros"),
    ])
    counter = {"passes": 0}

    def examples():
        counter["passes"] += 1
        for target in _TARGETS:
            yield np.zeros(2, np.float32), np.array([target], np.float32)

    dataset = tf.data.Dataset.from_generator(
        examples,
        output_signature=(tf.TensorSpec([2], tf.float32), tf.TensorSpec([1], tf.float32)),
    ).batch(_BATCH)
    return model, dataset, counter


def check_mean_loss(mean_loss: Callable) -> None:
    """``mean_loss(model, dataset, loss_fn) -> float`` must return the mean of ``loss_fn`` over every
    example of one pass over ``dataset`` (``(x, y)`` batches, the last one smaller)."""
    model, dataset, counter = _case()
    loss_fn = keras.losses.MeanSquaredError()
    value = call_learner(mean_loss, model, dataset, loss_fn, name="mean_loss")

    try:
        value = float(value)
    except (TypeError, ValueError):
        expect(False, f"return one number (a Python float), got {type(value).__name__}")
    expect(math.isfinite(value), f"your mean loss is {value}: it should be a finite number")
    expect(counter["passes"] == 1,
           f"your function started {counter['passes']} passes over the dataset: one pass is enough "
           "(and the size is not known before it ends)")

    per_example = _TARGETS.astype(np.float64) ** 2
    sizes = [len(per_example[i:i + _BATCH]) for i in range(0, len(per_example), _BATCH)]
    batch_means = [float(per_example[i:i + _BATCH].mean()) for i in range(0, len(per_example), _BATCH)]
    exact = float(per_example.mean())
    if math.isclose(value, float(np.mean(batch_means)), rel_tol=1e-5) and not math.isclose(value, exact, rel_tol=1e-5):
        expect(False,
               f"your value {value:.4f} is the plain average of the {len(sizes)} batch means (batch sizes "
               f"{', '.join(map(str, sizes))}): the last batch has only {sizes[-1]} examples but counted as "
               f"much as a full batch of {sizes[0]}. Each example should count once, whatever batch it is in.")
    if math.isclose(value, float(np.mean(batch_means[:-1])), rel_tol=1e-5):
        expect(False, f"your value {value:.4f} leaves out the last, smaller batch: every example counts")
    expect(math.isclose(value, exact, rel_tol=1e-5),
           f"your value {value:.4f} is not the mean loss over the {len(per_example)} examples of the pass "
           f"(batches of sizes {', '.join(map(str, sizes))})")
    passed(f"mean over all {len(per_example)} examples, the smaller last batch weighted by its size")
