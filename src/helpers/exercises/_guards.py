"""Models that record how the learner's code ran them, so that a rule is checked by what happened.

A :class:`RecordingDense` layer notes, every time it runs (eagerly, through ``model.call``, inside
any ``tf.function``), how many rows it ran on, and, when the Python call comes from one of the
workbook's helper modules, which one. A rule such as "never more than ``limit`` examples at once" or
"write the loop yourself, not with ``helpers.accumulation``" is then checked on the model's
:class:`Record`, whichever way the learner called the model. The layer cannot be copied
(``clone_model`` or ``from_config`` fail), so a copy cannot run unrecorded.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import keras
import tensorflow as tf

__all__ = ["Record", "RecordingDense", "HELPERS_DIR"]

HELPERS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # src/helpers


class Record:
    """What the recording layers of one model saw: the most rows in one call, the rows the first
    layer ran on in all (a pass over ``n`` examples adds ``n``), and the helper modules (among
    ``watched``, file names in ``helpers/``) that ran the model.

    >>> record = Record(watched=("accumulation.py",))
    >>> model = keras.Sequential([keras.Input((3,)), RecordingDense(2, record, first=True)])
    >>> _ = model(tf.ones([5, 3])); _ = model.call(tf.ones([7, 3]))
    >>> record.most, record.rows, record.helpers
    (7, 12, [])
    """

    def __init__(self, watched: tuple[str, ...] = ()):
        self.watched = tuple(watched)
        self._most = tf.Variable(0, dtype=tf.int64, trainable=False)
        self._rows = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.helpers: list[str] = []

    @property
    def most(self) -> int:
        return int(self._most.numpy())

    @property
    def rows(self) -> int:
        return int(self._rows.numpy())

    def reset(self) -> None:
        self._most.assign(0)
        self._rows.assign(0)
        self.helpers.clear()

    def note(self, inputs: Any, first: bool) -> None:
        rows = tf.shape(inputs, out_type=tf.int64)[0]
        self._most.assign(tf.maximum(self._most, rows))
        if first:
            self._rows.assign_add(rows)
        frame = sys._getframe(2)
        while frame is not None and self.watched:
            path = frame.f_code.co_filename
            if os.path.dirname(os.path.abspath(path)) == HELPERS_DIR and os.path.basename(path) in self.watched:
                name = f"helpers.{os.path.basename(path)[:-3]}"
                if name not in self.helpers:
                    self.helpers.append(name)
                break
            frame = frame.f_back


class RecordingDense(keras.layers.Dense):
    """A ``Dense`` layer that tells its :class:`Record` about every run (``first``: the model's first
    layer, whose rows count the examples)."""

    def __init__(self, units: int, record: Record, *, first: bool = False, **kwargs: Any):
        super().__init__(units, **kwargs)
        self._record, self._first = record, first

    def call(self, inputs: Any) -> Any:
        self._record.note(inputs, self._first)
        return super().call(inputs)

    def get_config(self) -> dict:
        raise TypeError("the checker's model cannot be copied: run it, not a copy of it")
