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


def test_accumulation_memory_and_curves_draws_both_panels():
    import pytest

    fig = plots.accumulation_memory_and_curves([64, 32, 16], [3.0, 1.6, 0.9],
                                               {"full batch": [1.0, 0.6], "accumulated": [1.0, 0.6]}, effective=64)
    left, right = fig.axes
    assert list(left.lines[0].get_ydata()) == [3.0, 1.6, 0.9] and len(right.lines) == 2
    assert [t.get_text() for t in right.get_legend().get_texts()] == ["full batch", "accumulated"]
    with pytest.raises(ValueError, match="equal length"):
        plots.accumulation_memory_and_curves([64], [1.0, 2.0], {"a": [1.0]}, effective=64)
    with pytest.raises(ValueError, match="curves is empty"):
        plots.accumulation_memory_and_curves([64], [1.0], {}, effective=64)


# --------------------------------------------------------------------------- 03 batch iteration


# --------------------------------------------------------------------------- 04 validation queues


# --------------------------------------------------------------------------- 05 network snapshots
