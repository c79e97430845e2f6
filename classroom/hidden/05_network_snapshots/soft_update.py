# Graded: 2 points
# Hidden test: new networks of a new width, two new values of tau (and tau = 1), each at a step where the warm-up
# rate 1/(step + 1) exceeds tau and at one where tau wins, never the visible cases; the expected weights computed
# here with NumPy from the rate max(tau, 1/(step + 1)).
import numpy as np
from helpers.exercises import checker, expect, grading


def _hidden(grade):
    fix, rng = checker("snapshots"), grade.rng
    width = int(rng.integers(3, 9))
    small, large = float(rng.uniform(0.05, 0.2)), float(rng.uniform(0.3, 0.95))
    cases = [(small, int(rng.integers(1, int(1 / small) - 1))),  # 1/(step + 1) > tau from step 1: the warm-up wins
             (large, 0),                                           # a full copy at step 0
             *[(tau, int(rng.integers(int(1 / tau) + 1, 1000))) for tau in (small, large)],  # tau wins
             (1.0, int(rng.integers(0, 1000)))]
    label = ", ".join(f"tau={tau:.3f} step={step}" for tau, step in cases)
    with grade.part(2, f"networks of width {width}; {label}"):
        for tau, step in cases:
            current, past = fix.network_pair(tuple(int(s) for s in rng.integers(10**6, size=2)), width)
            sources, targets = fix.trainable(current), fix.trainable(past)
            src, dst = fix.values(sources), fix.values(targets)
            rate = max(tau, 1.0 / (step + 1))
            grade.call(soft_update, sources, targets, tau, step)
            expect(all(np.array_equal(a, b) for a, b in zip(src, fix.values(fix.trainable(current)))),
                   "the sources changed")
            expect(all(np.allclose(t, rate * s + (1 - rate) * d, rtol=1e-5, atol=1e-6)  # the network's own variables
                       for t, s, d in zip(fix.values(fix.trainable(past)), src, dst)),
                   f"with tau={tau:.3f}, step={step} the target weights are not where the update puts them")


grading("soft_update", _hidden)
