"""Notebook 05's figures (05 network snapshots); :mod:`helpers.plots` re-exports them."""

from __future__ import annotations

from typing import Any

import numpy as np

from helpers.plots._style import COLORS, new_figure

__all__ = ["snapshot_labels", "snapshot_lag", "snapshot_mean_teacher", "snapshot_ring", "snapshot_step_order",
           "snapshot_targets", "snapshot_teacher_curves", "snapshot_teacher_step"]


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


def snapshot_ring(states: Any, rewards: Any, *, arrows: int = 4, gamma: float = 0.9) -> Any:
    """Notebook 05's data at a glance: the points on a circle, each coloured by its reward, and an arrow
    from the first ``arrows`` points to the point each moves to (the next one around the circle).

    ``states`` holds one (x, y) point per row, ``rewards`` one reward per point (any shape of that size).
    The title says how a point's label is made (``gamma`` is the discount written there).

    >>> import numpy as np
    >>> angles = 2 * np.pi * np.arange(8) / 8
    >>> fig = snapshot_ring(np.stack([np.cos(angles), np.sin(angles)], axis=1), np.arange(8.0), arrows=2)
    >>> sum(type(t).__name__ == "Annotation" for t in fig.axes[0].texts)  # one arrow per point asked for
    2
    """
    points = np.asarray(states, dtype=float)
    reward = np.asarray(rewards, dtype=float).reshape(-1)
    if points.ndim != 2 or points.shape[1] != 2 or points.shape[0] < 2:
        raise ValueError(f"states must be (points, 2) with at least 2 points, got shape {points.shape}")
    if reward.size != points.shape[0]:
        raise ValueError(f"rewards must hold one reward per point ({points.shape[0]}), got {reward.size}")
    if isinstance(arrows, bool) or not isinstance(arrows, int) or not 0 <= arrows <= points.shape[0]:
        raise ValueError(f"arrows must be a number of points from 0 to {points.shape[0]}, got {arrows!r}")
    fig, ax = new_figure(width=5.6, height=4.6)
    limit = float(np.abs(reward).max()) or 1.0
    dots = ax.scatter(points[:, 0], points[:, 1], c=reward, cmap="coolwarm", vmin=-limit, vmax=limit, s=70,
                      edgecolors="black", linewidths=0.5, zorder=3)
    fig.colorbar(dots, ax=ax, shrink=0.8, label="reward of the point")
    for i in range(arrows):
        ax.annotate("", xy=points[(i + 1) % len(points)] * 1.18, xytext=points[i] * 1.18,
                    arrowprops=dict(arrowstyle="->", color="black", lw=1.3, connectionstyle="arc3,rad=0.25"))
    ax.text(*(points[0] * 1.42), "point 0", ha="center", va="center", fontsize=9)
    ax.set_aspect("equal")
    ax.set_xlim(-1.6, 1.6)
    ax.set_ylim(-1.45, 1.45)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.grid(False)
    for side in ax.spines.values():
        side.set_visible(False)
    ax.set_title(f"{len(points)} points on a circle; arrows: to the next point\n"
                 f"label = own reward + {gamma:g} × prediction for the next point", fontsize=11)
    fig.tight_layout()
    return fig


def snapshot_step_order() -> Any:
    """A timeline of one training step with a past copy, and the next step's evaluation: B and past B
    evaluate on the same input into one loss, ``sync()`` copies B into past B, ``apply_gradients`` moves
    B. (``tape.gradient``, between the evaluation and the sync, changes neither row, so it has no
    column.) Each column shows which weights a row holds after that call (θ_t: B's weights after t
    updates, so step t starts from θ_t); past B holds θ_{t−1} at the evaluation, θ_0 in step 0 (the copy
    starts equal, as there is no earlier B). Under the sync, a note says what past B holds then:
    B's weights from before the update, and BatchNorm's moving statistics as this step's evaluation (B
    with ``training=True``) left them. What a call changes is boxed, the rest grey; the legend says both. A
    boxed note says when a Callback runs (before a step or after ``apply_gradients``, never between them)
    and what that gives, self-contained: its sync leaves past B equal to B (the notebook's Callback cell
    prints the same, measured).

    >>> fig = snapshot_step_order()
    >>> calls = ("evaluate", "tape.gradient", "sync()", "apply_gradients")
    >>> [t.get_text().splitlines()[0] for t in fig.axes[0].texts if t.get_text().startswith(calls)]
    ['evaluate', 'sync()', 'apply_gradients', 'evaluate']
    """
    from matplotlib.lines import Line2D
    from matplotlib.patches import FancyBboxPatch, Patch

    fig, ax = new_figure(width=10.0, height=4.7)
    theta = {-1: r"$\theta_{t-1}$", 0: r"$\theta_{t}$", 1: r"$\theta_{t+1}$"}
    rows = {"B (trained)": (2.0, COLORS[0]), "past B (the copy)": (0.9, COLORS[3])}
    columns = [  # (x, header, B holds, past B holds, which row the call changes)
        (0.0, "evaluate\nB and past B: one loss", 0, -1, None),
        (3.0, "sync()\npast B takes B's variables", 0, 0, "past B (the copy)"),
        (5.6, "apply_gradients\nB moves", 1, 0, "B (trained)"),
        (8.4, "evaluate\n(next step)", 1, 0, None)]
    for x, header, b_holds, past_holds, changed in columns:
        ax.text(x, 2.85, header, ha="center", va="center", fontsize=9.5, linespacing=1.3)
        for (row, (y, color)), version in zip(rows.items(), (b_holds, past_holds)):
            if row == changed:
                ax.add_patch(FancyBboxPatch((x - 0.5, y - 0.2), 1.0, 0.4, boxstyle="round,pad=0.02",
                                            fc=color, alpha=0.5, ec="black", lw=1.6))
            ax.text(x, y, theta[version], ha="center", va="center", fontsize=13,
                    color="black" if row == changed else "grey")
    ax.annotate("", xy=(3.0, 1.13), xytext=(3.0, 1.77), arrowprops={"arrowstyle": "-|>", "lw": 1.5})
    ax.text(0.0, 0.5, "in step 0: $\\theta_0$\n(the copy starts equal:\nthere is no earlier B)", ha="center", va="center",
            fontsize=8.5, color="#555555", linespacing=1.25)
    ax.text(3.0, 0.37, "B's weights from before the update\n(BatchNorm's statistics: as this\nstep's evaluation left them)",
            ha="center", va="center", fontsize=8.5, color="#333333", linespacing=1.25)
    ax.text(8.4, 0.5, "one update behind B", ha="center", va="center", fontsize=9, fontweight="bold",
            color=COLORS[3])
    ax.plot([7.0, 7.0], [0.3, 3.15], color="grey", lw=0.8, ls="--")
    ax.text(2.8, 3.35, r"step t (starts from $\theta_t$)", ha="center", va="center", fontsize=11, fontweight="bold")
    ax.text(8.4, 3.35, "step t + 1", ha="center", va="center", fontsize=11, fontweight="bold")
    for row, (y, _) in rows.items():
        ax.text(-0.9, y, row, ha="right", va="center", fontsize=10.5)
    key = [Line2D([], [], ls="none", label=r"$\theta_t$: B's weights after t updates (steps count from 0)"),
           Patch(fc="#dddddd", ec="black", lw=1.6, label="boxed: what this call changes"),
           Line2D([], [], ls="none", marker=r"$\theta$", ms=9, color="grey", label="grey: unchanged by this call")]
    ax.legend(handles=key, loc="lower left", bbox_to_anchor=(0.0, 0.1), ncol=3, fontsize=9, frameon=False,
              handlelength=1.0, handletextpad=0.3, columnspacing=2.0)
    ax.text(-3.0, -0.6, "A Callback runs only before a step or after apply_gradients, never between them: "
            "its sync leaves past B equal to B, not one update behind.", ha="left", va="center", fontsize=10,
            bbox={"boxstyle": "round,pad=0.4", "fc": "#fff4e5", "ec": COLORS[3]})
    ax.set_xlim(-3.0, 9.7)
    ax.set_ylim(-0.85, 3.55)
    ax.axis("off")
    ax.set_title("At every evaluation past B is one update behind B", fontsize=12)
    fig.tight_layout()
    return fig


def snapshot_targets(errors: dict[str, Any], *, syncs: tuple[str, int] | None = None,
                     title: str | None = None) -> Any:
    """What a target network buys in value learning with bootstrapped targets: the error of the value
    network against the exact values at each training step, one line per run.

    ``errors`` maps a run's name to its errors at steps 0, 1, 2, … (step t: after t updates, as
    ``optimizer.iterations`` counts): one sequence, or one row per start (seed) of equal length. With
    several starts each start is a thin line and the run's mean a thick one; the subtitle says how many
    starts there were (or that there was one). ``syncs = (name, every)`` marks with ticks along the
    bottom, in that run's colour, the steps ``0``, ``every``, ``2 every``, … in which the run named
    ``name`` syncs its copy (``optimizer.iterations % every == 0``); the legend names them as that run's
    syncs. ``title`` is the first line of the title (what to see); by default it says what is plotted.
    The y-axis runs from 0 to just above the highest line; the legend sits below the axes.

    >>> import numpy as np
    >>> fig = snapshot_targets({"no copy": np.ones((3, 20)), "hard copy": 1 / (1 + np.arange(20))},
    ...                        syncs=("hard copy", 10))
    >>> [line.get_label() for line in fig.axes[0].get_lines() if not line.get_label().startswith("_")]
    ['no copy', 'hard copy', 'ticks: syncs of the hard copy (steps 0, 10, 20, ...)']
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
    _check_syncs(syncs, curves, "errors")
    fig, ax = new_figure(width=9.0, height=4.8)
    steps = max(curve.shape[1] for curve in curves.values())
    for k, (name, curve) in enumerate(curves.items()):
        x = np.arange(curve.shape[1])
        if curve.shape[0] > 1:
            for row in curve:
                ax.plot(x, row, color=COLORS[k], lw=0.8, alpha=0.45, label="_start")
        ax.plot(x, curve.mean(axis=0), color=COLORS[k], lw=2.2, label=name)
    if syncs is not None:
        _sync_ticks(ax, syncs, list(curves), steps, 0.0, ms=14, mew=2)
    starts = {curve.shape[0] for curve in curves.values()}
    highest = max(float(curve.max()) for curve in curves.values())
    ax.set_ylim(0, 1.05 * highest if highest > 0 else 1.0)
    ax.set_xlim(-2, steps + 1)
    ax.set_xlabel("training step t")
    ax.set_ylabel("RMS error against the exact values")
    first = title if title is not None else "How far the learned values are from the exact ones"
    if starts != {1}:
        count = max(starts)
        second = f"(lower is better; {count} starts per run: thin lines, thick: their mean)"
    else:
        second = "(lower is better; one start per run)"
    ax.set_title(f"{first}\n{second}")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=2, fontsize=9.5)
    fig.tight_layout()
    return fig


def snapshot_labels(labels: dict[str, Any], *, exact: float, syncs: tuple[str, int] | None = None,
                    steps: int | None = None, point: int = 0, note: str | None = None) -> Any:
    """The label one point gets at each training step, one line per run: where a target network's labels
    stand still and a network's own labels move.

    ``labels`` maps a run's name to the label of point ``point`` at steps 0, 1, 2, ... (the label step t
    trains on). The run named in ``syncs`` is drawn as steps (its label holds between syncs: the
    staircase is the target network's), every other run as a plain line, in the colours
    :func:`snapshot_targets` gives the same runs in the same order. ``exact`` (the point's exact value,
    which the labels should approach) is a dashed grey line. ``syncs = (name, every)`` marks with ticks
    along the bottom, in that run's colour, the steps 0, ``every``, ``2 every``, ... in which the run
    named ``name`` syncs its copy. ``steps`` shows the first ``steps`` steps only. The legend sits below
    the axes. ``note`` (optional) is written in small grey text in the lower right corner of the axes.

    >>> import numpy as np
    >>> fig = snapshot_labels({"no copy": np.linspace(0, 1, 30), "hard copy": np.repeat([0.0, 0.5, 0.9], 10)},
    ...                       exact=1.0, syncs=("hard copy", 10))
    >>> [line.get_label() for line in fig.axes[0].get_lines()][:3]
    ['no copy', 'hard copy', 'exact value of point 0']
    """
    if not labels:
        raise ValueError("labels must hold at least one run")
    curves = {}
    for name, given in labels.items():
        curves[name] = np.asarray(given, dtype=float)
        if curves[name].ndim != 1 or curves[name].size == 0:
            raise ValueError(f"labels[{name!r}] must be a non-empty 1-D sequence, got shape {curves[name].shape}")
    if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 1):
        raise ValueError(f"steps must be a positive number of steps, got {steps!r}")
    _check_syncs(syncs, curves, "labels")
    shown = min(max(curve.size for curve in curves.values()), steps or 10**9)
    fig, ax = new_figure(width=9.0, height=4.6)
    for k, (name, curve) in enumerate(curves.items()):
        curve = curve[:shown]
        if syncs is not None and name == syncs[0]:  # its label holds between syncs: a staircase
            ax.step(np.arange(curve.size), curve, where="post", color=COLORS[k], lw=2.0, label=name)
        else:
            ax.plot(np.arange(curve.size), curve, color=COLORS[k], lw=2.0, label=name)
    ax.axhline(float(exact), color="grey", ls="--", lw=1.2, label=f"exact value of point {point}")
    low = min(float(exact), *(float(c[:shown].min()) for c in curves.values()))
    high = max(float(exact), *(float(c[:shown].max()) for c in curves.values()))
    pad = 0.08 * (high - low if high > low else 1.0)
    ax.set_ylim(low - 2 * pad, high + pad)
    if syncs is not None:
        _sync_ticks(ax, syncs, list(curves), shown, low - 2 * pad, ms=9, mew=1.2, alpha=0.55)
    ax.set_xlim(-1, shown)
    ax.set_xlabel("training step t")
    ax.set_ylabel(f"label for point {point}\n(reward + 0.9 × next-point guess)")
    if note:
        ax.text(0.99, 0.03, note, transform=ax.transAxes, ha="right", va="bottom", fontsize=9, color="dimgrey")
    ax.set_title(f"The label point {point} trains on, step by step\n"
                 "(a target network's stands still between syncs; the network's own moves at every step)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=2, fontsize=9.5)
    fig.tight_layout()
    return fig


def _check_syncs(syncs: tuple[str, int] | None, curves: dict[str, Any], given: str) -> None:
    """Refuse a ``syncs = (name, every)`` that names no run in ``curves`` (the argument called ``given``) or
    whose interval is not a positive number of steps."""
    if syncs is None:
        return
    if syncs[0] not in curves:
        raise ValueError(f"syncs names a run that is not in {given}: {syncs[0]!r}")
    if isinstance(syncs[1], bool) or not isinstance(syncs[1], int) or syncs[1] < 1:
        raise ValueError(f"syncs' interval must be a positive number of steps, got {syncs[1]!r}")


def _sync_ticks(ax: Any, syncs: tuple[str, int], names: list[str], steps: int, y: float, **style: Any) -> None:
    """Ticks at height ``y`` on the steps 0, every, 2 every, ... below ``steps`` in which the run ``syncs[0]``
    syncs its copy, in that run's colour, labelled for the legend."""
    name, every = syncs
    ticks = np.arange(0, steps, every)
    ax.plot(ticks, np.full(ticks.shape, y), ls="none", marker="|", color=COLORS[names.index(name)], clip_on=False,
            label=f"ticks: syncs of the {name.split(',')[0]} (steps 0, {every}, {2 * every}, ...)", **style)


def snapshot_mean_teacher(predict: dict[str, Any], x_labeled: Any, y_labeled: Any, x_unlabeled: Any, *,
                          grid: int = 150) -> Any:
    """One panel per model in ``predict`` (title: its key; value: a function from points ``(n, 2)`` to one score
    per class ``(n, 2)``): the plane shaded by the class the model predicts (class 0 blue, class 1 red), the
    unlabeled points faint grey, the labeled points as large markers in their class's colour. Made for
    notebook 05's mean teacher: labels only against labels plus the teacher, where the boundary follows the
    gap between the two moons only with the teacher.

    >>> import numpy as np
    >>> left = lambda x: np.stack([x[:, 0], -x[:, 0]], axis=1)  # class 0 where x < 0
    >>> fig = snapshot_mean_teacher({"a": left, "b": left}, np.zeros((2, 2)), np.array([0, 1]), np.zeros((5, 2)))
    >>> [ax.get_title() for ax in fig.axes]
    ['a', 'b']
    """
    from matplotlib.colors import ListedColormap
    from matplotlib.lines import Line2D

    if not predict:
        raise ValueError("predict is empty: give at least one model, as {title: function}")
    x_labeled, y_labeled = np.asarray(x_labeled, "float32"), np.asarray(y_labeled)
    x_unlabeled = np.asarray(x_unlabeled, "float32")
    if x_labeled.ndim != 2 or x_labeled.shape[1] != 2 or len(x_labeled) != len(y_labeled):
        raise ValueError(f"x_labeled must be (n, 2) with one label each, got {x_labeled.shape} and {y_labeled.shape}")
    if x_unlabeled.ndim != 2 or x_unlabeled.shape[1] != 2:
        raise ValueError(f"x_unlabeled must be (n, 2), got {x_unlabeled.shape}")
    points = np.concatenate([x_labeled, x_unlabeled])
    (x0, y0), (x1, y1) = points.min(axis=0) - 0.3, points.max(axis=0) + 0.3
    gx, gy = np.meshgrid(np.linspace(x0, x1, grid), np.linspace(y0, y1, grid))
    plane = np.stack([gx.ravel(), gy.ravel()], axis=1).astype("float32")
    fig, axes = new_figure(len(predict), width=4.6 * len(predict), height=3.9)
    axes = np.atleast_1d(axes)
    shades = ListedColormap(["#c6dbef", "#fcbba1"])  # light blue (class 0), light red (class 1)
    for ax, (title, fn) in zip(axes, predict.items()):
        cls = np.argmax(np.asarray(fn(plane)), axis=1).reshape(gx.shape)
        ax.contourf(gx, gy, cls, levels=[-0.5, 0.5, 1.5], cmap=shades)
        ax.scatter(*x_unlabeled.T, s=4, color="0.45", alpha=0.35, linewidths=0)
        for c, colour, marker in ((0, COLORS[0], "o"), (1, COLORS[1], "s")):
            ax.scatter(*x_labeled[y_labeled == c].T, s=110, color=colour, marker=marker, edgecolors="black",
                       linewidths=1.2, zorder=3)
        ax.set_title(title)
        ax.set_xticks([]), ax.set_yticks([])
        ax.grid(False)
    handles = [Line2D([], [], ls="", marker="o", ms=9, color=COLORS[0], mec="black", label="labeled, class 0"),
               Line2D([], [], ls="", marker="s", ms=9, color=COLORS[1], mec="black", label="labeled, class 1"),
               Line2D([], [], ls="", marker="o", ms=4, color="0.45", alpha=0.5, label="unlabeled")]
    fig.legend(handles=handles, loc="lower center", ncol=3, bbox_to_anchor=(0.5, -0.02))
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig


def snapshot_teacher_curves(student: Any, teacher: Any, *, labels_only: Any = None, tau: float | None = None,
                            every: int = 1, ramp_steps: int | None = None) -> Any:
    """Test accuracy after each training step of a mean teacher: the student (thin), the teacher (thick) and,
    if given, the same model trained on the labels only (grey). Made for notebook 05: the teacher, a soft copy
    of the student, draws the student's curve smoothed and a few steps behind. ``tau`` (the soft sync's rate), if
    given, shades the first 1/τ steps and says why the teacher starts low there: it starts as the student's random
    start and moves τ of the way per step, so it lags about 1/τ steps; ``ramp_steps`` (with ``tau``), if given, adds
    that the consistency weight ramps up from 0 over those first steps too. ``every``: the steps between two points (a
    ``fit`` History with ``steps_per_epoch=every`` has one point per epoch); point k is drawn at step k·every.

    >>> fig = snapshot_teacher_curves([0.5, 0.9, 0.8], [0.5, 0.7, 0.8], labels_only=[0.5, 0.8, 0.8])
    >>> [line.get_label() for line in fig.axes[0].get_lines()]
    ['labels only', 'student (trained)', 'teacher (soft copy of the student)']
    """
    runs = {"labels only": labels_only, "student (trained)": student, "teacher (soft copy of the student)": teacher}
    runs = {name: np.asarray(curve, dtype=float) for name, curve in runs.items() if curve is not None}
    for name, curve in runs.items():
        if curve.ndim != 1 or curve.size == 0:
            raise ValueError(f"{name.split(' (')[0]} must be a non-empty 1-D sequence of accuracies, got shape {curve.shape}")
    if len({curve.size for curve in runs.values()}) != 1:
        raise ValueError(f"the curves must have one value per step each, got lengths {[c.size for c in runs.values()]}")
    if not (isinstance(every, int) and every >= 1):
        raise ValueError(f"every must be a positive int (steps between two points), got {every!r}")
    fig, ax = new_figure(width=9.0, height=4.0)
    style = {"labels only": dict(color="0.55", lw=1.5), "student (trained)": dict(color=COLORS[0], lw=0.9),
             "teacher (soft copy of the student)": dict(color=COLORS[3], lw=2.6)}
    for name, curve in runs.items():
        ax.plot(every * np.arange(1, curve.size + 1), curve, label=name, **style[name])
    low = min(float(curve.min()) for curve in runs.values())
    ax.set_ylim(min(0.5, low - 0.02), 1.0)
    if tau is not None:
        if not 0 < tau <= 1:
            raise ValueError(f"tau must be in (0, 1], got {tau!r}")
        ax.axvspan(0, 1 / tau, color=COLORS[3], alpha=0.12, lw=0)
        ax.text(1 / tau + 4, min(0.5, low - 0.02) + 0.06,
                f"shaded, the first 1/τ = {1 / tau:.0f} steps: the teacher starts as the student's random start\n"
                f"and moves τ = {tau:g} of the way per step, so it lags about {1 / tau:.0f} steps"
                + ("" if ramp_steps is None else
                   f";\nthe consistency weight ramps up from 0 over the "
                   f"{'same ' if ramp_steps == round(1 / tau) else 'first '}{ramp_steps} steps"),
                ha="left", va="bottom", fontsize=9.5, color="#333333")
    ax.set_xlim(0, every * curve.size + 1)
    ax.set_xlabel("training step")
    ax.set_ylabel("test accuracy")
    when = "after each step" if every == 1 else f"every {every} steps"
    ax.set_title(f"Test accuracy {when}: the teacher is the student smoothed, a few steps behind")
    ax.legend(loc="center right")  # the lower left holds the note on 1/τ
    fig.tight_layout()
    return fig


def snapshot_teacher_step() -> Any:
    """The data flow of one mean-teacher step, in its three numbered parts: (1) the batch goes through the
    student and the frozen teacher into one loss, the teacher's output behind ``tf.stop_gradient`` (the student's
    target: dashed, no gradient flows back through it); only the unlabeled points are shifted; (2) ``tape.gradient`` and ``apply_gradients`` move the student
    only; (3) the soft sync moves the teacher τ of the way toward the student: a copy of weights, not data, so
    its arrow is dotted and labelled "weights". The step numbers sit along the flow in reading order (1 at the top
    left, 2 at the top right, 3 on the sync arrow). Made for notebook 05's ``TeacherLearner``.

    >>> fig = snapshot_teacher_step()
    >>> sorted(t.get_text().splitlines()[0] for t in fig.axes[0].texts if t.get_text()[:2] in ("1.", "2.", "3."))
    ['1. evaluate', '2. update the student', '3. soft sync, after the update']
    """
    fig, ax = new_figure(width=10.0, height=4.3)
    boxes = {  # name: (x, y, text, colour)
        "batch": (0.0, 1.5, "a batch\n6 labeled (x, y)\n64 unlabeled x", "#eeeeee"),
        "student": (3.4, 2.6, "student\n(trained)", COLORS[0]),
        "teacher": (3.4, 0.4, "teacher\n(frozen)", COLORS[3]),
        "loss": (7.5, 1.5, "loss =\ncross-entropy on the labels\n+ weight × mean of\n(target − prediction)²", "#eeeeee"),
    }
    for x, y, text, colour in boxes.values():
        ax.text(x, y, text, ha="center", va="center", fontsize=10, linespacing=1.3,
                bbox={"boxstyle": "round,pad=0.5", "fc": colour, "alpha": 0.35 if colour != "#eeeeee" else 1.0,
                      "ec": "black"})

    def arrow(start, end, ls="-", bend=0.0, color="black"):
        ax.annotate("", xy=end, xytext=start, arrowprops={"arrowstyle": "-|>", "lw": 1.6, "ls": ls,
                                                          "connectionstyle": f"arc3,rad={bend}", "color": color})

    def note(x, y, text, color="#333333", bold=False, ha="center"):
        ax.text(x, y, text, ha=ha, va="center", fontsize=9.5 if bold else 8.5, color=color, linespacing=1.2,
                fontweight="bold" if bold else "normal")

    arrow((0.75, 1.8), (2.75, 2.55))  # the batch into the student
    note(1.45, 2.55, "labeled x as they are;\nunlabeled x + a random shift")
    arrow((0.75, 1.2), (2.75, 0.45))  # the unlabeled points into the teacher
    note(1.45, 0.45, "unlabeled x\n+ another shift")
    arrow((4.05, 2.5), (6.4, 1.8))
    note(5.35, 2.45, "prediction\n(class probabilities)")
    arrow((4.05, 0.5), (6.4, 1.2), ls="--")  # the target: no gradient back through it
    note(5.3, 0.4, "target: tf.stop_gradient\n(no gradient back)")
    note(1.2, 3.3, "1. evaluate\nthe batch, through both", bold=True)
    arrow((7.5, 2.05), (4.05, 2.85), bend=0.3, color=COLORS[0])
    note(7.1, 3.3, "2. update the student\ntape.gradient → apply_gradients", color=COLORS[0], bold=True)
    arrow((3.4, 2.2), (3.4, 0.8), ls=":", color=COLORS[3])  # a weight copy, not data: dotted
    note(3.3, 1.5, "weights", color=COLORS[3], ha="right")
    note(3.55, 1.62, "3. soft sync, after the update", color=COLORS[3], bold=True, ha="left")
    note(3.55, 1.3, "teacher ← τ·student + (1 − τ)·teacher", color=COLORS[3], ha="left")
    ax.set_xlim(-0.8, 9.0)
    ax.set_ylim(0.0, 3.6)
    ax.axis("off")
    ax.set_title("One mean-teacher step (TeacherLearner.train_step)", fontsize=12)
    fig.tight_layout()
    return fig
