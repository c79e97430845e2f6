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
    with at most 6 batches per epoch. A cell holds the token's position in the stream. A coloured band
    over each column of windows names its batch; one long arrow through each row shows the state a
    stateful RNN carries along it, batch after batch; a bracket over row 0 marks its ``y`` in batch 0
    (its ``x`` one token later); the column that is only ever a target is grey, tokens never read are
    crossed out, and both have a band; the tokens the reshape drops are named in the title. A line
    from the end of the windows runs under the grid and back up the left side, with an arrow into the
    start of every row: after the last window every row jumps back to window 0 (reset the state). The
    legend under the grid says why each mark is there. Colours are colour-blind safe.

    >>> from helpers.batching import ptb_layout
    >>> type(ptb_grid(ptb_layout(70, 4, 5))).__name__
    'Figure'
    """
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    b, n, length, epochs = layout.batch_size, layout.num_steps, layout.batch_len, layout.epoch_size
    if epochs > len(_BATCH_COLORS):
        raise ValueError(f"layout has {epochs} batches per epoch; the grid shows at most {len(_BATCH_COLORS)}")
    fig, ax = new_figure(width=max(6.0, 0.55 * length + 2.5), height=0.8 * b + 3.8)
    ax.grid(False)
    last_target = epochs * n  # the column that is only ever a target

    def box(x: float, y: float, width: float, height: float, face: str, ink: str, label: str,
            size: float = 9, crossed: bool = False) -> None:
        ax.add_patch(plt.Rectangle((x, y), width, height, facecolor=face, edgecolor="black", linewidth=0.8))
        if crossed:
            ax.plot([x + 0.1, x + 0.9], [y + 0.9, y + 0.1], color="#999999", linewidth=1)
        ax.text(x + width / 2, y + height * 0.45, label, ha="center", va="center", fontsize=size, color=ink)

    for s in range(b):
        for t in range(length):
            k = t // n if t < last_target else -1
            face, ink = _BATCH_COLORS[k] if k >= 0 else ("#d9d9d9" if t == last_target else "white", "black")
            box(t, s, 1, 1, face, ink, str(s * length + t), crossed=t > last_target)
        # the state a stateful RNN carries along the row, from each batch to the next
        ax.annotate("", xy=(last_target - 0.05, s + 0.84), xytext=(0.1, s + 0.84),
                    arrowprops={"arrowstyle": "-|>", "color": "black", "linewidth": 1.4, "mutation_scale": 13})
    # a band over each column of windows names its batch (a column header, not a note)
    band, band_height = -1.55, 0.6
    for k in range(epochs):
        face, ink = _BATCH_COLORS[k]
        box(k * n + 0.05, band, n - 0.1, band_height, face, ink, f"x of batch {k}  (and {k + epochs}, {k + 2 * epochs}, …)")
    box(last_target + 0.05, band, 0.9, band_height, "#d9d9d9", "black", "y\nonly", size=8)
    if length > last_target + 1:
        box(last_target + 1.05, band, length - last_target - 1.1, band_height, "white", "black", "never\nread", size=8)
    # y of batch 0 in row 0: x shifted by one token (a bracket over the row, not a box over the colours)
    ax.plot([1.05, 1.05, n + 0.95, n + 0.95], [-0.08, -0.4, -0.4, -0.08], color="black", linewidth=1.8)
    ax.text(n + 1.2, -0.4, f"y of batch 0 in row 0: tokens 1–{n}, its x one token later "
            f"({n} is also batch 1's first input)", ha="left", va="center", fontsize=9, style="italic")
    # after the last window, every row jumps back to window 0: from the end of the windows, under the grid,
    # up the left side, and into the start of every row
    below, left = b + 0.45, -0.55
    ax.plot([last_target, last_target], [0, b], color="black", linewidth=2.5)
    ax.plot([last_target, last_target, left, left], [b, below, below, 0.5], color="black", linewidth=2)
    for s in range(b):
        ax.annotate("", xy=(-0.02, s + 0.5), xytext=(left, s + 0.5),
                    arrowprops={"arrowstyle": "-|>", "color": "black", "linewidth": 2, "mutation_scale": 14})
    ax.text(last_target / 2, below + 0.45, f"after batch {epochs - 1}, every row jumps back to its start "
            f"(batch {epochs} = window 0 again): reset the state", ha="center", va="center", fontsize=10,
            fontweight="bold")
    ax.set_xlim(left - 0.3, length + 0.2)
    ax.set_ylim(b + 1.3, band - 0.2)
    ax.set_xticks([])
    ax.set_yticks(np.arange(b) + 0.5, [f"row {s}" for s in range(b)])
    ax.tick_params(axis="y", length=0)
    dropped = list(range(b * length, layout.n_tokens))
    cut = ""
    if dropped:
        cut = f" (token {dropped[0]} dropped)" if len(dropped) == 1 else f" (tokens {dropped[0]}–{dropped[-1]} dropped)"
    ax.set_title(f"{layout.n_tokens} tokens cut into {b} rows of {length}{cut}, read {n} at a time", fontsize=12)
    key = [Line2D([], [], color="black", marker=">", markersize=7, linewidth=1.4,
                  label="the state a stateful RNN carries along a row, batch after batch"),
           Patch(facecolor="#d9d9d9", edgecolor="black", label="only ever a target (y): no window after it"),
           (Patch(facecolor="white", edgecolor="black"),
            Line2D([], [], color="#999999", linewidth=1, marker=[(-1, -1), (1, 1)], markersize=10, linestyle=""))]
    labels = [key[0].get_label(), key[1].get_label(),
              "never read: too few tokens left for another window plus its target"]
    ax.legend(handles=key, labels=labels, loc="upper center", bbox_to_anchor=(0.45, -0.0), ncol=1, fontsize=9,
              handlelength=2.2)
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


def validation_passes(history: Any, panels: list[tuple[str, list[list[list[int]]]]], *,
                      without_eval: Any = None, smooth: int = 5) -> Any:
    """Notebook 04's picture. Top: :func:`validation_curve` (log scale); with ``without_eval`` (the
    same training run without evaluation) its training loss dashed over the first. Bottom, one
    panel per ``(title, passes)``, each pass a list of batches of example ids: the id each position
    of each pass read, as a coloured grid, a line between batches, "empty" for a pass of no example.

    >>> from types import SimpleNamespace
    >>> h = SimpleNamespace(step=[1, 2], train_loss=[2.0, 1.0], eval_step=[0, 2], val=[{"loss": 3.0}, {"loss": 1.5}])
    >>> fig = validation_passes(h, [("cycling", [[[0, 1], [2, 0]], [[1, 2], [0, 1]]]), ("once", [[[0, 1], [2]], []])],
    ...                         without_eval=h)
    >>> len(fig.axes)
    3
    """
    import numpy as np

    apply_style()
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(11, 6.5))
    grid = fig.add_gridspec(2, len(panels), height_ratios=[0.85, 1], hspace=0.5, wspace=0.12)
    top = fig.add_subplot(grid[0, :])
    validation_curve(history, top, smooth=smooth, log=True)
    if without_eval is not None:
        train = np.asarray(without_eval.train_loss, dtype=float)
        steps = without_eval.step
        if smooth > 1 and len(train) >= smooth:
            train, steps = np.convolve(train, np.ones(smooth) / smooth, mode="valid"), steps[smooth - 1:]
        top.plot(steps, train, "--", color="black", lw=1, label="the same training without evaluation")
        top.legend()
    n_val = history.val[-1].get("examples", "all") if history.val else "all"
    every = history.eval_step[1] - history.eval_step[0] if len(history.eval_step) > 1 else 0
    top.set_title(f"A full validation pass over {n_val} examples every {every} steps (dotted lines)")
    flat = [[[i for batch in one for i in batch] for one in passes] for _, passes in panels]
    width = max(len(ids) for passes in flat for ids in passes)
    top_id = max(max(ids) for passes in flat for ids in passes if ids)
    for column, ((title, passes), ids_per_pass) in enumerate(zip(panels, flat)):
        ax = fig.add_subplot(grid[1, column])
        table = np.full((len(passes), width), np.nan)
        for row, ids in enumerate(ids_per_pass):
            table[row, :len(ids)] = ids
            if not ids:
                ax.text((width - 1) / 2, row, "empty", ha="center", va="center", fontsize=9, color="0.4")
            ends = np.cumsum([len(batch) for batch in passes[row]])[:-1]
            for end in ends:  # a line between batches
                ax.plot([end - 0.5, end - 0.5], [row - 0.5, row + 0.5], color="white", lw=2.5)
        ax.imshow(table, cmap="viridis", vmin=0, vmax=top_id, aspect="auto")
        for (row, col), value in np.ndenumerate(table):
            if not np.isnan(value):
                ax.text(col, row, int(value), ha="center", va="center", fontsize=8,
                        color="white" if value < top_id / 2 else "black")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("position in the pass")
        ax.set_yticks(range(len(passes)), [f"pass {p}" for p in range(1, len(passes) + 1)] if column == 0 else [])
        ax.set_xticks(range(width))
        ax.grid(False)
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
