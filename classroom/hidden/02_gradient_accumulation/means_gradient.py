# Graded: 6 points
# Hidden test: new micro-batch sizes (equal ones, then unequal ones), the expected gradient of
# (mean prediction - mean target)**2 from one tape over the whole batch on a twin model.
import numpy as np
import tensorflow as tf
import keras
from helpers.exercises import checker, expect, grading


def _hidden(grade):
    fix, rng = checker("accumulation"), grade.rng
    for points, equal in ((2, True), (4, False)):
        count = int(rng.integers(3, 6))
        sizes = [int(rng.integers(3, 7))] * count if equal else [int(s) for s in rng.integers(1, 8, size=count)]
        while not equal and (len(set(sizes)) == 1 or tuple(sizes) in {(5, 5, 2), (4, 4, 4, 1)}):
            sizes[-1] += 1  # unequal, and not a visible case
        n, limit = sum(sizes), max(sizes)
        with grade.part(points, f"micro-batches of {', '.join(map(str, sizes))}"):
            model, record, x, y = fix.device_case(n, seed=int(rng.integers(10**6)))
            before = [v.numpy().copy() for v in model.trainable_variables]
            bounds = np.cumsum([0] + sizes)
            parts = [(tf.constant(x[a:b]), tf.constant(y[a:b])) for a, b in zip(bounds[:-1], bounds[1:])]
            got = grade.call(means_gradient, model, parts)
            rule = fix.device_rule(record, limit, n, "means_gradient")
            grade.require(not rule, rule)
            expect(all(np.array_equal(a, v.numpy()) for a, v in zip(before, model.trainable_variables)),
                   "the model's weights changed: compute the gradient only")
            twin = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="tanh"), keras.layers.Dense(1)])
            twin.set_weights(before)
            with tf.GradientTape() as tape:
                loss = tf.square(tf.reduce_mean(twin(x, training=True)) - tf.reduce_mean(y))
            full = tape.gradient(loss, twin.trainable_variables)
            expect(len(got) == len(full) and all(np.allclose(np.asarray(g), f.numpy(), rtol=1e-4, atol=1e-6)
                                                 for g, f in zip(got, full)),
                   "the gradient differs from the whole batch's")


grading("means_gradient", _hidden)
