# Graded: 2 points
# Hidden test: new networks of a new width and two new values of tau, never the visible 0.25 (and tau = 1), the expected
# weights by the Polyak formula computed here with NumPy.
import numpy as np
from helpers.exercises import checker, expect, grading


def _hidden(grade):
    fix, rng = checker("snapshots"), grade.rng
    width = int(rng.integers(3, 9))
    taus = [float(t) for t in rng.choice([rng.uniform(0.05, 0.2), rng.uniform(0.3, 0.95)], 2, replace=False)] + [1.0]
    with grade.part(2, f"networks of width {width}, tau = {', '.join(f'{t:.3f}' for t in taus)}"):
        for tau in taus:
            current, past = fix.network_pair(tuple(int(s) for s in rng.integers(10**6, size=2)), width)
            sources, targets = fix.trainable(current), fix.trainable(past)
            src, dst = fix.values(sources), fix.values(targets)
            grade.call(soft_update, sources, targets, tau)
            expect(all(np.array_equal(a, b) for a, b in zip(src, fix.values(fix.trainable(current)))),
                   "the sources changed")
            expect(all(np.allclose(t, tau * s + (1 - tau) * d, rtol=1e-5, atol=1e-6)  # the network's own variables
                       for t, s, d in zip(fix.values(fix.trainable(past)), src, dst)),
                   f"with tau={tau:.3f} the target weights are not where the update puts them")


grading("soft_update", _hidden)
