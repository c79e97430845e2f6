# Graded: 3 points
# Hidden test: new epoch sizes (6 to 9) and Keras epochs (shorter than a pass through the data, then a
# multiple of it); the zero-state batches must be exactly the wrap-arounds, computed here.
from helpers.exercises import checker, expect, grading


def _hidden(grade):
    fix, rng = checker("batching"), grade.rng
    model = fix.stateful_model(2, 3)
    for points, aligned in ((2, False), (1, True)):
        epoch_size = int(rng.integers(6, 10))  # the visible fits use 4 and 5
        steps = epoch_size * int(rng.integers(2, 4)) if aligned else int(rng.integers(2, epoch_size))
        epochs = 2 if aligned else (2 * epoch_size) // steps + 1  # at least three wrap-arounds
        with grade.part(points, f"epoch_size={epoch_size}, fit(steps_per_epoch={steps}, epochs={epochs})"):
            callback = grade.call(reset_callback, epoch_size)
            zero = grade.call(fix.zero_state_batches, model, callback, epoch_size, steps, epochs,
                              int(rng.integers(10**6)), name="your callback")
            wraps = list(range(0, steps * epochs, epoch_size))
            expect(zero == wraps, f"the state was reset before batches {zero}, not exactly where the rows jump back")


grading("reset_callback", _hidden)
