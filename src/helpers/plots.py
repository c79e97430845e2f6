"""Every figure of the workbook: one function per figure, taking the data and returning the Figure.

A notebook draws a figure in one line (``plots.memory_and_curves(...)``); the figure's data is
computed in the notebook, where the learner can see it. Each function is smoke-tested in
``tests/test_plots.py``. :func:`apply_style` gives every figure the same look.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["COLORS", "apply_style", "new_figure", "ptb_grid"]

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


def ptb_grid(layout: Any) -> Any:
    """The PTB layout as a grid: the stream cut into rows, each ``x`` window coloured by its batch.

    ``layout`` is a :class:`helpers.batching.Layout` (``ptb_layout(n_tokens, batch_size, num_steps)``)
    with at most 6 batches per epoch. A cell holds the token's position in the stream; ``y`` of batch
    0 is dashed; the column that is only ever a target is grey; tokens never read are crossed out;
    arrows show what a stateful RNN carries from one batch to the next in each row.

    >>> from helpers.batching import ptb_layout
    >>> type(ptb_grid(ptb_layout(70, 4, 5))).__name__
    'Figure'
    """
    import matplotlib.pyplot as plt

    b, n, length, epochs = layout.batch_size, layout.num_steps, layout.batch_len, layout.epoch_size
    if epochs > len(COLORS):
        raise ValueError(f"layout has {epochs} batches per epoch; the grid shows at most {len(COLORS)}")
    fig, ax = new_figure(width=max(6.0, 0.55 * length + 1.5), height=0.8 * b + 1.6)
    ax.grid(False)
    last_target = epochs * n  # the column that is only ever a target
    for s in range(b):
        for t in range(length):
            k = t // n if t < last_target else -1
            face = COLORS[k] if k >= 0 else ("#d9d9d9" if t == last_target else "white")
            ax.add_patch(plt.Rectangle((t, s), 1, 1, facecolor=face, edgecolor="black", linewidth=0.8))
            if t > last_target:
                ax.plot([t + 0.1, t + 0.9], [s + 0.9, s + 0.1], color="#999999", linewidth=1)
            ax.text(t + 0.5, s + 0.5, str(s * length + t), ha="center", va="center", fontsize=9,
                    color="white" if k >= 0 else "black")
        for k in range(1, epochs):  # the state a stateful RNN carries from batch k-1 to batch k
            ax.annotate("", xy=(k * n + 0.45, s + 0.82), xytext=(k * n - 0.45, s + 0.82),
                        arrowprops={"arrowstyle": "-|>", "color": "black", "linewidth": 1.5, "mutation_scale": 14})
    ax.add_patch(plt.Rectangle((1, 0), n, b, fill=False, edgecolor="black", linewidth=2.5, linestyle="--"))
    ax.text(1 + n / 2, b + 0.35, "y of batch 0 (dashed)", ha="center", va="center", fontsize=9)
    for k in range(epochs):
        ax.text(k * n + n / 2, -0.35, f"x of batch {k} (and {k + epochs}, {k + 2 * epochs}, …)",
                ha="center", va="center", fontsize=9, color=COLORS[k])
    dropped = list(range(b * length, layout.n_tokens))
    if dropped:
        shown = ", ".join(map(str, dropped[:3])) + (", …" if len(dropped) > 3 else "")
        ax.text(length + 0.3, b / 2, f"dropped by the\nreshape: {shown}", va="center", fontsize=9)
    ax.set_xlim(0, length + 3)
    ax.set_ylim(b + 0.7, -0.8)
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


# --------------------------------------------------------------------------- 05 network snapshots
