"""One plotting style for every notebook's Picture section."""

from __future__ import annotations

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
