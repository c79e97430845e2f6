"""Notebook 03's figures (03 batch iteration); :mod:`helpers.plots` re-exports :func:`ptb_grid`.

:func:`reading_losses` is reached as ``helpers.plots.batching.reading_losses``."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from helpers.plots._style import COLORS, new_figure

__all__ = ["ptb_grid", "reading_losses"]


# Okabe and Ito's colour-blind-safe colours, with the text colour each needs: one per batch of a pass.
_BATCH_COLORS = (("#0072B2", "white"), ("#E69F00", "black"), ("#009E73", "white"),
                 ("#CC79A7", "black"), ("#56B4E9", "black"), ("#D55E00", "white"))
# the state carried from one batch to the next (the gradient does not follow it back)
_CARRY_ARROW = {"arrowstyle": "-|>", "color": "black", "linewidth": 2.2, "linestyle": (0, (2, 1.5)),
                "mutation_scale": 18}
_PITCH = 1.5  # a row of tokens (height 1) and, under it, the strip of its targets y


def ptb_grid(layout: Any) -> Any:
    """The PTB layout as a grid: the stream cut into rows, each ``x`` window coloured by its batch.

    ``layout`` is a :class:`helpers.batching.Layout` (``ptb_layout(n_tokens, batch_size, num_steps)``)
    with at most 6 batches per pass. A cell holds the token's position in the stream, coloured by the
    batch whose ``x`` reads it. Under every row a strip draws ``y``: each batch's window again, in its
    colour, one token to the right (so the column after the last window is a target only). A band over
    each column of windows names its batch. A dashed arrow crosses each boundary between windows: the
    state carried to the next batch (the legend's one entry). Tokens never read are crossed out; the
    tokens the reshape drops are drawn under the last row, where the stream goes on. Right of the grid,
    dashed boxes in batch 0's colour show what every row reads next with ``repeat=True``: its own first
    window again, where the state must be reset. Colours are colour-blind safe.

    >>> from helpers.batching import ptb_layout
    >>> type(ptb_grid(ptb_layout(70, 4, 5))).__name__
    'Figure'
    """
    import matplotlib.pyplot as plt
    from matplotlib import patheffects
    from matplotlib.lines import Line2D

    b, n, length, passes = layout.batch_size, layout.num_steps, layout.batch_len, layout.epoch_size
    if passes > len(_BATCH_COLORS):
        raise ValueError(f"layout has {passes} batches per pass; the grid shows at most {len(_BATCH_COLORS)}")
    dropped = list(range(b * length, layout.n_tokens))
    last_target = passes * n  # the column that is only ever a target
    next_left, next_width = length + 1.2, 2.6  # the column "next pass", right of the grid
    fig, ax = new_figure(width=max(6.0, 0.55 * (next_left + next_width) + 1.5), height=0.85 * b * _PITCH + 2.2)
    ax.grid(False)

    def box(x: float, y: float, width: float, height: float, face: str, ink: str, label: str,
            size: float = 9, edge: str = "black", style: str = "solid", alpha: float = 1.0) -> None:
        ax.add_patch(plt.Rectangle((x, y), width, height, facecolor=face, edgecolor=edge, linewidth=0.8,
                                   linestyle=style, alpha=alpha))
        middle = y + height * (0.42 if height == 1 else 0.5)  # a token's number sits above the state arrow
        ax.text(x + width / 2, middle, label, ha="center", va="center", fontsize=size, color=ink)

    for s in range(b):
        top = s * _PITCH
        for t in range(length):
            k = t // n if t < last_target else -1
            face, ink = _BATCH_COLORS[k] if k >= 0 else ("white", "black" if t == last_target else "0.5")
            box(t, top, 1, 1, face, ink, str(s * length + t))
            if t > last_target:  # never read: neither in an x nor in a y
                ax.plot([t + 0.1, t + 0.9], [top + 0.9, top + 0.1], color="#999999", linewidth=1)
        for k in range(passes):  # y of batch k: its window one token later
            face, ink = _BATCH_COLORS[k]
            first = s * length + k * n + 1
            box(k * n + 1.05, top + 1.06, n - 0.1, 0.3, face, "black", f"y: {first}–{first + n - 1}", size=8,
                alpha=0.6)
            if k + 1 < passes:  # to the next batch: the state is carried over, the gradient is cut
                carry = ax.annotate("", xy=(k * n + n + 0.5, top + 0.8), xytext=(k * n + n - 0.5, top + 0.8),
                                    arrowprops=_CARRY_ARROW)
                carry.arrow_patch.set_path_effects([patheffects.withStroke(linewidth=5, foreground="white")])
    band, band_height = -1.3, 0.95  # a band over each column of windows names its batch
    for k in range(passes):
        face, ink = _BATCH_COLORS[k]
        box(k * n + 0.05, band, n - 0.1, band_height, face, ink, f"batch {k}: x and y, [{b}, {n}] each", size=9.5)
    # the next pass (with repeat=True): every row reads its own first window again, from a reset state
    blue, blue_ink = _BATCH_COLORS[0]
    for s in range(b):
        ax.annotate("", xy=(next_left - 0.05, s * _PITCH + 0.5), xytext=(length + 0.05, s * _PITCH + 0.5),
                    arrowprops={"arrowstyle": "-|>", "color": "black", "linewidth": 2, "mutation_scale": 14})
        box(next_left, s * _PITCH + 0.08, next_width, 0.84, blue, blue_ink,
            f"{s * length}–{s * length + n - 1}", size=10, style="--")
    ax.text(next_left + next_width / 2, band + band_height / 2, f"with repeat=True,\nbatch {passes}: "
            "window 0 again:\nreset the state", ha="center", va="center", fontsize=9, fontweight="bold")
    below = b * _PITCH + 0.1  # the tokens the reshape drops: where the stream goes on, under the last row
    for i, token in enumerate(dropped):
        box(i, below, 1, 1, "#f2f2f2", "0.45", str(token), edge="0.6")
        ax.plot([i + 0.1, i + 0.9], [below + 0.9, below + 0.1], color="#999999", linewidth=1)
    if dropped:
        named = str(dropped[0]) if len(dropped) == 1 else f"{dropped[0]}–{dropped[-1]}"
        ax.text(len(dropped) + 0.3, below + 0.5, f"{named} dropped: too few for another row of {length}",
                ha="left", va="center", fontsize=9, style="italic", color="0.3")
    ax.set_xlim(-0.2, next_left + next_width + 0.2)
    ax.set_ylim(below + (1.2 if dropped else 0.1), band - 0.2)
    ax.set_xticks([])
    ax.set_yticks(np.arange(b) * _PITCH + 0.5, [f"row {s}" for s in range(b)])
    ax.tick_params(axis="y", length=0)
    ax.set_title(f"{layout.n_tokens} tokens in {b} rows of {length}, read {n} at a time", fontsize=12)
    key = [Line2D([], [], color="black", marker=">", markersize=7, linewidth=2, linestyle=_CARRY_ARROW["linestyle"])]
    ax.legend(handles=key, labels=["the state, carried to the next batch (the gradient is not)"],
              loc="upper left", bbox_to_anchor=(0.0, 0.0), fontsize=9.5, handlelength=2.5)
    ax.spines[:].set_visible(False)
    fig.tight_layout()
    return fig


def reading_losses(losses: Mapping[str, Mapping[str, float]]) -> Any:
    """Two bar charts side by side: one trained stateful model reading each text with the state carried vs
    reset before every batch (left), and with its batches in order vs shuffled (right).

    ``losses`` maps a text's name to its mean loss read three ways, keys ``"carried"`` (in order, the
    state carried: the same bar opens both panels), ``"reset"`` and ``"shuffled"``. One bar per text in
    each group, labelled with its value; the y axis starts at 1 and says so.

    >>> fig = reading_losses({"a": {"carried": 1.2, "reset": 1.5, "shuffled": 1.7}})
    >>> [ax.get_title() for ax in fig.axes]
    ['Carry the state, or reset it?', 'Batches in order, or shuffled?']
    """
    if not losses or any(set(v) != {"carried", "reset", "shuffled"} for v in losses.values()):
        raise ValueError("losses must map each text to its 'carried', 'reset' and 'shuffled' losses")
    panels = [("Carry the state, or reset it?", ["carried", "reset"],
               ["state carried\n(as trained)", "the same stateful model,\nstate reset before\nevery batch"]),
              ("Batches in order, or shuffled?", ["carried", "shuffled"],
               ["in order\n(as trained)", "order shuffled,\nstate carried"])]
    fig, axes = new_figure(2, width=9.0, height=3.6)
    width = 0.8 / len(losses)
    top = max(max(v.values()) for v in losses.values())
    for ax, (title, keys, names) in zip(axes, panels):
        for i, (text, values) in enumerate(losses.items()):
            offsets = np.arange(2) + (i - (len(losses) - 1) / 2) * width
            bars = ax.bar(offsets, [values[key] for key in keys], width, label=text, color=COLORS[i])
            ax.bar_label(bars, fmt="%.2f")
        ax.set(xticks=np.arange(2), xticklabels=names, ylim=(1, top + 0.25), title=title)
    axes[0].set_ylabel("loss per character\n(the axis starts at 1)")
    axes[0].legend(loc="upper left")
    fig.tight_layout()
    return fig
