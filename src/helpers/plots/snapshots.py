"""Notebook 05's figures (05 network snapshots); :mod:`helpers.plots` re-exports them."""

from __future__ import annotations

from typing import Any

import numpy as np

from helpers.plots._style import COLORS, new_figure

__all__ = ["snapshot_lag", "snapshot_step_order", "snapshot_targets"]


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


def snapshot_targets(errors: dict[str, Any]) -> Any:
    """What a target network buys in value learning with bootstrapped targets: the error of the value
    network against the exact values after each training step, one line per run.

    ``errors`` maps a run's name to its errors after steps 1, 2, …: one sequence, or one row per start
    (seed) of equal length. With several starts the line is their mean and a shaded band spans the
    lowest to the highest; the legend says how many starts there were. The y-axis starts at 0.

    >>> import numpy as np
    >>> fig = snapshot_targets({"no copy": np.ones((3, 20)), "hard copy": 1 / (1 + np.arange(20))})
    >>> [line.get_label() for line in fig.axes[0].get_lines()]
    ['no copy (mean of 3 starts)', 'hard copy']
    """
    if not errors:
        raise ValueError("errors must hold at least one run")
    curves = {}
    for name, given in errors.items():
        curve = np.asarray(given, dtype=float)
        if curve.ndim == 1:
            curve = curve[None, :]
        if curve.ndim != 2 or curve.size == 0:
            raise ValueError(f"errors[{name!r}] must be a non-empty sequence, or one row per start, got shape {curve.shape}")
        curves[name] = curve
    fig, ax = new_figure(width=9.0, height=4.6)
    for k, (name, curve) in enumerate(curves.items()):
        steps = np.arange(1, curve.shape[1] + 1)
        starts = curve.shape[0]
        label = name if starts == 1 else f"{name} (mean of {starts} starts)"
        ax.plot(steps, curve.mean(axis=0), color=COLORS[k], lw=2.0, label=label)
        if starts > 1:
            ax.fill_between(steps, curve.min(axis=0), curve.max(axis=0), color=COLORS[k], alpha=0.18, lw=0)
    ax.set_ylim(bottom=0)
    ax.set_xlim(0, max(curve.shape[1] for curve in curves.values()) + 1)
    ax.set_xlabel("training step")
    ax.set_ylabel("error of the values (RMS)")
    ax.set_title("How far the learned values are from the exact ones (lower is better)")
    several = any(curve.shape[0] > 1 for curve in curves.values())
    ax.legend(loc="upper right", fontsize=9.5, title="shaded: lowest to highest start" if several else None,
              title_fontsize=9)
    fig.tight_layout()
    return fig
