"""Notebook 01's figures (01 queue decoupling); :mod:`helpers.plots` re-exports them."""

from __future__ import annotations

from typing import Any

import numpy as np

from helpers.arguments import require_int
from helpers.plots._style import COLORS, apply_style

__all__ = ["held_vs_leaky"]

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


def held_vs_leaky(held: list[float], held_accepted: list[int], leaky: list[float],
                  leaky_accepted: list[int], leaky_points: list[Any] | None = None, *,
                  max_iterations: int | None = None,
                  all_data_losses: tuple[float, float] | None = None) -> Any:
    """Notebook 01's picture: two L-BFGS runs from the same start, one panel each, one column per evaluation.

    ``held`` lists the loss of each evaluation of a run on one batch, taken once; ``leaky`` the same
    for a run whose objective takes a new batch at every evaluation (evaluation k on batch k, both
    counted from 1). ``held_accepted`` and ``leaky_accepted`` are the evaluation numbers (1-based; 1 is
    the start) of the points SciPy accepted as iterates, e.g. ``len(losses)`` recorded by its
    ``callback``. ``leaky_points`` (optional) are the leaky run's evaluated parameter vectors, one per
    loss. ``max_iterations`` (optional) is both runs' iteration cap: a run that made that many
    iterations is labelled as stopped at the cap, so that its end does not read as convergence.

    Top panel, the held run: its start (evaluation 1) as a diamond, its accepted points (all on batch 1) as dots, its rejected
    trials as light crosses. Bottom panel, the leaky run, drawn the same way (nothing joined in either
    panel), each point labelled with the batch it read; under its lowest point, that these losses cannot be
    compared (each read another batch). The two panels share both axes (log losses), so the columns line up, but no point of one run
    sits on the other's axes. Each run's end is labelled: the held run "stops at its cap of N
    iterations" (or "stops after N evaluations"); the leaky run "stops after N: 'converged'" when its
    last evaluation is an accepted point whose loss rose (SciPy's L-BFGS-B stops when
    (f_k - f_k+1) / max(|f_k|, |f_k+1|, 1) <= ftol, which any rise satisfies), else "stops after N
    evaluations". When that last point has exactly the weights of the accepted point k before (needs
    ``leaky_points``), it is an open square, not a dot, joined to point k by a dotted elbow under the points
    labelled "same weights as k", and labelled in plain words: point k's weights, evaluated on the last batch, no lower, so
    SciPy says 'converged'. ``all_data_losses`` (optional) are
    the two runs' final losses on all the data, written in each panel's bold title, so the figure ties
    to the judge's numbers. Both panels shade each iteration's evaluations the same way
    (iteration 1 from the start to its accepted point; each next one from the evaluation after an
    accepted point to the next accepted point: one line search), named "iteration k" (the number alone
    where an iteration is narrower than 3 evaluations), a wide one named at its left edge, every band's edges drawn.
    The y-axis says the points are losses on the batch read, not on all the data.

    >>> fig = held_vs_leaky([133.0, 430.0, 3.6, 0.1], [3, 4], [133.0, 258.0, 2.0, 8.1], [3, 4])
    >>> top, bottom = fig.axes
    >>> bottom.get_yscale(), [t.get_text() for t in bottom.texts][:4]
    ('log', ['batch 1', 'batch 2', 'batch 3', 'batch 4'])
    """
    import matplotlib.pyplot as plt

    _check("held", held, held_accepted)
    _check("leaky", leaky, leaky_accepted)
    max_iterations = require_int("max_iterations", max_iterations, minimum=1, allow_none=True)
    if leaky_points is not None and len(leaky_points) != len(leaky):
        raise ValueError(f"leaky_points has {len(leaky_points)} vectors for {len(leaky)} losses: one per evaluation")
    if all_data_losses is not None and (len(all_data_losses) != 2
                                        or not all(np.isfinite(v) and v > 0 for v in all_data_losses)):
        raise ValueError(f"all_data_losses = {all_data_losses!r} must be two positive, finite losses (held, leaky)")

    apply_style()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8.5, 6.4), sharex=True, sharey=True)
    values, seen = np.asarray(held, dtype=float), np.asarray(leaky, dtype=float)

    def path_of(losses: np.ndarray, accepted: list[int]) -> np.ndarray:
        on_path = np.zeros(len(losses), dtype=bool)
        on_path[[0, *(int(i) - 1 for i in accepted)]] = True
        return on_path

    held_path, leaky_path = path_of(values, held_accepted), path_of(seen, leaky_accepted)
    columns, leaky_columns = np.arange(1, len(values) + 1), np.arange(1, len(seen) + 1)
    held_path[0] = leaky_path[0] = False  # evaluation 1 is the start, drawn as a diamond, not an accepted point
    top.semilogy(columns[:1], values[:1], "D", color=COLORS[0], ms=7)
    bottom.semilogy(leaky_columns[:1], seen[:1], "D", color=COLORS[1], ms=7)
    top.semilogy(columns[held_path], values[held_path], "o", color=COLORS[0], ms=6)   # not joined, as below
    held_rejected = ~path_of(values, held_accepted)
    top.semilogy(columns[held_rejected], values[held_rejected], "x", color=COLORS[0], ms=7, mew=1.5, alpha=0.5)

    accepted = np.flatnonzero(path_of(seen, leaky_accepted))  # the start counts here: a run's first point
    rose = len(accepted) >= 2 and accepted[-1] == len(seen) - 1 and seen[accepted[-1]] >= seen[accepted[-2]]
    same = (rose and leaky_points is not None  # the last "step" kept the weights: SciPy's stop, not a step
            and np.array_equal(np.asarray(leaky_points[accepted[-1]]), np.asarray(leaky_points[accepted[-2]])))
    dots = leaky_path.copy()
    if same:
        dots[-1] = False
        bottom.semilogy(leaky_columns[-1:], seen[-1:], "s", color=COLORS[1], mfc="white", mew=2, ms=9, zorder=5)
    bottom.semilogy(leaky_columns[dots], seen[dots], "o", color=COLORS[1], ms=6)   # not joined: other batches
    rejected = ~path_of(seen, leaky_accepted)
    bottom.semilogy(leaky_columns[rejected], seen[rejected], "x", color=COLORS[1], ms=7, mew=1.5, alpha=0.5)
    for k, loss in zip(leaky_columns, seen):
        bottom.annotate(f"batch {k}", (k, loss), textcoords="offset points", xytext=(0, 9), ha="center",
                        fontsize=8, color="0.35")

    # each iteration's evaluations shaded, alternately, in both panels: iteration 1 from the start
    # (evaluation 1) to its accepted point, then each from the evaluation after an accepted point to the
    # next (a line search); trailing evaluations after the last accepted point form the last
    def shade(ax: Any, accepted_at: list[int], count: int) -> None:
        ends = [0, *(int(i) for i in accepted_at)] + ([count] if not accepted_at or int(accepted_at[-1]) < count else [])
        ends = ends if count > 1 else []
        for number, (first, last) in enumerate(zip(ends, ends[1:]), start=1):
            grey = 0.5 if number % 2 else 0.75  # edges drawn: where each iteration starts and ends
            ax.axvspan(first + 0.5, last + 0.5, fc=(grey, grey, grey, 0.12), ec=(0.5, 0.5, 0.5, 0.5), lw=0.8, zorder=0)
            if last - first >= 3:  # wide: named at its left edge, where it starts
                ax.annotate(f"iteration {number}", (first + 0.6, 0.97), xycoords=("data", "axes fraction"),
                            ha="left", va="top", fontsize=9, color="0.3", fontstyle="italic")
            else:  # narrow: the number alone, centred
                ax.annotate(str(number), ((first + 1 + last) / 2, 0.97), xycoords=("data", "axes fraction"),
                            ha="center", va="top", fontsize=9, color="0.3", fontstyle="italic")

    shade(top, list(held_accepted), len(values))
    shade(bottom, list(leaky_accepted), len(seen))

    held_stop = f"stops after {len(values)} evaluations"
    if max_iterations is not None and len(held_accepted) >= max_iterations:  # the cap, not convergence
        held_stop = f"stops at its cap of {max_iterations} iterations"
    top.annotate(held_stop, (len(values), values[-1]), textcoords="offset points", xytext=(0, -12), ha="right", va="top",
                 fontsize=9, color=COLORS[0], fontweight="bold")
    stop = f"stops after {len(seen)}: 'converged'" if rose else f"stops after {len(seen)} evaluations"
    if same:  # the line search came back to the weights of the accepted point before, read on a new batch
        first, last_k = accepted[-2] + 1, len(seen)
        stop = f"batch {first}'s weights, evaluated on batch {last_k}:\nno lower, so SciPy stops: 'converged'"
        below = seen[first - 1] / 2.5  # a dotted elbow under the points: from the square back to its weights
        bottom.semilogy([first, first, last_k, last_k], [seen[first - 1], below, below, seen[-1]], ":",
                        color=COLORS[1], lw=1.5)
        bottom.annotate(f"same weights as {first}", ((first + last_k) / 2, below), textcoords="offset points",
                        xytext=(0, -3), ha="center", va="top", fontsize=9, color=COLORS[1])
    low = int(np.argmin(seen))  # the lowest leaky loss: low because of its batch, not its step
    bottom.annotate("losses on different batches:\ncannot be compared", (low + 1, seen[low]), textcoords="offset points",
                    xytext=(0, -30), ha="center", va="top", fontsize=9, color="0.2", fontstyle="italic")
    bottom.annotate(stop, (len(seen), seen[-1]), textcoords="offset points", xytext=(10, 0), va="center",
                    fontsize=9, color=COLORS[1], fontweight="bold")

    def mark(ax: Any, style: str, color: str, **kw: Any) -> Any:
        return ax.plot([], [], style, color=color, **kw)[0]

    top.legend([mark(top, "D", COLORS[0], ms=7), mark(top, "o", COLORS[0], ms=6),
                mark(top, "x", COLORS[0], ms=7, mew=1.5, alpha=0.5)],
               ["start (evaluation 1)", "accepted point (all on batch 1)", "rejected trial (too long a step: tried shorter)"],
               loc="upper right", bbox_to_anchor=(1, 0.88),  # under the iteration labels, above the points
               fontsize=9)
    handles = [mark(bottom, "D", COLORS[1], ms=7), mark(bottom, "o", COLORS[1], ms=6),
               mark(bottom, "x", COLORS[1], ms=7, mew=1.5, alpha=0.5)]
    labels = ["start (evaluation 1)", "accepted point (each on its own batch)", "rejected trial (a different batch each)"]
    if same:
        handles.append(mark(bottom, "s", COLORS[1], mfc="white", mew=2, ms=9))
        labels.append("where SciPy stops")
    bottom.legend(handles, labels, loc="upper right", fontsize=9)
    titles = ["Batch held: every evaluation reads batch 1", "next() in the loss: evaluation k reads batch k"]
    if all_data_losses is not None:  # the payoff, where the eye lands first
        titles = [f"{title}. At its end, loss on all the data: {end:.2f}" for title, end in zip(titles, all_data_losses)]
    top.set_title(titles[0], fontsize=11, fontweight="bold")
    bottom.set_title(titles[1], fontsize=11, fontweight="bold")
    last = max(len(values), len(seen))
    bottom.set_xlim(0.4, last + 0.6)
    bottom.set_xticks(range(1, last + 1))  # one tick per evaluation (column)
    bottom.set_ylim(min(values.min(), seen.min()) / 8, max(values.max(), seen.max()) * 6)
    bottom.set_xlabel("evaluation (one call of fun)")
    for ax in (top, bottom):
        ax.set_ylabel("loss on the batch it read\n(not all the data)")
    fig.tight_layout()
    return fig
