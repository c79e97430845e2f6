"""Notebook 01's figures (01 queue decoupling); :mod:`helpers.plots` re-exports them."""

from __future__ import annotations

from typing import Any

import numpy as np

from helpers.plots._style import COLORS, new_figure

__all__ = ["held_vs_leaky"]


def held_vs_leaky(held: list[float], held_accepted: list[int], leaky: list[float],
                  leaky_accepted: list[int], leaky_points: list[Any] | None = None) -> Any:
    """Notebook 01's picture: every loss two L-BFGS runs asked for, from the same start, on one log scale.

    ``held`` lists the loss of each evaluation of a run on one batch, taken once; ``leaky`` the same
    for a run whose objective takes a new batch at every evaluation (evaluation k on the k-th batch
    taken, batch 0 first). ``held_accepted`` and ``leaky_accepted`` are the evaluation numbers
    (1-based; 1 is the start) of the points SciPy accepted as iterates, e.g. ``len(losses)`` recorded
    by its ``callback``. ``leaky_points`` (optional) are the leaky run's evaluated parameter vectors,
    one per loss: a step between two accepted points at the same weights (the line search ended with
    a step of 0) is drawn dashed and labelled "same weights, new batch", since only the batch changed.

    Both runs are drawn alike, the held one blue, the leaky one red: a solid line through the start
    (hollow square) and the accepted points (dots); a trial step the line search rejected is a cross,
    joined by a dotted line to the point it was tried from (the legend says "its loss rose" only when
    every one did; the held run's first one is labelled). The leaky run's points say which batch they
    were computed on ("batch 3"); the last rise of its loss between two accepted points (the reason
    SciPy stops with "converged") is labelled. The last point of each run says after how many
    evaluations it stopped; the axes end at the last evaluation and just beyond the lowest and highest
    loss; the legend (three entries) sits under the axes.

    >>> fig = held_vs_leaky([133.0, 430.0, 3.6, 0.1], [3, 4], [133.0, 258.0, 2.0, 8.1], [3, 4])
    >>> fig.axes[0].get_yscale(), [t.get_text() for t in fig.axes[0].texts][-2:]
    ('log', ['stops after 4 evaluations', 'stops after 4 evaluations'])
    """
    for name, losses, accepted in (("held", held, held_accepted), ("leaky", leaky, leaky_accepted)):
        if not isinstance(losses, (list, tuple, np.ndarray)) or not isinstance(accepted, (list, tuple)):
            raise TypeError(f"{name} and {name}_accepted must be lists (losses; evaluation numbers)")
        if len(losses) == 0:
            raise ValueError(f"{name} is empty: a run has at least its first evaluation")
        if not all(np.isfinite(losses)) or min(losses) <= 0:
            raise ValueError(f"{name} must hold positive, finite losses to draw on a log scale")
        if any(not 2 <= int(i) <= len(losses) for i in accepted) or list(accepted) != sorted(set(accepted)):
            raise ValueError(f"{name}_accepted = {list(accepted)} must be increasing evaluation numbers from 2 "
                             f"to {len(losses)} (evaluation 1 is the start)")
    if leaky_points is not None and len(leaky_points) != len(leaky):
        raise ValueError(f"leaky_points has {len(leaky_points)} vectors for {len(leaky)} losses: one per evaluation")

    fig, ax = new_figure(width=8.5, height=4.8)
    values, seen = np.asarray(held, dtype=float), np.asarray(leaky, dtype=float)
    all_rose, paths, first_rejected = True, [], None
    for losses, accepted, color in ((values, held_accepted, COLORS[0]), (seen, leaky_accepted, COLORS[1])):
        steps = np.arange(1, len(losses) + 1)
        on_path = np.zeros(len(losses), dtype=bool)
        on_path[[0, *(int(i) - 1 for i in accepted)]] = True
        for i in np.flatnonzero(~on_path):
            origin = np.flatnonzero(on_path[:i])[-1]  # the last path point before this trial
            all_rose = all_rose and losses[i] > losses[origin]
            ax.semilogy([steps[origin], steps[i]], [losses[origin], losses[i]], ":", color=color, lw=1)
            ax.semilogy([steps[i]], [losses[i]], "x", color=color, ms=8, mew=1.8)
            if color == COLORS[0] and first_rejected is None:
                first_rejected = (i, losses[i] > losses[origin])
        paths.append(np.flatnonzero(on_path))
    unmoved = [leaky_points is not None and np.array_equal(np.asarray(leaky_points[a]), np.asarray(leaky_points[b]))
               for a, b in zip(paths[1][:-1], paths[1][1:])]
    ax.semilogy(paths[0] + 1, values[paths[0]], "-o", color=COLORS[0], lw=2, ms=5)
    for (a, b), same in zip(zip(paths[1][:-1], paths[1][1:]), unmoved):  # the leaky path, one step at a time
        ax.semilogy([a + 1, b + 1], seen[[a, b]], "--" if same else "-", color=COLORS[1], lw=2)
    ax.semilogy(paths[1] + 1, seen[paths[1]], "o", color=COLORS[1], ms=5)
    ax.semilogy([1], values[:1], "s", color="black", ms=9, mfc="white", mew=1.5, zorder=3)

    for k in range(len(seen)):  # evaluation k + 1 ran on batch k
        below = 0 < k < len(values) and values[k] > seen[k]  # keep the label off the held run's point
        ax.annotate(f"batch {k}", (k + 1, seen[k]), textcoords="offset points", fontsize=9.5, color=COLORS[1],
                    xytext=(0, -15 if below else 8), ha="center")
    if first_rejected is not None:
        i, rose = first_rejected
        ax.annotate("rejected: loss rose" if rose else "rejected", (i + 1, values[i]), textcoords="offset points",
                    xytext=(9, -3), fontsize=9, color=COLORS[0])
    rises = [(a, b, same) for (a, b), same in zip(zip(paths[1][:-1], paths[1][1:]), unmoved) if seen[b] > seen[a]]
    if rises:
        a, b, same = rises[-1]
        mid = ((a + b) / 2 + 1, float(np.sqrt(seen[a] * seen[b])))  # the middle of the segment, on a log scale
        why = "same weights, new batch:\n" if same else f"from batch {a} to batch {b}:\n"
        ax.annotate(f"{why}the loss rose {seen[a]:.2f} → {seen[b]:.2f};\nSciPy reports 'converged'", mid,
                    xytext=(b + 1.4, seen[b] / 3), fontsize=9, ha="left", va="top",  # below the run's end
                    color=COLORS[1], arrowprops={"arrowstyle": "->", "color": COLORS[1]})
    ax.annotate(f"stops after {len(values)} evaluations", (len(values), values[-1]), textcoords="offset points",
                xytext=(0, -15), ha="right", fontsize=9, color=COLORS[0], fontweight="bold")
    ax.annotate(f"stops after {len(seen)} evaluations", (len(seen), seen[-1]), textcoords="offset points",
                xytext=(9, -3), fontsize=9, color=COLORS[1], fontweight="bold")

    handles = [
        ax.plot([], [], "-o", color=COLORS[0], lw=2, label="batch held: all on batch 0")[0],
        ax.plot([], [], "-o", color=COLORS[1], lw=2, label="next() in the loss: a new batch each")[0],
        ax.plot([], [], ":x", color="black", label="trial rejected" + (" (its loss rose)" if all_rose else ""))[0],
    ]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=3, fontsize=9)
    ax.set_xlim(0.5, max(len(values), len(seen)) + 0.5)
    ax.set_ylim(min(values.min(), seen.min()) / 2.5, max(values.max(), seen.max()) * 2.5)  # just the data
    ax.set_xlabel("evaluations (calls of fun); ● accepted step, □ start")
    ax.set_ylabel("loss on the batch evaluated (log)")
    ax.set_title("Same start, same L-BFGS: one batch held vs a new batch per evaluation")
    fig.tight_layout()
    return fig
