# Graded: 3 points
# Hidden test: new pass lengths (windows_per_row 6 to 9); a fit that resumes a run (initial_epoch > 0, the stream
# skipped to where the run stopped) with Keras epochs shorter than a pass, then a fresh fit with Keras epochs
# longer than a pass but not a multiple of it; the zero-state batches must be exactly the wrap-arounds, computed here.
from helpers.exercises import checker, expect, grading


def _hidden(grade):
    fix, rng = checker("batching"), grade.rng
    model = fix.stateful_model(2, 3)
    for points, resumed in ((2, True), (1, False)):
        windows_per_row = int(rng.integers(6, 10))  # the visible fits use 4 and 5
        if resumed:
            steps = int(rng.integers(2, windows_per_row))  # shorter than a pass
            initial_epoch = int(rng.integers(1, 4))
            while (initial_epoch * steps) % windows_per_row == 0:  # resume in the middle of a pass
                initial_epoch += 1
            epochs = (2 * windows_per_row) // steps + 1  # at least two wrap-arounds
        else:
            steps = windows_per_row + int(rng.integers(1, windows_per_row))  # longer than a pass, not a multiple of it
            initial_epoch, epochs = 0, 3
        first = initial_epoch * steps  # where this fit's first batch sits in the whole stream
        wraps = [j for j in range(steps * epochs) if j == 0 or (first + j) % windows_per_row == 0]
        label = f"windows_per_row={windows_per_row}, fit(steps_per_epoch={steps}, epochs={initial_epoch + epochs}"
        label += f", initial_epoch={initial_epoch}) on the stream skipped by {first} batches" if resumed else ")"
        with grade.part(points, label):
            callback = grade.call(reset_callback, windows_per_row)
            zero = grade.call(fix.zero_state_batches, model, callback, windows_per_row, steps, epochs,
                              int(rng.integers(10**6)), initial_epoch, name="your callback")
            expect(zero == wraps,
                   f"the state was zero before batches {zero} of the fit, not exactly where the rows jump back")


grading("reset_callback", _hidden)
