"""Notebook 04's figures (04 validation queues); :mod:`helpers.plots` re-exports them."""

from __future__ import annotations

from typing import Any

import numpy as np

from helpers.plots._style import COLORS, apply_style, new_figure

__all__ = ["epoch_ends_and_passes", "keep_best_curve", "reported_losses", "validation_curve", "validation_losses", "validation_passes"]


def epoch_ends_and_passes(passes: list[tuple[int, float]], epoch_ends: list[tuple[int, float]], *,
                          best_pass: int, best_epoch_end: int, title: str | None = None) -> Any:
    """Notebook 04's finite-data picture: two runs of ``fit(finite_ds, epochs=E)`` on one axes.
    ``passes``: ``(step, loss)`` of a pass every K steps (``KeepBest``), a line with dots;
    ``epoch_ends``: ``(step, loss)`` of the built-in's pass at each epoch's end, open circles on that
    line (the two runs' passes are the same there: one curve), with a dotted line at each epoch end
    before the built-in's stop. Each run's stop (its last pass) is a dashed line in its colour,
    labelled with its step. ``best_pass`` and ``best_epoch_end``: the step whose weights each run
    restored, a star and a square labelled with its loss. Linear y axis from 0, its top near the
    late passes: a pass above it (the first, far above the rest) is an open triangle at the top
    edge, the values of those in the legend. The legend right of the axes. Returns the Figure.

    >>> fig = epoch_ends_and_passes([(0, 4.0), (5, 1.0), (10, 2.0)], [(10, 2.0)], best_pass=5, best_epoch_end=10)
    >>> [line.get_label() for line in fig.axes[0].lines][:2]
    ['KeepBest: a pass every 5 steps', 'built-in: a pass when an epoch ends (the same passes: one curve)']

    Raises ValueError for empty runs or a best step that is not one of the run's steps.
    """
    if not passes or not epoch_ends:
        raise ValueError("passes and epoch_ends: give each run's (step, loss) of at least one pass")
    loss_at, end_at = dict(passes), dict(epoch_ends)
    if best_pass not in loss_at or best_epoch_end not in end_at:
        raise ValueError(f"best_pass {best_pass} or best_epoch_end {best_epoch_end} is not a step of its run")
    every = passes[1][0] - passes[0][0] if len(passes) > 1 else 0
    fig, ax = new_figure(width=10.5, height=4.3)
    ax.plot(*zip(*passes), marker="o", ms=4, color=COLORS[1], lw=1.0, zorder=3,
            label=f"KeepBest: a pass every {every} steps")
    ax.plot(*zip(*epoch_ends), ls="none", marker="o", ms=14, mfc="none", mec=COLORS[0], mew=2.0, zorder=4,
            label="built-in: a pass when an epoch ends (the same passes: one curve)")
    marks = [(best_pass, loss_at[best_pass], "*", 18, COLORS[1], "KeepBest restores"),
             (best_epoch_end, end_at[best_epoch_end], "s", 10, COLORS[0], "built-in restores")]
    for step, loss, marker, size, color, said in marks:
        ax.plot([step], [loss], ls="none", marker=marker, ms=size, color=color, mec="white", mew=0.8, zorder=5,
                label=f"{said} this pass's weights")
        ax.annotate(f"{loss:.3f}", (step, loss), textcoords="offset points", xytext=(10, -4), ha="left",
                    va="top", fontsize=9, color=color, fontweight="bold",
                    bbox={"boxstyle": "square,pad=0.05", "fc": "white", "ec": "none", "alpha": 0.8})
    stops = [(epoch_ends[-1][0], COLORS[0], "built-in"), (passes[-1][0], COLORS[1], "KeepBest")]
    for step, color, who in stops:
        ax.axvline(step, color=color, lw=1.3, ls="--", zorder=2, label=f"{who} stopped (step {step})")
    for number, (step, _) in enumerate(epoch_ends[:-1], start=1):  # up to the built-in's stop
        ax.axvline(step, color="0.6", lw=1.0, ls=":", zorder=1, label="an epoch ends" if number == 1 else "_end")
    losses = sorted(loss for _, loss in passes + epoch_ends)
    top = min(losses[-1], 2.0 * losses[int(0.8 * (len(losses) - 1))]) * 1.02  # the first passes above
    ax.set_ylim(0, top)
    above = [(step, loss) for step, loss in passes if loss > top]
    if above:  # off the top: open triangles at the edge, their values in the legend (one line, no overlap)
        ax.scatter([step for step, _ in above], [top] * len(above), marker="^", s=40, facecolors="white",
                   edgecolors=COLORS[1], linewidths=1.4, zorder=6, clip_on=False,
                   label="above the scale: " + ", ".join(f"{loss:.3g}" for _, loss in above))
    epoch = epoch_ends[0][0] - passes[0][0]  # steps in an epoch: ticks at each epoch end
    last = max(step for step, _ in passes + epoch_ends)
    ax.set_xticks(list(range(passes[0][0], last + epoch, epoch)) if epoch > 0 else [passes[0][0]])
    ax.set_xlabel("training step")
    ax.set_ylabel("validation loss")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9, framealpha=0.95)
    if title:
        ax.set_title(title, fontsize=11, pad=14)  # clear of the triangles at the top edge
    fig.tight_layout()
    return fig


def keep_best_curve(curve: list[tuple[int, float]], best_step: int, *, patience: int | None = None,
                    restored: float | None = None, title: str | None = None) -> Any:
    """What a keep-the-best callback saw: the validation loss of each pass ``(step, loss)``, joined
    by a line; the best pass (at ``best_step``) a large green star, and a thin dotted green line
    across the axes at its loss, labelled "best <value>" above its left end, so that every other
    pass is visibly above it; with ``patience``, when the last pass is at least ``patience`` passes
    after the best, the passes after the best are open red circles (the last one labelled with its
    value) and a dashed line at the last pass says where ``fit`` stopped. ``restored``: the loss of
    a pass on the weights ``fit`` left, a green ring around the star at ``(best_step, restored)``
    (the best step's weights, put back; nothing is drawn at the stop line); star and ring share one
    legend entry. Linear y axis from 0, its top near the late passes: a pass above it (the first
    ones, often far above the rest) is an open triangle at the top edge, its value above it (a legend
    entry says so); the lowest other pass, when within 15% of the best, is labelled "next lowest
    <value>" (not a second best). The legend top right, left of the stop line. Returns the Figure.

    >>> fig = keep_best_curve([(0, 8.0), (20, 1.0), (40, 1.5), (60, 1.2)], 20, patience=2, restored=1.0)
    >>> [text.get_text() for text in fig.axes[0].get_legend().get_texts()][:2]
    ['validation loss of each pass', 'best pass, its weights restored after fit (1.000)']

    Raises ValueError for an empty ``curve`` or a ``best_step`` that is not one of its steps.
    """
    from matplotlib.legend_handler import HandlerTuple
    from matplotlib.lines import Line2D

    if not curve:
        raise ValueError("curve is empty: give the (step, validation loss) of at least one pass")
    steps = [step for step, _ in curve]
    losses = [loss for _, loss in curve]
    if best_step not in steps:
        raise ValueError(f"best_step {best_step} is not the step of a pass: {steps}")
    best = steps.index(best_step)
    after = list(range(best + 1, len(curve)))
    stopped = patience is not None and len(after) >= patience
    fig, ax = new_figure(width=9.0, height=4.3)
    ax.plot(steps, losses, marker="o", ms=5, color=COLORS[0], lw=1.4, zorder=2, label="validation loss of each pass")
    kept = ("the best pass: its weights are kept" if restored is None
            else f"best pass, its weights restored after fit ({restored:.3f})")
    (star,) = ax.plot([best_step], [losses[best]], ls="none", marker="*", ms=20, color=COLORS[2], mec="white",
                      mew=0.8, zorder=4, label=kept)
    ax.axhline(losses[best], color=COLORS[2], lw=0.9, ls=":", zorder=1, label="_best")  # every other pass above it
    ax.annotate(f"best {losses[best]:.3f}", (0.005, losses[best]), xycoords=("axes fraction", "data"),
                textcoords="offset points", xytext=(2, 3), ha="left", va="bottom", fontsize=9, color=COLORS[2])
    if stopped:
        ax.plot([steps[i] for i in after], [losses[i] for i in after], ls="none", marker="o", ms=11, mfc="none",
                mec=COLORS[1], mew=2.0, zorder=3, label="since the best, none lower: patience counts these")
        ax.axvline(steps[-1], color=COLORS[1], lw=1.2, ls="--", zorder=1,
                   label=f"fit stopped: {patience} passes without a lower loss")
    last = len(curve) - 1
    if last != best:  # the last pass's value above it
        ax.annotate(f"{losses[last]:.3f}", (steps[last], losses[last]), textcoords="offset points", xytext=(0, 10),
                    ha="center", va="bottom", fontsize=9, color="0.2", zorder=5,
                    bbox={"boxstyle": "square,pad=0.05", "fc": "white", "ec": "none", "alpha": 0.8})
    if restored is not None:  # a ring around the star: the best step's weights, put back after fit
        ax.plot([best_step], [restored], ls="none", marker="o", ms=26, mfc="none", mec=COLORS[2], mew=1.8,
                zorder=4, label="_restored")  # one legend entry with the star: the same point
    others = [i for i in range(len(curve)) if i not in (best, last)]
    near = min(others, key=lambda i: losses[i], default=None)
    if near is not None and losses[near] <= 1.15 * losses[best]:  # a near miss: its value, so it is not read as a best
        ax.annotate(f"next lowest {losses[near]:.3f}", (steps[near], losses[near]), textcoords="offset points",
                    xytext=(0, -16), ha="center", va="top", fontsize=9, color="0.2", zorder=5,  # under the best line
                    bbox={"boxstyle": "square,pad=0.05", "fc": "white", "ec": "none", "alpha": 0.8})
    span = max(steps[-1] - steps[0], 1)
    right = steps[-1] + 0.04 * span
    ranked = sorted(losses + ([restored] if restored is not None else []))
    top = min(max(ranked), 1.6 * ranked[int(0.8 * (len(ranked) - 1))])  # room for the legend; the first passes above
    ax.set_ylim(0, top * 1.02)
    above = [i for i in range(len(curve)) if losses[i] > top]
    if above:  # off the top: an open triangle at the edge, the value above it
        ax.scatter([steps[i] for i in above], [top * 1.02] * len(above), marker="^", s=40, facecolors="white",
                   edgecolors=COLORS[0], linewidths=1.4, zorder=3, clip_on=False,
                   label="above the scale (first passes): value above")
        for i in above:
            ax.annotate(f"{losses[i]:.3g}", (steps[i], top * 1.02), textcoords="offset points", xytext=(0, 6),
                        ha="center", va="bottom", fontsize=8, color=COLORS[0])  # above it: clear of the curve
    left = steps[0] - 0.04 * span
    ax.set_xlim(left, right)
    ax.set_xticks(steps[::2] if len(steps) > 12 else steps)
    ax.set_xlabel("training step")
    ax.set_ylabel("validation loss")
    # the legend top right, above the late passes and left of the stop line: clear of every marker
    anchor = ((steps[-1] - left) / (right - left) - 0.015, 1.0) if stopped else (1.0, 1.0)
    handles, labels = ax.get_legend_handles_labels()
    if restored is not None:  # the star inside a legend-sized ring
        handles[labels.index(kept)] = (star, Line2D([], [], ls="none", marker="o", ms=13, mfc="none",
                                                    mec=COLORS[2], mew=1.5))
    ax.legend(handles, labels, handler_map={tuple: HandlerTuple(ndivide=1)}, loc="upper right",
              bbox_to_anchor=anchor, fontsize=9, framealpha=0.95)
    if title:
        ax.set_title(title, fontsize=11, pad=22 if above else 12)  # room for the values above the top edge
    fig.tight_layout()
    return fig


def reported_losses(reports: list[tuple[str, list[float], float]], *,
                    val_curve: list[tuple[int, float]] | None = None, per_step: list[float] | None = None,
                    title: str | None = None, subtitle: str | None = None) -> Any:
    """The training loss ``fit`` reports in its logs after each step (a running mean over the
    epoch), one line per ``(label, values, kept)``: ``values`` for steps 1, 2, ...; ``kept``, the
    loss ``History`` kept for the epoch, a star at the last step in the line's colour, its value in
    the legend. ``per_step``: the loss of each training step (steps 1, 2, ...), a thin faint line
    under the others. ``val_curve`` ``[(step, loss), ...]``: the validation passes, open grey
    circles with a dotted line at each pass. ``title`` above the axes, ``subtitle`` under it in
    grey. Log y axis with plain tick labels; the legend right of the axes. Returns the Figure.

    >>> fig = reported_losses([("ours", [4.0, 3.0], 3.5), ("evaluate()", [4.0, 1.2], 1.0)],
    ...                       val_curve=[(0, 5.0), (2, 1.0)], per_step=[4.0, 2.0])
    >>> fig.axes[0].get_legend_handles_labels()[1][:4]
    ['loss of each training step', 'validation loss (a full pass)', 'ours', 'History kept 3.500']

    Raises ValueError for no reports, an empty one, or reports (and ``per_step``) of different
    lengths.
    """
    from matplotlib.ticker import FuncFormatter, LogLocator

    if not reports or any(len(values) == 0 for _, values, _ in reports):
        raise ValueError("reports: give at least one (label, [loss after step 1, 2, ...], kept) with values")
    lengths = {len(values) for _, values, _ in reports}
    if len(lengths) > 1 or (per_step is not None and {len(per_step)} != lengths):
        shown = [(label, len(values)) for label, values, _ in reports]
        if per_step is not None:
            shown.append(("per_step", len(per_step)))
        raise ValueError(f"reports differ in length: {shown}")
    fig, ax = new_figure(width=10.0, height=4.4)
    if per_step is not None:
        ax.plot(np.arange(1, len(per_step) + 1), per_step, color="0.55", lw=0.9, alpha=0.6, zorder=1,
                label="loss of each training step")
    if val_curve:
        for step, _ in val_curve:
            ax.axvline(step, color="0.6", lw=0.8, ls=":", zorder=0)
        ax.plot([step for step, _ in val_curve], [loss for _, loss in val_curve], ls="none", marker="o", ms=9,
                mfc="none", mec="0.3", mew=1.5, zorder=2, label="validation loss (a full pass)")
    for number, (label, values, kept) in enumerate(reports):
        color = COLORS[number % len(COLORS)]
        steps = np.arange(1, len(values) + 1)
        ax.plot(steps, values, color=color, lw=2.0 if number == 0 else 1.6, ls="-" if number == 0 else "--",
                zorder=3 + number, label=label)
        ax.plot([steps[-1]], [kept], ls="none", marker="*", ms=15, color=color, mec="white", mew=0.8,
                zorder=6, label=f"History kept {kept:.3f}")
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 3.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.set_xlabel("training step")
    ax.set_ylabel("loss (log scale)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9)
    if subtitle:
        ax.set_title(subtitle, fontsize=10, color="0.35")
    if title:
        fig.suptitle(title, fontsize=12)
    fig.tight_layout()
    return fig


def validation_curve(history: Any, ax: Any = None, *, metric: str = "loss", smooth: int = 1,
                     log: bool = False) -> Any:
    """The training loss at every step (a running mean over ``smooth`` steps) and the validation
    ``metric`` of each full pass, with a dotted line at every evaluation, on ``ax`` (a new figure
    when None). ``history``: a :class:`helpers.validation.History`. Returns the Figure.

    >>> from types import SimpleNamespace
    >>> h = SimpleNamespace(step=[1, 2, 3, 4], train_loss=[4.0, 3.0, 2.5, 2.0], eval_step=[0, 2, 4],
    ...                     val=[{"loss": 5.0}, {"loss": 3.0}, {"loss": 2.2}])
    >>> len(validation_curve(h, smooth=2).axes[0].lines)
    5
    """
    import numpy as np

    if ax is None:
        _, ax = new_figure()
    train = np.asarray(history.train_loss, dtype=float)
    if smooth > 1 and len(train) >= smooth:
        ax.plot(history.step[smooth - 1:], np.convolve(train, np.ones(smooth) / smooth, mode="valid"),
                label=f"training loss (mean of {smooth} steps)", alpha=0.8)
    else:
        ax.plot(history.step, train, label="training loss", alpha=0.8)
    if history.val:
        ax.plot(history.eval_step, [r[metric] for r in history.val], "o-", label=f"validation {metric} (full pass)")
    for step in history.eval_step:
        ax.axvline(step, color="0.6", lw=0.6, ls=":", zorder=0)
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.set_ylabel(metric)
    ax.legend()
    return ax.figure


def validation_losses(curves: list[tuple[str, list[tuple[int, float]]]], *, train_losses: list[float] | None = None,
                      title: str | None = None) -> Any:
    """Validation losses against the training step, one marker per ``(label, [(step, loss), ...])``
    pair, on a log axis with plain tick labels. Markers shrink from the first curve to the last
    (an open circle, a dot, a cross), so curves with equal values stay visible on top of each other.
    ``train_losses``: the training loss of steps 1, 2, ..., drawn as a thin grey line. Returns the
    Figure.

    >>> fig = validation_losses([("loop", [(0, 4.0), (2, 1.0)]), ("fit", [(2, 1.0)])], train_losses=[3.0, 2.0])
    >>> [line.get_label() for line in fig.axes[0].lines]
    ['training loss (each step)', 'loop', 'fit']

    Raises ValueError for no curves or an empty one.
    """
    from matplotlib.ticker import FuncFormatter, LogLocator

    if not curves or any(not points for _, points in curves):
        raise ValueError("curves: give at least one (label, [(step, loss), ...]) with at least one point")
    fig, ax = new_figure(width=8.0, height=4.2)
    if train_losses is not None:
        ax.plot(np.arange(1, len(train_losses) + 1), train_losses, color="0.65", lw=1.0,
                label="training loss (each step)")
    styles = [dict(marker="o", ms=13, mfc="none", mew=2.0, zorder=3), dict(marker="o", ms=6, mew=0, zorder=5),
              dict(marker="x", ms=10, mew=2.2, zorder=4), dict(marker="s", ms=4, mew=0, zorder=6)]
    for number, (label, points) in enumerate(curves):
        steps = [step for step, _ in points]
        losses = [loss for _, loss in points]
        ax.plot(steps, losses, ls="none", color=COLORS[number % len(COLORS)], label=label,
                **styles[number % len(styles)])
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0,)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.set_xlabel("training step")
    ax.set_ylabel("loss (log scale)")
    ax.legend(loc="upper right", fontsize=9)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig


def validation_passes(panels: list[tuple[str, list[list[list[int]]]]], *,
                      reads: list[tuple[str, list[int]]] | None = None, eval_steps: list[int] | None = None,
                      reads_title: str | None = None, panels_title: str | None = None,
                      answer: int | None = None) -> Any:
    """Notebook 04's picture, on ids only (no model): what each loop reads.

    Top, when ``reads`` is given (``(label, batch number read at each step)`` pairs, steps from 1):
    which training batch each step trains on, one line per pair (the first solid, the others
    dashed), a dotted line at each of ``eval_steps`` (a validation pass), titled ``reads_title``.
    Bottom, one panel per ``(title, passes)``, each pass a list of batches of example ids: the ids
    each pass read, in order, one cell per example, its batch shown by alternating fills; a read of an
    id that the same pass already read keeps its batch's fill in a red frame, its id in red (the first
    read is not framed; round 26: a red fill hid which batch the id was in); the panel's
    other ids (those it read in any pass) that this pass did not read, grey and hatched, after a gap
    and a dotted line (not part of what the pass read); "empty" marks a pass that read nothing.
    ``answer``: the index of the panel that shows the right way, drawn on a green tint with a green
    frame and title. Every panel is as wide as the longest row of any panel (round 26), so that
    the columns line up (the n-th id of a pass under the n-th of the others), with no x axis (the cells carry the ids); one legend, under the panels, names only what
    is drawn.
    ``panels_title`` heads the bottom row.

    >>> fig = validation_passes([("cycling", [[[0, 1], [2, 0]], [[1, 2], [0, 1]]]), ("once", [[[0, 1], [2]], []])],
    ...                         reads=[("kept", [1, 2, 3, 4]), ("restarted", [1, 2, 1, 2])], eval_steps=[0, 2, 4])
    >>> len(fig.axes), fig.axes[0].get_ylabel()
    (3, 'training batch number')

    Raises ValueError for empty ``panels``, a panel with no id at all, or ``reads`` lines of
    different lengths.
    """
    apply_style()
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    if not panels:
        raise ValueError("panels is empty: give at least one (title, passes)")
    if reads and len({len(numbers) for _, numbers in reads}) > 1:
        raise ValueError(f"reads lines differ in length: {[(label, len(numbers)) for label, numbers in reads]}")
    flat = [[[i for batch in one for i in batch] for one in passes] for _, passes in panels]
    if any(not any(ids for ids in passes) for passes in flat):
        raise ValueError("every panel needs at least one pass that read an id")

    fig = plt.figure(figsize=(11, 6.6 if reads else 3.6))
    upper, lower = fig.subfigures(2, 1, height_ratios=[0.75, 1]) if reads else (None, fig)
    if reads:
        upper.subplots_adjust(left=0.07, right=0.98, top=0.86, bottom=0.2)
        top = upper.subplots()
        steps = np.arange(1, len(reads[0][1]) + 1)
        for number, (label, read) in enumerate(reads):
            top.plot(steps, read, color=COLORS[number % len(COLORS)], lw=1.8 if number == 0 else 1.4,
                     ls="-" if number == 0 else "--", label=label)
        for step in eval_steps or []:
            top.axvline(step, color="0.6", lw=0.8, ls=":", zorder=0)
        top.set(xlabel="training step", ylabel="training batch number")
        top.set_ylim(bottom=0)
        top.legend(loc="upper left", fontsize=9)
        if reads_title:
            top.set_title(reads_title, fontsize=11)

    everything = [sorted({i for ids in passes for i in ids}) for passes in flat]  # the ids a panel ever reads
    skipped = [[[i for i in every if i not in ids] if ids else [] for ids in passes]
               for passes, every in zip(flat, everything)]  # ids a pass that read something did not read
    widths = [max(1, max(len(ids) + (len(gone) + 1 if gone else 0) for ids, gone in zip(passes, missing)))
              for passes, missing in zip(flat, skipped)]
    widths = [max(widths)] * len(widths)  # one width: the columns of every panel line up
    lower.subplots_adjust(left=0.07, right=0.98, top=0.78, bottom=0.1, wspace=0.08)
    bottom_axes = lower.subplots(1, len(panels), squeeze=False, gridspec_kw={"width_ratios": widths})[0]
    fills, red_fill, gray_fill = ("#c6dbef", "#fdd9b5"), "#d62728", "#eeeeee"  # alternating: one fill per batch
    rows = max(len(passes) for _, passes in panels)
    seen = {"red": False, "skipped": False}
    for column, ((title, passes), ids_per_pass) in enumerate(zip(panels, flat)):
        ax = bottom_axes[column]
        for row, (one, ids, gone) in enumerate(zip(passes, ids_per_pass, skipped[column])):
            if not ids:
                ax.text((widths[column] - 1) / 2, row, "empty: nothing left to read", ha="center", va="center",
                        fontsize=9, color="0.4")
            col = 0
            for batch_number, batch in enumerate(one):
                for value in batch:
                    twice = value in ids[:col]  # read before in this pass: this read red, not the first
                    seen["red"] |= twice
                    ax.add_patch(plt.Rectangle((col - 0.5, row - 0.5), 1, 1, lw=2.4 if twice else 0.8,
                                               edgecolor=red_fill if twice else "white", zorder=3 if twice else 1,
                                               facecolor=fills[batch_number % 2]))
                    ax.text(col, row, int(value), ha="center", va="center", fontsize=9, zorder=4,
                            color=red_fill if twice else "black", fontweight="bold" if twice else "normal")
                    col += 1
            if gone:  # a gap and a dotted line: what follows was not read
                ax.plot([col, col], [row - 0.45, row + 0.45], color="0.45", lw=1.2, ls=":")
                col += 1
            for value in gone:  # never read in this pass: grey, hatched, after the gap
                seen["skipped"] = True
                ax.add_patch(plt.Rectangle((col - 0.5, row - 0.5), 1, 1, lw=0.8, facecolor=gray_fill,
                                           edgecolor="0.55", hatch="///"))
                ax.text(col, row, int(value), ha="center", va="center", fontsize=9, color="0.45")
                col += 1
        ax.set_xlim(-0.5, widths[column] - 0.5)
        ax.set_ylim(rows - 0.5, -0.5)
        ax.set_title(title, fontsize=10, color=COLORS[2] if column == answer else "black",
                     fontweight="bold" if column == answer else "normal")
        ax.set_yticks(range(len(passes)), [f"pass {p}" for p in range(1, len(passes) + 1)] if column == 0 else [])
        ax.set_xticks([])
        ax.tick_params(length=0)
        ax.grid(False)
        for side in ("left", "bottom", "right", "top"):
            ax.spines[side].set_visible(column == answer)
            ax.spines[side].set_color(COLORS[2])
            ax.spines[side].set_linewidth(2.5)
        if column == answer:  # the right way: a green tint around its cells
            ax.set_facecolor("#dff2dc")
            ax.set_xlim(-0.75, widths[column] - 0.25)
            ax.set_ylim(rows - 0.3, -0.7)
    legend = [Patch(facecolor=fills[0], label="batch 1, 3, ..."),  # in each pass, batches alternate fills
              Patch(facecolor=fills[1], label="batch 2, 4, ...")]
    legend += [Patch(facecolor="white", edgecolor=red_fill, lw=2.4,
                     label="an id read a second time in the same pass")] * seen["red"]
    legend += [Patch(facecolor=gray_fill, edgecolor="0.55", hatch="///", label="not read in this pass (after the dotted line)")] * seen["skipped"]
    lower.legend(handles=legend, loc="lower center", ncol=len(legend), fontsize=8.5, handlelength=1.2,
                 columnspacing=1.2, frameon=False)
    if panels_title:
        lower.suptitle(panels_title, fontsize=11, y=0.97)
    return fig
