"""Every figure of the workbook: one function per figure, taking the data and returning the Figure.

A notebook draws a figure in one line (``plots.memory_and_curves(...)``); the figure's data is
computed in the notebook, where the learner can see it. Each function is smoke-tested in
``tests/test_plots.py``. :func:`apply_style` gives every figure the same look.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["COLORS", "apply_style", "new_figure", "evaluations_per_dequeue", "accumulation_memory",
           "accumulation_curves", "ptb_grid", "validation_curve", "validation_passes", "snapshot_lag",
           "snapshot_step_order"]

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


def snapshot_lag(curves: dict[str, Any], *, every: int | None = None, level: tuple[float, str] | None = None) -> Any:
    """How many updates a past network is behind the current one when step t uses it: one line per way
    of refreshing it.

    ``curves`` maps a refresh policy's name to its lag at steps 1, 2, …: at the evaluation of step t
    (before that step's sync and update), the distance ``‖current − past‖`` divided by the size of the
    latest update ``‖θ_t − θ_{t−1}‖`` (a copy synced in every step is exactly 1 behind). ``every``
    marks the hard syncs of a periodic copy, made in steps ``every``, ``2 every``, … right after their
    evaluation, with dotted vertical lines half a step later: between the evaluation where the copy is
    furthest behind and the next one, where it is 1 behind. ``level = (value, label)`` draws a dashed
    horizontal reference (a soft copy's ``1/τ``).

    >>> import numpy as np
    >>> fig = snapshot_lag({"hard, every step": np.ones(20), "hard, every 10": np.arange(20) % 10 + 1.0}, every=10)
    >>> [line.get_label() for line in fig.axes[0].get_lines()][:2]
    ['hard, every step', 'hard, every 10']
    """
    import numpy as np

    if not curves:
        raise ValueError("curves must hold at least one policy's lags")
    if every is not None and (isinstance(every, bool) or not isinstance(every, int) or every < 1):
        raise ValueError(f"every must be a positive number of steps, got {every!r}")
    arrays = {}
    for name, curve in curves.items():
        arrays[name] = np.asarray(curve, dtype=float)
        if arrays[name].ndim != 1 or arrays[name].size == 0:
            raise ValueError(f"curves[{name!r}] must be a non-empty 1-D sequence of lags, got shape {arrays[name].shape}")
    fig, ax = new_figure(width=8.0, height=5.0)
    for (name, curve), width in zip(arrays.items(), [2.5, 1.8, 1.8, 1.8, 1.8, 1.8]):
        ax.plot(np.arange(1, curve.size + 1), curve, lw=width, marker="o", ms=2.5, label=name)
    steps = max(curve.size for curve in arrays.values())
    if level is not None:
        ax.axhline(level[0], color="grey", ls="--", lw=1, label=level[1])
    if every is not None:
        for k, t in enumerate(range(every, steps, every)):  # synced in step t, after t's evaluation
            ax.axvline(t + 0.5, color="grey", ls=":", lw=1.2,
                       label=f"sync of the every-{every} copy (between two evaluations)" if k == 0 else "_nolegend_")
    ax.set_xlim(0, steps + 1)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("training step t (B has had t updates)")
    ax.set_ylabel("updates behind\n" r"($\|\theta_t - \theta'\|$ ÷ $\|\theta_t - \theta_{t-1}\|$)")
    ax.set_title("How far behind B is the past network when step t evaluates with it?")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, fontsize=9)
    fig.tight_layout()
    return fig


def snapshot_step_order(steps: int = 2) -> Any:
    """A timeline of the question's training step: in each step B and the past network both evaluate
    A's features into one loss, then the past network takes B's state (weights and BatchNorm
    statistics: the sync), then the optimizer updates A and B; each box shows the weights a network
    holds after that phase (θ_t: B's weights after t updates), the box the phase changes drawn bold.

    A diagram of the order in notebook 05's ``train_step`` (no data): at every evaluation the past
    network holds θ_{t−1} while B holds θ_t.

    >>> fig = snapshot_step_order(2)
    >>> [t.get_text().split()[0] for t in fig.axes[0].texts if t.get_text().startswith(("evaluate", "sync", "update"))][:3]
    ['evaluate', 'sync:', 'update']
    """
    from matplotlib.patches import FancyBboxPatch

    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= 4:
        raise ValueError(f"steps must be an int from 1 to 4, got {steps!r}")

    def theta(k: int) -> str:
        return r"$\theta_{t}$" if k == 0 else rf"$\theta_{{t{k:+d}}}$"

    fig, ax = new_figure(width=2.4 + 4.0 * steps, height=2.9)
    rows = {"B (trained)": 1.0, "past B (frozen copy)": 0.0}
    gap, width = 1.8, 5.8  # between phases, between steps
    for k in range(steps):
        phases = [("evaluate both\non A(x): one loss", (k, k - 1), None),
                  ("sync: past B ← B\n(weights + BN stats)", (k, k), "past B (frozen copy)"),
                  ("update A and B\n(not past B)", (k + 1, k), "B (trained)")]
        for j, (phase, held, changed) in enumerate(phases):
            x = width * k + gap * j
            ax.text(x, 1.6, phase, ha="center", va="center", fontsize=9.5, linespacing=1.3)
            for (row, y), version in zip(rows.items(), held):
                bold = row == changed
                ax.add_patch(FancyBboxPatch((x - 0.45, y - 0.2), 0.9, 0.4, boxstyle="round,pad=0.02",
                                            fc=COLORS[0] if y else COLORS[3], alpha=0.4 if bold else 0.15,
                                            ec="black", lw=1.8 if bold else 0.6))
                ax.text(x, y, theta(version), ha="center", va="center", fontsize=13)
            if phase.startswith("sync"):
                ax.annotate("", xy=(x, 0.22), xytext=(x, 0.78), arrowprops={"arrowstyle": "-|>", "lw": 1.5})
        ax.text(width * k + gap, 2.1, "step t" if k == 0 else f"step t + {k}", ha="center", va="center",
                fontsize=11, fontweight="bold")
        if k:
            x = width * k - (width - 2 * gap) / 2
            ax.plot([x, x], [-0.3, 2.2], color="grey", lw=0.8, ls="--")
    for row, y in rows.items():
        ax.text(-0.7, y, row, ha="right", va="center", fontsize=10)
    ax.text(width * (steps - 1) / 2 + gap, -0.5, r"bold box: the network that phase changes;  $\theta_t$: B's weights after t updates", ha="center", va="center", fontsize=9, color="dimgrey")
    ax.set_xlim(-2.9, width * (steps - 1) + 2 * gap + 0.7)
    ax.set_ylim(-0.65, 2.3)
    ax.axis("off")
    ax.set_title("At every evaluation, past B holds the weights B had one update earlier", fontsize=11)
    fig.tight_layout()
    return fig
