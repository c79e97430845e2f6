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


def test_ptb_grid_draws_every_token_of_a_layout():
    import pytest

    from helpers.batching import ptb_layout

    layout = ptb_layout(70, batch_size=4, num_steps=5)
    fig = plots.ptb_grid(layout)
    labels = {t.get_text() for t in fig.axes[0].texts}
    assert {str(p) for p in range(68)} <= labels  # every token of the 4 x 17 grid, by position
    assert any("68, 69" in text for text in labels)  # the two the reshape drops
    with pytest.raises(ValueError, match="at most"):
        plots.ptb_grid(ptb_layout(200, batch_size=2, num_steps=5))


# --------------------------------------------------------------------------- 04 validation queues


# --------------------------------------------------------------------------- 05 network snapshots
