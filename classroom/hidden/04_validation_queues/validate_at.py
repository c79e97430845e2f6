# Graded: 6 points
# Hidden test: a new schedule and validation set (its size not a multiple of the batch), losses
# from a table drawn here; each expected mean is computed here from that table.
import math
import numpy as np
from helpers.exercises import checker, expect, grading


def _hidden(grade):
    fix, rng = checker("validation"), grade.rng
    schedule = sorted({0, *[int(s) for s in rng.integers(1, 12, size=3)]})
    size = 4 * int(rng.integers(2, 5)) + int(rng.choice([1, 3]))  # 9 to 19, never the visible 7 or 10
    recorder = fix.Recorder(rng.uniform(0.5, 2.0, size))
    right = False
    with grade.part(4, f"the mean validation loss after steps {schedule}, {size} validation examples"):
        curve = grade.call(validate_at, fix.training_stream(), fix.generated_batches(np.zeros(size, np.float32), {"passes": 0}),
                           recorder.train_step, recorder.val_sums, list(schedule))
        expect(len(curve) == len(schedule), f"return one (step, mean) pair per evaluation ({len(schedule)})")
        for (step, value), expected_step in zip(curve, schedule):
            expect(int(step) == expected_step, f"your steps are {[int(s) for s, _ in curve]}, not {schedule}")
            expect(math.isclose(float(value), float(np.mean(recorder.table)) * (expected_step + 1), rel_tol=1e-5),
                   f"the mean after step {expected_step} is off: the sums come from val_sums, over one full pass")
        right = True
    with grade.part(2, "every training batch read once in order, one full validation pass per listed step"):
        expect(right, "first get the means right")
        hint = fix.reads_hint(recorder, schedule, size)
        expect(not hint, hint)


grading("validate_at", _hidden)
