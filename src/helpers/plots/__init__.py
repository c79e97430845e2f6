"""Every figure of the workbook: one function per figure, taking the data and returning the Figure.

A notebook draws a figure in one line (``plots.memory_and_curves(...)``); the figure's data is
computed in the notebook, where the learner can see it. Each function is smoke-tested in
``tests/test_plots.py``. :func:`apply_style` gives every figure the same look.
"""

from helpers.plots._style import COLORS, apply_style, new_figure
from helpers.plots.decoupling import held_vs_leaky
from helpers.plots.accumulation import accumulation_memory, accumulation_windows
from helpers.plots.batching import ptb_grid, reading_losses, series_groups, step_predictions
from helpers.plots.validation import (epoch_ends_and_passes, keep_best_curve, reported_losses, validation_curve,
                                      validation_losses, validation_passes)
from helpers.plots.snapshots import (snapshot_labels, snapshot_lag, snapshot_mean_teacher, snapshot_ring,
                                     snapshot_step_order, snapshot_targets, snapshot_teacher_curves,
                                     snapshot_teacher_step)

__all__ = ["COLORS", "apply_style", "new_figure", "held_vs_leaky", "accumulation_memory",
           "accumulation_windows", "ptb_grid", "reading_losses", "series_groups", "step_predictions",
           "epoch_ends_and_passes", "keep_best_curve", "reported_losses", "validation_curve", "validation_losses",
           "validation_passes", "snapshot_labels", "snapshot_lag", "snapshot_mean_teacher", "snapshot_ring",
           "snapshot_step_order", "snapshot_targets", "snapshot_teacher_curves", "snapshot_teacher_step"]
