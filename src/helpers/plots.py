"""Every figure of the workbook: one function per figure, taking the data and returning the Figure.

A notebook draws a figure in one line (``plots.memory_and_curves(...)``); the figure's data is
computed in the notebook, where the learner can see it. Each function is smoke-tested in
``tests/test_plots.py``. :func:`apply_style` gives every figure the same look.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["COLORS", "apply_style", "new_figure", "held_vs_leaky", "accumulation_memory",
           "accumulation_windows", "ptb_grid", "validation_curve", "validation_passes", "snapshot_lag",
           "snapshot_step_order"]

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


def held_vs_leaky(held: list[float], held_accepted: list[int], leaky: list[float],
                  leaky_accepted: list[int], leaky_points: list[Any] | None = None) -> Any:
    """Notebook 01's picture: every loss two L-BFGS runs asked for, from the same start, on one log scale.

    ``held`` lists the loss of each evaluation of a run on one batch, taken once; ``leaky`` the same
    for a run whose objective takes a new batch at every evaluation (evaluation k on the k-th batch
    taken, batch 0 first). ``held_accepted`` and ``leaky_accepted`` are the evaluation numbers
    (1-based; 1 is the start) of the points SciPy accepted as iterates, e.g. ``len(losses)`` recorded
    by its ``callback``. ``leaky_points`` (optional) are the leaky run's evaluated parameter vectors,
    one per loss: a step between two accepted points at the same weights (the line search ended with
    a step of 0) is drawn dashed and labelled "same weights, new batch", since only the batch changed.

    Both runs are drawn alike, the held one blue, the leaky one red: a solid line through the start
    (hollow square) and the accepted points (dots); a trial step the line search rejected is a cross,
    joined by a dotted line to the point it was tried from (the legend says "its loss rose" only when
    every one did; the held run's first one is labelled). The leaky run's points say which batch they
    were computed on ("batch 3"); the last rise of its loss between two accepted points (the reason
    SciPy stops with "converged") is labelled. The last point of each run says after how many
    evaluations it stopped; the axes end at the last evaluation and just beyond the lowest and highest
    loss; the legend (three entries) sits under the axes.

    >>> fig = held_vs_leaky([133.0, 430.0, 3.6, 0.1], [3, 4], [133.0, 258.0, 2.0, 8.1], [3, 4])
    >>> fig.axes[0].get_yscale(), [t.get_text() for t in fig.axes[0].texts][-2:]
    ('log', ['stops after 4 evaluations', 'stops after 4 evaluations'])
    """
    for name, losses, accepted in (("held", held, held_accepted), ("leaky", leaky, leaky_accepted)):
        if not isinstance(losses, (list, tuple, np.ndarray)) or not isinstance(accepted, (list, tuple)):
            raise TypeError(f"{name} and {name}_accepted must be lists (losses; evaluation numbers)")
        if len(losses) == 0:
            raise ValueError(f"{name} is empty: a run has at least its first evaluation")
        if not all(np.isfinite(losses)) or min(losses) <= 0:
            raise ValueError(f"{name} must hold positive, finite losses to draw on a log scale")
        if any(not 2 <= int(i) <= len(losses) for i in accepted) or list(accepted) != sorted(set(accepted)):
            raise ValueError(f"{name}_accepted = {list(accepted)} must be increasing evaluation numbers from 2 "
                             f"to {len(losses)} (evaluation 1 is the start)")
    if leaky_points is not None and len(leaky_points) != len(leaky):
        raise ValueError(f"leaky_points has {len(leaky_points)} vectors for {len(leaky)} losses: one per evaluation")

    fig, ax = new_figure(width=8.5, height=4.8)
    values, seen = np.asarray(held, dtype=float), np.asarray(leaky, dtype=float)
    all_rose, paths, first_rejected = True, [], None
    for losses, accepted, color in ((values, held_accepted, COLORS[0]), (seen, leaky_accepted, COLORS[1])):
        steps = np.arange(1, len(losses) + 1)
        on_path = np.zeros(len(losses), dtype=bool)
        on_path[[0, *(int(i) - 1 for i in accepted)]] = True
        for i in np.flatnonzero(~on_path):
            origin = np.flatnonzero(on_path[:i])[-1]  # the last path point before this trial
            all_rose = all_rose and losses[i] > losses[origin]
            ax.semilogy([steps[origin], steps[i]], [losses[origin], losses[i]], ":", color=color, lw=1)
            ax.semilogy([steps[i]], [losses[i]], "x", color=color, ms=8, mew=1.8)
            if color == COLORS[0] and first_rejected is None:
                first_rejected = (i, losses[i] > losses[origin])
        paths.append(np.flatnonzero(on_path))
    unmoved = [leaky_points is not None and np.array_equal(np.asarray(leaky_points[a]), np.asarray(leaky_points[b]))
               for a, b in zip(paths[1][:-1], paths[1][1:])]
    ax.semilogy(paths[0] + 1, values[paths[0]], "-o", color=COLORS[0], lw=2, ms=5)
    for (a, b), same in zip(zip(paths[1][:-1], paths[1][1:]), unmoved):  # the leaky path, one step at a time
        ax.semilogy([a + 1, b + 1], seen[[a, b]], "--" if same else "-", color=COLORS[1], lw=2)
    ax.semilogy(paths[1] + 1, seen[paths[1]], "o", color=COLORS[1], ms=5)
    ax.semilogy([1], values[:1], "s", color="black", ms=9, mfc="white", mew=1.5, zorder=3)

    for k in range(len(seen)):  # evaluation k + 1 ran on batch k
        below = 0 < k < len(values) and values[k] > seen[k]  # keep the label off the held run's point
        ax.annotate(f"batch {k}", (k + 1, seen[k]), textcoords="offset points", fontsize=9.5, color=COLORS[1],
                    xytext=(0, -15 if below else 8), ha="center")
    if first_rejected is not None:
        i, rose = first_rejected
        ax.annotate("rejected: loss rose" if rose else "rejected", (i + 1, values[i]), textcoords="offset points",
                    xytext=(9, -3), fontsize=9, color=COLORS[0])
    rises = [(a, b, same) for (a, b), same in zip(zip(paths[1][:-1], paths[1][1:]), unmoved) if seen[b] > seen[a]]
    if rises:
        a, b, same = rises[-1]
        mid = ((a + b) / 2 + 1, float(np.sqrt(seen[a] * seen[b])))  # the middle of the segment, on a log scale
        why = "same weights, new batch:\n" if same else f"from batch {a} to batch {b}:\n"
        ax.annotate(f"{why}the loss rose {seen[a]:.2f} → {seen[b]:.2f};\nSciPy reports 'converged'", mid,
                    xytext=(b + 1.4, seen[b] / 3), fontsize=9, ha="left", va="top",  # below the run's end
                    color=COLORS[1], arrowprops={"arrowstyle": "->", "color": COLORS[1]})
    ax.annotate(f"stops after {len(values)} evaluations", (len(values), values[-1]), textcoords="offset points",
                xytext=(0, -15), ha="right", fontsize=9, color=COLORS[0], fontweight="bold")
    ax.annotate(f"stops after {len(seen)} evaluations", (len(seen), seen[-1]), textcoords="offset points",
                xytext=(9, -3), fontsize=9, color=COLORS[1], fontweight="bold")

    handles = [
        ax.plot([], [], "-o", color=COLORS[0], lw=2, label="batch held: all on batch 0")[0],
        ax.plot([], [], "-o", color=COLORS[1], lw=2, label="next() in the loss: a new batch each")[0],
        ax.plot([], [], ":x", color="black", label="trial rejected" + (" (its loss rose)" if all_rose else ""))[0],
    ]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=3, fontsize=9)
    ax.set_xlim(0.5, max(len(values), len(seen)) + 0.5)
    ax.set_ylim(min(values.min(), seen.min()) / 2.5, max(values.max(), seen.max()) * 2.5)  # just the data
    ax.set_xlabel("evaluations (calls of fun); ● accepted step, □ start")
    ax.set_ylabel("loss on the batch evaluated (log)")
    ax.set_title("Same start, same L-BFGS: one batch held vs a new batch per evaluation")
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- 02 gradient accumulation


def accumulation_memory(splits: list[int], peak_mib: list[float], *, effective: int,
                        fixed_mib: float, fixed_label: str, seconds: list[float] | None = None) -> Any:
    """Notebook 02's cost figure: the peak memory of one ``effective``-example gradient computed in
    ``k`` micro-batches, for each ``k`` in ``splits``, relative to the first split's (its MiB in the axis
    label), each point labelled with its ratio; a tick reads "k × size". A dashed line marks the floor
    that does not shrink (``fixed_mib``, relative too), labelled ``fixed_label`` (say what it holds).
    With ``seconds`` (the time of one update in each split), a second panel shows the time per example
    relative to the first split's. Ratios, because the absolute sizes and times are one machine's.

    >>> fig = accumulation_memory([1, 2], [2.0, 1.0], effective=4, fixed_mib=0.5, fixed_label="weights")
    >>> [t.get_text() for t in fig.axes[0].get_xticklabels()]
    ['1 × 4', '2 × 2']
    >>> len(accumulation_memory([1, 2], [2.0, 1.0], effective=4, fixed_mib=0.5, fixed_label="w",
    ...                         seconds=[1.0, 1.2]).axes)
    2
    """
    if len(splits) != len(peak_mib) or not splits:
        raise ValueError(f"splits and peak_mib must be non-empty and of equal length, got "
                         f"{len(splits)} and {len(peak_mib)}")
    if any(k < 1 or effective % k for k in splits):
        raise ValueError(f"every split must divide effective={effective} into equal micro-batches, got {splits}")
    if not all(mib > 0 for mib in peak_mib):
        raise ValueError(f"peak_mib must hold positive sizes, got {peak_mib}")
    if seconds is not None and (len(seconds) != len(splits) or not all(s > 0 for s in seconds)):
        raise ValueError(f"seconds must hold one positive time per split ({len(splits)}), got {seconds}")
    fig, axes = new_figure(1 if seconds is None else 2, width=6.5 if seconds is None else 11, height=3.8)
    ax = axes if seconds is None else axes[0]
    ticks = [f"{k} × {effective // k}" for k in splits]
    relative = [mib / peak_mib[0] for mib in peak_mib]
    ax.plot(splits, relative, "o-", label="peak memory of one gradient")
    ax.axhline(fixed_mib / peak_mib[0], color="grey", ls="--", lw=1.5, label=fixed_label)
    for k, ratio in zip(splits[1:], relative[1:]):
        ax.annotate(f"{ratio:.2f}x", (k, ratio), textcoords="offset points", xytext=(0, 8), ha="center")
    ax.set_xscale("log", base=2)
    ax.set_xticks(splits, ticks)
    ax.minorticks_off()
    ax.set_xlabel(f"micro-batches × examples in each ({effective} in all)")
    ax.set_ylabel(f"peak memory (1 = {peak_mib[0]:.3g} MiB)")
    ax.set_ylim(0, 1.15)
    ax.set_title("memory: smaller micro-batches, down to a floor")
    ax.legend(loc="upper right", fontsize=9)
    if seconds is not None:
        relative_time = [s / seconds[0] for s in seconds]  # the same examples in every split: per example too
        bars = axes[1].bar(ticks, relative_time, color=COLORS[0], alpha=0.7)
        for bar, ratio in zip(bars, relative_time):
            axes[1].annotate(f"{ratio:.2f}x", (bar.get_x() + bar.get_width() / 2, ratio),
                             textcoords="offset points", xytext=(0, 3), ha="center")
        axes[1].set_xlabel(f"micro-batches × examples in each ({effective} in all)")
        axes[1].set_ylabel(f"time per example (1 = {seconds[0] / effective * 1e6:.3g} µs)")
        axes[1].set_ylim(0, max(relative_time) * 1.15)  # room for the top label
        axes[1].set_title(f"time per example (one update of {effective})")
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
    make a large batch; ``epochs`` passes. Three rows share one axis of examples read: the large
    batches (``fit(batch_size=steps * sizes[0])``, one box per batch), the size-weighted loop (each
    large batch split into its micro-batches, each labelled with its share ``n / batch``; the helper
    makes the same updates) and Keras' ``gradient_accumulation_steps`` (one global counter; every
    micro-batch weighted ``1 / steps``; a last window that never fills stays unapplied, hatched). An
    outline groups the micro-batches of one update, a triangle marks where it is applied, a dashed line
    each new epoch. Colour says whether an update equals one of fit's large batches (blue) or not
    (vermillion), in every row alike; a micro-batch weighted above its share of its update's examples
    (the trap: a micro-batch of 4, the last of 28 examples, weighted as 1 of 4 micro-batches) is filled solid vermillion.

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
    per_epoch = " + ".join(str(sum(w)) for w in _windows(sizes, steps, 1, per_epoch=True))
    rows = [
        (f"fit(batch_size={large})\nbatches of {per_epoch} per epoch", [[sum(w)] for w in ours], "batch"),
        (f"ours: each batch of {large},\nsplit into micro-batches of {sizes[0]}", ours, "size"),
        (f"Keras' built-in\ngradient_accumulation_steps={steps}", keras_applied, "equal"),
    ]
    ends = list(itertools.accumulate(sum(w) for w in ours))
    fit_batches = {(end - sum(w), sum(w)) for end, w in zip(ends, ours)}  # (first example, examples) of fit's
    total = epochs * sum(sizes)
    fig, ax = new_figure(width=10, height=4.5)
    ax.grid(False)
    over = ""  # the first micro-batch weighted above its share, named in the legend
    for row, (label, windows, rule) in enumerate(rows):
        y, start = -row, 0
        for window in windows:
            weights_right = rule != "equal" or len(set(window)) == 1
            color = _SAME_AS_FIT if weights_right and (start, sum(window)) in fit_batches else _NOT_FIT
            first = start
            for size in window:
                heavy = rule == "equal" and Fraction(1, len(window)) > Fraction(size, sum(window))
                over = over or (f"a micro-batch of {size} (the last of the {sum(window)} examples),\n"
                                f"weighted as 1 of {len(window)} micro-batches" if heavy else "")
                ax.add_patch(plt.Rectangle((start, y - 0.3), size, 0.6, facecolor=_NOT_FIT if heavy else color,
                                           alpha=0.85 if heavy else 0.3, edgecolor="grey", linewidth=0.6))
                share = {"batch": f"{size}", "size": f"{size}/{sum(window)}",
                         "equal": f"{Fraction(1, len(window))}"}[rule]
                ax.text(start + size / 2, y, share, ha="center", va="center", fontsize=8,
                        color="white" if heavy else "black", fontweight="bold" if heavy else "normal")
                start += size
            inset = total * 0.003  # a gap between the outlines of two updates
            ax.add_patch(plt.Rectangle((first + inset, y - 0.37), start - first - 2 * inset, 0.74,
                                       facecolor="none", edgecolor=color, linewidth=2.2))
            ax.plot([start - 2 * inset], [y + 0.47], marker="v", color=color, markersize=7, markeredgecolor="black")
        for size in (waiting if rule == "equal" else []):
            ax.add_patch(plt.Rectangle((start, y - 0.3), size, 0.6, facecolor="white", hatch="///",
                                       edgecolor="grey", linewidth=0.8))
            start += size
        late = f"\n+{len(waiting)} micro-batch(es)\nwaiting" if waiting and rule == "equal" else ""
        ax.text(total * 1.01, y, f"{len(windows)} updates{late}", va="center", fontsize=9, clip_on=False)
    for epoch in range(1, epochs):
        ax.axvline(epoch * sum(sizes), color="black", ls="--", lw=1.2)
        ax.text(epoch * sum(sizes) + 0.5, 0.78, f"epoch {epoch + 1} starts", fontsize=9, va="bottom")
    ax.set_yticks([-r for r in range(len(rows))], [label for label, _, _ in rows], fontsize=9)
    ax.set_xlim(0, total * 1.005)  # the data only: the update counts sit outside, on the right
    ax.set_ylim(-len(rows) + 0.25, 1.15)
    ax.set_xlabel("examples read (a box is as wide as its micro-batch)")
    ax.set_title("Each box is one micro-batch, labelled with the weight its gradient gets.\n"
                 "Each outline is one update: its boxes' weighted gradients added up, applied once at ▼")
    keys = [Patch(facecolor=to_rgba(color, 0.3), edgecolor=color, linewidth=2.2, label=label)
            for color, label in [(_SAME_AS_FIT, "update = one of fit's batches"),
                                 (_NOT_FIT, "an update fit never makes")]]
    if over:
        keys.append(Patch(facecolor=to_rgba(_NOT_FIT, 0.85), edgecolor="grey",
                          label=f"weighted above its size: {over}"))
    ax.legend(handles=keys, loc="upper center", bbox_to_anchor=(0.45, -0.2), ncol=2, fontsize=9)
    ax.spines[["left"]].set_visible(False)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- 03 batch iteration


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



# --------------------------------------------------------------------------- 04 validation queues



def validation_curve(history: Any, ax: Any = None, *, metric: str = "loss", smooth: int = 1,
                     log: bool = False) -> Any:
    """The training loss at every step (a running mean over ``smooth`` steps) and the validation
    ``metric`` of each full pass, with a dotted line at every evaluation, on ``ax`` (a new figure
    when None). ``history``: a :class:`helpers.validation.History`. Returns the Figure.

    >>> from types import SimpleNamespace
    >>> h = SimpleNamespace(step=[1, 2, 3, 4], train_loss=[4.0, 3.0, 2.5, 2.0], eval_step=[0, 2, 4],
    ...                     val=[{"loss": 5.0}, {"loss": 3.0}, {"loss": 2.2}])
    >>> len(validation_curve(h, smooth=2).axes[0].lines)
    5
    """
    import numpy as np

    if ax is None:
        _, ax = new_figure()
    train = np.asarray(history.train_loss, dtype=float)
    if smooth > 1 and len(train) >= smooth:
        ax.plot(history.step[smooth - 1:], np.convolve(train, np.ones(smooth) / smooth, mode="valid"),
                label=f"training loss (mean of {smooth} steps)", alpha=0.8)
    else:
        ax.plot(history.step, train, label="training loss", alpha=0.8)
    if history.val:
        ax.plot(history.eval_step, [r[metric] for r in history.val], "o-", label=f"validation {metric} (full pass)")
    for step in history.eval_step:
        ax.axvline(step, color="0.6", lw=0.6, ls=":", zorder=0)
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.set_ylabel(metric)
    ax.legend()
    return ax.figure


def validation_passes(panels: list[tuple[str, list[list[list[int]]]]], *,
                      reads: list[tuple[str, list[int]]] | None = None, eval_steps: list[int] | None = None,
                      reads_title: str | None = None, panels_title: str | None = None) -> Any:
    """Notebook 04's picture, on ids only (no model): what each loop reads.

    Top, when ``reads`` is given (``(label, batch number read at each step)`` pairs, steps from 1):
    which training batch each step trains on, one line per pair (the first solid, the others
    dashed), a dotted line at each of ``eval_steps`` (a validation pass), titled ``reads_title``.
    Bottom, one panel per ``(title, passes)``, each pass a list of batches of example ids: the ids
    each pass read, in order, one cell per example, its batch shown by alternating fills; an id read
    a second time in the same pass is filled red; "empty" marks a pass that read nothing. Each panel
    is as wide as its longest pass, with no x axis (the cells carry the ids); the first panel with a
    red cell (else the first panel) holds the legend of the fills, in a spare row under the passes.
    ``panels_title`` heads the bottom row.

    >>> fig = validation_passes([("cycling", [[[0, 1], [2, 0]], [[1, 2], [0, 1]]]), ("once", [[[0, 1], [2]], []])],
    ...                         reads=[("kept", [1, 2, 3, 4]), ("restarted", [1, 2, 1, 2])], eval_steps=[0, 2, 4])
    >>> len(fig.axes), fig.axes[0].get_ylabel()
    (3, 'training batch number')

    Raises ValueError for empty ``panels``, a panel with no id at all, or ``reads`` lines of
    different lengths.
    """
    apply_style()
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    if not panels:
        raise ValueError("panels is empty: give at least one (title, passes)")
    if reads and len({len(numbers) for _, numbers in reads}) > 1:
        raise ValueError(f"reads lines differ in length: {[(label, len(numbers)) for label, numbers in reads]}")
    flat = [[[i for batch in one for i in batch] for one in passes] for _, passes in panels]
    if any(not any(ids for ids in passes) for passes in flat):
        raise ValueError("every panel needs at least one pass that read an id")

    fig = plt.figure(figsize=(11, 6.6 if reads else 3.6))
    upper, lower = fig.subfigures(2, 1, height_ratios=[0.75, 1]) if reads else (None, fig)
    if reads:
        upper.subplots_adjust(left=0.07, right=0.98, top=0.86, bottom=0.2)
        top = upper.subplots()
        steps = np.arange(1, len(reads[0][1]) + 1)
        for number, (label, read) in enumerate(reads):
            top.plot(steps, read, color=COLORS[number % len(COLORS)], lw=1.8 if number == 0 else 1.4,
                     ls="-" if number == 0 else "--", label=label)
        for step in eval_steps or []:
            top.axvline(step, color="0.6", lw=0.8, ls=":", zorder=0)
        top.set(xlabel="training step", ylabel="training batch number")
        top.set_ylim(bottom=0)
        top.legend(loc="upper left", fontsize=9)
        if reads_title:
            top.set_title(reads_title, fontsize=11)

    widths = [max(1, max(len(ids) for ids in passes)) for passes in flat]
    lower.subplots_adjust(left=0.07, right=0.98, top=0.78, bottom=0.03, wspace=0.08)
    bottom_axes = lower.subplots(1, len(panels), squeeze=False, gridspec_kw={"width_ratios": widths})[0]
    fills, red_fill = ("#c6dbef", "#fdd9b5"), "#f4a6a6"  # alternating: one fill per batch
    rows = max(len(passes) for _, passes in panels)
    any_red = []
    for column, ((title, passes), ids_per_pass) in enumerate(zip(panels, flat)):
        ax = bottom_axes[column]
        for row, (one, ids) in enumerate(zip(passes, ids_per_pass)):
            if not ids:
                ax.text((widths[column] - 1) / 2, row, "empty: nothing left to read", ha="center", va="center",
                        fontsize=9, color="0.4")
            col = 0
            for batch_number, batch in enumerate(one):
                for value in batch:
                    twice = value in ids[:col]  # read a second time in this pass
                    any_red += [column] if twice else []
                    ax.add_patch(plt.Rectangle((col - 0.5, row - 0.5), 1, 1, lw=2.2 if twice else 0.8,
                                               facecolor=red_fill if twice else fills[batch_number % 2],
                                               edgecolor=COLORS[1] if twice else "white"))
                    ax.text(col, row, int(value), ha="center", va="center", fontsize=9)
                    col += 1
        ax.set_xlim(-0.5, widths[column] - 0.5)
        ax.set_ylim(rows + 0.15, -0.5)  # a spare strip under the passes, for the legend
        ax.set_title(title, fontsize=10)
        ax.set_yticks(range(len(passes)), [f"pass {p}" for p in range(1, len(passes) + 1)] if column == 0 else [])
        ax.set_xticks([])
        ax.tick_params(length=0)
        ax.grid(False)
        for side in ("left", "bottom"):
            ax.spines[side].set_visible(False)
    legend = [Patch(facecolor=fills[0], label="batch 1, 3, ..."),  # in each pass, batches alternate fills
              Patch(facecolor=fills[1], label="batch 2, 4, ..."),
              Patch(facecolor=red_fill, edgecolor=COLORS[1], lw=2, label="read twice in one pass")]
    bottom_axes[any_red[0] if any_red else 0].legend(handles=legend, loc="lower center", ncol=3, fontsize=8.5,
                                                      handlelength=1.2, columnspacing=1.0, borderaxespad=0.1)
    if panels_title:
        lower.suptitle(panels_title, fontsize=11, y=0.97)
    return fig


# --------------------------------------------------------------------------- 05 network snapshots


def snapshot_lag(curves: dict[str, Any], *, every: int | None = None, level: tuple[float, str] | None = None,
                 computed: tuple[str, ...] = ()) -> Any:
    """How many steps a past network is behind the current one when step t uses it: one line per way
    of refreshing it.

    ``curves`` maps a refresh policy's name to its lag at steps 1, 2, …: at the evaluation of step t
    (B has had t updates; before that step's sync and update), ``t − k`` for a hard copy that is B
    after k updates, or the average age of a soft copy's mix of B's earlier weights. ``every`` shades
    each hard sync of a periodic copy, made in steps ``every``, ``2 every``, … right after their
    evaluation: the band spans the drop, from the step furthest behind to the next one, 1 behind.
    ``level = (value, label)`` draws a dashed horizontal reference (a soft copy's ``1/τ``). The curves
    named in ``computed`` (values computed from a rule, not measured) are drawn dashed. The legend sits
    to the right of the axes.

    >>> import numpy as np
    >>> fig = snapshot_lag({"hard, every step": np.ones(20), "hard, every 10": np.arange(20) % 10 + 1.0}, every=10)
    >>> [line.get_label() for line in fig.axes[0].get_lines()][:2]
    ['hard, every step', 'hard, every 10']
    """
    import numpy as np

    if not curves:
        raise ValueError("curves must hold at least one policy's lags")
    if every is not None and (isinstance(every, bool) or not isinstance(every, int) or every < 1):
        raise ValueError(f"every must be a positive number of steps, got {every!r}")
    arrays = {}
    for name, curve in curves.items():
        arrays[name] = np.asarray(curve, dtype=float)
        if arrays[name].ndim != 1 or arrays[name].size == 0:
            raise ValueError(f"curves[{name!r}] must be a non-empty 1-D sequence of lags, got shape {arrays[name].shape}")
    unknown = [name for name in computed if name not in arrays]
    if unknown:
        raise ValueError(f"computed names curves that are not in curves: {unknown}")
    fig, ax = new_figure(width=10.0, height=4.6)
    for (name, curve), width in zip(arrays.items(), [2.5, 1.8, 1.8, 1.8, 1.8, 1.8]):
        dashed = name in computed
        ax.plot(np.arange(1, curve.size + 1), curve, lw=width, ls="--" if dashed else "-",
                marker=None if dashed else "o", ms=2.5, label=name)
    steps = max(curve.size for curve in arrays.values())
    if level is not None:
        ax.axhline(level[0], color="grey", ls="--", lw=1, label=level[1])
    if every is not None:
        for k, t in enumerate(range(every, steps, every)):  # synced in step t, after t's evaluation
            ax.axvspan(t, t + 1, color="grey", alpha=0.18, lw=0,
                       label=f"shaded: the every-{every} copy's sync,\nafter the evaluation of step {every}, {2 * every}, ..."
                       if k == 0 else "_nolegend_")
    ax.set_xlim(0, steps + 1)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("training step t (B has had t updates)")
    ax.set_ylabel("steps past B is behind B")
    ax.set_title("How far behind B is the past network when step t evaluates with it?")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=9, labelspacing=1.0)
    fig.tight_layout()
    return fig


def snapshot_step_order(steps: int = 2) -> Any:
    """A timeline of the question's training step: in each step B and the past network both evaluate
    A's features into one loss, ``tape.gradient`` computes the gradients g, then the past network takes
    B's state (weights and BatchNorm statistics: the sync), then the optimizer applies g to A and B.
    Each column shows what a row holds after that phase (φ_t: A's weights after t updates, θ_t: B's,
    g_t: step t's gradients); what the phase changes is boxed, the rest is grey text, and the key is a
    legend. A note says why the sync must not come before the evaluation.

    A diagram of the order in notebook 05's ``train_step`` (no data): at every evaluation the past
    network holds θ_{t−1} while B holds θ_t, and g is fixed before the sync, so the sync cannot change it.

    >>> fig = snapshot_step_order(2)
    >>> phases = ("evaluate", "tape", "sync", "apply")
    >>> [t.get_text().split()[0] for t in fig.axes[0].texts if t.get_text().startswith(phases)][:4]
    ['evaluate:', 'tape.gradient:', 'sync():', 'apply_gradients:']
    """
    from matplotlib.patches import FancyBboxPatch, Patch

    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= 4:
        raise ValueError(f"steps must be an int from 1 to 4, got {steps!r}")

    def label(symbol: str, k: int) -> str:
        return rf"${symbol}_{{t}}$" if k == 0 else rf"${symbol}_{{t{k:+d}}}$"

    fig, ax = new_figure(width=2.2 + 5.0 * steps, height=4.2)
    rows = {"A (trained)": (3.0, r"\varphi"), "B (trained)": (2.0, r"\theta"),
            "past B (frozen copy)": (1.0, r"\theta"), "gradients": (0.0, "g")}
    colors = {3.0: COLORS[4], 2.0: COLORS[0], 1.0: COLORS[3], 0.0: COLORS[2]}
    gap, width = 2.0, 8.6  # between phases, between steps
    for k in range(steps):
        phases = [("evaluate: B and\npast B; one loss", (k, k, k - 1, None), ()),
                  ("tape.gradient:\nthe gradients g", (k, k, k - 1, k), ("gradients",)),
                  ("sync(): past B\ntakes B's state", (k, k, k, None), ("past B (frozen copy)",)),
                  ("apply_gradients:\nA and B move by g", (k + 1, k + 1, k, None), ("A (trained)", "B (trained)"))]
        for j, (phase, held, changed) in enumerate(phases):
            x = width * k + gap * j
            ax.text(x, 3.75, phase, ha="center", va="center", fontsize=9, linespacing=1.3)
            for (row, (y, symbol)), version in zip(rows.items(), held):
                if version is None:
                    continue
                if row in changed:
                    ax.add_patch(FancyBboxPatch((x - 0.55, y - 0.21), 1.1, 0.42, boxstyle="round,pad=0.02",
                                                fc=colors[y], alpha=0.5, ec="black", lw=1.6))
                ax.text(x, y, label(symbol, version), ha="center", va="center", fontsize=12,
                        color="black" if row in changed else "grey")
            if phase.startswith("sync"):
                ax.annotate("", xy=(x, 1.23), xytext=(x, 1.77), arrowprops={"arrowstyle": "-|>", "lw": 1.5})
        ax.text(width * k + 1.5 * gap, 4.35, "step t" if k == 0 else f"step t + {k}", ha="center", va="center",
                fontsize=11, fontweight="bold")
        if k:
            x = width * k - (width - 3 * gap) / 2
            ax.plot([x, x], [-0.4, 4.4], color="grey", lw=0.8, ls="--")
    for row, (y, _) in rows.items():
        ax.text(-0.8, y, row, ha="right", va="center", fontsize=10)
    ax.text(-3.2, -0.75, "Synced before the evaluation instead, past B would equal B (0 behind): "
            "the step would compare B with itself.", ha="left", va="center", fontsize=9.5)
    key = [Patch(fc="white", ec="black", lw=1.6, label="boxed: what this phase changes (grey: unchanged)"),
           Patch(fc="none", ec="none", label=r"$\varphi_t$: A's weights after t updates"),
           Patch(fc="none", ec="none", label=r"$\theta_t$: B's weights (and BN stats) after t updates"),
           Patch(fc="none", ec="none", label=r"$g_t$: step t's gradients, fixed before the sync")]
    ax.legend(handles=key, loc="upper center", bbox_to_anchor=(0.5, -0.02), ncol=2, fontsize=9,
              handlelength=1.2, frameon=False)
    ax.set_xlim(-3.2, width * (steps - 1) + 3 * gap + 0.7)
    ax.set_ylim(-0.95, 4.5)
    ax.axis("off")
    ax.set_title("At every evaluation past B is one update behind B; the sync comes after the gradients", fontsize=11)
    fig.tight_layout()
    return fig
