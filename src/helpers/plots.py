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


# --------------------------------------------------------------------------- 05 network snapshots
