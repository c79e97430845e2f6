"""Every figure of the workbook: one function per figure, taking the data and returning the Figure.

A notebook draws a figure in one line (``plots.memory_and_curves(...)``); the figure's data is
computed in the notebook, where the learner can see it. Each function is smoke-tested in
``tests/test_plots.py``. :func:`apply_style` gives every figure the same look.
"""

from __future__ import annotations

from typing import Any

__all__ = ["COLORS", "apply_style", "new_figure", "snapshot_lag"]

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


__all__ += ["evaluations_per_dequeue"]


def evaluations_per_dequeue(losses: list[list[float]], iterates: list[list[int]]) -> Any:
    """Every loss evaluation of a line-search optimizer, batch after batch, with the dequeues marked.

    ``losses[k]`` lists the loss of every evaluation on batch ``k`` in order; ``iterates[k]`` the
    evaluation numbers (1-based) at which the optimizer accepted an iterate (the rest are line-search
    probes). A dashed line marks each ``next(iterator)``: every dot between two lines used one batch.

    >>> fig = evaluations_per_dequeue([[4.0, 2.0, 3.0, 1.0], [2.0, 0.5]], [[2, 4], [2]])
    >>> len(fig.axes[0].lines) > 4
    True
    """
    if len(losses) != len(iterates) or not losses:
        raise ValueError(f"losses and iterates must hold one list per batch, got {len(losses)} and {len(iterates)}")
    import numpy as np

    fig, ax = new_figure(width=9, height=4)
    offset, low = 0, min(min(batch) for batch in losses)
    for k, (batch_losses, accepted) in enumerate(zip(losses, iterates)):
        values = np.asarray(batch_losses, dtype=float)
        steps = offset + np.arange(1, len(values) + 1)
        color = COLORS[k % len(COLORS)]
        ax.axvline(offset + 0.5, color="grey", ls="--", lw=1)
        ax.text(offset + 1, low / 3, f"next(iterator)\nbatch {k}", fontsize=8, va="bottom")
        ax.semilogy(steps, values, ".", color=color, ms=5)
        chosen = np.asarray(accepted, dtype=int) - 1
        ax.semilogy(steps[chosen], values[chosen], "o", color=color, ms=6, mfc="none")
        offset += len(values)
    ax.plot([], [], ".", color="black", label="evaluation (iterate or line-search probe)")
    ax.plot([], [], "o", color="black", mfc="none", label="accepted iterate")
    ax.plot([], [], "--", color="grey", label="next(iterator): one dequeue")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3, fontsize=9)
    ax.set(xlabel="loss + gradient evaluation (all batches, in order)", ylabel="loss",
           title="A line search evaluates each batch many times; the iterator advances once per batch")
    ax.set_ylim(low / 4, max(max(batch) for batch in losses) * 3)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- 02 gradient accumulation


# --------------------------------------------------------------------------- 03 batch iteration


# --------------------------------------------------------------------------- 04 validation queues


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
            ax.axvline(t, color="grey", linestyle=":", linewidth=0.8)
    ax.set_xlabel("training step")
    ax.set_ylabel("‖current − past‖ (trainable weights)")
    ax.set_title("How far the past network lags behind the current one")
    ax.legend()
    fig.tight_layout()
    return fig
