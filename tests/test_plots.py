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


# --------------------------------------------------------------------------- 05 network snapshots
