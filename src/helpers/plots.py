"""Every figure of the workbook: one function per figure, taking the data and returning the Figure.

A notebook draws a figure in one line (``plots.memory_and_curves(...)``); the figure's data is
computed in the notebook, where the learner can see it. Each function is smoke-tested in
``tests/test_plots.py``. :func:`apply_style` gives every figure the same look.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["COLORS", "apply_style", "new_figure", "evaluations_per_dequeue", "accumulation_memory",
           "accumulation_curves", "ptb_grid", "validation_curve", "validation_passes", "snapshot_lag"]

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b")


def apply_style() -> None:
    """Readable defaults: larger fonts, light grid, no top/right spines, fixed figure size."""
    import matplotlib as mpl

    mpl.rcParams.update({
        "figure.figsize": (8, 4),
        "figure.dpi": 100,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.titlesize": 12,
        "axes.labelsize": 11,
        "legend.frameon": False,
        "axes.prop_cycle": mpl.cycler(color=COLORS),
    })


def new_figure(ncols: int = 1, *, width: float = 8.0, height: float = 4.0) -> tuple[Any, Any]:
    """A styled ``(figure, axes)`` pair with ``ncols`` axes side by side (one axes when ``ncols == 1``).

    >>> fig, ax = new_figure()
    >>> type(fig).__name__
    'Figure'
    """
    import matplotlib.pyplot as plt

    apply_style()
    return plt.subplots(1, ncols, figsize=(width, height))


# --------------------------------------------------------------------------- 01 queue decoupling




def evaluations_per_dequeue(losses: list[list[float]], iterates: list[list[int]]) -> Any:
    """Every loss evaluation of a line-search optimizer, batch after batch, with the dequeues marked.

    ``losses[k]`` lists the loss of every evaluation on batch ``k`` in order; ``iterates[k]`` the
    evaluation numbers (1-based) at which the optimizer accepted an iterate. The first evaluation of
    each batch (the new batch at the weights the optimizer starts from) is a square,
    accepted iterates are circles, the rest (rejected line-search probes) are crosses. A dashed line
    marks each ``next(iterator)``: every mark between two lines used one batch.

    >>> fig = evaluations_per_dequeue([[4.0, 2.0, 3.0, 1.0], [2.0, 0.5]], [[2, 4], [2]])
    >>> len(fig.axes[0].lines) > 4
    True
    """
    if len(losses) != len(iterates) or not losses:
        raise ValueError(f"losses and iterates must hold one list per batch, got {len(losses)} and {len(iterates)}")
    import numpy as np

    fig, ax = new_figure(width=9, height=4.4)
    offset, low = 0, min(min(batch) for batch in losses)
    for k, (batch_losses, accepted) in enumerate(zip(losses, iterates)):
        values = np.asarray(batch_losses, dtype=float)
        steps = offset + np.arange(1, len(values) + 1)
        color = COLORS[k % len(COLORS)]
        chosen = np.zeros(len(values), dtype=bool)
        chosen[np.asarray(accepted, dtype=int) - 1] = True
        chosen[0] = False
        rejected = ~chosen
        rejected[0] = False
        ax.axvline(offset + 0.5, color="grey", ls="--", lw=1)
        ax.text(offset + 1, low / 3, f"next(iterator)\nbatch {k}", fontsize=8, va="bottom")
        ax.semilogy(steps[:1], values[:1], "s", color=color, ms=6, mfc="none")
        ax.semilogy(steps[chosen], values[chosen], "o", color=color, ms=4)
        ax.semilogy(steps[rejected], values[rejected], "x", color=color, ms=7)
        offset += len(values)
    ax.plot([], [], "s", color="black", mfc="none", label="first evaluation on a new batch")
    ax.plot([], [], "o", color="black", ms=4, label="accepted iterate")
    ax.plot([], [], "x", color="black", label="rejected line-search probe")
    ax.plot([], [], "--", color="grey", label="next(iterator): one dequeue")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, fontsize=9)
    ax.set(xlabel="loss + gradient evaluation (all batches, in order)", ylabel="loss",
           title="L-BFGS evaluates each batch many times; the iterator advances once per batch")
    ax.set_ylim(low / 4, max(max(batch) for batch in losses) * 3)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- 02 gradient accumulation


def accumulation_memory(splits: list[int], peak_mib: list[float], *, effective: int,
                        fixed_mib: float, fixed_label: str) -> Any:
    """Notebook 02's memory figure: peak memory of one ``effective``-example gradient computed in
    ``k`` micro-batches, for each ``k`` in ``splits``; a tick reads "size (×k)". A dashed line at
    ``fixed_mib`` marks the floor that does not shrink, labelled ``fixed_label`` (say what it holds).

    >>> fig = accumulation_memory([1, 2], [2.0, 1.0], effective=4, fixed_mib=0.5, fixed_label="weights")
    >>> [t.get_text() for t in fig.axes[0].get_xticklabels()]
    ['4 (×1)', '2 (×2)']
    """
    if len(splits) != len(peak_mib) or not splits:
        raise ValueError(f"splits and peak_mib must be non-empty and of equal length, got "
                         f"{len(splits)} and {len(peak_mib)}")
    if any(k < 1 or effective % k for k in splits):
        raise ValueError(f"every split must divide effective={effective} into equal micro-batches, got {splits}")
    fig, ax = new_figure(width=6.5, height=3.8)
    ax.plot(splits, peak_mib, "o-", label="peak memory of one gradient")
    ax.axhline(fixed_mib, color="grey", ls="--", lw=1.5, label=fixed_label)
    ax.set_xscale("log", base=2)
    ax.set_xticks(splits, [f"{effective // k} (×{k})" for k in splits])
    ax.minorticks_off()
    ax.set_xlabel(f"micro-batch size (× number of micro-batches), {effective} examples in all")
    ax.set_ylabel("peak memory (MiB)")
    ax.set_ylim(bottom=0)
    ax.set_title("smaller micro-batches, less memory, toward a floor")
    ax.legend(loc="upper right")
    fig.tight_layout()
    return fig


def accumulation_curves(curves: dict[str, list[float]], *, xlabel: str) -> Any:
    """Notebook 02's training figure: the training loss (MSE) of each run in ``curves`` (name ->
    one loss per point of ``xlabel``), drawn so that equal curves show as one line.

    >>> fig = accumulation_curves({"a": [1.0, 0.5], "b": [1.0, 0.6]}, xlabel="epoch")
    >>> len(fig.axes[0].lines)
    2
    """
    if not curves:
        raise ValueError("curves is empty: give at least one name -> losses")
    fig, ax = new_figure(width=6.5, height=3.8)
    for (name, losses), style in zip(curves.items(), ["-", "--", ":", "-."]):
        ax.plot(range(1, len(losses) + 1), losses, style, marker="o" if style == "-" else None,
                lw=3.0 if style == "-" else 1.8, label=name)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("training loss (MSE)")
    ax.set_title("where the curves part, the updates differ")
    ax.legend()
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- 03 batch iteration


# Okabe and Ito's colour-blind-safe colours, with the text colour each needs: one per batch of an epoch.
_BATCH_COLORS = (("#0072B2", "white"), ("#E69F00", "black"), ("#009E73", "white"),
                 ("#CC79A7", "black"), ("#56B4E9", "black"), ("#D55E00", "white"))


def ptb_grid(layout: Any) -> Any:
    """The PTB layout as a grid: the stream cut into rows, each ``x`` window coloured by its batch.

    ``layout`` is a :class:`helpers.batching.Layout` (``ptb_layout(n_tokens, batch_size, num_steps)``)
    with at most 6 batches per epoch. A cell holds the token's position in the stream; ``y`` of batch
    0 is dashed; the column that is only ever a target is grey; tokens never read are crossed out;
    arrows show what a stateful RNN carries from one batch to the next in each row, and where the
    next epoch jumps back to window 0 (where the state must be reset). Colours are colour-blind safe.

    >>> from helpers.batching import ptb_layout
    >>> type(ptb_grid(ptb_layout(70, 4, 5))).__name__
    'Figure'
    """
    import matplotlib.pyplot as plt

    b, n, length, epochs = layout.batch_size, layout.num_steps, layout.batch_len, layout.epoch_size
    if epochs > len(_BATCH_COLORS):
        raise ValueError(f"layout has {epochs} batches per epoch; the grid shows at most {len(_BATCH_COLORS)}")
    fig, ax = new_figure(width=max(6.0, 0.55 * length + 1.5), height=0.8 * b + 2.2)
    ax.grid(False)
    last_target = epochs * n  # the column that is only ever a target
    for s in range(b):
        for t in range(length):
            k = t // n if t < last_target else -1
            face, ink = _BATCH_COLORS[k] if k >= 0 else ("#d9d9d9" if t == last_target else "white", "black")
            ax.add_patch(plt.Rectangle((t, s), 1, 1, facecolor=face, edgecolor="black", linewidth=0.8))
            if t > last_target:
                ax.plot([t + 0.1, t + 0.9], [s + 0.9, s + 0.1], color="#999999", linewidth=1)
            ax.text(t + 0.5, s + 0.5, str(s * length + t), ha="center", va="center", fontsize=9, color=ink)
        for k in range(1, epochs):  # the state a stateful RNN carries from batch k-1 to batch k
            ax.annotate("", xy=(k * n + 0.45, s + 0.82), xytext=(k * n - 0.45, s + 0.82),
                        arrowprops={"arrowstyle": "-|>", "color": "black", "linewidth": 1.5, "mutation_scale": 14})
    ax.add_patch(plt.Rectangle((1, 0), n, b, fill=False, edgecolor="black", linewidth=2.5, linestyle="--"))
    ax.text(1 + n / 2, b + 0.35, "y of batch 0 (dashed)", ha="center", va="center", fontsize=9)
    # the next epoch: after the last window, every row jumps back to window 0
    ax.annotate("", xy=(0.1, b + 0.8), xytext=(last_target - 0.1, b + 0.8),
                arrowprops={"arrowstyle": "-|>", "color": "black", "linewidth": 2, "mutation_scale": 16})
    ax.text(last_target / 2, b + 1.3, f"batch {epochs} = window 0 again: reset the state", ha="center",
            va="center", fontsize=10, fontweight="bold")
    for k in range(epochs):
        ax.text(k * n + n / 2, -0.35, f"x of batch {k} (and {k + epochs}, {k + 2 * epochs}, …)",
                ha="center", va="center", fontsize=9)
    dropped = list(range(b * length, layout.n_tokens))
    if dropped:
        shown = ", ".join(map(str, dropped[:3])) + (", …" if len(dropped) > 3 else "")
        ax.text(length + 0.3, b / 2, f"dropped by the\nreshape: {shown}", va="center", fontsize=9)
    ax.set_xlim(0, length + 3)
    ax.set_ylim(b + 1.7, -0.8)
    ax.set_xticks(np.arange(length) + 0.5, [str(t) for t in range(length)])
    ax.set_yticks(np.arange(b) + 0.5, [f"row {s}" for s in range(b)])
    ax.set_xlabel("column of the reshaped data (time within a row)")
    ax.set_title(f"{layout.n_tokens} tokens as {b} rows x {length}, read {n} at a time\n"
                 "grey: only ever a target; crossed out: never read; arrows: the state carried to the next batch",
                 fontsize=11)
    ax.spines[:].set_visible(False)
    fig.tight_layout()
    return fig




# --------------------------------------------------------------------------- 04 validation queues



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


def validation_passes(train_loss: Any, val_curve: list[tuple[int, float]],
                      panels: list[tuple[str, list[list[list[int]]]]], *, examples: int | None = None,
                      panels_title: str | None = None, reads: list[tuple[str, list[int]]] | None = None) -> Any:
    """Notebook 04's picture.

    Top left: ``train_loss`` (one loss per training step, steps counting from 1) as a thin line, the
    validation loss of each full pass (``val_curve``: ``(step, loss)`` pairs, step 0 = before
    training) as red dots labelled with their value, a dotted line at every evaluation; a log loss
    axis with plain tick labels, so that the late, small losses stay apart. ``examples``: the size of
    a pass, for the title.
    Top right, when ``reads`` is given (``(label, batch number read at each step)`` pairs, steps from
    1): which training batch each step read, one line per pair (the first solid, the others dashed),
    with the same dotted lines at the evaluations.
    Bottom, one panel per ``(title, passes)``, each pass a list of batches of example ids: the ids
    each pass read, in order, one cell per example, its batch shown by alternating fills; an id read
    a second time in the same pass is filled red; "empty" marks a pass that read nothing. Each panel
    is as wide as its longest pass. ``panels_title`` heads the bottom row.

    >>> fig = validation_passes([2.0, 1.0, 0.8, 0.7], [(0, 2.5), (2, 1.5), (4, 0.9)],
    ...                         [("cycling", [[[0, 1], [2, 0]], [[1, 2], [0, 1]]]), ("once", [[[0, 1], [2]], []])],
    ...                         examples=3, reads=[("kept", [1, 2, 3, 4]), ("restarted", [1, 2, 1, 2])])
    >>> len(fig.axes), fig.axes[0].get_title()
    (4, 'A full pass over all 3 validation examples at step 0 and every 2 steps')

    Raises ValueError for an empty ``train_loss`` or ``panels``, a panel with no id at all, or a
    ``reads`` line of another length than ``train_loss``.
    """
    apply_style()
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    train = np.asarray(train_loss, dtype=float)
    if train.ndim != 1 or not len(train):
        raise ValueError(f"train_loss must be one loss per training step, got shape {train.shape}")
    if not panels:
        raise ValueError("panels is empty: give at least one (title, passes)")
    for label, numbers in reads or []:
        if len(numbers) != len(train):
            raise ValueError(f"reads[{label!r}] has {len(numbers)} steps, train_loss {len(train)}")
    flat = [[[i for batch in one for i in batch] for one in passes] for _, passes in panels]
    if any(not any(ids for ids in passes) for passes in flat):
        raise ValueError("every panel needs at least one pass that read an id")
    steps = np.arange(1, len(train) + 1)
    evaluated = [step for step, _ in val_curve]

    fig = plt.figure(figsize=(11, 8.2))
    upper, lower = fig.subfigures(2, 1, height_ratios=[1, 0.95])
    upper.subplots_adjust(left=0.07, right=0.98, top=0.88, bottom=0.17, wspace=0.22)
    top_axes = upper.subplots(1, 2 if reads else 1, squeeze=False)[0]
    top = top_axes[0]
    top.plot(steps, train, color=COLORS[0], lw=1.2, label="training loss (one batch per step)")
    if val_curve:
        losses = [loss for _, loss in val_curve]
        top.plot(evaluated, losses, "o-", color=COLORS[1], ms=6, label="validation loss (one full pass)")
        for step, loss in val_curve:
            top.annotate(f"{loss:.2f}", (step, loss), textcoords="offset points", xytext=(9, 6), fontsize=8,
                         color=COLORS[1], bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none"})
    top.set_yscale("log")
    top.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    top.set(xlabel="training step", ylabel="loss (MSE, log scale)")
    top.legend(loc="upper right", fontsize=9)
    pass_size = f"all {examples} validation examples" if examples is not None else "the validation set"
    start = " at step 0 and" if val_curve and val_curve[0][0] == 0 else ""
    every = f"{start} every {val_curve[-1][0] - val_curve[-2][0]} steps" if len(val_curve) > 1 else ""
    top.set_title(f"A full pass over {pass_size}{every}", fontsize=11)
    axes_with_steps = [top]
    if reads:
        right = top_axes[1]
        for number, (label, read) in enumerate(reads):
            right.plot(steps, read, color=COLORS[number % len(COLORS)], lw=1.8 if number == 0 else 1.4,
                       ls="-" if number == 0 else "--", label=label)
        right.set(xlabel="training step", ylabel="batch number in the training stream")
        right.set_ylim(bottom=0)
        right.legend(loc="upper left", fontsize=9)
        right.set_title("Which training batch each step trains on", fontsize=11)
        axes_with_steps.append(right)
    for ax in axes_with_steps:
        for step in evaluated:
            ax.axvline(step, color="0.6", lw=0.6, ls=":", zorder=0)

    widths = [max(1, max(len(ids) for ids in passes)) for passes in flat]
    lower.subplots_adjust(left=0.07, right=0.98, top=0.74, bottom=0.2, wspace=0.08)
    bottom_axes = lower.subplots(1, len(panels), squeeze=False, gridspec_kw={"width_ratios": widths})[0]
    fills = ("#c6dbef", "#fdd9b5")  # alternating: one fill per batch
    for column, ((title, passes), ids_per_pass) in enumerate(zip(panels, flat)):
        ax = bottom_axes[column]
        for row, (one, ids) in enumerate(zip(passes, ids_per_pass)):
            if not ids:
                ax.text((widths[column] - 1) / 2, row, "empty", ha="center", va="center", fontsize=9, color="0.4")
            col = 0
            for batch_number, batch in enumerate(one):
                for value in batch:
                    twice = value in ids[:col]  # read a second time in this pass
                    ax.add_patch(plt.Rectangle((col - 0.5, row - 0.5), 1, 1, lw=2.2 if twice else 0.8,
                                               facecolor="#f4a6a6" if twice else fills[batch_number % 2],
                                               edgecolor=COLORS[1] if twice else "white"))
                    ax.text(col, row, int(value), ha="center", va="center", fontsize=9)
                    col += 1
        ax.set_xlim(-0.5, widths[column] - 0.5)
        ax.set_ylim(len(passes) - 0.5, -0.5)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("position in the pass")
        ax.set_yticks(range(len(passes)), [f"pass {p}" for p in range(1, len(passes) + 1)] if column == 0 else [])
        ax.set_xticks(range(widths[column]))
        ax.tick_params(length=0)
        ax.grid(False)
        for side in ("left", "bottom"):
            ax.spines[side].set_visible(False)
    if panels_title:
        lower.suptitle(panels_title, fontsize=11, y=0.97)
    lower.text(0.5, 0.02, "Each cell: the id of the example read; blue and orange: consecutive batches; "
             "red: an example read a second time in the same pass", ha="center", fontsize=9)
    return fig


# --------------------------------------------------------------------------- 05 network snapshots


def snapshot_lag(curves: dict[str, Any], *, every: int | None = None) -> Any:
    """How far a past network lags behind the current one: one line per sync policy.

    ``curves`` maps a policy's name to the distance ``‖current − past‖`` after each training step
    (``snapshots.parameter_distance``). ``every`` marks the steps of a periodic hard sync with
    dotted vertical lines (every ``every`` steps), so the saw-tooth reads against its cause.

    >>> import numpy as np
    >>> fig = snapshot_lag({"hard, every step": np.ones(20), "hard, every 10": np.arange(20) % 10 + 1.0}, every=10)
    >>> [line.get_label() for line in fig.axes[0].get_lines()][:2]
    ['hard, every step', 'hard, every 10']
    """
    import numpy as np

    if not curves:
        raise ValueError("curves must hold at least one policy's distances")
    fig, ax = new_figure()
    for name, curve in curves.items():
        curve = np.asarray(curve, dtype=float)
        if curve.ndim != 1 or curve.size == 0:
            raise ValueError(f"curves[{name!r}] must be a non-empty 1-D sequence of distances, got shape {curve.shape}")
        ax.plot(np.arange(1, curve.size + 1), curve, label=name)
    if every is not None:
        steps = max(len(c) for c in curves.values())
        for t in range(1, steps + 1, every):
            label = f"hard sync (every {every})" if t == 1 else "_nolegend_"
            ax.axvline(t, color="grey", linestyle=":", linewidth=0.8, label=label)
    ax.set_xlabel("training step")
    ax.set_ylabel("‖current − past‖ (trainable weights)")
    ax.set_title("How far the past network lags behind the current one")
    ax.legend()
    fig.tight_layout()
    return fig
