# Graded: 4 points
# Hidden test: new molecules, models, shrink and c drawn from the teacher's seed; the expected step
# comes from this cell's own search (a tape at each trial point); c is raised until it decides the
# step; the last case allows one trial fewer than the search needs, so nothing is accepted (it
# counts once the accepted steps are right).
import math
import numpy as np
import tensorflow as tf
import keras
from helpers import molecules
from helpers.exercises import checker, expect, grading


def _hidden(grade):
    fix, rng, mse = checker("decoupling"), grade.rng, keras.losses.MeanSquaredError(dtype="float64")

    def loss_at(model, batch, w, gradient=False):
        for variable, value in zip(model.trainable_variables, w):
            variable.assign(value)
        with tf.GradientTape() as tape:
            loss = mse(batch[1], model(batch[0], training=False))
        return float(loss), [g.numpy() for g in tape.gradient(loss, model.trainable_variables)] if gradient else None

    def searcher(model, batch, w0, shrink):  # search(c, tries): the first accepted step, or 0.0
        f0, g = loss_at(model, batch, w0, gradient=True)
        squared, steps, losses = sum(float(np.sum(d * d)) for d in g), [1.0], []

        def search(c, tries):
            for k in range(tries):
                while len(losses) <= k:
                    losses.append(loss_at(model, batch, [w - steps[len(losses)] * d for w, d in zip(w0, g)])[0])
                    steps.append(steps[-1] * shrink)
                if losses[k] <= f0 - c * steps[k] * squared:
                    return steps[k]
            return 0.0

        return search, g

    right = []
    for case, points in enumerate((2, 1, 1)):
        shrink, c = float(rng.uniform(0.3, 0.7)), float(rng.uniform(0.3, 0.6))
        data = molecules.molecule_dataset(int(rng.integers(8, 16)), batch_size=int(rng.integers(3, 7)),
                                          seed=int(rng.integers(10**6)))
        batch = next(iter(data))
        theirs, ours = fix.twin_models(batch, seed=int(rng.integers(10**6)))
        w0 = fix.weights(ours)
        search, g = searcher(ours, batch, w0, shrink)
        while search(c, 30) == search(1e-12, 30):
            c = (1.0 + c) / 2  # a case where the sufficient decrease (c) decides, not any decrease
        tries = 30
        if case == 2:  # one trial short of the first accepted step: nothing is accepted
            tries = max(1, round(math.log(search(c, 30), shrink)))
        with grade.part(points, f"shrink={shrink:.2f}, c={c:.2f}, max_tries={tries}"):
            expect(case < 2 or len(right) == 2, "first get the accepted steps right")
            pipeline = fix.counting_pipeline(data, needed=1)
            t = grade.call(armijo_step, pipeline, theirs, mse, shrink, c, tries)
            grade.require(pipeline.advances == 1, f"one line-search step took {pipeline.advances} batches from "
                          "the iterator: take one batch, before the search, and evaluate every trial on it")
            want = search(c, tries)
            expect(isinstance(t, (int, float)) and math.isclose(t, want, rel_tol=1e-9, abs_tol=0.0),
                   f"returned t={t!r}, not the first step the condition accepts"
                   + (" (0.0 when none does within max_tries)" if want == 0.0 else ""))
            expect(all(np.allclose(a, w - want * d, rtol=1e-9, atol=1e-12)
                       for a, w, d in zip(fix.weights(theirs), w0, g)),
                   "the model is not left where it should be: at theta - t*g, or at theta when no step is accepted")
            right.append(True)

grading("armijo_step", _hidden)
