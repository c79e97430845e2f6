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


# --------------------------------------------------------------------------- 02 gradient accumulation


# --------------------------------------------------------------------------- 03 batch iteration


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
    fig = plots.validation_passes(_history(), [("cycling", [[0, 1, 2, 0], [1, 2, 0, 1]]),
                                               ("fresh", [[0, 1, 2], [0, 1, 2]])])
    assert len(fig.axes) == 3
    assert "10 examples every 4 steps" in fig.axes[0].get_title()
    assert fig.axes[1].images[0].get_array().shape == (2, 4)


# --------------------------------------------------------------------------- 05 network snapshots
