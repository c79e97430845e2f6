# Graded: 2 points
# Hidden test: new targets, a new number of examples and batch size (the last batch smaller); the
# model predicts 0, so the expected mean is the mean of the squared targets, computed here.
import math
import numpy as np
import keras
from helpers.exercises import checker, expect, grading


def _hidden(grade):
    fix, rng = checker("validation"), grade.rng
    batch = int(rng.integers(3, 7))
    targets = rng.uniform(-3.0, 3.0, size=batch * int(rng.integers(2, 5)) + int(rng.integers(1, batch))).astype(np.float32)
    model, record = fix.recording_regressor()
    counter = {"passes": 0}
    value, right = None, False
    with grade.part(1, f"the mean over {len(targets)} examples in batches of {batch}"):
        value = grade.call(mean_loss, model, fix.generated_batches(targets, counter, batch),
                           keras.losses.MeanSquaredError())
        grade.require(not record.helpers, fix.helper_hint(record, "mean_loss"))
        expect(math.isclose(float(value), float(np.mean(targets.astype(np.float64) ** 2)), rel_tol=1e-5),
               "not the mean loss over the examples (each example counts once, whatever its batch)")
        right = True
    with grade.part(1, "in one pass over the dataset"):
        expect(right, "first get the mean right")
        expect(counter["passes"] == 1, f"your function started {counter['passes']} passes over the dataset")


grading("mean_loss", _hidden)
