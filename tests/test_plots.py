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


def test_validation_passes_draws_the_curve_and_one_grid_per_panel():
    fig = plots.validation_passes(_history(), [("cycling", [[[0, 1], [2, 0]], [[1, 2], [0, 1]]]),
                                               ("once", [[[0, 1], [2]], [], []]),
                                               ("fresh", [[[0, 1], [2]], [[0, 1], [2]]])], without_eval=_history())
    assert len(fig.axes) == 4
    top = fig.axes[0]
    assert "10 examples every 4 steps" in top.get_title()
    assert top.lines[-1].get_label() == "the same training without evaluation"
    assert fig.axes[1].images[0].get_array().shape == (2, 4)
    assert len(fig.axes[1].lines) == 2 and len(fig.axes[2].lines) == 1  # one line between two batches, per pass
    assert [t.get_text() for t in fig.axes[2].texts].count("empty") == 2


# --------------------------------------------------------------------------- 05 network snapshots


def test_snapshot_lag_marks_each_sync_between_the_peak_and_the_drop_of_the_periodic_curve():
    import numpy as np
    import pytest

    curves = {"hard every step": np.ones(30), "hard every 10": np.arange(30) % 10 + 1.0, "soft": np.full(30, 9.0)}
    fig = plots.snapshot_lag(curves, every=10, level=(10.0, "1/τ = 10"))
    ax = fig.axes[0]
    lines = ax.get_lines()
    assert [line.get_label() for line in lines[:3]] == list(curves)
    marks = [line for line in lines if line.get_linestyle() == ":"]
    # the lag at step t is measured at t's evaluation; the periodic copy syncs in steps 10, 20 after
    # their evaluation, so the mark sits between the peak (t) and the drop (t + 1); none after the last step
    assert [float(m.get_xdata()[0]) for m in marks] == [10.5, 20.5]
    steps = np.arange(1, 31)
    peaks = steps[:-1][np.diff(curves["hard every 10"]) < 0]  # the last step before each drop
    assert list(peaks) == [10, 20] and all(curves["hard every 10"][p - 1] == 10.0 for p in peaks)
    level = [line for line in lines if line.get_linestyle() == "--"]
    assert len(level) == 1 and list(level[0].get_ydata()) == [10.0, 10.0]
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert legend == list(curves) + ["1/τ = 10", "sync of the every-10 copy (between two evaluations)"]  # one entry
    assert ax.get_xlabel().startswith("training step t") and "updates behind" in ax.get_ylabel()
    with pytest.raises(ValueError, match="at least one"):
        plots.snapshot_lag({})
    with pytest.raises(ValueError, match=r"curves\['bad'\]"):
        plots.snapshot_lag({"bad": np.zeros((2, 2))})
    with pytest.raises(ValueError, match="every must be a positive"):
        plots.snapshot_lag(curves, every=0)


def test_snapshot_step_order_shows_evaluate_sync_update_and_the_past_one_update_behind():
    import pytest

    fig = plots.snapshot_step_order(2)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert [t for t in texts if t.startswith(("evaluate", "sync", "update"))] == [
        "evaluate both\non A(x): one loss", "sync: past B ← B\n(weights + BN stats)", "update A and B\n(not past B)"] * 2
    assert any(t.startswith("bold box: the network that phase changes") for t in texts)  # the key to the boxes
    versions = [t for t in texts if t.startswith("$")]
    # per phase: B's version, then the past copy's: evaluate (t, t-1), sync (t, t), update (t+1, t), ...
    assert versions[:6] == [r"$\theta_{t}$", r"$\theta_{t-1}$", r"$\theta_{t}$", r"$\theta_{t}$",
                            r"$\theta_{t+1}$", r"$\theta_{t}$"]
    assert versions[6:8] == [r"$\theta_{t+1}$", r"$\theta_{t}$"]  # step t + 1 evaluates with the past one behind
    assert "step t" in texts and "step t + 1" in texts
    for bad in (0, 5, True, 1.5):
        with pytest.raises(ValueError, match="steps must be an int from 1 to 4"):
            plots.snapshot_step_order(bad)
