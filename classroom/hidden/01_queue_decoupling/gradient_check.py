# Graded: 6 points
# Hidden test: new molecules in batches of new sizes, a new step h (large enough that the central
# difference and |g| differ), expectations from this cell's own tape and central difference.
import math
import numpy as np
import tensorflow as tf
import keras
from helpers import molecules
from helpers.exercises import checker, expect, grading


def _hidden(grade):
    fix, rng, mse = checker("decoupling"), grade.rng, keras.losses.MeanSquaredError(dtype="float64")
    n, size, h = int(rng.integers(9, 15)), int(rng.integers(3, 6)), float(rng.uniform(0.05, 0.2))
    data = molecules.molecule_dataset(n, batch_size=size, min_atoms=3, max_atoms=11, seed=int(rng.integers(10**6)))
    batches = list(data)
    theirs, record = fix.recording_model(int(rng.integers(10**6)), batches[0])
    w0, right = fix.weights(theirs), False
    with grade.part(4, f"{len(batches)} batches of {n} molecules, h={h:.3f}: |g| and the central difference"):
        pipeline = fix.counting_pipeline(data, needed=len(batches))
        pairs = grade.call(gradient_check, pipeline, theirs, mse, len(batches), h)
        grade.require(pipeline.advances == len(batches), f"asked for {len(batches)} batches, your function took "
                      f"{pipeline.advances} from the iterator: take each batch once and evaluate every point on it")
        ours = molecules.PerAtomEnergy(hidden=8, dropout=0.25)
        ours(batches[0][0])
        expect(len(pairs) == len(batches), f"return one pair per batch ({len(batches)} pairs), got {len(pairs)}")
        for k, ((x, y), (norm, slope)) in enumerate(zip(batches, pairs)):
            for variable, value in zip(ours.trainable_variables, w0):
                variable.assign(value)
            with tf.GradientTape() as tape:
                loss = mse(y, ours(x, training=False))
            g = tape.gradient(loss, ours.trainable_variables)
            g_norm = math.sqrt(sum(float(tf.reduce_sum(d * d)) for d in g))
            ends = []
            for sign in (1.0, -1.0):
                for variable, value, d in zip(ours.trainable_variables, w0, g):
                    variable.assign(value + sign * h * d.numpy() / g_norm)
                ends.append(float(mse(y, ours(x, training=False))))
            expect(math.isclose(float(norm), g_norm, rel_tol=1e-8), f"batch {k}: the gradient norm is off")
            expect(math.isclose(float(slope), (ends[0] - ends[1]) / (2 * h), rel_tol=1e-6),
                   f"batch {k}: the finite difference is off (h={h:.3f})")
        right = True
    with grade.part(1, "the weights exactly as they were"):
        expect(right, "first get the numbers right")
        expect(all(np.array_equal(a, b) for a, b in zip(fix.weights(theirs), w0)),
               "the weights are not exactly what they were before: assign the saved values back")
    with grade.part(1, "one compiled function, traced once for every batch shape"):
        expect(right, "first get the numbers right")
        expect(len(record["graphs"]) == 1, f"traced {len(record['graphs'])} times (0: never compiled)")


grading("gradient_check", _hidden)
