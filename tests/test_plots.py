"""Smoke tests: every figure function draws from small data and returns a Figure.

Each topic adds one test per figure function in its section below.
"""

import matplotlib

matplotlib.use("Agg")

from helpers import plots  # noqa: E402


def test_new_figure_gives_styled_axes():
    fig, axes = plots.new_figure(2, width=6, height=3)
    assert len(axes) == 2 and tuple(fig.get_size_inches()) == (6.0, 3.0)


# --------------------------------------------------------------------------- 01 queue decoupling


def test_evaluations_per_dequeue_marks_each_dequeue_and_each_accepted_iterate():
    import pytest

    fig = plots.evaluations_per_dequeue([[133.0, 40.0, 430.0, 2.0], [1.5, 0.4, 0.01]], [[2, 4], [2, 3]])
    ax = fig.axes[0]
    dashed = [line for line in ax.lines if line.get_linestyle() == "--" and len(line.get_xdata()) == 2]
    assert len(dashed) == 2 and ax.get_yscale() == "log"
    marks = {}
    for line in ax.lines:
        if line.get_marker() in ("s", "o", "x") and len(line.get_xdata()):
            marks.setdefault(line.get_marker(), []).extend(float(v) for v in line.get_xdata())
    # evaluation numbers across both batches: starts 1 and 5, iterates 2, 4, 6, 7, the rejected probe 3
    assert sorted(marks["s"]) == [1, 5] and sorted(marks["o"]) == [2, 4, 6, 7] and marks["x"] == [3]
    with pytest.raises(ValueError, match="one list per batch"):
        plots.evaluations_per_dequeue([[1.0]], [])


# --------------------------------------------------------------------------- 02 gradient accumulation


def test_accumulation_memory_labels_sizes_with_counts_and_draws_the_fixed_part():
    import pytest

    fig = plots.accumulation_memory([1, 2, 4], [3.0, 1.6, 0.9], effective=64, fixed_mib=0.5, fixed_label="weights")
    ax = fig.axes[0]
    assert list(ax.lines[0].get_ydata()) == [3.0, 1.6, 0.9]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["64 (×1)", "32 (×2)", "16 (×4)"]
    floor = [line for line in ax.lines if line.get_linestyle() == "--"]
    assert len(floor) == 1 and list(floor[0].get_ydata()) == [0.5, 0.5]
    assert "weights" in [t.get_text() for t in ax.get_legend().get_texts()]
    with pytest.raises(ValueError, match="equal length"):
        plots.accumulation_memory([1], [1.0, 2.0], effective=64, fixed_mib=0.5, fixed_label="w")
    with pytest.raises(ValueError, match="divide effective=64"):
        plots.accumulation_memory([3], [1.0], effective=64, fixed_mib=0.5, fixed_label="w")


def test_accumulation_curves_draws_one_line_per_run_with_the_mse_label():
    import pytest

    fig = plots.accumulation_curves({"large": [1.0, 0.6], "ours": [1.0, 0.6], "keras": [1.2, 0.7]}, xlabel="epoch")
    ax = fig.axes[0]
    assert len(ax.lines) == 3 and ax.get_ylabel() == "training loss (MSE)" and ax.get_xlabel() == "epoch"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["large", "ours", "keras"]
    with pytest.raises(ValueError, match="curves is empty"):
        plots.accumulation_curves({}, xlabel="epoch")


# --------------------------------------------------------------------------- 03 batch iteration


def test_ptb_grid_draws_every_token_of_a_layout():
    import matplotlib.colors
    import pytest

    from helpers.batching import ptb_layout

    layout = ptb_layout(70, batch_size=4, num_steps=5)
    fig = plots.ptb_grid(layout)
    labels = {t.get_text() for t in fig.axes[0].texts}
    assert {str(p) for p in range(68)} <= labels  # every token of the 4 x 17 grid, by position
    assert any("68, 69" in text for text in labels)  # the two the reshape drops
    assert "batch 3 = window 0 again: reset the state" in labels  # where the rows jump back
    faces = {patch.get_facecolor()[:3] for patch in fig.axes[0].patches}
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


def test_validation_passes_draws_the_run_and_one_grid_per_panel():
    import matplotlib

    losses = [4.0, 3.0, 2.5, 2.0, 1.8, 1.7, 1.6, 1.5]
    fig = plots.validation_passes(losses, [(0, 5.0), (4, 2.2), (8, 1.9)], _PANELS, examples=10,
                                  panels_title="the toy set")
    assert len(fig.axes) == 4
    top = fig.axes[0]
    assert top.get_title() == "A full pass over all 10 validation examples at step 0 and every 4 steps"
    train, val = top.lines[:2]
    assert list(train.get_xdata()) == list(range(1, 9)) and list(train.get_ydata()) == losses  # raw, not smoothed
    assert list(val.get_xdata()) == [0, 4, 8]  # step 0 drawn: before training
    assert [t.get_text() for t in top.texts] == ["5.00", "2.20", "1.90"]  # each pass's value written by its dot
    assert top.get_yscale() == "log" and top.yaxis.get_major_formatter()(0.1, 0) == "0.1"  # plain tick labels
    assert "the toy set" in [t.get_text() for t in fig.subfigs[1].texts]
    cycling, once, fresh = fig.axes[1:]
    assert [cycling.get_xlim(), once.get_xlim()] == [(-0.5, 3.5), (-0.5, 2.5)]  # each panel as wide as its longest pass
    assert len(cycling.patches) == 8 and len(once.patches) == 3 and len(fresh.patches) == 6  # one cell per id read
    assert [t.get_text() for t in once.texts].count("empty") == 2
    red = matplotlib.colors.to_rgba(plots.COLORS[1])
    twice = [p.get_xy() for p in cycling.patches if p.get_edgecolor() == red]
    assert twice == [(3 - 0.5, 0 - 0.5), (3 - 0.5, 1 - 0.5)]  # id 0 again in pass 1, id 1 again in pass 2
    assert not [p for p in fresh.patches if p.get_edgecolor() == red]  # a new loop per pass reads nothing twice
    fills = [p.get_facecolor() for p in fresh.patches[:3]]
    assert fills[0] == fills[1] != fills[2]  # ids 0, 1 in the first batch, id 2 in the second


def test_validation_passes_draws_which_training_batch_each_step_reads():
    fig = plots.validation_passes([3.0, 2.0, 1.5, 1.0], [(0, 3.5), (2, 1.8), (4, 1.1)], _PANELS[:1],
                                  reads=[("kept", [1, 2, 3, 4]), ("restarted", [1, 2, 1, 2])])
    assert len(fig.axes) == 3
    right = fig.axes[1]
    kept, restarted = right.lines[:2]
    assert list(kept.get_ydata()) == [1, 2, 3, 4] and list(restarted.get_ydata()) == [1, 2, 1, 2]
    assert kept.get_linestyle() == "-" and restarted.get_linestyle() == "--"
    assert [line.get_xdata()[0] for line in right.lines[2:]] == [0, 2, 4]  # a dotted line at each evaluation


def test_validation_passes_titles_and_bad_input():
    import pytest

    fig = plots.validation_passes([3.0, 2.0, 1.0], [(1, 1.5), (3, 1.2)], _PANELS[:1])
    assert fig.axes[0].get_title() == "A full pass over the validation set every 2 steps"  # no step 0: not claimed
    with pytest.raises(ValueError, match="train_loss"):
        plots.validation_passes([], [], _PANELS[:1])
    with pytest.raises(ValueError, match="panels"):
        plots.validation_passes([1.0], [], [])
    with pytest.raises(ValueError, match="at least one pass"):
        plots.validation_passes([1.0], [], [("nothing", [[], []])])
    with pytest.raises(ValueError, match=r"reads\['short'\] has 1 steps, train_loss 2"):
        plots.validation_passes([1.0, 0.5], [], _PANELS[:1], reads=[("short", [1])])


# --------------------------------------------------------------------------- 05 network snapshots


def test_snapshot_lag_draws_one_line_per_policy_and_the_sync_marks():
    import numpy as np
    import pytest

    curves = {"hard every step": np.full(30, 0.1), "hard every 10": (np.arange(30) % 10 + 1) / 10,
              "soft": np.linspace(0.1, 0.5, 30)}
    fig = plots.snapshot_lag(curves, every=10)
    ax = fig.axes[0]
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels[:3] == list(curves) and len(labels) == 3 + 3  # three curves, sync marks at 1, 11, 21
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert legend == list(curves) + ["hard sync (every 10)"]  # one legend entry for all the marks
    assert ax.get_xlabel() == "training step"
    with pytest.raises(ValueError, match="at least one"):
        plots.snapshot_lag({})
    with pytest.raises(ValueError, match=r"curves\['bad'\]"):
        plots.snapshot_lag({"bad": np.zeros((2, 2))})
