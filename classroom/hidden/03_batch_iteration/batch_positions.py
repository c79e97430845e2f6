# Graded: 5 points
# Hidden test: new layouts (one whose stream length is a multiple of num_steps), batches inside
# the first epoch and after wrap-arounds compared with the real producer run here, and a new
# stream of about 10**15 tokens compared with exact integer arithmetic done here.
import numpy as np
from helpers import batching
from helpers.exercises import checker, expect, grading


def _hidden(grade):
    fix, rng = checker("batching"), grade.rng

    def produced(n_tokens, batch_size, num_steps, ks):  # the producer fed with positions: its values are positions
        stream = batching.ptb_batches(np.arange(n_tokens), batch_size, num_steps, repeat=True, prefetch=0)
        batches = [x.numpy() for x, _ in stream.take(max(ks) + 1)]
        return [batches[k] for k in ks]

    layouts = []
    for multiple in (False, True):
        batch_size, num_steps = int(rng.integers(2, 9)), int(rng.integers(2, 11))
        row = num_steps * int(rng.integers(3, 12)) + (0 if multiple else int(rng.integers(2, num_steps + 1)))
        layout = (batch_size * row + int(rng.integers(0, batch_size)), batch_size, num_steps)
        if layout in {(70, 4, 5), (101, 3, 7), (60, 4, 5), (1906, 8, 10)}:  # not a visible case
            layout = (layout[0] + batch_size * num_steps, batch_size, num_steps)
        layouts.append(layout)
    for points, after_wrap in ((2, False), (2, True)):
        with grade.part(points, ("after wrap-arounds" if after_wrap else "inside the first epoch") + f", layouts {layouts}"):
            for n_tokens, batch_size, num_steps in layouts:
                epoch = (n_tokens // batch_size - 1) // num_steps
                ks = [int(k) for k in rng.integers(epoch, 4 * epoch, size=3)] + [epoch] if after_wrap else \
                     sorted({0, epoch - 1, int(rng.integers(0, epoch))})
                got = [fix.positions_of(batch_positions, k, n_tokens, batch_size, num_steps) for k in ks]
                for k, mine, theirs in zip(ks, produced(n_tokens, batch_size, num_steps, ks), got):
                    expect(np.array_equal(mine, theirs), f"batch k={k} of layout {(n_tokens, batch_size, num_steps)} is wrong")
    with grade.part(1, "a stream of about 10**15 tokens, without any pipeline"):
        n_tokens, batch_size, num_steps = 10**15 + int(rng.integers(10**12)), int(rng.integers(100, 2000)), int(rng.integers(5, 60))
        row = n_tokens // batch_size
        epoch = (row - 1) // num_steps
        for k in (int(rng.integers(10**6, 10**9)), 5 * epoch + int(rng.integers(1, 10**6))):
            got = fix.positions_of(batch_positions, k, n_tokens, batch_size, num_steps)
            first = (k % epoch) * num_steps
            expect(all(int(got[r, j]) == r * row + first + j for r in (0, 1, batch_size - 1) for j in (0, num_steps - 1)),
                   f"batch k={k} of the 10**15-token stream is wrong: are your numbers exact integers?")


grading("batch_positions", _hidden)
