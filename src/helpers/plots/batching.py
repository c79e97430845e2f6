"""Notebook 03's figures (03 batch iteration); :mod:`helpers.plots` re-exports them."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from helpers.plots._style import COLORS, apply_style, new_figure

__all__ = ["ptb_grid", "reading_losses", "series_groups", "step_predictions"]


# Okabe and Ito's colour-blind-safe colours, with the text colour each needs: one per batch of a pass.
_BATCH_COLORS = (("#0072B2", "white"), ("#E69F00", "black"), ("#009E73", "white"),
                 ("#CC79A7", "black"), ("#56B4E9", "black"), ("#D55E00", "white"),
                 ("#F0E442", "black"))
# the state carried from one batch to the next (the gradient does not follow it back)
_CARRY_ARROW = {"arrowstyle": "-|>", "color": "black", "linewidth": 3.0, "linestyle": "solid",
                "mutation_scale": 22, "connectionstyle": "arc3,rad=-1.0", "shrinkA": 0, "shrinkB": 0}
# round 23 (a reader): arrows in a lane over the row "read like decoration": each state arrow now joins a window's
# last token to the next window's first token of the same row, an arch from the top of one cell to the top of the next
_CARRY_FROM, _CARRY_TO = 0.5, 0.5  # in cells, before and after the boundary between windows: the two cells' middles
_LANE = -0.02  # the arch's ends: the top edge of the row's cells (it rises into the panel above the row)
_STRIP = 1.38  # the top of the strip of targets y
_PANEL = (-0.62, 1.82)  # a grey panel behind each row, its arrows and its y strip: they belong together
_PITCH = 2.64  # the arrows' lane, a row of tokens (height 1) and the strip of its targets y, then a gap


def _listed(tokens: list[str]) -> str:
    """Tokens as a short list: at most five, then an ellipsis."""
    return ", ".join(tokens) if len(tokens) <= 5 else ", ".join(tokens[:4]) + ", ..."


def ptb_grid(layout: Any) -> Any:
    """The PTB layout as a grid: the stream cut into rows, each ``x`` window coloured by its batch.

    ``layout`` is a :class:`helpers.batching.Layout` (``ptb_layout(n_tokens, batch_size, num_steps)``)
    with at most 7 batches per pass. A cell holds the token's position in the stream, coloured by the
    batch whose ``x`` reads it. A grey panel holds each row with its ``y`` strip (so a strip visibly belongs
    to the row above it, not to the next). Under every row a strip draws ``y``: each batch's window again, in its
    colour, one token to the right (so the column after the last window is a target only: white). A band
    over each column of windows names its batch and says that ``y`` is the same window shifted by one. In a
    row, a solid curved arrow (an arch) joins each window's last token to the next window's first: the state carried to the
    next batch (from the top of one cell to the top of the next, so it covers no number); small text after row 0's last one says so. Tokens never read are crossed out; the tokens the
    reshape drops are drawn under the last row, where the stream goes on. The legend names the arrow,
    the white column and the crossed-out one, with their tokens. Right of the grid,
    dashed boxes in batch 0's colour show what every row reads in the next pass: its own first
    window again, where the state must be reset. Colours are colour-blind safe.

    >>> from helpers.batching import ptb_layout
    >>> type(ptb_grid(ptb_layout(70, 4, 5))).__name__
    'Figure'
    """
    import matplotlib.pyplot as plt
    from matplotlib import patheffects
    from matplotlib.legend_handler import HandlerBase
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle

    class Cell(HandlerBase):  # a legend key drawn like a cell of the grid: a white square, crossed out or not
        def __init__(self, crossed: bool) -> None:
            super().__init__()
            self.crossed = crossed

        def create_artists(self, legend, orig_handle, xdescent, ydescent, width, height, fontsize, trans):
            side = height * 1.5
            left, bottom = -xdescent + (width - side) / 2, -ydescent + (height - side) / 2
            artists = [Rectangle((left, bottom), side, side, facecolor="white", edgecolor="black", linewidth=0.8,
                                 transform=trans)]
            if self.crossed:
                xs = [left + 0.1 * side, left + 0.9 * side]
                ys = [bottom + 0.1 * side, bottom + 0.9 * side]
                artists.append(Line2D(xs, ys, color="#999999", linewidth=1, transform=trans))
            return artists

    b, n, length, passes = layout.batch_size, layout.num_steps, layout.batch_len, layout.epoch_size
    if passes > len(_BATCH_COLORS):
        raise ValueError(f"layout has {passes} batches per pass; the grid shows at most {len(_BATCH_COLORS)}")
    dropped = list(range(b * length, layout.n_tokens))
    last_target = passes * n  # the column that is only ever a target
    next_left, next_width = length + 1.2, 2.6  # the column "next pass", right of the grid
    fig, ax = new_figure(width=max(6.0, 0.55 * (next_left + next_width) + 1.5), height=0.72 * b * _PITCH + 2.4)
    ax.grid(False)

    def box(x: float, y: float, width: float, height: float, face: str, ink: str, label: str,
            size: float = 9, edge: str = "black", style: str = "solid", alpha: float = 1.0) -> None:
        ax.add_patch(plt.Rectangle((x, y), width, height, facecolor=face, edgecolor=edge, linewidth=0.8,
                                   linestyle=style, alpha=alpha))
        middle = y + height / 2
        ax.text(x + width / 2, middle, label, ha="center", va="center", fontsize=size, color=ink)

    for s in range(b):
        top = s * _PITCH
        ax.add_patch(plt.Rectangle((-0.12, top + _PANEL[0]), length + 0.24, _PANEL[1] - _PANEL[0],
                                   facecolor="#ececec", edgecolor="0.6", linewidth=0.8, zorder=0))
        for t in range(length):
            k = t // n if t < last_target else -1
            face, ink = _BATCH_COLORS[k] if k >= 0 else ("white", "black" if t == last_target else "0.5")
            box(t, top, 1, 1, face, ink, str(s * length + t))
            if t > last_target:  # never read: neither in an x nor in a y
                ax.plot([t + 0.1, t + 0.9], [top + 0.9, top + 0.1], color="#999999", linewidth=1)
        for k in range(passes):  # y of batch k: its window one token later
            face, ink = _BATCH_COLORS[k]
            first = s * length + k * n + 1
            box(k * n + 1.05, top + _STRIP, n - 0.1, 0.3, face, "black", f"y: {first}–{first + n - 1}", size=8,
                alpha=0.6)
            if k + 1 < passes:  # to the next batch: the state is carried over, the gradient is cut
                edge = k * n + n
                carry = ax.annotate("", xy=(edge + _CARRY_TO, top + _LANE),
                                    xytext=(edge - _CARRY_FROM, top + _LANE), arrowprops=_CARRY_ARROW)
                carry.arrow_patch.set_path_effects([patheffects.withStroke(linewidth=6.5, foreground="white")])
                if s == 0 and k == passes - 2:  # said once, on the figure, after row 0's last arrow (a reader)
                    ax.text(edge + _CARRY_TO + 0.45, top - 0.32, "state carried, gradient stops", ha="left",
                            va="center", fontsize=8, style="italic")
    band, band_height = -1.75, 0.95  # a band over each column of windows names its batch
    for k in range(passes):
        face, ink = _BATCH_COLORS[k]
        box(k * n + 0.05, band, n - 0.1, band_height, face, ink, f"batch {k}: x, a [{b}, {n}] tensor\n"
            "(y: the same, shifted by one)", size=9.5)
    # the next pass: every row reads its own first window again, from a reset state
    blue, blue_ink = _BATCH_COLORS[0]
    for s in range(b):  # round 25 (two readers): from the middle of the last cell read, over the cells never read
        ax.annotate("", xy=(next_left - 0.05, s * _PITCH + 0.5), xytext=(last_target - 0.5, s * _PITCH + _LANE),
                    arrowprops={"arrowstyle": "-|>", "color": "#D55E00", "linewidth": 2, "mutation_scale": 14,
                                "connectionstyle": "arc3,rad=-0.35", "shrinkA": 0, "linestyle": "--"})
        # round 26 (a reader): dashed and red, not the solid black of "the state, carried": here the state is reset
        box(next_left, s * _PITCH + 0.08, next_width, 0.84, blue, blue_ink,
            f"{s * length}–{s * length + n - 1}", size=10, style="--")
    ax.text(next_left + next_width / 2, band + band_height / 2, "the next pass:\nbatch 0 again,\n"
            "from a reset state", ha="center", va="center", fontsize=9, fontweight="bold",
            color="#D55E00")  # round 26: in the colour of the dashed reset arrows
    below = b * _PITCH - 0.1  # the tokens the reshape drops: where the stream goes on, under the last row
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
    ax.set_title(f"{layout.n_tokens} tokens in {b} rows of {length}, read {n} at a time: batch k is window k of "
                 "every row", fontsize=12)
    arrow = Line2D([], [], color="black", marker=">", markersize=10, linewidth=4, linestyle=_CARRY_ARROW["linestyle"])
    target_only = Rectangle((0, 0), 1, 1, facecolor="white", edgecolor="black", linewidth=0.8)
    never_read = Rectangle((0, 0), 1, 1, facecolor="white", edgecolor="black", linewidth=0.8)
    column = [str(s * length + last_target) for s in range(b)]
    unread = [str(s * length + t) for s in range(b) for t in range(last_target + 1, length)]
    labels = ["the state, carried to the next batch (the gradient is not)",
              f"{', '.join(column)}: white, a target only (the last y of each row)"]
    handles: list[Any] = [arrow, target_only]
    if unread:
        labels.append(f"{_listed(unread)}: crossed out, never read (too few for another window)")
        handles.append(never_read)
    cells = {target_only: Cell(crossed=False), never_read: Cell(crossed=True)}
    ax.legend(handles=handles, labels=labels, handler_map=cells,
              loc="upper left", bbox_to_anchor=(0.0, 0.0), fontsize=9.5, handlelength=2.5)
    ax.spines[:].set_visible(False)
    fig.tight_layout()
    return fig


def reading_losses(losses: Mapping[str, float], uniform: float | None = None) -> Any:
    """One bar chart: the held-out loss of one trained stateful model read two ways, and of a plain LSTM.

    ``losses`` maps each way to its mean loss per character on the held-out text: ``"carried"`` (the
    stateful model, the batches in order, the state carried, as trained), ``"reset"`` (the same model, the
    state reset before every batch) and ``"plain"`` (the same layers with ``stateful=False``, trained the
    usual way: the baseline). The stateful model's two bars are blue, the baseline's grey, each labelled
    with its value. The y axis starts at 0 (a reader found an axis from 1.6 exaggerated the gaps); a dashed
    line at the "carried" bar's height, labelled with its value (each bar's value just above its top, clear of the
    line), shows the gap to the other two at a glance;
    a double arrow beside the baseline's bar marks the gap, labelled in nats. The bars are evenly spaced.
    The one-line title states the gain of the carried state over the baseline. Given ``uniform`` (the loss of a
    uniform guess, ln of the vocabulary size), a dotted line at that height, labelled, gives the gap a scale.

    >>> fig = reading_losses({"carried": 1.8, "reset": 2.0, "plain": 2.0})
    >>> [label.get_text().splitlines()[0] for label in fig.axes[0].get_xticklabels()]
    ['stateful LSTM:', 'the same model:', 'plain LSTM']
    """
    ways = ["carried", "reset", "plain"]
    if set(losses) != set(ways):
        raise ValueError("losses must map exactly 'carried', 'reset' and 'plain' to a loss each")
    names = ["stateful LSTM:\nstate carried\n(as trained)",
             "the same model:\nstate reset before\nevery batch, so it\nreads each window alone",
             "plain LSTM\n(stateful=False),\ntrained as usual"]
    fig, ax = new_figure(width=7.0, height=4.3)
    positions = np.array([0.0, 1.0, 2.0])  # evenly spaced (a reader asked what a wider gap meant); colour marks the baseline
    colors = [COLORS[0], COLORS[0], "#8c8c8c"]
    top = max([*losses.values(), uniform or 0.0])
    bars = ax.bar(positions, [losses[way] for way in ways], 0.7, color=colors)
    # the values just above the bars' tops: inside them, the dashed line at the carried loss crossed two (round 25)
    ax.bar_label(bars, labels=[f"{losses[way]:.2f}" for way in ways], padding=3, color="black")
    ax.axhline(losses["carried"], color="black", linestyle="--", linewidth=1.2, zorder=3)
    ax.text(positions[-1] + 0.55, losses["carried"] - 0.04, f"{losses['carried']:.2f}: the state\ncarried, as trained",
            ha="left", va="top", fontsize=9)
    gain = round(losses["plain"], 2) - round(losses["carried"], 2)  # as the bars' labels show them
    # the gap itself, marked beside the baseline's bar: from 0, 0.16 nats is a thin sliver (a reader)
    ax.annotate("", xy=(positions[-1] + 0.45, losses["plain"]), xytext=(positions[-1] + 0.45, losses["carried"]),
                arrowprops={"arrowstyle": "<->", "color": "black", "linewidth": 1.2, "shrinkA": 0, "shrinkB": 0})
    ax.text(positions[-1] + 0.55, (losses["carried"] + losses["plain"]) / 2, f"{gain:.2f} nats", ha="left",
            va="center", fontsize=9, fontweight="bold")
    if uniform is not None:  # round 25 (two readers): the 0.16-nat gap needs a scale
        ax.axhline(uniform, color="black", linestyle=":", linewidth=1.2, zorder=3)
        ax.text(positions[-1] + 0.55, uniform - 0.04, f"{uniform:.2f}: a uniform\nguess", ha="left", va="top",
                fontsize=9)
    ax.set(xticks=positions, xticklabels=names, ylim=(0, top * 1.15), xlim=(-0.6, positions[-1] + 1.55))
    ax.set_title(f"Held-out fables, one seed: the carried state is {gain:.2f} nats below the plain LSTM")
    # round 26 (a reader): the unit defined on the figure, not only in the markdown above it
    ax.set_ylabel("mean −ln p(next character), nats (lower is better)")
    ax.grid(axis="x", visible=False)
    fig.tight_layout()
    return fig


def series_groups(lengths: Any, names: Any, num_steps: int) -> Any:
    """Many series in groups, stacked in rows: where each group's batches read, where they cut, where they reset.

    ``lengths[g]`` lists the lengths of group ``g``'s series, shortest first (one series per row of its batches),
    ``names[g]`` their names (series numbers), ``num_steps`` the steps per batch. As copy 5 cuts them, every series
    of a group is read up to the group's shortest length: ``(shortest - 1) // num_steps`` windows, each coloured by
    its batch, counted across groups (batch 0 blue, as in :func:`ptb_grid`), then one step that is only a target
    (white); the steps after the shortest length are cut (crossed out, grey). A band over each group's windows names
    the batch that reads them, counted across groups; a red bar left of each group marks the reset before its first
    batch. Rows of different groups are separated by a gap.

    >>> fig = series_groups([[3, 4], [5, 5]], [[1, 0], [2, 3]], 2)
    >>> [t.get_text() for t in fig.axes[0].texts if t.get_text().startswith("reset")]
    ['reset before batch 0', 'reset before batch 1']
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    if len(lengths) != len(names) or any(len(a) != len(b) for a, b in zip(lengths, names)):
        raise ValueError("lengths and names must have one entry per series of every group")
    if any(list(group) != sorted(group) for group in lengths):
        raise ValueError("each group's lengths must be sorted, shortest first, as copy 5 sorts them")
    passes = [(group[0] - 1) // num_steps for group in lengths]
    if sum(passes) > len(_BATCH_COLORS):  # round 26 (a reader): one colour per batch, counted across groups
        raise ValueError(f"the groups have {sum(passes)} batches; the figure shows at most {len(_BATCH_COLORS)}")
    widest = max(max(group) for group in lengths)
    rows = sum(len(group) for group in lengths) + 1.6 * (len(lengths) - 1)
    fig, ax = new_figure(width=max(6.0, 0.36 * widest + 3.0), height=0.42 * rows + 0.55 * len(lengths) + 1.6)
    ax.grid(False)
    top, first_batch, ticks, tick_labels = 0.0, 0, [], []
    for g, (group, group_names) in enumerate(zip(lengths, names)):
        kept = group[0]  # every series of the group is cut to its shortest
        read = passes[g] * num_steps  # steps read as x; step `read` is only a target
        for k in range(passes[g]):  # the band naming the batch over each window
            face, ink = _BATCH_COLORS[first_batch + k]
            ax.add_patch(Rectangle((k * num_steps + 0.05, top - 1.0), num_steps - 0.1, 0.85, facecolor=face,
                                   edgecolor="black", linewidth=0.8))
            ax.text(k * num_steps + num_steps / 2, top - 0.57, f"batch {first_batch + k}", ha="center",
                    va="center", fontsize=9, color=ink)
        for s, (length, name) in enumerate(zip(group, group_names)):
            y = top + s
            for t in range(length):
                if t < read:
                    face = _BATCH_COLORS[first_batch + t // num_steps][0]
                elif t < kept:
                    face = "white"
                else:
                    face = "#d9d9d9"
                ax.add_patch(Rectangle((t, y), 1, 0.9, facecolor=face, edgecolor="0.4", linewidth=0.5))
                if t > read:  # cut, or too few steps for another window: never read
                    ax.plot([t + 0.15, t + 0.85], [y + 0.75, y + 0.15], color="0.45", linewidth=0.8)
            ticks.append(y + 0.45)
            tick_labels.append(f"row {s}: series {name} ({length} steps)")
        ax.add_patch(Rectangle((-0.55, top - 1.0), 0.3, len(group) + 0.9, facecolor=COLORS[1], edgecolor="none"))
        ax.text(-0.75, top - 0.57, f"reset before batch {first_batch}", ha="right", va="center", fontsize=9,
                color=COLORS[1], fontweight="bold")
        ax.text(kept + 0.2, top - 0.57, f"group {g}: cut to {kept} steps", ha="left", va="center",
                fontsize=9, style="italic")
        first_batch += passes[g]
        top += len(group) + 1.6
    ax.set_xlim(-0.7, widest + 0.3)
    ax.set_ylim(top - 1.6 + 0.2, -1.2)
    ax.set_yticks(ticks, tick_labels)
    ax.tick_params(axis="y", length=0)
    ax.set_xticks(np.arange(0, widest + 1, num_steps))
    ax.set_xlabel("step of the series")
    ax.spines[:].set_visible(False)
    ax.legend(handles=[Patch(facecolor=_BATCH_COLORS[0][0], edgecolor="0.4", label="read as x, coloured by batch"),
                       Patch(facecolor="white", edgecolor="0.4", label="a target only"),
                       Patch(facecolor="#d9d9d9", edgecolor="0.4", label="cut to the group's shortest: dropped")],
              loc="upper center", bbox_to_anchor=(0.5, -0.13), ncols=3, fontsize=9)
    ax.set_title(f"{sum(map(len, lengths))} series, {len(lengths[0])} per group: a group's series sit side by side, "
                 "one per row,\nits batches read them together, and the state is reset where the next group starts",
                 fontsize=11)
    fig.tight_layout()
    return fig


def step_predictions(minutes: Any, measured: Any, predicted: Any, reset: Any = None,
                     reset_label: str = "the same, state reset before each call", parts: Any = None) -> Any:
    """A series as measured (black) and as predicted one step at a time (dashed, red).

    Given ``reset`` (the same model's predictions without the state carried from the start, e.g. each one from a
    zero state over a short window), a dotted grey line shows them too, labelled ``reset_label``, and a second panel
    below shows each method's absolute error at every step, so that where they differ is seen at a glance. The
    temperatures are in the simulation's scaled units (the y axis says so). Given ``parts`` too (``(start, stop)``
    index pairs), the error panel is cut there, each stretch labelled with both methods' mean squared errors, and
    the stretches where the carried state's is lower are shaded.

    >>> fig = step_predictions([0, 1, 2], [1.0, 2.0, 3.0], [1.1, 1.9, 3.2])
    >>> [line.get_label() for line in fig.axes[0].lines]
    ['measured', 'predicted, one minute at a time']
    """
    import matplotlib.pyplot as plt

    minutes, measured, predicted = (np.asarray(a, dtype=float) for a in (minutes, measured, predicted))
    if not len(minutes) == len(measured) == len(predicted) or (reset is not None and len(reset) != len(minutes)):
        raise ValueError("minutes, measured, predicted (and reset) must have the same length")
    if reset is None:
        fig, ax = new_figure(width=8.0, height=3.4)
    else:  # round 25, fourth edit (two readers): the dashed and dotted lines overlapped; their errors, below, do not
        apply_style()
        fig, (ax, err) = plt.subplots(2, 1, figsize=(8.0, 5.4), sharex=True, height_ratios=(3, 2))
    ax.plot(minutes, measured, color="black", linewidth=2.0, label="measured")
    # round 27, second pass (two readers): with a baseline, the method has one name in both panels' legends
    carried = "predicted, one minute at a time" if reset is None else "state carried"
    ax.plot(minutes, predicted, color=COLORS[1], linewidth=2.0, linestyle="--", label=carried)
    if reset is not None:  # round 25 (two readers): a good fit alone does not prove the state; the baseline shows
        reset = np.asarray(reset, dtype=float)
        ax.plot(minutes, reset, color="0.45", linewidth=2.0, linestyle=":", label=reset_label)
        err.plot(minutes, np.abs(predicted - measured), color=COLORS[1], linewidth=1.8, label=carried)
        err.plot(minutes, np.abs(reset - measured), color="0.45", linewidth=1.8, linestyle=":", label=reset_label)
        err.set(xlabel="minute", ylabel="absolute error\n(scaled units)", ylim=(0, None))
        err.set_title("the error of each method at every minute: lower is better", fontsize=10)
        if not parts:  # round 27 (a reader): one message, each error line labelled with its mean squared error
            for line, guess in zip(err.lines, (predicted, reset)):
                line.set_label(f"{line.get_label()}: mean squared error {np.mean((guess - measured) ** 2):.4f}")
            err.set_ylim(0, 1.6 * max(np.abs(predicted - measured).max(), np.abs(reset - measured).max()))
            err.legend(loc="upper center", fontsize=8.5)  # above the lines: the top 40% of the panel is free
        else:  # the lines are those of the legend above; the stretches' labels take the legend's place
            err.set_title("the error at every minute (lower is better); shaded: where the state's MSE is lower",
                          fontsize=10)
            err.set_ylim(0, 1.5 * max(np.abs(predicted - measured).max(), np.abs(reset - measured).max()))
        for start, stop in parts or ():  # round 26, third pass (two readers): where the state helps, at a glance
            carried, window = (float(np.mean((a[start:stop] - measured[start:stop]) ** 2)) for a in (predicted, reset))
            left, right = minutes[start], minutes[stop - 1]
            if carried < window:
                err.axvspan(left - 0.5, right + 0.5, color=COLORS[1], alpha=0.10, linewidth=0)
            if stop < len(minutes):
                err.axvline((right + minutes[stop]) / 2, color="0.6", linewidth=0.8, linestyle="--")
            err.text((left + right) / 2, 0.96, f"MSE: state {carried:.4f}\nlast 10 only {window:.4f}", transform=err.get_xaxis_transform(),
                     ha="center", va="top", fontsize=8.5, color=COLORS[1] if carried < window else "0.3")
    else:
        ax.set(xlabel="minute")
    ax.set(ylabel="room temperature\n(scaled units)")
    # what to see (a reader): the dashed line follows the black one although each call reads one minute only
    title = (f"{len(minutes)} new minutes, one call each: the state carries every earlier minute\n"
             "into the next prediction, so the dashed line follows the measured one")
    if reset is not None:  # round 26 (a reader): both lines follow the measured one here; say so, point below
        title = (f"{len(minutes)} new minutes: both predictions stay close to the measured line;\n"
                 "the panel below shows where their errors differ")
    ax.set_title(title, fontsize=10.5)
    ax.legend(loc="best", fontsize=9)
    fig.tight_layout()
    return fig
