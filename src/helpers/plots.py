"""Every figure of the workbook: one function per figure, taking the data and returning the Figure.

A notebook draws a figure in one line (``plots.memory_and_curves(...)``); the figure's data is
computed in the notebook, where the learner can see it. Each function is smoke-tested in
``tests/test_plots.py``. :func:`apply_style` gives every figure the same look.
"""

from __future__ import annotations

from typing import Any

__all__ = ["COLORS", "apply_style", "new_figure"]

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


# --------------------------------------------------------------------------- 02 gradient accumulation


# --------------------------------------------------------------------------- 03 batch iteration


# --------------------------------------------------------------------------- 04 validation queues

__all__ += ["validation_curve", "validation_passes"]


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


def validation_passes(history: Any, panels: list[tuple[str, list[list[int]]]], *,
                      smooth: int = 5) -> Any:
    """Notebook 04's picture. Top: :func:`validation_curve` (log scale). Bottom, one panel per
    ``(title, passes)``: which example id each position of each pass read, as a coloured grid.

    >>> from types import SimpleNamespace
    >>> h = SimpleNamespace(step=[1, 2], train_loss=[2.0, 1.0], eval_step=[0, 2], val=[{"loss": 3.0}, {"loss": 1.5}])
    >>> fig = validation_passes(h, [("cycling", [[0, 1, 2, 0], [1, 2, 0, 1]]), ("fresh", [[0, 1, 2], [0, 1, 2]])])
    >>> len(fig.axes)
    3
    """
    import numpy as np

    apply_style()
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(9, 6.5))
    grid = fig.add_gridspec(2, len(panels), height_ratios=[1.6, 1], hspace=0.45, wspace=0.15)
    top = fig.add_subplot(grid[0, :])
    validation_curve(history, top, smooth=smooth, log=True)
    n_val = history.val[-1].get("examples", "all") if history.val else "all"
    every = history.eval_step[1] - history.eval_step[0] if len(history.eval_step) > 1 else 0
    top.set_title(f"A full validation pass over {n_val} examples every {every} steps (dotted lines)")
    width = max(len(ids) for _, passes in panels for ids in passes)
    top_id = max(max(ids) for _, passes in panels for ids in passes if len(ids))
    for column, (title, passes) in enumerate(panels):
        ax = fig.add_subplot(grid[1, column])
        table = np.full((len(passes), width), np.nan)
        for row, ids in enumerate(passes):
            table[row, :len(ids)] = ids
        ax.imshow(table, cmap="viridis", vmin=0, vmax=top_id, aspect="auto")
        for (row, col), value in np.ndenumerate(table):
            if not np.isnan(value):
                ax.text(col, row, int(value), ha="center", va="center", fontsize=9,
                        color="white" if value < top_id / 2 else "black")
        ax.set_title(title)
        ax.set_xlabel("position in the pass")
        ax.set_yticks(range(len(passes)), [f"pass {p}" for p in range(1, len(passes) + 1)] if column == 0 else [])
        ax.set_xticks(range(width))
        ax.grid(False)
    return fig


# --------------------------------------------------------------------------- 05 network snapshots
