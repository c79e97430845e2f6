# Graded: 5 points
# Hidden test: a new model (two Dense + BatchNorm blocks, Dropout; no helper can copy it) of a new
# width, trained between the restores; every state variable is compared with its value at remember.
import numpy as np
from helpers.exercises import checker, expect, grading


def _hidden(grade):
    fix, rng = checker("snapshots"), grade.rng
    model, x, y = fix.uncopyable_network(int(rng.integers(10**6)), width=int(rng.integers(4, 10)), blocks=2)
    remembered, restore, first = fix.state(model), None, False
    output = model(x, training=False).numpy()
    with grade.part(3, f"{len(remembered)} state variables back after training, remember() changes nothing"):
        restore = grade.call(remember, model)
        expect(all(np.array_equal(v, fix.state(model)[k]) for k, v in remembered.items()), "remember() changed the model")
        fix.train(model, x, y, steps=int(rng.integers(2, 5)))
        grade.call(restore, name="restore")
        missed = [k for k, v in remembered.items() if not np.array_equal(v, fix.state(model)[k])]
        expect(not missed, f"restore() left {len(missed)} of {len(remembered)} state variables behind: {', '.join(missed)}")
        first = True
    with grade.part(2, "again after more training (restore works every time)"):
        expect(first, "first get one restore right")
        fix.train(model, x, y, steps=int(rng.integers(2, 5)))
        grade.call(restore, name="restore")
        expect(all(np.array_equal(v, fix.state(model)[k]) for k, v in remembered.items()), "the second restore() failed")
        expect(np.array_equal(model(x, training=False).numpy(), output), "the output at inference differs")


grading("remember", _hidden)
