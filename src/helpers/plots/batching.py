"""Notebook 03's figures (03 batch iteration); :mod:`helpers.plots` re-exports them."""

from __future__ import annotations

from typing import Any

import numpy as np

from helpers.plots._style import new_figure

__all__ = ["ptb_grid"]


# Okabe and Ito's colour-blind-safe colours, with the text colour each needs: one per batch of an epoch.
_BATCH_COLORS = (("#0072B2", "white"), ("#E69F00", "black"), ("#009E73", "white"),
                 ("#CC79A7", "black"), ("#56B4E9", "black"), ("#D55E00", "white"))
# the state carried from one batch to the next (the gradient does not follow it back)
_CARRY_ARROW = {"arrowstyle": "-|>", "color": "black", "linewidth": 1.8, "linestyle": (0, (2, 1.5)),
                "mutation_scale": 14}


def ptb_grid(layout: Any) -> Any:
    """The PTB layout as a grid: the stream cut into rows, each ``x`` window coloured by its batch.

    ``layout`` is a :class:`helpers.batching.Layout` (``ptb_layout(n_tokens, batch_size, num_steps)``)
    with at most 6 batches per epoch. A cell holds the token's position in the stream. A coloured band
    over each column of windows names its batch, one ``[batch_size, num_steps]`` tensor, and says that its
    ``y`` is ``x`` shifted by one token. In each row a
    solid arrow spans every window (the RNN's steps, through which the gradient flows back) and a dashed
    arrow crosses each boundary between windows (the state carried to the next batch, the gradient cut:
    truncated BPTT). A bracket in batch 0's colour, just over row 0 and under batch 0's band, marks
    row 0's ``y`` in batch 0; the column that is only ever a target is grey, tokens never read are
    crossed out, and both are named by plain text over them (no box: they are not batches); the
    tokens the reshape drops are named in the title. A line from the end of the windows runs under the
    grid and back up the left side, with an arrow into the start of every row, and the sentence under
    the grid says it: after the last window every row jumps back to window 0 (reset the state). The
    legend under the grid says why each mark is there. Colours are colour-blind safe.

    >>> from helpers.batching import ptb_layout
    >>> type(ptb_grid(ptb_layout(70, 4, 5))).__name__
    'Figure'
    """
    import matplotlib.pyplot as plt
    from matplotlib import patheffects
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
        for k in range(epochs):
            # inside a window: the LSTM's steps, through which the gradient flows back (truncated BPTT)
            ax.annotate("", xy=(k * n + n - 0.45, s + 0.84), xytext=(k * n + 0.1, s + 0.84),
                        arrowprops={"arrowstyle": "-|>", "color": "black", "linewidth": 1.4, "mutation_scale": 13})
            if k + 1 < epochs:  # to the next batch: the state is carried over, the gradient is cut
                carry = ax.annotate("", xy=(k * n + n + 0.45, s + 0.84), xytext=(k * n + n - 0.4, s + 0.84),
                                    arrowprops=_CARRY_ARROW)
                carry.arrow_patch.set_path_effects([patheffects.withStroke(linewidth=4.5, foreground="white")])
    # a band over each column of windows names its batch (a column header, not a note)
    band, band_height = -1.9, 0.85
    for k in range(epochs):
        face, ink = _BATCH_COLORS[k]
        box(k * n + 0.05, band, n - 0.1, band_height, face, ink,
            f"x of batch {k}: a [{b}, {n}] tensor\ny = x shifted by one token")
    for x, note in [(last_target, "y\nonly"), (last_target + 1, "never\nread")][: length - last_target]:
        width = 1 if x == last_target else length - last_target - 1   # plain text, no box: these are not batches
        ax.text(x + width / 2, band + band_height / 2, note, ha="center", va="center", fontsize=8,
                style="italic", color="0.3")
    # y of batch 0 in row 0: x shifted by one token. A bracket in batch 0's colour just over the row, its label
    # between it and batch 0's band, over batch 0's columns (a reader took the bracket for one spanning batches)
    blue = _BATCH_COLORS[0][0]
    ax.plot([1.1, 1.1, n + 0.9, n + 0.9], [-0.08, -0.3, -0.3, -0.08], color=blue, linewidth=2.2)
    ax.text(n / 2 + 0.5, -0.55, f"y of batch 0, row 0: tokens 1–{n}", ha="center", va="center", fontsize=9,
            style="italic", color=blue, fontweight="bold")
    # after the last window, every row jumps back to window 0: from the end of the windows, under the grid,
    # up the left side, and into the start of every row
    below, left = b + 0.45, -0.55
    ax.plot([last_target, last_target], [0, b], color="black", linewidth=2.5)
    ax.plot([last_target, last_target, left, left], [b, below, below, 0.5], color="black", linewidth=2)
    for s in range(b):
        ax.annotate("", xy=(-0.02, s + 0.5), xytext=(left, s + 0.5),
                    arrowprops={"arrowstyle": "-|>", "color": "black", "linewidth": 2, "mutation_scale": 14})
    ax.text(last_target / 2, below + 0.45, f"after batch {epochs - 1} the pass ends; batch {epochs} is window 0 of "
            f"every row again: reset the state", ha="center", va="center", fontsize=10, fontweight="bold")
    ax.set_xlim(left - 0.2, length + 0.2)
    ax.set_ylim(b + 1.3, band - 0.2)
    ax.set_xticks([])
    ax.set_yticks(np.arange(b) + 0.5, [f"row {s}" for s in range(b)])
    ax.tick_params(axis="y", length=0)
    dropped = list(range(b * length, layout.n_tokens))
    cut = ""
    if dropped:
        cut = f" (token {dropped[0]} dropped)" if len(dropped) == 1 else f" (tokens {dropped[0]}–{dropped[-1]} dropped)"
    ax.set_title(f"{layout.n_tokens} tokens in {b} rows of {length}{cut}, read {n} at a time", fontsize=12)
    key = [Line2D([], [], color="black", marker=">", markersize=7, linewidth=1.4,
                  label="inside a window: the LSTM's steps; the gradient flows back through them"),
           Line2D([], [], color="black", marker=">", markersize=7, linewidth=1.8, linestyle=_CARRY_ARROW["linestyle"],
                  label="to the next batch: the state is carried over (stateful=True), the gradient is cut "
                        "(truncated BPTT)"),
           Patch(facecolor="#d9d9d9", edgecolor="black", label="only ever a target (y): no window after it"),
           (Patch(facecolor="white", edgecolor="black"),
            Line2D([], [], color="#999999", linewidth=1, marker=[(-1, -1), (1, 1)], markersize=10, linestyle=""))]
    labels = [key[0].get_label(), key[1].get_label(), key[2].get_label(),
              "never read: too few tokens left for another window plus its target"]
    ax.legend(handles=key, labels=labels, loc="upper center", bbox_to_anchor=(0.45, -0.0), ncol=1, fontsize=9,
              handlelength=2.2)
    ax.spines[:].set_visible(False)
    fig.tight_layout()
    return fig
