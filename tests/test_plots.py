"""Smoke tests: every figure function draws from small data and returns a Figure.

Each topic adds one test per figure function in its section below.
"""

import math

import matplotlib

matplotlib.use("Agg")

from helpers import plots  # noqa: E402


def test_new_figure_gives_styled_axes():
    fig, axes = plots.new_figure(2, width=6, height=3)
    assert len(axes) == 2 and tuple(fig.get_size_inches()) == (6.0, 3.0)


# --------------------------------------------------------------------------- 01 queue decoupling

import numpy as np  # noqa: E402
import pytest  # noqa: E402


def _marks(ax):
    """x positions of every drawn marker, by marker symbol (legend proxies have no data)."""
    marks = {}
    for line in ax.lines:
        if line.get_marker() not in ("None", None, "") and len(line.get_xdata()):
            marks.setdefault(line.get_marker(), []).extend(float(v) for v in line.get_xdata())
    return marks


def test_held_vs_leaky_draws_both_runs_alike_and_labels_each_leaky_batch():
    # held: start 133, a rejected trial 430, accepted 3.6, 3.1, 0.1; leaky: 133 (batch 0), 258 rejected, 2.0 accepted
    fig = plots.held_vs_leaky([133.0, 430.0, 3.6, 3.1, 0.1], [3, 4, 5], [133.0, 258.0, 2.0], [3])
    (ax,) = fig.axes
    assert ax.get_yscale() == "log"
    marks = _marks(ax)
    assert marks["s"] == [1] and marks["x"] == [2, 2]  # the start; one marker style for every rejected trial

    def drawn(style):
        return [(list(line.get_xdata()), line.get_color()) for line in ax.lines
                if line.get_linestyle() == style and len(line.get_xdata())]

    blue, red = plots.COLORS[:2]
    assert drawn("-") == [([1, 3, 4, 5], blue), ([1, 3], red)]  # each path joins only the start and accepted points
    assert drawn(":") == [([1, 2], blue), ([1, 2], red)]  # a rejected trial, joined to the point it was tried from
    assert drawn("--") == []
    texts = {t.get_text(): t for t in ax.texts}
    assert set(texts) == {"batch 0", "batch 1", "batch 2", "stops after 5 evaluations", "stops after 3 evaluations",
                          "rejected: loss rose"}  # the held run's rejected trial says why
    # a label goes under its point when the held run's point at that evaluation is above it (430 > 258, 3.6 > 2.0)
    assert texts["batch 1"].xyann[1] < 0 and texts["batch 2"].xyann[1] < 0 and texts["batch 0"].xyann[1] > 0
    assert all(texts[f"batch {k}"].get_fontsize() >= 9 for k in range(3))  # readable at notebook width
    low, high = ax.get_ylim()
    assert 0.1 / 3 < low <= 0.1 and 430.0 <= high < 430.0 * 3  # every point on the scale, no empty decade
    assert ax.get_xlim()[1] == 5.5  # the x axis ends at the last evaluation
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert len(legend) == 3 and not any("\n" in t for t in legend) and legend[2].endswith("(its loss rose)")


def test_held_vs_leaky_points_at_a_rise_between_accepted_points_of_the_leaky_run():
    fig = plots.held_vs_leaky([133.0, 3.6, 0.1], [2, 3], [133.0, 258.0, 2.0, 8.1], [3, 4])
    (rise,) = [t for t in fig.axes[0].texts if "'converged'" in t.get_text()]
    assert rise.get_text().startswith("from batch 2 to batch 3:\n") and "rose 2.00 → 8.10" in rise.get_text()
    assert 3 < rise.xy[0] < 4 and 2.0 < rise.xy[1] < 8.1  # the arrow ends on the rising segment
    assert not [line for line in fig.axes[0].lines if line.get_linestyle() == "--"]  # no points: a real step
    fig = plots.held_vs_leaky([133.0, 3.6, 0.1], [2, 3], [133.0, 258.0, 2.0, 1.5], [3, 4])  # no rise: no arrow
    assert not [t for t in fig.axes[0].texts if "'converged'" in t.get_text()]


def test_held_vs_leaky_says_when_the_rise_happened_at_the_same_weights():
    points = [np.zeros(2), np.ones(2), np.full(2, 0.5), np.full(2, 0.5)]  # evaluation 4 is evaluation 3's point
    fig = plots.held_vs_leaky([133.0, 3.6, 0.1], [2, 3], [133.0, 258.0, 2.0, 8.1], [3, 4], points)
    (rise,) = [t for t in fig.axes[0].texts if "'converged'" in t.get_text()]
    assert rise.get_text().startswith("same weights, new batch:\n") and "rose 2.00 → 8.10" in rise.get_text()
    dashed = [list(line.get_xdata()) for line in fig.axes[0].lines if line.get_linestyle() == "--"]
    assert dashed == [[3, 4]]  # drawn unlike an accepted step: only the batch changed
    assert rise.xy[0] == 3.5  # the arrow points at that segment
    points[3] = np.full(2, 0.6)  # a real step: the plain wording
    fig = plots.held_vs_leaky([133.0, 3.6, 0.1], [2, 3], [133.0, 258.0, 2.0, 8.1], [3, 4], points)
    assert [t for t in fig.axes[0].texts if t.get_text().startswith("from batch 2 to batch 3")]


def test_held_vs_leaky_says_the_loss_rose_only_when_every_rejected_trial_raised_it():
    fig = plots.held_vs_leaky([4.0, 3.0, 2.0], [3], [4.0], [])  # a trial rejected although its loss fell
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()][2] == "trial rejected"
    assert "rejected" in [t.get_text() for t in fig.axes[0].texts]  # the held run's trial, without "loss rose"


@pytest.mark.parametrize("args, error, match", [
    (([], [], [1.0], []), ValueError, "held is empty"),
    (([1.0, 0.5], [1], [1.0], []), ValueError, r"held_accepted = \[1\] must be increasing evaluation numbers "
                                              r"from 2 to 2"),
    (([1.0], [], [1.0, 0.5], [3]), ValueError, r"leaky_accepted = \[3\]"),
    (([1.0, 0.5, 0.2], [3, 2], [1.0], []), ValueError, "increasing"),
    (([1.0, 0.0], [2], [1.0], []), ValueError, "held must hold positive, finite"),
    (([1.0], [], [1.0, float("nan")], [2]), ValueError, "leaky must hold positive, finite"),
    (("abc", [], [1.0], []), TypeError, "held and held_accepted must be lists"),
    (([1.0], [], [1.0, 0.5], [2], [np.zeros(2)]), ValueError, "leaky_points has 1 vectors for 2 losses"),
])
def test_held_vs_leaky_bad_input(args, error, match):
    with pytest.raises(error, match=match):
        plots.held_vs_leaky(*args)


# --------------------------------------------------------------------------- 02 gradient accumulation


def test_accumulation_memory_labels_sizes_with_counts_and_draws_the_fixed_part():
    import pytest

    fig = plots.accumulation_memory([1, 2, 4], [3.0, 1.6, 0.9], effective=64, fixed_mib=0.5, fixed_label="weights")
    ax = fig.axes[0]
    assert len(fig.axes) == 1
    assert [round(v, 6) for v in ax.lines[0].get_ydata()] == [1.0, 0.533333, 0.3]  # relative to the first
    assert ax.get_ylabel() == "peak memory (1 = 3 MiB)"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1 × 64", "2 × 32", "4 × 16"]
    floor = [line for line in ax.lines if line.get_linestyle() == "--"]
    assert len(floor) == 1 and [round(v, 6) for v in floor[0].get_ydata()] == [0.166667, 0.166667]
    assert len(ax.lines) == 2  # the peaks and the floor, nothing else
    assert [t.get_text() for t in ax.texts] == ["0.53x", "0.30x"]
    assert "weights" in [t.get_text() for t in ax.get_legend().get_texts()]
    with pytest.raises(ValueError, match="peak_mib must hold positive"):
        plots.accumulation_memory([1, 2], [0.0, 1.0], effective=64, fixed_mib=0.5, fixed_label="w")
    with pytest.raises(ValueError, match="equal length"):
        plots.accumulation_memory([1], [1.0, 2.0], effective=64, fixed_mib=0.5, fixed_label="w")
    with pytest.raises(ValueError, match="divide effective=64"):
        plots.accumulation_memory([3], [1.0], effective=64, fixed_mib=0.5, fixed_label="w")


def test_accumulation_memory_draws_the_time_per_example_with_ratios():
    import pytest

    fig = plots.accumulation_memory([1, 4], [2.0, 1.0], effective=1000, fixed_mib=0.5, fixed_label="w",
                                    seconds=[0.002, 0.003])
    time_ax = fig.axes[1]
    assert [round(bar.get_height(), 6) for bar in time_ax.patches] == [1.0, 1.5]  # relative to the first
    assert time_ax.get_ylabel() == "time per example (1 = 2 µs)"
    assert [t.get_text() for t in time_ax.texts] == ["1.00x", "1.50x"]
    with pytest.raises(ValueError, match="seconds"):
        plots.accumulation_memory([1, 4], [2.0, 1.0], effective=1000, fixed_mib=0.5, fixed_label="w", seconds=[1.0])
    with pytest.raises(ValueError, match="seconds"):
        plots.accumulation_memory([1, 4], [2.0, 1.0], effective=1000, fixed_mib=0.5, fixed_label="w",
                                  seconds=[1.0, 0.0])


def test_accumulation_windows_draws_the_updates_of_each_way_and_the_weights():
    import matplotlib.colors
    import pytest

    fig = plots.accumulation_windows([8, 8, 8, 8, 8, 4], steps=4, epochs=2)
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.texts]
    assert [t for t in texts if "update" in t] == ["4 updates", "4 updates", "3 updates"]
    # the large batches, then each micro-batch's weight: by size in each large batch, 1/4 in Keras'
    assert texts.count("32") == 2 and texts.count("12") == 2
    assert texts.count("8/32") == 8 and texts.count("8/12") == 2 and texts.count("4/12") == 2
    assert texts.count("1/4") == 12
    triangles = [line for line in ax.lines if line.get_marker() == "v"]
    # each just inside its update's outline, at its end (rounded up: the example where the update ends)
    where = [(math.ceil(float(t.get_xdata()[0])), float(t.get_ydata()[0]), matplotlib.colors.to_hex(t.get_color()))
             for t in triangles]
    assert sorted(x for x, _, _ in where) == [32, 32, 32, 44, 44, 60, 76, 76, 88, 88, 88]
    # one meaning for colour in every row: blue, an update equal to one of fit's; vermillion, one fit never makes
    blue, vermillion = "#0072b2", "#d55e00"
    keras_row = min(y for _, y, _ in where)
    assert sorted((x, c) for x, y, c in where if y == keras_row) == [(32, blue), (60, vermillion), (88, vermillion)]
    assert {c for _, y, c in where if y != keras_row} == {blue}
    outlines = [p for p in ax.patches if p.get_facecolor()[3] == 0 and p.get_linewidth() > 2]
    assert len(outlines) == 11  # one per update
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["update = one of fit's batches",
                                                                   "an update fit never makes",
                                                                   "weighted above its size: a micro-batch of 4 (the last of the 28 examples),\n"
                                                                   "weighted as 1 of 4 micro-batches"]
    assert ax.get_yticklabels()[1].get_text() == "ours: each batch of 32,\nsplit into micro-batches of 8"
    assert ax.get_xlim()[1] < 89  # the axis ends with the data
    # the legend's keys look like the updates they name: a light fill inside a thick outline of the colour
    keys = ax.get_legend().get_patches()
    assert [matplotlib.colors.to_hex(k.get_edgecolor()) for k in keys[:2]] == [blue, vermillion]
    assert all(k.get_linewidth() > 2 and k.get_facecolor()[3] < 0.5 for k in keys[:2])
    # the trap at a glance: Keras' two micro-batches of 4, weighted 1/4 each (their share: 4/28), filled solid
    solid = [p for p in ax.patches if p.get_facecolor()[3] > 0.5 and p.get_width() < 10]
    assert sorted((p.get_x(), p.get_width()) for p in solid) == [(40, 4), (84, 4)]
    assert {matplotlib.colors.to_hex(p.get_facecolor()) for p in solid} == {vermillion}
    assert ax.get_yticklabels()[0].get_text() == "fit(batch_size=32)\nbatches of 32 + 12 per epoch"
    epoch_lines = [line for line in ax.lines if line.get_linestyle() == "--"]
    assert len(epoch_lines) == 1 and list(epoch_lines[0].get_xdata()) == [44, 44]
    with pytest.raises(ValueError, match="sizes is empty"):
        plots.accumulation_windows([], steps=2, epochs=1)
    with pytest.raises(ValueError, match=r"sizes\[1\]"):
        plots.accumulation_windows([4, 0], steps=2, epochs=1)
    with pytest.raises(ValueError, match="steps"):
        plots.accumulation_windows([4], steps=0, epochs=1)
    with pytest.raises(TypeError, match="epochs"):
        plots.accumulation_windows([4], steps=1, epochs=1.5)


def test_accumulation_windows_marks_equal_weights_of_unequal_micro_batches_as_not_fits():
    import matplotlib.colors

    fig = plots.accumulation_windows([5, 5, 2], steps=3, epochs=1)  # the trap: one update of 12 either way
    triangles = [line for line in fig.axes[0].lines if line.get_marker() == "v"]
    colours = [matplotlib.colors.to_hex(t.get_color()) for t in sorted(triangles, key=lambda t: -t.get_ydata()[0])]
    assert colours == ["#0072b2", "#0072b2", "#d55e00"]  # fit, ours, Keras (1/3 each where fit gives 5/12 ...)
    solid = [p for p in fig.axes[0].patches if p.get_facecolor()[3] > 0.5]
    assert [(p.get_x(), p.get_width()) for p in solid] == [(10, 2)]  # only the 2 examples weighted like 5


def test_accumulation_windows_hatches_what_keras_leaves_waiting():
    fig = plots.accumulation_windows([8, 8, 8, 8, 8], steps=2, epochs=1)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.texts if "update" in t.get_text()] == [
        "3 updates", "3 updates", "2 updates\n+1 micro-batch(es)\nwaiting"]
    assert sum(1 for p in ax.patches if p.get_hatch()) == 1
    assert not [line for line in ax.lines if line.get_linestyle() == "--"]  # one epoch: no epoch line


# --------------------------------------------------------------------------- 03 batch iteration


def test_ptb_grid_draws_every_token_of_a_layout():
    import matplotlib.colors
    import pytest

    from helpers.batching import ptb_layout

    layout = ptb_layout(70, batch_size=4, num_steps=5)
    fig = plots.ptb_grid(layout)
    ax = fig.axes[0]
    labels = {t.get_text() for t in ax.texts}
    assert {str(p) for p in range(68)} <= labels and not {"68", "69"} & labels  # the 4 x 17 grid, nothing beside it
    assert ax.get_title() == "70 tokens in 4 rows of 17 (tokens 68–69 dropped), read 5 at a time"  # short
    assert {"y\nonly", "never\nread"} <= labels  # the last two columns say what they are
    headers = [t for t in ax.texts if t.get_text().startswith("x of batch ")]
    assert len(headers) == 3 and all(t.get_position()[1] < -1 for t in headers)  # a band each, high above the grid
    assert [t.get_text() for t in headers] == [f"x of batch {k}: a [4, 5] tensor\ny = x shifted by one token"
                                               for k in range(3)]  # one tensor each, and y for the whole batch;
    # no "(and 3, 6, …)": the jump-back line under the grid says batch 3 is window 0 again
    arrows = [a for a in ax.texts if a.get_text() == "" and a.xy[0] > 0.5]
    carried = [a for a in arrows if a.arrow_patch.get_linestyle() != "solid"]  # dashed: state carried, gradient cut
    assert sorted({round(a.xy[0] - 0.45) for a in carried}) == [5, 10] and len(carried) == 2 * 4
    assert len(arrows) - len(carried) == 3 * 4 and all(a.xy[0] < 15 for a in arrows)  # one solid arrow per window
    jump = next(t for t in ax.texts if t.get_text().startswith("after batch 2 the pass ends; batch 3 is window 0 of every"))
    assert "reset the state" in jump.get_text() and jump.get_position()[1] > 4  # under the grid
    assert not any(t.get_rotation() for t in ax.texts)  # no rotated label up the left side: the sentence says it
    into_rows = [a for a in ax.texts if a.get_text() == "" and a.xy[0] < 0.5]
    assert sorted(a.xy[1] for a in into_rows) == [0.5, 1.5, 2.5, 3.5]  # the jump back reaches every row, not one
    bracket = next(t for t in ax.texts if t.get_text() == "y of batch 0, row 0: tokens 1–5")
    x, y = bracket.get_position()
    assert -1 < y < 0 and 0 < x < 5  # over row 0, below the batch bands, centred over batch 0's columns
    notes = [t for t in ax.texts if t.get_text() in ("y\nonly", "never\nread")]
    assert len(notes) == 2 and all(t.get_position()[1] < -1 for t in notes)  # over their columns, at the bands' height,
    assert len(ax.patches) == 4 * 17 + 3  # but no box: only the 68 tokens and the 3 batch bands are boxes
    assert not any(p.get_linestyle() == "--" for p in ax.patches)  # no dashed box over the coloured windows
    key = [t.get_text() for t in ax.get_legend().get_texts()]
    assert len(key) == 4 and any("only ever a target" in k for k in key) and "gradient is cut" in key[1]
    assert any(k.startswith("never read: too few tokens left") for k in key)  # says why, not only that
    assert not any(getattr(h, "get_hatch", lambda: None)() for h in ax.get_legend().legend_handles)  # no hatch:
    # the crossed-out cells have a single slash, and so does their key
    assert "(token 68 dropped), read 5 at a time" in plots.ptb_grid(ptb_layout(69, 4, 5)).axes[0].get_title()
    assert "dropped" not in plots.ptb_grid(ptb_layout(68, 4, 5)).axes[0].get_title()
    faces = {patch.get_facecolor()[:3] for patch in ax.patches}
    assert len(faces & {matplotlib.colors.to_rgb(c) for c in ("#d62728", "#2ca02c")}) < 2  # not red next to green
    with pytest.raises(ValueError, match="at most"):
        plots.ptb_grid(ptb_layout(200, batch_size=2, num_steps=5))


# --------------------------------------------------------------------------- 04 validation queues


def _history():
    from types import SimpleNamespace

    return SimpleNamespace(step=list(range(1, 9)), train_loss=[4.0, 3.0, 2.5, 2.0, 1.8, 1.7, 1.6, 1.5],
                           eval_step=[0, 4, 8], val=[{"loss": 5.0, "examples": 10}, {"loss": 2.2, "examples": 10},
                                                     {"loss": 1.9, "examples": 10}])


def test_validation_curve_draws_training_and_validation():
    fig = plots.validation_curve(_history(), smooth=2)
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.lines[:2]] == ["training loss (mean of 2 steps)",
                                                          "validation loss (full pass)"]
    assert list(ax.lines[1].get_xdata()) == [0, 4, 8]


_PANELS = [("cycling", [[[0, 1], [2, 0]], [[1, 2], [0, 1]]]), ("once", [[[0, 1], [2]], [], []]),
           ("fresh", [[[0, 1], [2]], [[0, 1], [2]]])]


def test_validation_passes_draws_one_grid_per_panel_and_a_legend_where_red_is():
    import matplotlib

    fig = plots.validation_passes(_PANELS, panels_title="the toy set")
    assert len(fig.axes) == 3  # no reads: the grids only
    assert "the toy set" in [t.get_text() for t in fig.texts]
    cycling, once, fresh = fig.axes
    assert [cycling.get_xlim(), once.get_xlim()] == [(-0.5, 3.5), (-0.5, 2.5)]  # each panel as wide as its longest pass
    assert not cycling.get_xticks().size and not once.get_xticks().size  # no x axis: the cells carry the ids
    assert len(cycling.patches) == 8 and len(once.patches) == 3 and len(fresh.patches) == 6  # one cell per id read
    assert [t.get_text() for t in once.texts].count("empty: nothing left to read") == 2
    red = matplotlib.colors.to_rgba(plots.COLORS[1])
    twice = [p.get_xy() for p in cycling.patches if p.get_edgecolor() == red]
    assert twice == [(3 - 0.5, 0 - 0.5), (3 - 0.5, 1 - 0.5)]  # id 0 again in pass 1, id 1 again in pass 2
    assert not [p for p in fresh.patches if p.get_edgecolor() == red]  # a new loop per pass reads nothing twice
    fills = [p.get_facecolor() for p in fresh.patches[:3]]
    assert fills[0] == fills[1] != fills[2]  # ids 0, 1 in the first batch, id 2 in the second
    legend = cycling.get_legend()  # red's meaning inside the panel that shows red
    assert legend is not None and once.get_legend() is None
    assert [t.get_text() for t in legend.get_texts()] == ["batch 1, 3, ...", "batch 2, 4, ...",
                                                          "read twice in one pass"]
    assert plots.validation_passes(_PANELS[1:]).axes[0].get_legend() is not None  # no red: the first panel


def test_validation_passes_draws_which_training_batch_each_step_reads():
    fig = plots.validation_passes(_PANELS[:1], reads=[("kept", [1, 2, 3, 4]), ("restarted", [1, 2, 1, 2])],
                                  eval_steps=[0, 2, 4], reads_title="training")
    assert len(fig.axes) == 2
    top = fig.axes[0]
    assert top.get_title() == "training"
    kept, restarted = top.lines[:2]
    assert list(kept.get_xdata()) == [1, 2, 3, 4]  # steps from 1
    assert list(kept.get_ydata()) == [1, 2, 3, 4] and list(restarted.get_ydata()) == [1, 2, 1, 2]
    assert kept.get_linestyle() == "-" and restarted.get_linestyle() == "--"
    assert [line.get_xdata()[0] for line in top.lines[2:]] == [0, 2, 4]  # a dotted line at each evaluation


def test_validation_passes_bad_input():
    import pytest

    with pytest.raises(ValueError, match="panels"):
        plots.validation_passes([])
    with pytest.raises(ValueError, match="at least one pass"):
        plots.validation_passes([("nothing", [[], []])])
    with pytest.raises(ValueError, match=r"reads lines differ in length: \[\('long', 2\), \('short', 1\)\]"):
        plots.validation_passes(_PANELS[:1], reads=[("long", [1, 2]), ("short", [1])])


# --------------------------------------------------------------------------- 05 network snapshots


def test_snapshot_lag_shades_each_sync_across_the_drop_of_the_periodic_curve():
    import numpy as np
    import pytest

    curves = {"hard every step": np.ones(30), "hard every 10": np.arange(30) % 10 + 1.0, "soft": np.full(30, 9.0)}
    fig = plots.snapshot_lag(curves, every=10, level=(10.0, "1/τ = 10"))
    ax = fig.axes[0]
    lines = ax.get_lines()
    assert [line.get_label() for line in lines[:3]] == list(curves)
    # the lag at step t is measured at t's evaluation; the periodic copy syncs in steps 10, 20 after
    # their evaluation, so the band spans the drop, from the peak (t) to t + 1; none after the last step
    bands = [p.get_x() for p in ax.patches]
    assert [(float(p.get_x()), float(p.get_x() + p.get_width())) for p in ax.patches] == [(10.0, 11.0), (20.0, 21.0)], bands
    steps = np.arange(1, 31)
    peaks = steps[:-1][np.diff(curves["hard every 10"]) < 0]  # the last step before each drop
    assert list(peaks) == [10, 20] and all(curves["hard every 10"][p - 1] == 10.0 for p in peaks)
    level = [line for line in lines if line.get_linestyle() == "--"]
    assert len(level) == 1 and list(level[0].get_ydata()) == [10.0, 10.0]
    legend = ax.get_legend()
    assert [text.get_text() for text in legend.get_texts()] == list(curves) + [
        "1/τ = 10", "shaded: the every-10 copy's sync,\nafter the evaluation of step 10, 20, ..."]  # one entry for the bands
    assert legend.get_bbox_to_anchor().x0 > ax.get_window_extent().x1 - 1  # beside the axes, not over the lines
    assert ax.get_xlabel().startswith("training step t") and "behind" in ax.get_ylabel()
    with pytest.raises(ValueError, match="at least one"):
        plots.snapshot_lag({})
    with pytest.raises(ValueError, match=r"curves\['bad'\]"):
        plots.snapshot_lag({"bad": np.zeros((2, 2))})
    with pytest.raises(ValueError, match="every must be a positive"):
        plots.snapshot_lag(curves, every=0)
    computed = plots.snapshot_lag(curves, computed=("soft",)).axes[0].get_lines()  # a computed curve: dashed
    assert [line.get_linestyle() for line in computed] == ["-", "-", "--"]
    with pytest.raises(ValueError, match=r"computed names curves that are not in curves: \['nope'\]"):
        plots.snapshot_lag(curves, computed=("nope",))


def test_snapshot_step_order_shows_evaluate_sync_update_and_the_past_one_update_behind():
    fig = plots.snapshot_step_order()
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.texts]
    calls = ("evaluate", "tape.gradient", "sync()", "apply_gradients")
    assert [t for t in texts if t.startswith(calls)] == [
        "evaluate\nB and past B: one loss", "sync()\npast B takes B's variables",
        "apply_gradients\nB moves", "evaluate\n(next step)"]  # no header names a row the figure does not draw;
    # tape.gradient changes neither row: no column for it
    assert not [t for t in texts if t[:2] in ("1.", "2.", "3.", "4.")]  # no sub-step number reads as a step number
    assert {"B (trained)", "past B (the copy)", r"step t (starts from $\theta_t$)", "step t + 1",
            "one update behind B"} <= set(texts)
    versions = [t for t in texts if t.startswith("$") and t.endswith("$")]
    # per column, B then past B: evaluate (t, t-1), sync (t, t), apply (t+1, t), the next evaluation
    # (t+1, t): one update behind
    t, t1, tm1 = r"$\theta_{t}$", r"$\theta_{t+1}$", r"$\theta_{t-1}$"
    assert versions == [t, tm1, t, t, t1, t, t1, t]
    assert any(r"in step 0: $\theta_0$" in text and "starts equal" in text for text in texts)  # no θ_-1 undefined
    boxed = [p for p in ax.patches if type(p).__name__ == "FancyBboxPatch"]
    assert len(boxed) == 2  # the synced past B, the updated B
    key = [text.get_text() for text in ax.get_legend().get_texts()]  # boxed and grey explained in the legend
    assert key[0].startswith(r"$\theta_t$: B's weights after t updates")
    assert key[1].startswith("boxed:") and key[2].startswith("grey:")
    assert any(t.startswith("Synced before the evaluation instead") and "0 steps behind" in t for t in texts)


def test_snapshot_targets_draws_each_start_thin_their_mean_thick_and_ticks_at_the_syncs():
    import numpy as np
    import pytest

    one = {"no copy": np.linspace(2, 1, 30), "hard copy": 1 / (1 + np.arange(30))}
    fig = plots.snapshot_targets(one)
    ax = fig.axes[0]
    assert len(fig.axes) == 1
    assert [line.get_label() for line in ax.get_lines()] == list(one)
    assert list(ax.get_lines()[0].get_xdata()[:2]) == [0, 1]  # the error in steps 0, 1, ... (optimizer.iterations)
    assert ax.get_ylim()[0] == 0 and ax.get_xlabel() == "training step t"
    assert ax.get_title().endswith("one start per run)")
    assert ax.get_ylim()[1] < 1.1 * 2  # no empty band above the highest line
    starts = {"no copy": np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]]), "hard copy": np.ones(3)}
    fig = plots.snapshot_targets(starts)
    ax = fig.axes[0]
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == ["_start", "_start", "no copy", "hard copy"]
    assert lines[0].get_linewidth() < lines[2].get_linewidth()  # each start thin, the mean thick
    np.testing.assert_allclose(lines[2].get_ydata(), [2.0, 2.0, 2.0])  # the mean of the starts
    assert "2 starts per run" in ax.get_title()
    runs = {"no copy": np.ones((3, 35)), "hard copy": np.ones((3, 35))}
    ax = plots.snapshot_targets(runs, syncs=("hard copy", 10)).axes[0]
    ticks = ax.get_lines()[-1]
    assert list(ticks.get_xdata()) == [0, 10, 20, 30] and ticks.get_marker() == "|"  # iterations % 10 == 0
    assert ticks.get_color() == ax.get_lines()[-2].get_color()  # in the hard copy's colour
    assert [t.get_text() for t in ax.get_legend().get_texts()][-1] == "ticks: syncs of the hard copy (steps 0, 10, 20, ...)"
    titled = plots.snapshot_targets(runs, title="What to see").axes[0].get_title()
    assert titled.startswith("What to see\n(lower is better; 3 starts per run")
    with pytest.raises(ValueError, match="at least one run"):
        plots.snapshot_targets({})
    with pytest.raises(ValueError, match=r"errors\['no copy'\]"):
        plots.snapshot_targets({"no copy": np.zeros((2, 2, 2))})
    with pytest.raises(ValueError, match=r"errors\['no copy'\]"):
        plots.snapshot_targets({"no copy": []})
    with pytest.raises(ValueError, match="syncs names a run that is not in errors"):
        plots.snapshot_targets(runs, syncs=("soft copy", 10))
    with pytest.raises(ValueError, match="syncs' interval"):
        plots.snapshot_targets(runs, syncs=("hard copy", 0))
