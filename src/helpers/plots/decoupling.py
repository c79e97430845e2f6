"""Notebook 01's figures (01 queue decoupling); :mod:`helpers.plots` re-exports them."""

from __future__ import annotations

from typing import Any

import numpy as np

from helpers.arguments import require_int
from helpers.plots._style import COLORS, apply_style

__all__ = ["held_vs_leaky"]

DODGE = 0.1  # held_vs_leaky: how far each run's points sit left (held) and right (leaky) of their column


def _check(name: str, losses: Any, accepted: Any) -> None:
    if not isinstance(losses, (list, tuple, np.ndarray)) or not isinstance(accepted, (list, tuple)):
        raise TypeError(f"{name} and {name}_accepted must be lists (losses; evaluation numbers)")
    if len(losses) == 0:
        raise ValueError(f"{name} is empty: a run has at least its first evaluation")
    if not all(np.isfinite(losses)) or min(losses) <= 0:
        raise ValueError(f"{name} must hold positive, finite losses to draw on a log scale")
    if any(not 2 <= int(i) <= len(losses) for i in accepted) or list(accepted) != sorted(set(accepted)):
        raise ValueError(f"{name}_accepted = {list(accepted)} must be increasing evaluation numbers from 2 "
                         f"to {len(losses)} (evaluation 1 is the start)")


def _batch_strip(ax: Any, held: int, leaky: int) -> None:
    """One cell per evaluation, with the number of the batch it read: all 0 held, 0, 1, 2, ... leaky."""
    from matplotlib.patches import Rectangle

    for row, count, color, batch_of in ((1, held, COLORS[0], lambda k: 0), (0, leaky, COLORS[1], lambda k: k)):
        for k in range(count):
            ax.add_patch(Rectangle((k + 0.55, row - 0.38), 0.9, 0.76, facecolor=color, alpha=0.15,
                                   edgecolor=color))
            ax.text(k + 1, row, str(batch_of(k)), ha="center", va="center", fontsize=9.5, color=color)
    ax.set_ylim(-0.5, 1.5)
    ax.set_yticks([1, 0], ["batch held", "next() in the loss"])
    ax.tick_params(axis="y", length=0)
    ax.grid(False)
    for side in ("left", "bottom"):
        ax.spines[side].set_visible(False)
    ax.tick_params(axis="x", labelbottom=False, length=0)
    ax.set_title("The batch each evaluation read", fontsize=11)


def held_vs_leaky(held: list[float], held_accepted: list[int], leaky: list[float],
                  leaky_accepted: list[int], leaky_points: list[Any] | None = None, *,
                  max_iterations: int | None = None) -> Any:
    """Notebook 01's picture: two L-BFGS runs from the same start, one evaluation per column.

    ``held`` lists the loss of each evaluation of a run on one batch, taken once; ``leaky`` the same
    for a run whose objective takes a new batch at every evaluation (evaluation k on batch k - 1).
    ``held_accepted`` and ``leaky_accepted`` are the evaluation numbers (1-based; 1 is the start) of
    the points SciPy accepted as iterates, e.g. ``len(losses)`` recorded by its ``callback``.
    ``leaky_points`` (optional) are the leaky run's evaluated parameter vectors, one per loss.
    ``max_iterations`` (optional) is both runs' iteration cap: a run that made that many iterations
    is labelled as stopped at the cap, so that its end does not read as convergence.

    Top panel: the batch each evaluation read (one batch for many evaluations, or one per evaluation).
    Bottom panel, losses on a log scale: accepted points (the start included) are dots, rejected trial
    steps are crosses. The held run's accepted points, all on one batch, are joined by a thick line (a
    trajectory); the leaky run's are not joined, since each is on another batch and their losses do
    not compare. In each column the held run's point sits a little left of the evaluation number and
    the leaky run's a little right (``DODGE``), so that no point hides behind the other run's; crosses
    have a white outline and sit over the line. A "start" label sits over column 1. Each run's last
    evaluation is labelled; the leaky run's label says 'converged' when its last evaluation is an
    accepted point whose loss rose: SciPy's L-BFGS-B stops when (f_k - f_k+1) / max(|f_k|, |f_k+1|, 1)
    <= ftol, which any rise satisfies. When that point is at exactly the weights of the accepted one
    before (the line search ended with a step of 0; needs ``leaky_points``), it is drawn as an open
    square, not a dot (it is where SciPy stops, not a step), labelled "SciPy stops here", and a dashed
    curved arrow runs from that earlier point to it, labelled "SciPy went back to k's weights;\nbatch j
    gave them a higher loss". A note in the top right corner says the red dots do not compare. Rejected
    trials are small, light crosses. The legend, under the axes,
    says that the leaky run's points do not compare, that rejected trials are normal in both runs, and
    (with the square) where SciPy stops.

    >>> fig = held_vs_leaky([133.0, 430.0, 3.6, 0.1], [3, 4], [133.0, 258.0, 2.0, 8.1], [3, 4])
    >>> strip, ax = fig.axes
    >>> ax.get_yscale(), [t.get_text() for t in strip.texts]
    ('log', ['0', '0', '0', '0', '0', '1', '2', '3'])
    """
    import matplotlib.pyplot as plt
    from matplotlib import patheffects
    from matplotlib.legend_handler import HandlerTuple

    _check("held", held, held_accepted)
    _check("leaky", leaky, leaky_accepted)
    max_iterations = require_int("max_iterations", max_iterations, minimum=1, allow_none=True)
    if leaky_points is not None and len(leaky_points) != len(leaky):
        raise ValueError(f"leaky_points has {len(leaky_points)} vectors for {len(leaky)} losses: one per evaluation")

    apply_style()
    fig, (strip, ax) = plt.subplots(2, 1, figsize=(8.5, 6.2), sharex=True, gridspec_kw={"height_ratios": [1, 4]})
    _batch_strip(strip, len(held), len(leaky))
    values, seen = np.asarray(held, dtype=float), np.asarray(leaky, dtype=float)

    def path_of(losses: np.ndarray, accepted: list[int]) -> np.ndarray:
        on_path = np.zeros(len(losses), dtype=bool)
        on_path[[0, *(int(i) - 1 for i in accepted)]] = True
        return on_path

    held_path, leaky_path = path_of(values, held_accepted), path_of(seen, leaky_accepted)
    # the two runs side by side in each column (held left, leaky right), so no point hides behind another
    halo = [patheffects.withStroke(linewidth=4, foreground="white")]  # a cross stays visible over a line
    left = np.arange(1, len(values) + 1) - DODGE
    ax.semilogy(left[held_path], values[held_path], "-o", color=COLORS[0], lw=2, ms=5)
    ax.semilogy(left[~held_path], values[~held_path], "x", color=COLORS[0], ms=6, mew=1.2, alpha=0.5,
                zorder=4, path_effects=halo)   # rejected trials: light, not the point of the picture
    right = np.arange(1, len(seen) + 1) + DODGE
    accepted = np.flatnonzero(leaky_path)
    rose = len(accepted) >= 2 and accepted[-1] == len(seen) - 1 and seen[accepted[-1]] >= seen[accepted[-2]]
    same = (rose and leaky_points is not None  # the last "step" kept the weights: SciPy's stop, not a step
            and np.array_equal(np.asarray(leaky_points[accepted[-1]]), np.asarray(leaky_points[accepted[-2]])))
    dots = leaky_path.copy()
    if same:
        dots[-1] = False
        ax.semilogy(right[-1:], seen[-1:], "s", color=COLORS[1], mfc="white", mew=2, ms=9, zorder=5)
    ax.semilogy(right[dots], seen[dots], "o", color=COLORS[1], ms=6)   # not joined: other batches
    ax.semilogy(right[~leaky_path], seen[~leaky_path], "x", color=COLORS[1], ms=6, mew=1.2, alpha=0.5,
                zorder=4, path_effects=halo)
    ax.annotate("start", (1, max(values[0], seen[0])), textcoords="offset points", xytext=(0, 8), ha="center",
                fontsize=9)
    ax.text(0.99, 0.97, "red dots: each on another batch,\nnot comparable with blue or each other",
            transform=ax.transAxes, ha="right", va="top", fontsize=8.5, color=COLORS[1])

    stop = f"stops after {len(seen)}: 'converged'" if rose else f"stops after {len(seen)} evaluations"
    if same:
        a, b = accepted[-2], accepted[-1]
        # a curved arrow from the earlier point to the stop: SciPy went back to those weights
        ax.annotate("", (right[b], seen[b]), (right[a], seen[a]),
                    arrowprops={"arrowstyle": "->", "color": "0.45", "linestyle": "--", "lw": 1.2,
                                "connectionstyle": "arc3,rad=-0.35", "shrinkA": 5, "shrinkB": 7})
        ax.annotate(f"SciPy went back to {a + 1}'s weights;\nbatch {b} gave them a higher loss",
                    ((right[a] + right[b]) / 2, np.sqrt(seen[a] * seen[b])),
                    textcoords="offset points", xytext=(0, 44), ha="center", fontsize=8.5, color="0.35")
        stop = "SciPy stops here"
    held_stop = f"stops after {len(values)} evaluations"
    if max_iterations is not None and len(held_accepted) >= max_iterations:  # the cap, not convergence
        held_stop = f"stops at its cap of {max_iterations} iterations"
    ax.annotate(held_stop, (len(values) - DODGE, values[-1]), textcoords="offset points",
                xytext=(0, -15), ha="right", fontsize=9, color=COLORS[0], fontweight="bold")
    ax.annotate(stop, (len(seen) + DODGE, seen[-1]), textcoords="offset points", xytext=(9, 0), va="center",
                fontsize=9, color=COLORS[1], fontweight="bold")

    def mark(style: str, color: str, **kw: Any) -> Any:
        return ax.plot([], [], style, color=color, **kw)[0]

    handles = [mark("-o", COLORS[0], lw=2, ms=5), mark("o", COLORS[1], ms=6),
               (mark("x", COLORS[0], ms=6, mew=1.2, alpha=0.5), mark("x", COLORS[1], ms=6, mew=1.2, alpha=0.5))]
    labels = ["batch held: accepted points, all on batch 0",
              "next() in the loss: accepted points, each on its own batch (not comparable)",
              "rejected trial (normal in both runs)"]
    if same:
        handles.append(mark("s", COLORS[1], mfc="white", mew=2, ms=9))
        labels.append("next() in the loss: where SciPy stops (weights it had already evaluated)")
    ax.legend(handles, labels, handler_map={tuple: HandlerTuple(ndivide=None, pad=0.6)}, loc="upper center",
              bbox_to_anchor=(0.5, -0.16), ncol=1, fontsize=9)
    ax.set_xlim(0.4, max(len(values), len(seen)) + 0.6)
    ax.set_xticks(range(1, max(len(values), len(seen)) + 1))  # one tick per evaluation (column)
    ax.set_ylim(min(values.min(), seen.min()) / 2.5, max(values.max(), seen.max()) * 4)
    ax.set_xlabel("evaluation (one call of fun); held run just left of it, next() run just right")
    ax.set_ylabel("loss on the batch it read (log)")
    ax.set_title("Batch held: the loss keeps falling. next() in the loss: SciPy stops early", fontsize=11)
    fig.tight_layout()
    return fig
