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
                  leaky_accepted: list[int]) -> Any:
    """Notebook 01's picture: every loss two L-BFGS runs asked for, from the same start, on one log scale.

    ``held`` lists the loss of each evaluation of a run on one batch, taken once; ``leaky`` the same
    for a run whose objective takes a new batch at every evaluation (evaluation k on the k-th batch
    taken). ``held_accepted`` and ``leaky_accepted`` are the evaluation numbers (1-based; 1 is the
    start) of the points SciPy accepted as iterates, e.g. ``len(losses)`` recorded by its
    ``callback``. The held run's path is a solid line through the start (hollow square) and its
    accepted points (dots); a point the line search rejected is a grey cross, joined by a dotted
    line to the point it was tried from (the legend says "the loss rose" only when every one did).
    The leaky run is a dashed red line through every loss SciPy saw, each point labelled with the
    batch it was computed on (accepted points filled; the label sits on the side away from the held
    run's point at the same evaluation). The last point of each run says after how many
    evaluations it stopped.

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

    fig, ax = new_figure(width=8.5, height=4.6)
    blue, red = COLORS[0], COLORS[1]
    values = np.asarray(held, dtype=float)
    steps = np.arange(1, len(values) + 1)
    on_path = np.zeros(len(values), dtype=bool)
    on_path[[0, *(int(i) - 1 for i in held_accepted)]] = True
    all_rose = True
    for i in np.flatnonzero(~on_path):
        origin = np.flatnonzero(on_path[:i])[-1]  # the last path point before this trial
        all_rose = all_rose and values[i] > values[origin]
        ax.semilogy([steps[origin], steps[i]], [values[origin], values[i]], ":", color="grey", lw=1)
        ax.semilogy([steps[i]], [values[i]], "x", color="grey", ms=8, mew=1.5)
    ax.semilogy(steps[on_path], values[on_path], "-o", color=blue, lw=2, ms=5)
    ax.semilogy(steps[:1], values[:1], "s", color="black", ms=9, mfc="white", mew=1.5, zorder=3)

    seen = np.asarray(leaky, dtype=float)
    taken = np.arange(1, len(seen) + 1)
    filled = np.isin(taken, [1, *leaky_accepted])
    ax.semilogy(taken, seen, "--", color=red, lw=1.5)
    ax.semilogy(taken[filled], seen[filled], "o", color=red, ms=6)
    ax.semilogy(taken[~filled], seen[~filled], "o", color=red, ms=6, mfc="white")
    for k, (step, loss) in enumerate(zip(taken, seen)):
        below = k < len(values) and values[k] > loss  # keep the label off the held run's point
        ax.annotate(f"{k}", (step, loss), textcoords="offset points", xytext=(0, -13 if below else 6),
                    ha="center", fontsize=8, color=red)
    for step, loss, color in ((steps[-1], values[-1], blue), (taken[-1], seen[-1], red)):
        ax.annotate(f"stops after {step} evaluations", (step, loss), textcoords="offset points", xytext=(9, -3),
                    fontsize=9, color=color, fontweight="bold")

    rejected = "trial step rejected (the loss rose), then a shorter one" if all_rose else "trial step rejected"
    handles = [
        ax.plot([], [], "s", color="black", mfc="white", label="start: the same weights for both runs")[0],
        ax.plot([], [], "-o", color=blue, lw=2, label="batch held (one next): the path L-BFGS took")[0],
        ax.plot([], [], ":x", color="grey", label=rejected)[0],
        ax.plot([], [], "--o", color=red, label="next() inside the loss: a new batch at every point (its "
                "number);\nfilled: accepted by L-BFGS, hollow: rejected")[0],
    ]
    ax.legend(handles=handles, loc="upper right", fontsize=9)
    ax.set_xlim(0.5, max(len(values), len(seen)) * 1.4 + 1)  # room for the labels
    low = min(values.min(), seen.min()) / 2
    high = max(values.max(), seen.max()) * 40  # room for the legend above the curves
    ax.set_ylim(low, high)
    ax.set_xlabel("evaluation of the loss (one call of fun)")
    ax.set_ylabel("loss on the batch evaluated (log)")
    ax.set_title("Same start, same L-BFGS: the batch held vs a new batch per evaluation")
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


def ptb_grid(layout: Any) -> Any:
    """The PTB layout as a grid: the stream cut into rows, each ``x`` window coloured by its batch.

    ``layout`` is a :class:`helpers.batching.Layout` (``ptb_layout(n_tokens, batch_size, num_steps)``)
    with at most 6 batches per epoch. A cell holds the token's position in the stream. A coloured band
    over each column of windows names its batch; one long arrow through each row shows the state a
    stateful RNN carries along it, batch after batch; a bracket over row 0 marks its ``y`` in batch 0
    (its ``x`` one token later); the column that is only ever a target is grey, tokens never read are
    crossed out, and both have a band; the tokens the reshape drops are named in the title. A line
    from the end of the windows runs under the grid and back up the left side, with an arrow into the
    start of every row: after the last window every row jumps back to window 0 (reset the state). The
    legend under the grid says why each mark is there. Colours are colour-blind safe.

    >>> from helpers.batching import ptb_layout
    >>> type(ptb_grid(ptb_layout(70, 4, 5))).__name__
    'Figure'
    """
    import matplotlib.pyplot as plt
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
        # the state a stateful RNN carries along the row, from each batch to the next
        ax.annotate("", xy=(last_target - 0.05, s + 0.84), xytext=(0.1, s + 0.84),
                    arrowprops={"arrowstyle": "-|>", "color": "black", "linewidth": 1.4, "mutation_scale": 13})
    # a band over each column of windows names its batch (a column header, not a note)
    band, band_height = -1.55, 0.6
    for k in range(epochs):
        face, ink = _BATCH_COLORS[k]
        box(k * n + 0.05, band, n - 0.1, band_height, face, ink, f"x of batch {k}  (and {k + epochs}, {k + 2 * epochs}, …)")
    box(last_target + 0.05, band, 0.9, band_height, "#d9d9d9", "black", "y\nonly", size=8)
    if length > last_target + 1:
        box(last_target + 1.05, band, length - last_target - 1.1, band_height, "white", "black", "never\nread", size=8)
    # y of batch 0 in row 0: x shifted by one token (a bracket over the row, not a box over the colours)
    ax.plot([1.05, 1.05, n + 0.95, n + 0.95], [-0.08, -0.4, -0.4, -0.08], color="black", linewidth=1.8)
    ax.text(n + 1.2, -0.4, f"y of batch 0 in row 0: tokens 1–{n}, its x one token later "
            f"({n} is also batch 1's first input)", ha="left", va="center", fontsize=9, style="italic")
    # after the last window, every row jumps back to window 0: from the end of the windows, under the grid,
    # up the left side, and into the start of every row
    below, left = b + 0.45, -0.55
    ax.plot([last_target, last_target], [0, b], color="black", linewidth=2.5)
    ax.plot([last_target, last_target, left, left], [b, below, below, 0.5], color="black", linewidth=2)
    for s in range(b):
        ax.annotate("", xy=(-0.02, s + 0.5), xytext=(left, s + 0.5),
                    arrowprops={"arrowstyle": "-|>", "color": "black", "linewidth": 2, "mutation_scale": 14})
    ax.text(last_target / 2, below + 0.45, f"after batch {epochs - 1}, every row jumps back to its start "
            f"(batch {epochs} = window 0 again): reset the state", ha="center", va="center", fontsize=10,
            fontweight="bold")
    ax.set_xlim(left - 0.3, length + 0.2)
    ax.set_ylim(b + 1.3, band - 0.2)
    ax.set_xticks([])
    ax.set_yticks(np.arange(b) + 0.5, [f"row {s}" for s in range(b)])
    ax.tick_params(axis="y", length=0)
    dropped = list(range(b * length, layout.n_tokens))
    cut = ""
    if dropped:
        cut = f" (token {dropped[0]} dropped)" if len(dropped) == 1 else f" (tokens {dropped[0]}–{dropped[-1]} dropped)"
    ax.set_title(f"{layout.n_tokens} tokens cut into {b} rows of {length}{cut}, read {n} at a time", fontsize=12)
    key = [Line2D([], [], color="black", marker=">", markersize=7, linewidth=1.4,
                  label="the state a stateful RNN carries along a row, batch after batch"),
           Patch(facecolor="#d9d9d9", edgecolor="black", label="only ever a target (y): no window after it"),
           (Patch(facecolor="white", edgecolor="black"),
            Line2D([], [], color="#999999", linewidth=1, marker=[(-1, -1), (1, 1)], markersize=10, linestyle=""))]
    labels = [key[0].get_label(), key[1].get_label(),
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


def validation_passes(train_loss: Any, val_curve: list[tuple[int, float]],
                      panels: list[tuple[str, list[list[list[int]]]]], *, examples: int | None = None,
                      panels_title: str | None = None, reads: list[tuple[str, list[int]]] | None = None) -> Any:
    """Notebook 04's picture.

    Top left: ``train_loss`` (one loss per training step, steps counting from 1) as a thin line, the
    validation loss of each full pass (``val_curve``: ``(step, loss)`` pairs, step 0 = before
    training) as red dots labelled with their value, a dotted line at every evaluation; a log loss
    axis with plain tick labels, so that the late, small losses stay apart. ``examples``: the size of
    a pass, for the title.
    Top right, when ``reads`` is given (``(label, batch number read at each step)`` pairs, steps from
    1): which training batch each step read, one line per pair (the first solid, the others dashed),
    with the same dotted lines at the evaluations.
    Bottom, one panel per ``(title, passes)``, each pass a list of batches of example ids: the ids
    each pass read, in order, one cell per example, its batch shown by alternating fills; an id read
    a second time in the same pass is filled red; "empty" marks a pass that read nothing. Each panel
    is as wide as its longest pass. ``panels_title`` heads the bottom row.

    >>> fig = validation_passes([2.0, 1.0, 0.8, 0.7], [(0, 2.5), (2, 1.5), (4, 0.9)],
    ...                         [("cycling", [[[0, 1], [2, 0]], [[1, 2], [0, 1]]]), ("once", [[[0, 1], [2]], []])],
    ...                         examples=3, reads=[("kept", [1, 2, 3, 4]), ("restarted", [1, 2, 1, 2])])
    >>> len(fig.axes), fig.axes[0].get_title()
    (4, 'A full pass over all 3 validation examples at step 0 and every 2 steps')

    Raises ValueError for an empty ``train_loss`` or ``panels``, a panel with no id at all, or a
    ``reads`` line of another length than ``train_loss``.
    """
    apply_style()
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    train = np.asarray(train_loss, dtype=float)
    if train.ndim != 1 or not len(train):
        raise ValueError(f"train_loss must be one loss per training step, got shape {train.shape}")
    if not panels:
        raise ValueError("panels is empty: give at least one (title, passes)")
    for label, numbers in reads or []:
        if len(numbers) != len(train):
            raise ValueError(f"reads[{label!r}] has {len(numbers)} steps, train_loss {len(train)}")
    flat = [[[i for batch in one for i in batch] for one in passes] for _, passes in panels]
    if any(not any(ids for ids in passes) for passes in flat):
        raise ValueError("every panel needs at least one pass that read an id")
    steps = np.arange(1, len(train) + 1)
    evaluated = [step for step, _ in val_curve]

    fig = plt.figure(figsize=(11, 8.2))
    upper, lower = fig.subfigures(2, 1, height_ratios=[1, 0.95])
    upper.subplots_adjust(left=0.07, right=0.98, top=0.88, bottom=0.17, wspace=0.22)
    top_axes = upper.subplots(1, 2 if reads else 1, squeeze=False)[0]
    top = top_axes[0]
    top.plot(steps, train, color=COLORS[0], lw=1.2, label="training loss (one batch per step)")
    if val_curve:
        losses = [loss for _, loss in val_curve]
        top.plot(evaluated, losses, "o-", color=COLORS[1], ms=6, label="validation loss (one full pass)")
        for step, loss in val_curve:
            top.annotate(f"{loss:.2f}", (step, loss), textcoords="offset points", xytext=(9, 6), fontsize=8,
                         color=COLORS[1], bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none"})
    top.set_yscale("log")
    top.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    top.set(xlabel="training step", ylabel="loss (MSE, log scale)")
    top.legend(loc="upper right", fontsize=9)
    pass_size = f"all {examples} validation examples" if examples is not None else "the validation set"
    start = " at step 0 and" if val_curve and val_curve[0][0] == 0 else ""
    every = f"{start} every {val_curve[-1][0] - val_curve[-2][0]} steps" if len(val_curve) > 1 else ""
    top.set_title(f"A full pass over {pass_size}{every}", fontsize=11)
    axes_with_steps = [top]
    if reads:
        right = top_axes[1]
        for number, (label, read) in enumerate(reads):
            right.plot(steps, read, color=COLORS[number % len(COLORS)], lw=1.8 if number == 0 else 1.4,
                       ls="-" if number == 0 else "--", label=label)
        right.set(xlabel="training step", ylabel="batch number in the training stream")
        right.set_ylim(bottom=0)
        right.legend(loc="upper left", fontsize=9)
        right.set_title("Which training batch each step trains on", fontsize=11)
        axes_with_steps.append(right)
    for ax in axes_with_steps:
        for step in evaluated:
            ax.axvline(step, color="0.6", lw=0.6, ls=":", zorder=0)

    widths = [max(1, max(len(ids) for ids in passes)) for passes in flat]
    lower.subplots_adjust(left=0.07, right=0.98, top=0.74, bottom=0.2, wspace=0.08)
    bottom_axes = lower.subplots(1, len(panels), squeeze=False, gridspec_kw={"width_ratios": widths})[0]
    fills = ("#c6dbef", "#fdd9b5")  # alternating: one fill per batch
    for column, ((title, passes), ids_per_pass) in enumerate(zip(panels, flat)):
        ax = bottom_axes[column]
        for row, (one, ids) in enumerate(zip(passes, ids_per_pass)):
            if not ids:
                ax.text((widths[column] - 1) / 2, row, "empty", ha="center", va="center", fontsize=9, color="0.4")
            col = 0
            for batch_number, batch in enumerate(one):
                for value in batch:
                    twice = value in ids[:col]  # read a second time in this pass
                    ax.add_patch(plt.Rectangle((col - 0.5, row - 0.5), 1, 1, lw=2.2 if twice else 0.8,
                                               facecolor="#f4a6a6" if twice else fills[batch_number % 2],
                                               edgecolor=COLORS[1] if twice else "white"))
                    ax.text(col, row, int(value), ha="center", va="center", fontsize=9)
                    col += 1
        ax.set_xlim(-0.5, widths[column] - 0.5)
        ax.set_ylim(len(passes) - 0.5, -0.5)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("position in the pass")
        ax.set_yticks(range(len(passes)), [f"pass {p}" for p in range(1, len(passes) + 1)] if column == 0 else [])
        ax.set_xticks(range(widths[column]))
        ax.tick_params(length=0)
        ax.grid(False)
        for side in ("left", "bottom"):
            ax.spines[side].set_visible(False)
    if panels_title:
        lower.suptitle(panels_title, fontsize=11, y=0.97)
    lower.text(0.5, 0.02, "Each cell: the id of the example read; blue and orange: consecutive batches; "
             "red: an example read a second time in the same pass", ha="center", fontsize=9)
    return fig


# --------------------------------------------------------------------------- 05 network snapshots


def snapshot_lag(curves: dict[str, Any], *, every: int | None = None, level: tuple[float, str] | None = None) -> Any:
    """How many updates a past network is behind the current one when step t uses it: one line per way
    of refreshing it.

    ``curves`` maps a refresh policy's name to its lag at steps 1, 2, …: at the evaluation of step t
    (before that step's sync and update), the distance ``‖current − past‖`` divided by the size of the
    latest update ``‖θ_t − θ_{t−1}‖`` (a copy synced in every step is exactly 1 behind). ``every``
    marks the hard syncs of a periodic copy, made in steps ``every``, ``2 every``, … right after their
    evaluation, with dotted vertical lines half a step later: between the evaluation where the copy is
    furthest behind and the next one, where it is 1 behind. ``level = (value, label)`` draws a dashed
    horizontal reference (a soft copy's ``1/τ``).

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
    fig, ax = new_figure(width=8.0, height=5.0)
    for (name, curve), width in zip(arrays.items(), [2.5, 1.8, 1.8, 1.8, 1.8, 1.8]):
        ax.plot(np.arange(1, curve.size + 1), curve, lw=width, marker="o", ms=2.5, label=name)
    steps = max(curve.size for curve in arrays.values())
    if level is not None:
        ax.axhline(level[0], color="grey", ls="--", lw=1, label=level[1])
    if every is not None:
        for k, t in enumerate(range(every, steps, every)):  # synced in step t, after t's evaluation
            ax.axvline(t + 0.5, color="grey", ls=":", lw=1.2,
                       label=f"sync of the every-{every} copy (between two evaluations)" if k == 0 else "_nolegend_")
    ax.set_xlim(0, steps + 1)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("training step t (B has had t updates)")
    ax.set_ylabel("updates behind\n" r"($\|\theta_t - \theta'\|$ ÷ $\|\theta_t - \theta_{t-1}\|$)")
    ax.set_title("How far behind B is the past network when step t evaluates with it?")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, fontsize=9)
    fig.tight_layout()
    return fig


def snapshot_step_order(steps: int = 2) -> Any:
    """A timeline of the question's training step: in each step B and the past network both evaluate
    A's features into one loss, then the past network takes B's state (weights and BatchNorm
    statistics: the sync), then the optimizer updates A and B; each box shows the weights a network
    holds after that phase (θ_t: B's weights after t updates), the box the phase changes drawn bold.

    A diagram of the order in notebook 05's ``train_step`` (no data): at every evaluation the past
    network holds θ_{t−1} while B holds θ_t.

    >>> fig = snapshot_step_order(2)
    >>> [t.get_text().split()[0] for t in fig.axes[0].texts if t.get_text().startswith(("evaluate", "sync", "update"))][:3]
    ['evaluate', 'sync:', 'update']
    """
    from matplotlib.patches import FancyBboxPatch

    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= 4:
        raise ValueError(f"steps must be an int from 1 to 4, got {steps!r}")

    def theta(k: int) -> str:
        return r"$\theta_{t}$" if k == 0 else rf"$\theta_{{t{k:+d}}}$"

    fig, ax = new_figure(width=2.4 + 4.0 * steps, height=2.9)
    rows = {"B (trained)": 1.0, "past B (frozen copy)": 0.0}
    gap, width = 1.8, 5.8  # between phases, between steps
    for k in range(steps):
        phases = [("evaluate both\non A(x): one loss", (k, k - 1), None),
                  ("sync: past B ← B\n(weights + BN stats)", (k, k), "past B (frozen copy)"),
                  ("update A and B\n(not past B)", (k + 1, k), "B (trained)")]
        for j, (phase, held, changed) in enumerate(phases):
            x = width * k + gap * j
            ax.text(x, 1.6, phase, ha="center", va="center", fontsize=9.5, linespacing=1.3)
            for (row, y), version in zip(rows.items(), held):
                bold = row == changed
                ax.add_patch(FancyBboxPatch((x - 0.45, y - 0.2), 0.9, 0.4, boxstyle="round,pad=0.02",
                                            fc=COLORS[0] if y else COLORS[3], alpha=0.4 if bold else 0.15,
                                            ec="black", lw=1.8 if bold else 0.6))
                ax.text(x, y, theta(version), ha="center", va="center", fontsize=13)
            if phase.startswith("sync"):
                ax.annotate("", xy=(x, 0.22), xytext=(x, 0.78), arrowprops={"arrowstyle": "-|>", "lw": 1.5})
        ax.text(width * k + gap, 2.1, "step t" if k == 0 else f"step t + {k}", ha="center", va="center",
                fontsize=11, fontweight="bold")
        if k:
            x = width * k - (width - 2 * gap) / 2
            ax.plot([x, x], [-0.3, 2.2], color="grey", lw=0.8, ls="--")
    for row, y in rows.items():
        ax.text(-0.7, y, row, ha="right", va="center", fontsize=10)
    ax.text(width * (steps - 1) / 2 + gap, -0.5, r"bold box: the network that phase changes;  $\theta_t$: B's weights after t updates", ha="center", va="center", fontsize=9, color="dimgrey")
    ax.set_xlim(-2.9, width * (steps - 1) + 2 * gap + 0.7)
    ax.set_ylim(-0.65, 2.3)
    ax.axis("off")
    ax.set_title("At every evaluation, past B holds the weights B had one update earlier", fontsize=11)
    fig.tight_layout()
    return fig
