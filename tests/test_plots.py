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


def _lines(ax, style):
    """(x data, colour) of every drawn line of a line style (legend proxies have no data)."""
    return [(list(line.get_xdata()), line.get_color()) for line in ax.lines
            if line.get_linestyle() == style and len(line.get_xdata())]


def test_held_vs_leaky_draws_each_run_on_its_own_panel_with_the_batch_each_evaluation_read():
    fig = plots.held_vs_leaky([133.0, 430.0, 3.6, 3.1, 0.1], [3, 4, 5], [133.0, 258.0, 2.0], [3])
    top, bottom = fig.axes
    blue, red = plots.COLORS[:2]
    assert {line.get_color() for line in top.lines if len(line.get_xdata())} == {blue}  # the held run alone
    assert {line.get_color() for line in bottom.lines if len(line.get_xdata())} == {red}  # the next() run alone
    assert "batch 1" in top.get_title() and "batch k" in bottom.get_title()  # numbered from 1, as the evaluations
    assert [t.get_text() for t in bottom.texts][:3] == ["batch 1", "batch 2", "batch 3"]  # evaluation k on batch k
    assert [t.xy[0] for t in bottom.texts][:3] == [1, 2, 3]  # over its own evaluation, no left/right offset
    assert top.get_xlim() == bottom.get_xlim() == (0.4, 5.6)  # the columns line up; the axis ends at the last one
    assert top.get_ylim() == bottom.get_ylim()  # one scale for both panels
    assert list(bottom.get_xticks()) == [1, 2, 3, 4, 5] and bottom.get_xlabel() == "evaluation (one call of fun)"
    assert all("\n" not in ax.get_title() for ax in (top, bottom))  # one line each


def test_held_vs_leaky_top_legend_covers_no_point_of_the_notebooks_run():
    # round 27, third pass (readers): the top legend sat on the held run's points 5 and 6; now it sits
    # upper right, under the iteration names, above the points (the notebook's losses, rounded)
    held = [133.0, 430.0, 3.6, 3.1, 1.7, 0.95, 0.4, 0.4, 0.35, 0.22, 0.12, 0.1]
    fig = plots.held_vs_leaky(held, list(range(3, 13)), [133.0, 258.0, 2.0, 3.5, 9.0, 12.0, 8.0], [3, 7],
                              max_iterations=10)
    top = fig.axes[0]
    fig.canvas.draw()
    box = top.get_legend().get_window_extent()
    points = top.transData.transform(np.column_stack([np.arange(1, len(held) + 1), held]))
    under = [(k + 1, box.y0 - y) for k, (x, y) in enumerate(points) if box.x0 - 15 <= x <= box.x1 + 15]
    assert under and all(gap >= 40 for _, gap in under), under  # clear of them by 40 px (was 23 at centre right)
    names = [t for t in top.texts if _iteration_name(t)]
    assert all(t.get_window_extent().y0 >= box.y1 for t in names)  # under the iteration names, not on them


def test_held_vs_leaky_draws_both_runs_the_same_way_and_joins_neither():
    # held: start 133, a rejected trial 430, accepted 3.6, 3.1, 0.1; leaky: 133 (batch 1), 258 rejected, 2.0 accepted
    fig = plots.held_vs_leaky([133.0, 430.0, 3.6, 3.1, 0.1], [3, 4, 5], [133.0, 258.0, 2.0], [3])
    top, bottom = fig.axes
    assert top.get_yscale() == bottom.get_yscale() == "log"
    assert _lines(top, "-") == _lines(bottom, "-") == []  # one style in both panels: dots, nothing joined
    held_marks, leaky_marks = _marks(top), _marks(bottom)
    assert held_marks["D"] == leaky_marks["D"] == [1]  # round 27: the start, a diamond, not an accepted point
    assert sorted(held_marks["o"]) == [3, 4, 5]  # the accepted points
    assert held_marks["x"] == [2] and leaky_marks["x"] == [2]  # every rejected trial a cross
    assert sorted(leaky_marks["o"]) == [3] and "s" not in leaky_marks
    assert all(line.get_alpha() == 0.5 for ax in fig.axes for line in ax.lines if line.get_marker() == "x")
    low, high = bottom.get_ylim()
    assert 0.1 / 10 < low <= 0.1 / 4 and 430.0 <= high <= 430.0 * 6  # every point on the scale, room for labels
    assert [t.get_text() for t in top.texts if not _iteration_name(t)] == ["stops after 5 evaluations"]
    assert [t.get_text() for t in bottom.texts][-1] == "stops after 3 evaluations"
    assert [t.get_text() for t in top.get_legend().get_texts()] == ["start (evaluation 1)",
                                                                     "accepted point (all on batch 1)",
                                                                     "rejected trial (too long a step: tried shorter)"]
    assert [t.get_text() for t in bottom.get_legend().get_texts()] == ["start (evaluation 1)",
                                                                        "accepted point (each on its own batch)",
                                                                        "rejected trial (a different batch each)"]
    # round 26: said under the leaky run's lowest point (evaluation 3), which reads as "better" otherwise
    note = [t for t in bottom.texts if t.get_text() == "losses on different batches:\ncannot be compared"]
    assert len(note) == 1 and note[0].xy == (3, 2.0)


def test_held_vs_leaky_says_converged_only_when_the_leaky_run_ends_on_a_rise():
    # SciPy's L-BFGS-B stops when (f_k - f_k+1) / max(|f_k|, |f_k+1|, 1) <= ftol: any rise does it
    fig = plots.held_vs_leaky([133.0, 3.6, 0.1], [2, 3], [133.0, 2.0, 9.0, 8.1], [2, 4])
    assert fig.axes[1].texts[-1].get_text() == "stops after 4: 'converged'"
    fig = plots.held_vs_leaky([133.0, 3.6, 0.1], [2, 3], [133.0, 2.0, 9.0, 1.5], [2, 4])  # it fell: no claim
    assert fig.axes[1].texts[-1].get_text() == "stops after 4 evaluations"
    fig = plots.held_vs_leaky([133.0, 3.6, 0.1], [2, 3], [133.0, 2.0, 9.0], [2])  # ends on a rejected trial
    assert fig.axes[1].texts[-1].get_text() == "stops after 3 evaluations"


def test_held_vs_leaky_marks_a_last_point_at_exactly_the_weights_before_as_the_stop():
    points = [np.zeros(2), np.ones(2), np.full(2, 0.5), np.full(2, 0.5) + 3e-3, np.full(2, 0.5)]
    fig = plots.held_vs_leaky([133.0, 3.6, 0.1], [2, 3], [133.0, 258.0, 2.0, 9.0, 8.1], [3, 5], points)
    bottom = fig.axes[1]
    label = bottom.texts[-1]
    # round 27: the stop said in plain words next to the square, and a dotted elbow under the points joins
    # the square to point 3, labelled "same weights as 3" (no arrow, no bracket to decode)
    assert label.get_text() == "batch 3's weights, evaluated on batch 5:\nno lower, so SciPy stops: 'converged'"
    assert np.allclose(label.xy, [5, 8.1])
    [(xs, _)] = _lines(bottom, ":")
    assert xs == [3, 3, 5, 5]
    dotted = [line for line in bottom.lines if line.get_linestyle() == ":"][0]
    ys = list(dotted.get_ydata())
    assert ys[0] == 2.0 and ys[-1] == 8.1 and ys[1] == ys[2] < 2.0  # under both points
    same = [t for t in bottom.texts if t.get_text() == "same weights as 3"]
    assert len(same) == 1 and same[0].xy == (4.0, ys[1])
    assert not [t for t in bottom.texts if t.arrow_patch is not None or "bracket" in t.get_text()]
    marks = _marks(bottom)  # the stop is an open square, not an accepted dot
    assert marks["s"] == [5] and 5 not in marks["o"] and 3 in marks["o"]
    assert bottom.get_legend().get_texts()[-1].get_text() == "where SciPy stops"
    points[4] = points[4] + 1e-12  # nearly, not exactly, the same weights: no square
    fig = plots.held_vs_leaky([133.0, 3.6, 0.1], [2, 3], [133.0, 258.0, 2.0, 9.0, 8.1], [3, 5], points)
    assert fig.axes[1].texts[-1].get_text() == "stops after 5: 'converged'" and "s" not in _marks(fig.axes[1])
    assert _lines(fig.axes[1], ":") == [] and "same weights" not in " ".join(t.get_text() for t in fig.axes[1].texts)


def test_held_vs_leaky_writes_each_runs_loss_on_all_the_data_on_its_panel():
    fig = plots.held_vs_leaky([133.0, 430.0, 3.6], [3], [133.0, 258.0, 2.0], [3], all_data_losses=(2.582, 6.112))
    top, bottom = fig.axes
    # round 26: in each panel's title (bold), no longer in a small corner box
    assert top.get_title() == "Batch held: every evaluation reads batch 1. At its end, loss on all the data: 2.58"
    assert bottom.get_title() == "next() in the loss: evaluation k reads batch k. At its end, loss on all the data: 6.11"
    assert top.title.get_fontweight() == "bold" and not [t for t in top.texts if "all the data" in t.get_text()]
    assert top.get_ylabel() == bottom.get_ylabel() == "loss on the batch it read\n(not all the data)"
    fig = plots.held_vs_leaky([133.0, 430.0, 3.6], [3], [133.0, 258.0, 2.0], [3])  # not given: nothing written
    assert not [t for ax in fig.axes for t in ax.texts if "all the data" in t.get_text()]
    assert "all the data" not in fig.axes[0].get_title() + fig.axes[1].get_title()
    with pytest.raises(ValueError, match="two positive, finite losses"):
        plots.held_vs_leaky([133.0], [], [133.0], [], all_data_losses=(2.5, float("nan")))


def _iteration_name(text):
    return text.get_text().startswith("iteration") or text.get_text().isdigit()


def _spans(ax):
    return [(patch.get_x(), patch.get_x() + patch.get_width()) for patch in ax.patches]


def test_held_vs_leaky_shades_and_names_each_iteration_in_both_panels_the_same_way():
    # round 26: which evaluations belong to one iteration (one line search), at a glance; second pass:
    # both panels, iteration 1 from the start (evaluation 1), a narrow iteration named by its number
    points = [np.zeros(2), np.ones(2), np.full(2, 0.5), np.full(2, 0.7), np.full(2, 0.5), np.full(2, 0.6)]
    fig = plots.held_vs_leaky([133.0, 430.0, 3.6, 3.1, 0.1], [3, 4, 5], [133.0, 258.0, 2.0, 9.0, 7.0, 8.1], [3, 6],
                              points)
    top, bottom = fig.axes
    assert _spans(bottom) == [(0.5, 3.5), (3.5, 6.5)]  # evaluations 1-3, then 4-6
    names = [t for t in bottom.texts if _iteration_name(t)]
    # round 27, second pass: a wide iteration named at its left edge (where it starts), every band's edges drawn
    assert [(t.get_text(), t.xy[0], t.get_ha()) for t in names] == [("iteration 1", 0.6, "left"), ("iteration 2", 3.6, "left")]
    assert all(p.get_linewidth() > 0 and p.get_edgecolor()[3] > 0 for ax in fig.axes for p in ax.patches)
    assert _spans(top) == [(0.5, 3.5), (3.5, 4.5), (4.5, 5.5)]  # the held run: the same rule
    assert [(t.get_text(), t.xy[0]) for t in top.texts if _iteration_name(t)] == [("iteration 1", 0.6), ("2", 4.0),
                                                                                   ("3", 5.0)]
    assert [p.get_facecolor() for p in top.patches][:2] == [p.get_facecolor() for p in bottom.patches]  # same shades
    fig = plots.held_vs_leaky([133.0, 3.6], [2], [133.0, 2.0, 9.0], [2])  # a last, unfinished line search
    assert _spans(fig.axes[1]) == [(0.5, 2.5), (2.5, 3.5)]
    assert [t.get_text() for t in fig.axes[1].texts if _iteration_name(t)] == ["1", "2"]
    fig = plots.held_vs_leaky([133.0], [], [133.0], [])  # the start alone: no iteration
    assert not fig.axes[0].patches and not fig.axes[1].patches


def test_held_vs_leaky_says_the_held_run_stopped_at_its_cap_not_by_converging():
    fig = plots.held_vs_leaky([133.0, 3.6, 0.1], [2, 3], [133.0, 2.0, 9.0], [2], max_iterations=2)
    assert [t.get_text() for t in fig.axes[0].texts if not _iteration_name(t)] == ["stops at its cap of 2 iterations"]
    fig = plots.held_vs_leaky([133.0, 3.6, 0.1], [2, 3], [133.0, 2.0, 9.0], [2], max_iterations=5)
    assert [t.get_text() for t in fig.axes[0].texts if not _iteration_name(t)] == ["stops after 3 evaluations"]  # no claim
    with pytest.raises(ValueError, match="max_iterations must be >= 1"):
        plots.held_vs_leaky([133.0], [], [133.0], [], max_iterations=0)


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
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["peak memory of one update", "weights: 0.17x"]
    with pytest.raises(ValueError, match="peak_mib must hold positive"):
        plots.accumulation_memory([1, 2], [0.0, 1.0], effective=64, fixed_mib=0.5, fixed_label="w")
    with pytest.raises(ValueError, match="equal length"):
        plots.accumulation_memory([1], [1.0, 2.0], effective=64, fixed_mib=0.5, fixed_label="w")
    with pytest.raises(ValueError, match="divide effective=64"):
        plots.accumulation_memory([3], [1.0], effective=64, fixed_mib=0.5, fixed_label="w")


def test_accumulation_memory_draws_the_time_of_one_update_with_ratios():
    import pytest

    fig = plots.accumulation_memory([1, 4], [2.0, 1.0], effective=1000, fixed_mib=0.5, fixed_label="w",
                                    seconds=[0.002, 0.003])
    time_ax = fig.axes[1]
    assert [round(bar.get_height(), 6) for bar in time_ax.patches] == [1.0, 1.5]  # relative to the first
    assert time_ax.get_ylabel() == "time of one update (1 = 2 ms)"
    assert [t.get_text() for t in time_ax.texts] == ["1.00x", "1.50x"]
    with pytest.raises(ValueError, match="seconds"):
        plots.accumulation_memory([1, 4], [2.0, 1.0], effective=1000, fixed_mib=0.5, fixed_label="w", seconds=[1.0])
    with pytest.raises(ValueError, match="seconds"):
        plots.accumulation_memory([1, 4], [2.0, 1.0], effective=1000, fixed_mib=0.5, fixed_label="w",
                                  seconds=[1.0, 0.0])


def _update_outlines(ax):
    """(first example, last example, row, colour) of each update's outline (no fill, a thick edge)."""
    import matplotlib.colors

    return sorted((round(p.get_x()), round(p.get_x() + p.get_width()), round(p.get_y() + 0.37),
                   matplotlib.colors.to_hex(p.get_edgecolor()))
                  for p in ax.patches if p.get_facecolor()[3] == 0 and p.get_linewidth() > 2)


def test_accumulation_windows_draws_the_updates_of_each_way_and_the_weights():
    import matplotlib.colors
    import pytest

    fig = plots.accumulation_windows([8, 8, 8, 8, 8, 4], steps=4, epochs=2)
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.texts]
    assert [t for t in texts if "update" in t] == ["4 updates", "4 updates", "3 updates"]
    # the large batches, then each micro-batch's weight: by size in each large batch, 1/4 in Keras'
    assert texts.count("32 examples") == 2 and texts.count("12 examples") == 2
    assert texts.count("8/32") == 8 and texts.count("8/12") == 2 and texts.count("4/12") == 2
    # round 26: where Keras' 1/4 equals the size-weighted share, the box says so ("1/4 = 8/32"); elsewhere 1/4 alone
    assert texts.count("1/4\n= 8/32") == 4 and texts.count("1/4") == 8
    # one outline per update, ending where the update is applied (rounded: a small gap between two outlines)
    outlines = _update_outlines(ax)
    assert len(outlines) == 11
    assert sorted(end for _, end, _, _ in outlines) == [32, 32, 32, 44, 44, 60, 76, 76, 88, 88, 88]
    # one meaning for colour in every row: blue, an update equal to one of fit's; vermillion, one fit never makes
    blue, vermillion = "#0072b2", "#d55e00"
    keras_row = min(row for _, _, row, _ in outlines)
    assert [(end, c) for _, end, row, c in outlines if row == keras_row] == [(32, blue), (60, vermillion), (88, vermillion)]
    assert {c for _, _, row, c in outlines if row != keras_row} == {blue}
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["the same update as fit", "an update fit never makes"]
    assert ax.get_yticklabels()[1].get_text() == "Accumulating: fit's batches,\nin micro-batches of 8"
    # every label inside its box: the small box's "4/12" too
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for text in ax.texts:
        if text.get_text() == "4/12":
            width = text.get_window_extent(renderer).width
            box = ax.transData.transform([(0, 0), (4, 0)])
            assert width < box[1][0] - box[0][0]
    assert ax.get_xlim()[1] < 89  # the axis ends with the data
    # the legend's keys look like the updates they name: a light fill inside a thick outline of the colour
    keys = ax.get_legend().get_patches()
    assert [matplotlib.colors.to_hex(k.get_edgecolor()) for k in keys] == [blue, vermillion]
    assert all(k.get_linewidth() > 2 and k.get_facecolor()[3] < 0.5 for k in keys)
    # each box filled in its update's colour, lightly (one shade per colour)
    boxes = [p for p in ax.patches if 0 < p.get_facecolor()[3] < 0.5 and p.get_width() < 10 and not p.get_hatch()]
    assert {matplotlib.colors.to_hex(p.get_facecolor()) for p in boxes if p.get_x() in (40, 84) and round(p.get_y() + 0.3) == -2} == {vermillion}
    assert ax.get_yticklabels()[0].get_text() == "fit, batches of 32"  # round 26: fit has no micro-batches
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
    fig = plots.accumulation_windows([5, 5, 2], steps=3, epochs=1)  # the trap: one update of 12 either way
    colours = [c for _, _, _, c in sorted(_update_outlines(fig.axes[0]), key=lambda o: -o[2])]
    assert colours == ["#0072b2", "#0072b2", "#d55e00"]  # fit, ours, Keras (1/3 each where fit gives 5/12 ...)
    assert [t.get_text() for t in fig.axes[0].texts if t.get_text() in ("1/3", "2/12")] == ["2/12", "1/3", "1/3", "1/3"]


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
    labels = [t.get_text() for t in ax.texts]
    assert {str(p) for p in range(70)} <= set(labels)  # the 4 x 17 grid and the 2 dropped tokens, all drawn
    # short; the dropped tokens are drawn. Round 23 (a reader): "the gradient is not carried" only in the legend
    assert ax.get_title() == "70 tokens in 4 rows of 17, read 5 at a time: batch k is window k of every row"
    # round 23, second reader: said once on the figure itself, in small text after row 0's last state arrow
    (said,) = [t for t in ax.texts if t.get_text() == "state carried, gradient stops"]
    assert said.get_fontsize() < 9 and said.get_position()[0] > 10.9 and said.get_position()[1] < 0
    dropped = next(t for t in ax.texts if "dropped" in t.get_text())
    assert dropped.get_text() == "68–69 dropped: too few for another row of 17"
    rows = [a.get_position()[1] - 0.5 for a in ax.get_yticklabels()]  # the top of each row of tokens
    pitch = rows[1] - rows[0]
    assert dropped.get_position()[1] > rows[3] + 1.7  # under the last row (and its y strip), where the stream goes on
    # a reader (round 12): the bands said "x and y" but spanned x's columns only; now they say what y is
    headers = [t for t in ax.texts if t.get_text().startswith("batch ") and "tensor" in t.get_text()]
    assert [t.get_text() for t in headers] == [f"batch {k}: x, a [4, 5] tensor\n(y: the same, shifted by one)"
                                               for k in range(3)]
    assert all(t.get_position()[1] < -0.3 for t in headers)  # a band each, above the grid
    # y is drawn: under every row, each batch's window again one token to the right (a reader: "y never drawn")
    strips = [t.get_text() for t in ax.texts if t.get_text().startswith("y: ")]
    assert len(strips) == 4 * 3 and strips[:3] == ["y: 1–5", "y: 6–10", "y: 11–15"] and "y: 62–66" in strips
    arrows = [a for a in ax.texts if a.get_text() == "" and a.xy[0] > 0.5]
    in_grid = [a for a in arrows if a.xy[0] < 17]
    # round 23 (a reader): the text said dashed, the arches looked solid. Now solid, as the legend's key and the text
    (key, *_) = ax.get_legend().legend_handles
    assert key.get_linestyle() == "-" and all(a.arrow_patch.get_linestyle() == "solid" for a in in_grid)
    assert sorted({round((a.xy[0] + a.xyann[0]) / 2) for a in in_grid}) == [5, 10] and len(in_grid) == 2 * 4
    # round 23, third reader: arrows in a lane over the row "read like decoration, instead of joining token 4 to
    # token 5": each is an arch from the middle of a window's last cell to the middle of the next window's first
    assert all(a.xy[0] - a.xyann[0] == 1.0 for a in in_grid)
    assert all("arc3" in str(a.arrow_patch.get_connectionstyle().__class__).lower() for a in in_grid)
    # round 23 (a reader): "the arrows start in the middle of a window": each starts under its window's last token
    # and ends under the next window's first token
    assert all(int(a.xyann[0]) % 5 == 4 and int(a.xy[0]) % 5 == 0 for a in in_grid)
    # a reader (round 12): "dashed arrows sit on top of token numbers": they run in a lane beside the row; round 23
    # (a reader): under the row, near the y strips, "they look like they point into the targets": now over the row,
    # inside its grey panel, two on every row
    panel_tops = sorted(p.get_y() for p in ax.patches if p.get_facecolor()[:3] == matplotlib.colors.to_rgb("#ececec"))
    assert all(sum(panel_tops[s] < a.xy[1] == a.xyann[1] < rows[s] for a in in_grid) == 2 for s in range(4))
    # the next pass: an arrow from the end of every row (not one row) into what it reads next, its own window 0
    jumps = [a for a in arrows if a.xy[0] > 17]
    assert sorted(a.xy[1] for a in jumps) == pytest.approx([top + 0.5 for top in rows])
    # round 25 (two readers: "the arrow seems to come from the crossed-out, never-read cell"): it starts at the middle
    # of the row's last cell read (token 14 of row 0), on its top edge, and arches over the cells never read
    assert all(a.xyann[0] == 14.5 and a.xyann[1] < a.xy[1] for a in jumps)
    assert all("arc3" in str(a.arrow_patch.get_connectionstyle().__class__).lower() for a in jumps)
    # round 26 (a reader): the jump back is where the state is reset, so it is not drawn as the legend's solid
    # "state, carried" arrow: dashed, in another colour
    assert all(a.arrow_patch.get_linestyle() == "--" and a.arrow_patch.get_edgecolor()[:3] != (0, 0, 0) for a in jumps)
    assert {"0–4", "17–21", "34–38", "51–55"} <= set(labels)
    # says when it happens; round 23 (a reader): not "with repeat=True", which the notebook introduces later
    # round 27, second pass (two readers: the box labelled "batch 3" is window 0 again): it says batch 0 again
    assert "the next pass:\nbatch 0 again,\nfrom a reset state" in labels
    assert not any("batch 3" in text for text in labels)
    assert not any("repeat" in text for text in labels)
    assert not any(t.get_rotation() for t in ax.texts)  # no rotated label up the left side
    assert not any("never" in text or "only" in text for text in labels)  # in the grid: fewer words, the legend says
    # the tokens, 12 y strips, 3 batch bands, 4 next windows, 2 dropped tokens, 4 row panels
    assert len(ax.patches) == 4 * 17 + 4 * 3 + 3 + 4 + 2 + 4
    # a reader (round 13): "unsure which row a y strip belongs to": a grey panel holds each row, its arrows and its
    # strip, and the strip sits nearer its own row than the next one
    panels = sorted((p for p in ax.patches if p.get_facecolor()[:3] == matplotlib.colors.to_rgb("#ececec")),
                    key=lambda p: p.get_y())
    assert len(panels) == 4 and all(p.get_zorder() < 1 for p in panels)
    for s, panel in enumerate(panels):
        strips_of_row = [p for p in ax.patches if abs(p.get_height() - 0.3) < 1e-9 and rows[s] < p.get_y() < rows[s] + pitch]
        assert len(strips_of_row) == 3
        assert all(panel.get_y() < rows[s] and p.get_y() + 0.3 < panel.get_y() + panel.get_height() for p in strips_of_row)
        if s + 1 < 4:
            assert panel.get_y() + panel.get_height() < panels[s + 1].get_y()  # a gap between the panels
            assert strips_of_row[0].get_y() - (rows[s] + 1) < rows[s + 1] - (strips_of_row[0].get_y() + 0.3)
    dashed = [p for p in ax.patches if p.get_linestyle() == "--"]
    assert len(dashed) == 4 and all(p.get_x() > 17 for p in dashed)  # only the next pass's windows are dashed
    key = [t.get_text() for t in ax.get_legend().get_texts()]
    # a reader: the struck-through last column had no caption, and token 15 was white with no key
    assert key == ["the state, carried to the next batch (the gradient is not)",
                   "15, 32, 49, 66: white, a target only (the last y of each row)",
                   "16, 33, 50, 67: crossed out, never read (too few for another window)"]
    crossed = [line for line in ax.lines if line.get_color() == "#999999"]
    assert len(crossed) == 4 + 2  # token 16 of every row is never read; 68 and 69 are dropped
    one = plots.ptb_grid(ptb_layout(69, 4, 5)).axes[0]
    assert any(t.get_text() == "68 dropped: too few for another row of 17" for t in one.texts)
    full = plots.ptb_grid(ptb_layout(64, 4, 5)).axes[0]  # rows of 16: every token read, no "never read" key
    assert [t.get_text()[:14] for t in full.get_legend().get_texts()][1:] == ["15, 31, 47, 63"]
    many = plots.ptb_grid(ptb_layout(80, 4, 5)).axes[0]  # rows of 20, 3 windows: 15 only a target, 16-19 unread
    assert many.get_legend().get_texts()[2].get_text().startswith("16, 17, 18, 19, ...: crossed out")
    none = plots.ptb_grid(ptb_layout(68, 4, 5)).axes[0]
    assert not any("dropped" in t.get_text() for t in none.texts) and "dropped" not in none.get_title()
    faces = {patch.get_facecolor()[:3] for patch in ax.patches}
    assert len(faces & {matplotlib.colors.to_rgb(c) for c in ("#d62728", "#2ca02c")}) < 2  # not red next to green
    with pytest.raises(ValueError, match="at most"):
        plots.ptb_grid(ptb_layout(200, batch_size=2, num_steps=5))


def test_reading_losses_draws_the_stateful_model_two_ways_and_the_plain_baseline_with_a_labelled_line():
    # Readers: the middle bar read as "a stateless model"; the axis started at 1; no units; no stateless baseline
    # (round 13). Round 23: the axis from 1.6 exaggerated a 0.16-nat gap, the dashed line had no label, the title ran
    # to two lines, and the "shuffled" bar (a case no one runs) left for docs. Now three bars from 0, each value inside
    # its bar's top (the dashed line crosses none), the dashed line at the carried loss labelled, a one-line title.
    import matplotlib.colors
    import pytest

    losses = {"carried": 1.83, "reset": 2.0, "plain": 1.99}
    fig = plots.reading_losses(losses)
    (ax,) = fig.axes
    ticks = [label.get_text() for label in ax.get_xticklabels()]
    assert ticks == ["stateful LSTM:\nstate carried\n(as trained)",
                     "the same model:\nstate reset before\nevery batch, so it\nreads each window alone",
                     "plain LSTM\n(stateful=False),\ntrained as usual"]
    texts = [t.get_text() for t in ax.texts]
    assert texts[:3] == ["1.83", "2.00", "1.99"]  # every bar labelled
    # round 25 (two readers): inside the bars' tops, "2.00" and "1.99" sat on the dashed 1.83 line; now above each bar
    assert all(label.xyann[1] > 0 and label.get_color() == "black" for label in ax.texts[:3])
    assert texts[3] == "1.83: the state\ncarried, as trained"  # the dashed line says what it is
    # round 23 (a reader): from 0 the 0.16-nat gap looked tiny, and a wider gap before the grey bar meant nothing.
    # Now a double arrow beside the baseline's bar spans the gap, labelled; the bars are evenly spaced
    (label,) = [t for t in ax.texts if t.get_text() == "0.16 nats"]
    assert 1.83 < label.get_position()[1] < 1.99
    (gap,) = [a for a in ax.texts if a.get_text() == "" and hasattr(a, "arrow_patch")]
    assert sorted([gap.xy[1], gap.xyann[1]]) == [1.83, 1.99] and gap.xy[0] > ax.patches[2].get_x() + 0.7
    centres = [p.get_x() + p.get_width() / 2 for p in ax.patches]
    assert centres[1] - centres[0] == pytest.approx(centres[2] - centres[1])
    faces = [matplotlib.colors.to_hex(p.get_facecolor()) for p in ax.patches]
    assert faces[0] == faces[1] != faces[2]  # one model in one colour, the baseline another
    assert [round(p.get_height(), 2) for p in ax.patches] == [1.83, 2.0, 1.99]
    assert ax.get_ylim()[0] == 0 and ax.get_ylim()[1] > 2.0
    dashed = [line for line in ax.lines if line.get_linestyle() == "--"]
    assert len(dashed) == 1 and dashed[0].get_ydata()[0] == 1.83
    title = ax.get_title()
    assert "Held-out" in title and "0.16 nats below the plain LSTM" in title and "\n" not in title
    assert "one seed" in title  # round 23 (a reader): the chart did not say it is one training run
    assert ax.get_legend() is None
    label = ax.get_ylabel()
    assert "nats" in label and "lower is better" in label and len(label.splitlines()) == 1
    with pytest.raises(ValueError, match="plain"):
        plots.reading_losses({"carried": 1.0, "reset": 2.0, "shuffled": 2.1})


def test_reading_losses_draws_the_uniform_guess_when_given():
    # round 25 (two readers): the 0.16-nat gap needs a scale: a dotted line at a uniform guess's loss, labelled
    fig = plots.reading_losses({"carried": 1.83, "reset": 2.0, "plain": 1.99}, uniform=3.4657)
    (ax,) = fig.axes
    dotted = [line for line in ax.lines if line.get_linestyle() == ":"]
    assert len(dotted) == 1 and dotted[0].get_ydata()[0] == 3.4657
    assert "3.47: a uniform\nguess" in [t.get_text() for t in ax.texts] and ax.get_ylim()[1] > 3.4657
    assert "0.16 nats below" in ax.get_title() and "one seed" in ax.get_title()


def test_series_groups_stacks_each_groups_series_in_rows_marks_its_cut_and_its_reset():
    # round 25 (two readers lost at "many independent series"): the groups as a grid, as the single stream got one
    import matplotlib.colors
    import pytest

    fig = plots.series_groups([[16, 17, 17, 18], [21, 22, 23, 24]], [[2, 0, 6, 4], [3, 7, 5, 1]], 5)
    (ax,) = fig.axes
    texts = [t.get_text() for t in ax.texts]
    assert [t for t in texts if t.startswith("reset")] == ["reset before batch 0", "reset before batch 3"]
    assert [t for t in texts if t.startswith("batch ")] == [f"batch {k}" for k in range(7)]  # counted across groups
    assert "group 0: cut to 16 steps" in texts and "group 1: cut to 21 steps" in texts
    assert [label.get_text() for label in ax.get_yticklabels()][:2] == ["row 0: series 2 (16 steps)",
                                                                        "row 1: series 0 (17 steps)"]
    cells = [p for p in ax.patches if p.get_width() == 1]
    assert len(cells) == 16 + 17 + 17 + 18 + 21 + 22 + 23 + 24  # every step drawn, the cut ones too
    faces = [matplotlib.colors.to_hex(p.get_facecolor()) for p in cells]
    assert faces.count("#ffffff") == 8 and faces.count("#d9d9d9") == 10  # a target only per row; 10 steps cut
    assert [h.get_label() for h in ax.get_legend().legend_handles] == [
        "read as x, coloured by batch", "a target only", "cut to the group's shortest: dropped"]
    with pytest.raises(ValueError, match="shortest first"):
        plots.series_groups([[17, 16]], [[0, 2]], 5)
    with pytest.raises(ValueError, match="one entry per series"):
        plots.series_groups([[16, 17]], [[0]], 5)


def test_step_predictions_draws_the_measured_series_and_the_step_by_step_predictions():
    # round 23 (a reader): the step-by-step predictions were only numbers; now a line each, the prediction dashed
    import pytest

    fig = plots.step_predictions([3200, 3201, 3202], [20.0, 20.5, 21.0], [20.1, 20.4, 21.3])
    (ax,) = fig.axes
    measured, predicted = ax.lines
    assert measured.get_label() == "measured" and predicted.get_label() == "predicted, one minute at a time"
    assert list(measured.get_xdata()) == [3200, 3201, 3202] and list(predicted.get_ydata()) == [20.1, 20.4, 21.3]
    assert measured.get_linestyle() == "-" and predicted.get_linestyle() == "--"
    assert ax.get_legend() is not None and ax.get_xlabel() == "minute" and "3 new minutes" in ax.get_title()
    assert "the state carries every earlier minute" in ax.get_title()  # round 25 (a reader): say what to see
    with pytest.raises(ValueError, match="same length"):
        plots.step_predictions([0, 1], [1.0], [1.0, 2.0])
    # round 25 (two readers: "could be a good model without any state"): the same model reset before each call
    fig = plots.step_predictions([3200, 3201, 3202], [20.0, 20.5, 21.0], [20.1, 20.4, 21.3], reset=[19.0, 19.1, 19.2])
    ax, err = fig.axes
    assert [line.get_label() for line in ax.lines][2] == "the same, state reset before each call"
    # round 27, second pass (two readers): the method has the same name in both panels' legends
    assert ax.lines[1].get_label() == "state carried"
    assert ax.lines[2].get_linestyle() == ":"
    # round 25, fourth edit (two readers: the dashed and dotted lines overlap for most of the plot): a panel below
    # draws each method's absolute error at every minute, the state carried solid red, the baseline dotted grey
    carried, baseline = err.lines
    assert np.allclose(carried.get_ydata(), [0.1, 0.1, 0.3]) and np.allclose(baseline.get_ydata(), [1.0, 1.4, 1.8])
    # round 27 (a reader: "make its message single"): each error line's label gives its mean squared error
    assert carried.get_label() == "state carried: mean squared error 0.0367" and baseline.get_linestyle() == ":"
    assert baseline.get_label() == "the same, state reset before each call: mean squared error 2.0667"
    # round 26 (a reader): the three lines overlap in the upper panel; its title no longer says only the dashed one
    # follows the measured line, it points to the errors below
    assert "both predictions stay close to the measured line" in ax.get_title() and "panel below" in ax.get_title()
    assert err.get_xlabel() == "minute" and "absolute error" in err.get_ylabel() and err.get_ylim()[0] == 0
    # round 25, second round (two readers: a reset before each call fed single minutes, which training never did;
    # the notebook's baseline is now each minute's last 10 minutes from a zero state, labelled by the caller), and
    # the y axis says the temperatures are scaled
    fig = plots.step_predictions([0, 1], [1.0, 2.0], [1.0, 2.0], reset=[1.0, 1.5], reset_label="last 10 minutes only")
    ax, err = fig.axes
    assert ax.lines[2].get_label() == "last 10 minutes only" and "scaled" in ax.get_ylabel()
    assert err.lines[1].get_label() == "last 10 minutes only: mean squared error 0.1250" and "scaled" in err.get_ylabel()
    with pytest.raises(ValueError, match="same length"):
        plots.step_predictions([0, 1], [1.0, 2.0], [1.0, 2.0], reset=[1.0])
    # round 26, third pass (two readers: "halves the MSE" yet "closer on 48 of 100 minutes"; the upper lines
    # overlap): given stretches, the error panel labels each with both mean squared errors and shades those where
    # the carried state's is lower (here the first: 0.0000 against 0.2500; the second: 0.2500 against 0.0000)
    fig = plots.step_predictions([0, 1, 2, 3], [1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.5, 1.5], reset=[1.5, 1.5, 1.0, 1.0],
                                 parts=[(0, 2), (2, 4)])
    ax, err = fig.axes
    assert [t.get_text() for t in err.texts] == ["MSE: state 0.0000\nlast 10 only 0.2500",
                                                 "MSE: state 0.2500\nlast 10 only 0.0000"]
    assert len(err.patches) == 1 and err.get_legend() is None and "shaded" in err.get_title()
    assert [line.get_xdata()[0] for line in err.lines[2:]] == [1.5]  # one divider, between the stretches


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


def test_validation_losses_draws_one_marker_per_curve_over_the_training_loss():
    fig = plots.validation_losses([("loop", [(0, 4.0), (2, 1.0)]), ("fit", [(0, 4.0), (2, 1.0)]),
                                   ("built-in", [(2, 1.0)])], train_losses=[3.0, 2.0], title="three ways")
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.lines] == ["training loss (each step)", "loop", "fit", "built-in"]
    assert list(ax.lines[0].get_xdata()) == [1, 2]  # training steps count from 1
    assert list(ax.lines[3].get_xdata()) == [2]  # no point where the curve has none
    assert len({line.get_marker() for line in ax.lines[1:]}) == 2 and ax.lines[1].get_markerfacecolor() == "none"
    assert ax.lines[2].get_zorder() > ax.lines[3].get_zorder() > ax.lines[1].get_zorder()  # the dot on top
    assert ax.get_yscale() == "log" and ax.get_title() == "three ways"


def test_epoch_ends_and_passes_draws_both_runs_the_epoch_ends_and_what_each_restored():
    """Notebook 04's finite-data figure (round 27, second pass): KeepBest's passes every K steps as a
    line, the built-in's epoch-end passes as open circles on them, a star and a square at the two
    restored passes with their values. Third pass: each run's stop a dashed line in its colour with
    its step, the dotted epoch-end lines only before the built-in's stop, "one curve" said in the
    legend, a linear axis from 0 with the far-off first pass a triangle at the top edge."""
    import pytest

    passes = [(step, 4.0 / (1 + step / 10) + (0.3 if step % 40 == 20 else 0.0)) for step in range(0, 241, 20)]
    ends = [(80, dict(passes)[80]), (160, dict(passes)[160])]
    fig = plots.epoch_ends_and_passes(passes, ends, best_pass=140, best_epoch_end=160, title="two runs")
    ax = fig.axes[0]
    labels = [line.get_label() for line in ax.lines]
    assert labels == ["KeepBest: a pass every 20 steps", "built-in: a pass when an epoch ends (the same passes: one curve)",
                      "KeepBest restores this pass's weights", "built-in restores this pass's weights",
                      "built-in stopped (step 160)", "KeepBest stopped (step 240)", "an epoch ends"]
    assert [line.get_xdata()[0] for line in ax.lines[4:]] == [160, 240, 80]  # the stops, then epoch ends before 160
    assert [line.get_linestyle() for line in ax.lines[4:]] == ["--", "--", ":"]
    assert list(ax.lines[1].get_xdata()) == [80, 160] and ax.lines[1].get_markerfacecolor() == "none"
    values = [t.get_text() for t in ax.texts]
    assert values[:2] == [f"{dict(passes)[140]:.3f}", f"{dict(passes)[160]:.3f}"]
    assert ax.get_yscale() == "linear" and ax.get_title() == "two runs"
    low, high = ax.get_ylim()
    assert low == 0 and passes[0][1] > high  # the first pass is off the scale ...
    off = [loss for _, loss in passes if loss > high]
    assert values[2:] == [] and 0 < len(off) < len(passes) / 3  # ... marked at the top edge, values in the legend
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert legend[-1] == "above the scale: " + ", ".join(f"{loss:.3g}" for loss in off)
    assert all(loss < high for _, loss in passes[3:])
    assert list(ax.get_xticks()) == [0, 80, 160, 240]
    with pytest.raises(ValueError, match="best_pass 30"):
        plots.epoch_ends_and_passes(passes, ends, best_pass=30, best_epoch_end=160)
    with pytest.raises(ValueError, match="at least one pass"):
        plots.epoch_ends_and_passes([], ends, best_pass=0, best_epoch_end=80)


def test_validation_losses_bad_input():
    import pytest

    with pytest.raises(ValueError, match="curves"):
        plots.validation_losses([])
    with pytest.raises(ValueError, match="curves"):
        plots.validation_losses([("empty", [])])


_PANELS = [("cycling", [[[0, 1], [2, 0]], [[1, 2], [0, 1]]]), ("once", [[[0, 1], [2]], [], []]),
           ("fresh", [[[0, 1], [2]], [[0, 1], [2]]])]


def test_validation_passes_draws_one_grid_per_panel_and_a_legend_where_red_is():
    fig = plots.validation_passes(_PANELS, panels_title="the toy set")
    assert len(fig.axes) == 3  # no reads: the grids only
    assert "the toy set" in [t.get_text() for t in fig.texts]
    cycling, once, fresh = fig.axes
    assert [cycling.get_xlim(), once.get_xlim()] == [(-0.5, 3.5), (-0.5, 3.5)]  # round 26: one width, the columns line up
    assert not cycling.get_xticks().size and not once.get_xticks().size  # no x axis: the cells carry the ids
    assert len(cycling.patches) == 8 and len(once.patches) == 3 and len(fresh.patches) == 6  # one cell per id read,
    # nothing else (round 25: no outline around a pass that starts partway; its first id says so)
    assert [t.get_text() for t in once.texts].count("empty: nothing left to read") == 2
    legend = fig.legends[0]  # one legend under the panels, naming only what is drawn
    assert [t.get_text() for t in legend.get_texts()] == ["batch 1, 3, ...", "batch 2, 4, ...",
                                                          "an id read a second time in the same pass"]
    # round 25, third edit: "read twice in one pass" let a half-red batch read as a fourth batch;
    # round 26: a red fill hid the batch an id was read in: a red frame on the batch's own fill
    red = legend.get_patches()[2].get_edgecolor()
    assert red not in [p.get_facecolor() for p in legend.get_patches()[:2]]  # red is none of the batch fills
    twice = [p.get_xy() for p in cycling.patches if p.get_edgecolor() == red]
    assert twice == [(3 - 0.5, 0 - 0.5),   # the second read of id 0 in pass 1, not its first
                     (3 - 0.5, 1 - 0.5)]   # the second read of id 1 in pass 2
    assert not [p for p in fresh.patches if p.get_edgecolor() == red]  # a new loop per pass reads nothing twice
    fills = [p.get_facecolor() for p in fresh.patches[:3]]
    assert fills[0] == fills[1] != fills[2]  # ids 0, 1 in the first batch, id 2 in the second
    assert [p.get_facecolor() for p in cycling.patches[2:4]] == [fills[2]] * 2  # batch 2 of pass 1: ids 2 and 0,
    # the second read of 0 framed, not refilled
    assert {p.get_facecolor() for ax in fig.axes for p in ax.patches} == set(fills)  # every read keeps its batch's fill
    short = plots.validation_passes([("too few", [[[0, 1]], [[2, 0]]])])  # each pass skips an id the other reads
    gone = [p for p in short.axes[0].patches if p.get_hatch() == "///"]
    assert [p.get_xy() for p in gone] == [(2.5, -0.5), (2.5, 0.5)]  # id 2 after pass 1's reads and a gap; id 1 after pass 2's
    assert [line.get_xdata()[0] for line in short.axes[0].lines] == [2, 2]  # the dotted line in the gap, each pass
    tinted = plots.validation_passes(_PANELS, answer=2).axes
    assert tinted[2].get_facecolor() != tinted[0].get_facecolor() and tinted[2].spines["top"].get_visible()
    assert tinted[2].title.get_color() == plots.COLORS[2] and not tinted[0].spines["top"].get_visible()
    assert [t.get_text() for t in short.axes[0].texts] == ["0", "1", "2", "2", "0", "1"]
    assert "not read in this pass (after the dotted line)" in [t.get_text() for t in short.legends[0].get_texts()]
    assert len(plots.validation_passes(_PANELS[1:]).legends[0].get_texts()) == 2  # nothing read twice: fills only


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



def test_keep_best_curve_marks_the_best_pass_the_passes_patience_counts_and_the_stop():
    import matplotlib

    from helpers.plots.validation import keep_best_curve

    curve = [(0, 8.0), (20, 1.0), (40, 1.5), (60, 1.2)]
    fig = keep_best_curve(curve, 20, patience=2, title="kept")
    (ax,) = fig.axes
    passes, best, best_line, counted, stop = ax.lines
    assert list(passes.get_xdata()) == [0, 20, 40, 60] and list(passes.get_ydata()) == [8.0, 1.0, 1.5, 1.2]
    assert list(best.get_xdata()) == [20] and best.get_marker() == "*"
    # round 25, third edit: a thin dotted line at the best loss, across the axes, labelled "best <value>":
    # every other pass is visibly above it (the near-miss label is gone)
    assert list(best_line.get_ydata()) == [1.0, 1.0] and best_line.get_linestyle() == ":"
    assert list(best_line.get_xdata()) == [0, 1]  # axes fraction: the whole width
    assert best_line.get_label().startswith("_")  # not in the legend: its own label says it
    assert list(counted.get_xdata()) == [40, 60] and counted.get_markerfacecolor() == "none"
    assert list(stop.get_xdata()) == [60, 60] and stop.get_label() == "fit stopped: 2 passes without a lower loss"
    assert matplotlib.colors.to_hex(counted.get_markeredgecolor()) == plots.COLORS[1]
    # round 26, second pass: a linear axis from 0 (a log axis made 0.18 against 0.27 look tiny); a pass far above
    # the late ones (8.0) is an open triangle at the top edge with its value
    assert [t.get_text() for t in ax.texts] == ["best 1.000", "1.200", "8"]  # best line, last pass, the clipped pass
    assert ax.get_yscale() == "linear" and ax.get_ylim()[0] == 0 and ax.get_title() == "kept"
    (clipped,) = ax.collections
    assert [tuple(p) for p in clipped.get_offsets()] == [(0, ax.get_ylim()[1])] and clipped.get_clip_on() is False
    back = keep_best_curve(curve, 20, patience=2, restored=1.0).axes[0]  # a pass after fit: the best weights
    ring = back.lines[-1]  # round 25, third edit: a ring around the star, not a marker at the stop line
    assert list(ring.get_xdata()) == [20] and list(ring.get_ydata()) == [1.0]
    assert ring.get_marker() == "o" and ring.get_markerfacecolor() == "none" and ring.get_markersize() > best.get_markersize()
    assert ring.get_label().startswith("_")  # round 25, fourth edit: one legend entry for the star and its ring
    entries = [t.get_text() for t in back.get_legend().get_texts()]
    assert entries.count("best pass, its weights restored after fit (1.000)") == 1
    assert not [e for e in entries if "kept" in e or e.startswith("restored")]  # no second entry for that point
    (pair,) = [h for h, label in zip(*back.get_legend_handles_labels()) if "restored" in label]
    assert pair is back.lines[1]  # the star's own line carries the label
    at_stop = [line for line in back.lines if line.get_marker() not in ("None", None, "")
               and 60 in list(line.get_xdata())]  # the only markers at the stop step: the passes themselves
    assert [line.get_label() for line in at_stop] == ["validation loss of each pass",
                                                      "since the best, none lower: patience counts these"]
    assert [t.get_text() for t in back.texts] == ["best 1.000", "1.200", "8"]  # no label for the ring: the legend has it
    fig = back.figure  # round 25: the legend covered the middle of the curve; now it is clear of every
    fig.canvas.draw()  # marker and left of the stop line
    box = back.get_legend().get_window_extent()
    points = back.transData.transform([(step, loss) for step, loss in curve])
    assert not [tuple(p) for p in points if box.contains(*p)]
    assert box.x1 < back.transData.transform((60, 1.0))[0]
    losses = [8.3, 3.5, 2.6, 1.45, 0.85, 0.78, 0.98, 0.91, 0.86, 0.85, 0.372, 0.953, 0.192, 0.65, 0.224, 0.18,
              0.27, 0.25, 0.3, 0.245, 0.272]  # the notebook's run, rounded: its near miss sits 60 steps left
    noisy = keep_best_curve(list(zip(range(0, 401, 20), losses)), 300, patience=5, restored=0.18).axes[0]
    noisy.figure.canvas.draw()
    # round 26, second pass: readers took the near miss at 240 (0.192) for the best; its value is labelled again
    # round 26, third pass: it says what it is, under the best line; the triangles have a legend entry
    # round 27: the triangles' values above them, apart, under the title; second pass: "next lowest" (what it is)
    assert [t.get_text() for t in noisy.texts] == ["best 0.180", "0.272", "next lowest 0.192", "8.3", "3.5", "2.6"]
    values = [t.get_window_extent() for t in noisy.texts[3:]]
    assert all(a.x1 < b.x0 for a, b in zip(values, values[1:]))  # side by side, none touching the next
    assert all(v.y0 > noisy.transData.transform((0, noisy.get_ylim()[1]))[1] for v in values)  # above the top edge
    assert all(not v.overlaps(noisy.title.get_window_extent()) for v in values)
    assert noisy.texts[2].get_window_extent().y1 < noisy.transData.transform((240, 0.18))[1]
    assert [t.get_text() for t in noisy.get_legend().get_texts()][-1] == "above the scale (first passes): value above"
    box = noisy.get_legend().get_window_extent()
    assert not [p for p in noisy.transData.transform(list(zip(range(0, 401, 20), losses))) if box.contains(*p)]
    label = noisy.texts[0].get_window_extent()
    ticks = [t.get_window_extent() for t in noisy.get_xticklabels() if t.get_text()]
    assert not [t for t in ticks if t.overlaps(label)] and label.y0 >= noisy.transData.transform((0, 0.18))[1]
    near = noisy.transData.transform((240, 0.192))[1] - noisy.transData.transform((240, 0.18))[1]
    assert near > 2  # the near miss sits above the best line, in pixels
    points = noisy.transData.transform(list(zip(range(0, 401, 20), losses)))
    assert not [tuple(p) for p in points if label.contains(*p)]  # the label covers no pass
    still = keep_best_curve(curve, 20, patience=3).axes[0]  # fewer passes after the best than patience
    assert [line.get_label() for line in still.lines] == ["validation loss of each pass",
                                                         "the best pass: its weights are kept", "_best"]
    with pytest.raises(ValueError, match="curve is empty"):
        keep_best_curve([], 0)
    with pytest.raises(ValueError, match=r"best_step 30 is not the step of a pass: \[0, 20, 40, 60\]"):
        keep_best_curve(curve, 30)

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
    assert any(t.startswith("A Callback runs only before a step or after apply_gradients, never between them")
               and t.endswith("its sync leaves past B equal to B, not one update behind.")
               and "below" not in t for t in texts)  # self-contained: the notebook's Callback cell prints the same
    assert any(t.startswith("B's weights from before the update") for t in texts)  # what the sync copies


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


def test_snapshot_labels_draws_the_synced_run_as_steps_the_others_as_lines_with_the_exact_value_and_ticks():
    import numpy as np
    import pytest

    labels = {"no copy": np.linspace(0.0, 1.0, 35), "hard copy": np.repeat([0.0, 0.5, 0.8, 0.9], [11, 10, 10, 4])}
    fig = plots.snapshot_labels(labels, exact=1.5, syncs=("hard copy", 10))
    ax = fig.axes[0]
    lines = ax.get_lines()
    assert [line.get_label() for line in lines[:2]] == list(labels)
    assert lines[1].get_drawstyle() == "steps-post"  # the synced run's label holds between syncs: a staircase
    assert lines[0].get_drawstyle() == "default"  # any other run: a plain line (the staircase is the copy's alone)
    np.testing.assert_array_equal(lines[1].get_ydata(), labels["hard copy"])
    assert lines[2].get_label() == "exact value of point 0" and lines[2].get_linestyle() == "--"
    assert list(lines[2].get_ydata()) == [1.5, 1.5]
    ticks = lines[-1]
    assert list(ticks.get_xdata()) == [0, 10, 20, 30] and ticks.get_marker() == "|"
    assert ticks.get_color() == lines[1].get_color()  # in the hard copy's colour
    assert ax.get_ylim()[0] < 0.0 and ax.get_ylim()[1] > 1.5  # every line and the exact value inside
    colours = [line.get_color() for line in plots.snapshot_targets(
        {name: np.ones(3) for name in labels}).axes[0].get_lines()]
    assert colours == [line.get_color() for line in lines[:2]]  # the same runs in the same colours
    short = plots.snapshot_labels(labels, exact=0.0, steps=12, point=3).axes[0]
    assert all(line.get_xdata().size == 12 for line in short.get_lines()[:2])
    assert short.get_ylabel() == "label for point 3\n(reward + 0.9 × next-point guess)"
    noted = plots.snapshot_labels(labels, exact=0.0, note="a note").axes[0]
    assert [t.get_text() for t in noted.texts] == ["a note"] and not short.texts
    with pytest.raises(ValueError, match="at least one run"):
        plots.snapshot_labels({}, exact=0.0)
    with pytest.raises(ValueError, match=r"labels\['no copy'\]"):
        plots.snapshot_labels({"no copy": np.zeros((2, 2))}, exact=0.0)
    with pytest.raises(ValueError, match="steps must be"):
        plots.snapshot_labels(labels, exact=0.0, steps=0)
    with pytest.raises(ValueError, match="syncs names a run"):
        plots.snapshot_labels(labels, exact=0.0, syncs=("soft copy", 10))
    with pytest.raises(ValueError, match="syncs' interval"):
        plots.snapshot_labels(labels, exact=0.0, syncs=("hard copy", 0))


def test_snapshot_ring_colours_each_point_by_its_reward_and_draws_the_arrows_asked_for():
    from helpers import snapshot_data

    data = snapshot_data.ring()
    fig = plots.snapshot_ring(data.states, data.rewards, arrows=4)
    ax = fig.axes[0]
    dots = ax.collections[0]
    np.testing.assert_allclose(dots.get_offsets(), data.states)  # every point, where it is
    np.testing.assert_allclose(dots.get_array(), data.rewards[:, 0])  # coloured by its reward
    assert sum(type(t).__name__ == "Annotation" for t in ax.texts) == 4
    assert "32 points" in ax.get_title() and "0.9" in ax.get_title()
    with pytest.raises(ValueError, match="states"):
        plots.snapshot_ring(np.zeros((3, 3)), np.zeros(3))
    with pytest.raises(ValueError, match="rewards"):
        plots.snapshot_ring(data.states, np.zeros(5))
    with pytest.raises(ValueError, match="arrows"):
        plots.snapshot_ring(data.states, data.rewards, arrows=33)


def test_snapshot_mean_teacher_shades_each_models_classes_and_marks_the_labeled_points():
    import numpy as np
    import pytest

    below = lambda x: np.stack([x[:, 1], -x[:, 1]], axis=1)  # class 0 where y > 0
    left = lambda x: np.stack([-x[:, 0], x[:, 0]], axis=1)  # class 1 where x > 0
    x_labeled, y_labeled = np.array([[0.0, 1.0], [0.0, -1.0]]), np.array([0, 1])
    x_unlabeled = np.random.default_rng(0).normal(size=(50, 2))
    seen = []
    recorded = lambda x: seen.append(x) or left(x)
    fig = plots.snapshot_mean_teacher({"labels only": below, "with the teacher": recorded}, x_labeled, y_labeled,
                                      x_unlabeled)
    assert [ax.get_title() for ax in fig.axes] == ["labels only", "with the teacher"]
    plane = seen[0]  # the model is asked about a grid over every point, labeled and unlabeled
    points = np.concatenate([x_labeled, x_unlabeled])
    assert (plane.min(axis=0) < points.min(axis=0)).all() and (plane.max(axis=0) > points.max(axis=0)).all()
    for ax in fig.axes:
        filled = [c for c in ax.collections if type(c).__name__ in ("QuadContourSet", "PathCollection")]
        sizes = sorted(len(c.get_offsets()) for c in filled if type(c).__name__ == "PathCollection")
        assert sizes == [1, 1, 50]  # the unlabeled points, one labeled point per class
        assert len(filled) == 4  # and the shaded regions
    key = [t.get_text() for t in fig.legends[0].get_texts()]
    assert key == ["labeled, class 0", "labeled, class 1", "unlabeled"]
    with pytest.raises(ValueError, match="empty"):
        plots.snapshot_mean_teacher({}, x_labeled, y_labeled, x_unlabeled)
    with pytest.raises(ValueError, match="x_labeled"):
        plots.snapshot_mean_teacher({"a": below}, x_labeled, y_labeled[:1], x_unlabeled)
    with pytest.raises(ValueError, match="x_unlabeled"):
        plots.snapshot_mean_teacher({"a": below}, x_labeled, y_labeled, np.zeros((3, 3)))


def test_snapshot_teacher_curves_draws_the_student_thin_the_teacher_thick_and_the_labels_only_run_grey():
    import numpy as np
    import pytest

    student, teacher, alone = [0.4, 0.9, 0.8, 0.95], [0.4, 0.6, 0.75, 0.85], [0.4, 0.8, 0.8, 0.8]
    ax = plots.snapshot_teacher_curves(student, teacher, labels_only=alone).axes[0]
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == ["labels only", "student (trained)",
                                                    "teacher (soft copy of the student)"]
    for line, curve in zip(lines, (alone, student, teacher)):  # one point per step, steps 1, 2, ...
        assert list(line.get_xdata()) == [1, 2, 3, 4] and list(line.get_ydata()) == curve
    assert lines[2].get_linewidth() > 2 * lines[1].get_linewidth()  # the teacher stands out
    assert lines[0].get_color() == "0.55"  # grey: the baseline
    assert ax.get_ylim()[0] <= 0.38 and ax.get_ylim()[1] == 1.0  # every point visible (lowest 0.4)
    assert ax.get_xlabel() == "training step" and ax.get_ylabel() == "test accuracy"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [line.get_label() for line in lines]
    assert len(plots.snapshot_teacher_curves(student, teacher).axes[0].get_lines()) == 2  # no baseline given
    with pytest.raises(ValueError, match="one value per step"):
        plots.snapshot_teacher_curves(student, teacher[:3])
    with pytest.raises(ValueError, match="teacher must be a non-empty 1-D"):
        plots.snapshot_teacher_curves(student, np.zeros((2, 2)))
    # round 27, second pass: tau shades the first 1/tau steps and says why the teacher lags there
    shaded = plots.snapshot_teacher_curves(student * 10, teacher * 10, tau=0.25).axes[0]
    (band,) = shaded.patches
    assert np.allclose([band.get_x(), band.get_x() + band.get_width()], [0.0, 4.0])  # steps 0 to 1/tau
    (note,) = shaded.texts
    assert "1/τ = 4 steps" in note.get_text() and "τ = 0.25 of the way per step" in note.get_text()
    assert not plots.snapshot_teacher_curves(student, teacher).axes[0].patches  # no tau: no band
    # round 27, fourth pass: ramp_steps says the consistency weight ramps up over the shaded steps too
    assert "ramps up" not in note.get_text()
    (ramped,) = plots.snapshot_teacher_curves(student * 10, teacher * 10, tau=0.25, ramp_steps=4).axes[0].texts
    assert ramped.get_text().endswith("the consistency weight ramps up from 0 over the same 4 steps")
    (other,) = plots.snapshot_teacher_curves(student * 10, teacher * 10, tau=0.25, ramp_steps=6).axes[0].texts
    assert other.get_text().endswith("ramps up from 0 over the first 6 steps")
    with pytest.raises(ValueError, match="tau must be in"):
        plots.snapshot_teacher_curves(student, teacher, tau=0.0)
    # round 27, third pass: one point per fit epoch of `every` steps, point k at step k·every
    sparse = plots.snapshot_teacher_curves(student, teacher, labels_only=alone, every=5).axes[0]
    assert all(list(line.get_xdata()) == [5, 10, 15, 20] for line in sparse.get_lines())
    assert sparse.get_xlim()[1] >= 20 and "every 5 steps" in sparse.get_title()
    assert "after each step" in ax.get_title()
    with pytest.raises(ValueError, match="every must be a positive int"):
        plots.snapshot_teacher_curves(student, teacher, every=0)


def test_snapshot_teacher_step_draws_evaluate_update_and_sync_with_the_teachers_label_dashed():
    fig = plots.snapshot_teacher_step()
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.texts]
    steps = [t.splitlines()[0] for t in texts if t[:2] in ("1.", "2.", "3.")]
    assert sorted(steps) == ["1. evaluate", "2. update the student", "3. soft sync, after the update"]
    assert "teacher ← τ·student + (1 − τ)·teacher" in "\n".join(texts)  # the soft sync's rule, as make_soft_sync
    assert {"student\n(trained)", "teacher\n(frozen)"} <= set(texts)
    # round 27, third pass: the teacher's output is the student's target; only the unlabeled points are shifted;
    # the loss box says what the code computes (the mean of squared gaps between class probabilities)
    assert "target: tf.stop_gradient\n(no gradient back)" in texts and "labeled x as they are;" in "\n".join(texts)
    assert "mean of\n(target − prediction)²" in "\n".join(texts)
    assert not any(t.startswith("label:") or "guess" in t for t in texts)  # one word for the teacher's output
    arrows = [a for a in ax.texts if type(a).__name__ == "Annotation"]
    assert len(arrows) == 6  # batch → student, batch → teacher, student → loss, teacher → loss, update, sync
    dashed = [a for a in arrows if a.arrow_patch.get_linestyle() == "--"]
    assert len(dashed) == 1  # only the teacher's label: no gradient back through it
    (x0, y0), (x1, y1) = dashed[0].xyann, dashed[0].xy
    assert y0 < y1 and x0 < x1  # from the teacher (below) up to the loss
    sync = [a for a in arrows if a.xyann[0] == a.xy[0]]  # the one vertical arrow: student above, teacher below
    assert len(sync) == 1 and sync[0].xyann[1] > sync[0].xy[1]
    # round 27, second pass: the sync is a weight copy, not data: the one dotted arrow, labelled "weights"
    assert [a for a in arrows if a.arrow_patch.get_linestyle() == ":"] == sync and "weights" in texts
    assert sum(a.arrow_patch.get_linestyle() == "-" for a in arrows) == 4  # the rest: data and the update
    # the step numbers in reading order: 1 at the top left, 2 at the top right, 3 on the sync arrow
    place = {t.get_text()[:2]: t.get_position() for t in ax.texts if t.get_text()[:2] in ("1.", "2.", "3.")}
    assert place["1."][0] < place["2."][0] and place["1."][1] > place["3."][1] < place["2."][1]
    assert abs(place["3."][0] - sync[0].xy[0]) < 0.5 and sync[0].xy[1] < place["3."][1] < sync[0].xyann[1]
