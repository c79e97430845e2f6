# Graded: 4 points
# Hidden test: new batch sizes and device limits (one case with equal micro-batches, one with a
# smaller last one), the expected gradient from one tape over the whole batch on a twin model.
import numpy as np
import tensorflow as tf
import keras
from helpers.exercises import checker, expect, grading


def _hidden(grade):
    fix, rng, mse = checker("accumulation"), grade.rng, keras.losses.MeanSquaredError()
    for points, uneven in ((2, False), (2, True)):
        limit = int(rng.integers(3, 8))
        n = limit * int(rng.integers(3, 6)) + (int(rng.integers(1, limit)) if uneven else 0)  # not 12/5, 9/4
        with grade.part(points, f"{n} examples, at most {limit} at a time"):
            model, record, x, y = fix.device_case(n, seed=int(rng.integers(10**6)))
            before = [v.numpy().copy() for v in model.trainable_variables]
            got = grade.call(accumulate, model, mse, tf.constant(x), tf.constant(y), limit)
            rule = fix.device_rule(record, limit, n, "accumulate")
            grade.require(not rule, rule)
            expect(all(np.array_equal(a, v.numpy()) for a, v in zip(before, model.trainable_variables)),
                   "the model's weights changed: compute the gradient only")
            twin = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="tanh"), keras.layers.Dense(1)])
            twin.set_weights(before)
            with tf.GradientTape() as tape:
                loss = mse(y, twin(x, training=True))
            full = tape.gradient(loss, twin.trainable_variables)
            expect(len(got) == len(full) and all(np.allclose(np.asarray(g), f.numpy(), rtol=1e-4, atol=1e-5)
                                                 for g, f in zip(got, full)),
                   "the gradient differs from the whole batch's")


grading("accumulate", _hidden)
