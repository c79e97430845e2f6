"""The look every workbook figure shares: :data:`COLORS`, :func:`apply_style`, :func:`new_figure`."""


from __future__ import annotations

from typing import Any

import numpy as np


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


__all__ = ["COLORS", "apply_style", "new_figure"]
