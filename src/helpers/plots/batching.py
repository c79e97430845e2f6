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
    with at most 6 batches per pass. A cell holds the token's position in the stream. A coloured band
    over each column of windows names its batch, one ``[batch_size, num_steps]`` tensor, and says that its
    ``y`` is ``x`` shifted by one token. In each row a solid arrow spans every window (the RNN's steps,
    through which the gradient flows back) and a dashed arrow crosses each boundary between windows (the
    state carried to the next batch, the gradient cut: truncated BPTT). The column that is only ever a
    target is grey and tokens never read are crossed out, both named by plain text over them (no box:
    they are not batches). The tokens the reshape drops are drawn crossed out under the last row, where
    the stream goes on, and named there. Right of the grid, a column in batch 0's colour shows what
    every row reads next: its own first window again (the next pass), with an arrow from the end of
    each row; its header and the sentence under the grid say to reset the state there. The legend
    under the grid says why each mark is there. Colours are colour-blind safe.

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
        raise ValueError(f"layout has {epochs} batches per pass; the grid shows at most {len(_BATCH_COLORS)}")
    dropped = list(range(b * length, layout.n_tokens))
    next_left, next_width = length + 1.2, 2.4   # the column "next pass", right of the grid
    fig, ax = new_figure(width=max(6.0, 0.55 * (next_left + next_width) + 2.0), height=0.8 * b + 4.0)
    ax.grid(False)
    last_target = epochs * n  # the column that is only ever a target

    def box(x: float, y: float, width: float, height: float, face: str, ink: str, label: str,
            size: float = 9, crossed: bool = False, edge: str = "black", style: str = "solid") -> None:
        ax.add_patch(plt.Rectangle((x, y), width, height, facecolor=face, edgecolor=edge, linewidth=0.8,
                                   linestyle=style))
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
    band, band_height = -1.5, 1.1
    for k in range(epochs):
        face, ink = _BATCH_COLORS[k]
        box(k * n + 0.05, band, n - 0.1, band_height, face, ink,
            f"x of batch {k}: a [{b}, {n}] tensor\ny = x shifted by one token")
    for x, note in [(last_target, "y\nonly"), (last_target + 1, "never\nread")][: length - last_target]:
        width = 1 if x == last_target else length - last_target - 1   # plain text, no box: these are not batches
        ax.text(x + width / 2, band + band_height / 2, note, ha="center", va="center", fontsize=8,
                style="italic", color="0.3")
    # the next pass: every row reads its own first window again (batch `epochs` = batch 0), so reset the state
    blue, blue_ink = _BATCH_COLORS[0]
    for s in range(b):
        start = s * length
        ax.annotate("", xy=(next_left - 0.05, s + 0.5), xytext=(length + 0.05, s + 0.5),
                    arrowprops={"arrowstyle": "-|>", "color": "black", "linewidth": 2, "mutation_scale": 14})
        box(next_left, s + 0.08, next_width, 0.84, blue, blue_ink, f"{start}–{start + n - 1}", size=10,
            style="--")
    ax.text(next_left + next_width / 2, band + band_height / 2,
            f"batch {epochs}, next pass:\nwindow 0 again,\nreset the state", ha="center", va="center", fontsize=9,
            fontweight="bold")
    # the tokens the reshape drops: where the stream goes on, under the last row
    below = b + 0.25
    for i, token in enumerate(dropped):
        box(i, below, 1, 1, "#f2f2f2", "0.45", str(token), crossed=True, edge="0.6")
    if dropped:
        named = str(dropped[0]) if len(dropped) == 1 else f"{dropped[0]}–{dropped[-1]}"
        ax.text(len(dropped) + 0.3, below + 0.5, f"{named} dropped by the reshape: too few for another row "
                f"of {length}", ha="left", va="center", fontsize=9, style="italic", color="0.3")
    caption = below + (1.6 if dropped else 0.5)
    ax.text((next_left + next_width) / 2, caption, f"after batch {epochs - 1} the pass ends: every row jumps back "
            "to its own start, and the state must be reset", ha="center", va="center", fontsize=10,
            fontweight="bold")
    ax.set_xlim(-0.2, next_left + next_width + 0.2)
    ax.set_ylim(caption + 0.5, band - 0.2)
    ax.set_xticks([])
    ax.set_yticks(np.arange(b) + 0.5, [f"row {s}" for s in range(b)])
    ax.tick_params(axis="y", length=0)
    ax.set_title(f"{layout.n_tokens} tokens in {b} rows of {length}, read {n} at a time", fontsize=12)
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
