"""Notebook 02's figures (02 gradient accumulation); :mod:`helpers.plots` re-exports them."""

from __future__ import annotations

from typing import Any

import numpy as np

from helpers.plots._style import COLORS, new_figure

__all__ = ["accumulation_memory", "accumulation_windows"]


def accumulation_memory(splits: list[int], peak_mib: list[float], *, effective: int,
                        fixed_mib: float, fixed_label: str, seconds: list[float] | None = None,
                        relative: bool = True, first_label: str | None = None,
                        others: dict[str, list[float]] | None = None) -> Any:
    """Notebook 02's cost figure: the peak memory of one update of ``effective`` examples made in ``k``
    micro-batches, for each ``k`` in ``splits``; a tick reads "k × size". A dashed line marks the floor
    that does not shrink (``fixed_mib``), labelled ``fixed_label`` (say what it holds). With ``seconds``
    (the time of the same update in each split), a second panel shows that time as bars. ``first_label``
    names the first split under its tick (the notebook's: "plain fit", the baseline). ``others`` maps a label to
    another peak per split (the notebook's: the class without one line), drawn dashed, labelled from the second
    split on (the first is the baseline, one micro-batch: the notebook passes the same value).

    ``relative=False`` (the notebook's): both panels in MiB and ms, each point and bar labelled with its
    value. ``relative=True``: each value divided by the first split's (its MiB and ms in the axis labels),
    labelled "0.62x".

    >>> fig = accumulation_memory([1, 2], [2.0, 1.0], effective=4, fixed_mib=0.5, fixed_label="weights")
    >>> [t.get_text() for t in fig.axes[0].get_xticklabels()]
    ['1 × 4', '2 × 2']
    >>> fig = accumulation_memory([1, 2], [2.0, 1.0], effective=4, fixed_mib=0.5, fixed_label="w",
    ...                           seconds=[0.01, 0.012], relative=False)
    >>> fig.axes[0].get_ylabel(), fig.axes[1].get_ylabel()
    ('peak memory of one update (MiB)', 'time of one update (ms)')
    """
    if len(splits) != len(peak_mib) or not splits:
        raise ValueError(f"splits and peak_mib must be non-empty and of equal length, got "
                         f"{len(splits)} and {len(peak_mib)}")
    if any(k < 1 or effective % k for k in splits):
        raise ValueError(f"every split must divide effective={effective} into equal micro-batches, got {splits}")
    if not all(mib > 0 for mib in peak_mib):
        raise ValueError(f"peak_mib must hold positive sizes, got {peak_mib}")
    others = dict(others or {})
    if any(len(v) != len(splits) or not all(mib > 0 for mib in v) for v in others.values()):
        raise ValueError(f"others must hold one positive size per split ({len(splits)}), got {others}")
    if seconds is not None and (len(seconds) != len(splits) or not all(s > 0 for s in seconds)):
        raise ValueError(f"seconds must hold one positive time per split ({len(splits)}), got {seconds}")
    fig, axes = new_figure(1 if seconds is None else 2, width=6.5 if seconds is None else 11, height=3.8)
    ax = axes if seconds is None else axes[0]
    ticks = [f"{k} × {effective // k}" for k in splits]
    if first_label:
        ticks[0] += f"\n({first_label})"
    unit = peak_mib[0] if relative else 1.0
    values = [mib / unit for mib in peak_mib]
    floor = fixed_mib / unit
    label = (lambda v: f"{v:.2f}x") if relative else (lambda v: f"{v:.1f} MiB")
    ax.plot(splits, values, "o-", label="peak memory of one update", zorder=3)  # over a shared first point
    for (name, other), color in zip(others.items(), COLORS[1:]):
        other = [mib / unit for mib in other]
        ax.plot(splits, other, "s--", color=color, label=name)  # from the shared first point
        for k, value in zip(splits[1:], other[1:]):
            ax.annotate(label(value), (k, value), textcoords="offset points", xytext=(5, 6), ha="left", color=color)
    ax.axhline(floor, color="grey", ls="--", lw=1.5, label=f"{fixed_label}: {label(floor)}")
    for k, value in zip(splits[int(relative):], values[int(relative):]):  # relative: the first is 1.00x
        ax.annotate(label(value), (k, value), textcoords="offset points", xytext=(5, -14 if others else 6),
                    ha="left")  # clear of the line (under it when a dashed curve runs above)
    ax.set_xscale("log", base=2)
    ax.set_xticks(splits, ticks)
    ax.set_xlim(splits[0] / 1.5, splits[-1] * 1.5)  # room for the end points' labels
    ax.minorticks_off()
    ax.set_xlabel(f"micro-batches × examples in each ({effective} in all)")
    ax.set_ylabel(f"peak memory (1 = {peak_mib[0]:.3g} MiB)" if relative else "peak memory of one update (MiB)")
    top = max([*values, *(mib / unit for v in others.values() for mib in v[1:])])
    ax.set_ylim(0, top * (1.5 if others else 1.15))  # with others: room for the legend above the curves
    ax.set_title(f"memory of one update of {effective}: down to a floor")
    ax.legend(loc="upper right", fontsize=9)
    if seconds is not None:
        scale = seconds[0] if relative else 1e-3
        times = [s / scale for s in seconds]  # the same update in every split
        bars = axes[1].bar(ticks, times, color=COLORS[0], alpha=0.7)
        for bar, value in zip(bars, times):
            axes[1].annotate(f"{value:.2f}x" if relative else f"{value:.0f} ms",
                             (bar.get_x() + bar.get_width() / 2, value),
                             textcoords="offset points", xytext=(0, 3), ha="center")
        axes[1].set_xlabel(f"micro-batches × examples in each ({effective} in all)")
        axes[1].set_ylabel(f"time of one update (1 = {seconds[0] * 1e3:.3g} ms)" if relative
                           else "time of one update (ms)")
        axes[1].set_ylim(0, max(times) * 1.15)  # room for the top label
        axes[1].set_title(f"time of one update of {effective}")
        axes[1].grid(axis="x", visible=False)
    fig.tight_layout()
    return fig


# The picture's two colours (Okabe and Ito's colour-blind-safe blue and vermillion): an update that equals
# one of fit's large batches (the same examples, each weighted by its size), and one that does not.
_SAME_AS_FIT, _NOT_FIT = "#0072B2", "#D55E00"


def _windows(sizes: list[int], steps: int, epochs: int, *, per_epoch: bool) -> list[list[int]]:
    """The micro-batch sizes of each update: ``steps`` micro-batches per window, the window either
    restarting at every epoch (a partial window applied at the epoch's end) or counted globally."""
    windows: list[list[int]] = []
    current: list[int] = []
    for epoch in range(epochs):
        for i, size in enumerate(sizes, start=1):
            current.append(size)
            if len(current) == steps or (per_epoch and i == len(sizes)):
                windows.append(current)
                current = []
    return windows + ([current] if current else [])


def accumulation_windows(sizes: list[int], *, steps: int, epochs: int) -> Any:
    """Notebook 02's picture: which micro-batches make each update, and with what weight.

    ``sizes``: the examples of each micro-batch of one epoch, in order; ``steps`` micro-batches
    make a large batch; ``epochs`` passes. Three rows share one axis of examples read: ``fit`` on the
    large batches (one box per batch, labelled with its examples), the size-weighted loop (notebook 02's
    ``Accumulating``: each large batch split into its micro-batches, each labelled with the fraction
    ``n / batch`` its gradient is multiplied by) and Keras' ``gradient_accumulation_steps`` (one global
    counter; every micro-batch multiplied by ``1 / steps``; a last window that never fills stays
    unapplied, hatched). One outline is one update; a dashed line marks each new epoch. Colour has one
    meaning, in every row alike: blue, an update ``fit`` makes too (the same examples, the same
    weights); vermillion, an update ``fit`` never makes.

    >>> fig = accumulation_windows([8, 8, 4], steps=2, epochs=2)
    >>> [t.get_text() for t in fig.axes[0].texts if "update" in t.get_text()]
    ['4 updates', '4 updates', '3 updates']
    """
    import itertools
    from fractions import Fraction

    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgba
    from matplotlib.patches import Patch

    from helpers.arguments import require_int

    sizes = list(sizes)
    if not sizes:
        raise ValueError("sizes is empty: give the examples of each micro-batch of one epoch")
    for i, size in enumerate(sizes):
        require_int(f"sizes[{i}]", size, minimum=1)
    require_int("steps", steps, minimum=1)
    require_int("epochs", epochs, minimum=1)
    ours = _windows(sizes, steps, epochs, per_epoch=True)
    keras_applied = _windows(sizes, steps, epochs, per_epoch=False)
    waiting = keras_applied.pop() if len(keras_applied[-1]) < steps else []  # never applied: kept in Keras' sums
    large = steps * sizes[0]
    rows = [
        (f"fit, batches of {large}", [[sum(w)] for w in ours], "batch"),
        (f"Accumulating: fit's batches,\nin micro-batches of {sizes[0]}", ours, "size"),
        (f"Keras' built-in,\n{steps} micro-batches of {sizes[0]}", keras_applied, "equal"),
    ]
    ends = list(itertools.accumulate(sum(w) for w in ours))
    fit_batches = {(end - sum(w), sum(w)) for end, w in zip(ends, ours)}  # (first example, examples) of fit's
    total = epochs * sum(sizes)
    fig, ax = new_figure(width=15, height=4.4)
    ax.grid(False)
    for row, (label, windows, rule) in enumerate(rows):
        y, start = -row, 0
        for window in windows:
            weights_right = rule != "equal" or len(set(window)) == 1
            color = _SAME_AS_FIT if weights_right and (start, sum(window)) in fit_batches else _NOT_FIT
            first = start
            for size in window:
                ax.add_patch(plt.Rectangle((start, y - 0.3), size, 0.6, facecolor=color, alpha=0.25,
                                           edgecolor="grey", linewidth=0.6))
                equal = Fraction(1, len(window))  # Keras' weight; "= n/N" where it is the size-weighted one
                same = f"\n= {size}/{sum(window)}" if equal == Fraction(size, sum(window)) else ""
                share = {"batch": f"{size} examples", "size": f"{size}/{sum(window)}", "equal": f"{equal}{same}"}[rule]
                ax.text(start + size / 2, y, share, ha="center", va="center", fontsize=11)
                start += size
            inset = total * 0.003  # a gap between the outlines of two updates
            ax.add_patch(plt.Rectangle((first + inset, y - 0.37), start - first - 2 * inset, 0.74,
                                       facecolor="none", edgecolor=color, linewidth=2.2))
        for size in (waiting if rule == "equal" else []):
            ax.add_patch(plt.Rectangle((start, y - 0.3), size, 0.6, facecolor="white", hatch="///",
                                       edgecolor="grey", linewidth=0.8))
            start += size
        late = f"\n+{len(waiting)} micro-batch(es)\nwaiting" if waiting and rule == "equal" else ""
        ax.text(total * 1.01, y, f"{len(windows)} updates{late}", va="center", fontsize=11, clip_on=False)
    for epoch in range(1, epochs):
        ax.axvline(epoch * sum(sizes), color="black", ls="--", lw=1.2)
        ax.text(epoch * sum(sizes) + 0.5, 0.45, f"epoch {epoch + 1} starts", fontsize=11, va="bottom")
    ax.set_yticks([-r for r in range(len(rows))], [label for label, _, _ in rows], fontsize=11)
    ax.set_xlim(0, total * 1.005)  # the data only: the update counts sit outside, on the right
    ax.set_ylim(-len(rows) + 0.5, 0.75)
    ax.set_xlabel("examples read (a box is as wide as its micro-batch)", fontsize=11)
    ax.set_title("One outline is one update; a fraction is a micro-batch gradient's weight", fontsize=13)
    keys = [Patch(facecolor=to_rgba(color, 0.25), edgecolor=color, linewidth=2.2, label=label)
            for color, label in [(_SAME_AS_FIT, "the same update as fit"),
                                 (_NOT_FIT, "an update fit never makes")]]
    ax.legend(handles=keys, loc="upper center", bbox_to_anchor=(0.45, -0.22), ncol=2, fontsize=11)
    ax.spines[["left"]].set_visible(False)
    fig.tight_layout()
    return fig
