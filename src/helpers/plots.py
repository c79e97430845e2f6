"""Every figure of the workbook: one function per figure, taking the data and returning the Figure.

A notebook draws a figure in one line (``plots.memory_and_curves(...)``); the figure's data is
computed in the notebook, where the learner can see it. Each function is smoke-tested in
``tests/test_plots.py``. :func:`apply_style` gives every figure the same look.
"""

from __future__ import annotations

from typing import Any

__all__ = ["COLORS", "apply_style", "new_figure", "accumulation_memory_and_curves"]

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


def accumulation_memory_and_curves(micro_sizes: list[int], peak_mib: list[float],
                                   curves: dict[str, list[float]], *, effective: int) -> Any:
    """Notebook 02's Picture. Left: peak memory of one ``effective``-example gradient computed in
    micro-batches of each size in ``micro_sizes``. Right: the training loss per update of each
    run in ``curves`` (name -> losses), drawn so that equal curves show as one line.

    >>> fig = accumulation_memory_and_curves([4, 2], [2.0, 1.0], {"a": [1.0, 0.5]}, effective=4)
    >>> len(fig.axes)
    2
    """
    if len(micro_sizes) != len(peak_mib) or not micro_sizes:
        raise ValueError(f"micro_sizes and peak_mib must be non-empty and of equal length, got "
                         f"{len(micro_sizes)} and {len(peak_mib)}")
    if not curves:
        raise ValueError("curves is empty: give at least one name -> losses")
    fig, (left, right) = new_figure(2, width=10, height=3.8)
    left.plot(micro_sizes, peak_mib, "o-")
    left.set_xscale("log", base=2)
    left.set_xticks(micro_sizes, [str(s) for s in micro_sizes])
    left.set_xlabel(f"micro-batch size (effective batch {effective})")
    left.set_ylabel("peak memory (MiB)")
    left.set_ylim(bottom=0)
    left.set_title("smaller micro-batches, less memory")
    for (name, losses), style in zip(curves.items(), ["-", "--", ":", "-."]):
        right.plot(range(1, len(losses) + 1), losses, style, lw=3.0 if style == "-" else 1.5, label=name)
    right.set_xlabel("update")
    right.set_ylabel("training loss")
    right.set_title("same updates, same curve")
    right.legend()
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- 03 batch iteration


# --------------------------------------------------------------------------- 04 validation queues


# --------------------------------------------------------------------------- 05 network snapshots
