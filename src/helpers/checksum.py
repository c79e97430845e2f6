"""The Cost section of notebook 03: a stand-in training step that reads every token of a batch.

* :func:`batch_checksum`: ``sum(x) + 2 * sum(y)``, an int64 scalar (works in TF1 graphs too).
* :class:`Checksum`: that step in a variable, run from a Python loop, inside one ``tf.function``
  (a ``While`` loop over the iterator) or as a ``dataset.reduce``.

Split off :mod:`helpers.batching`, which re-exports both names.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from helpers.arguments import require_int
from helpers.plumbing import check_dataset

__all__ = ["batch_checksum", "Checksum"]


def batch_checksum(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
    """``sum(x) + 2 * sum(y)`` as an int64 scalar: reads every token of a batch (works in TF1 graphs too).

    >>> int(batch_checksum(tf.constant([[1, 2]]), tf.constant([[2, 3]])))
    13
    """
    x = tf.cast(x, tf.int64)
    y = tf.cast(y, tf.int64)
    return tf.reduce_sum(x) + 2 * tf.reduce_sum(y)


_BATCH = tf.TensorSpec([None, None], tf.int32)


class Checksum:
    """A stand-in training step: add :func:`batch_checksum` of each batch to a variable.

    ``step(x, y)`` is compiled once for every batch shape (its ``input_signature`` has ``None``
    dimensions) and is called from a Python loop; ``loop(dataset)`` runs the whole loop inside one
    ``tf.function`` (one trace per dataset element spec). It loops over ``iter(dataset)``, which
    AutoGraph compiles to a ``While`` loop: the step stays in the compiled function, where a GPU can
    run it; ``for x, y in dataset`` would become a tf.data reduction, run on the host.

    >>> from helpers.batching import ptb_batches
    >>> counter = Checksum()
    >>> counter.run_python_loop(ptb_batches(range(20), 2, 3), num_batches=3) == counter.run_in_graph(
    ...     ptb_batches(range(20), 2, 3), num_batches=3)
    True
    """

    def __init__(self) -> None:
        self.total = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.step = tf.function(self._step, input_signature=[_BATCH, _BATCH])
        self.loop = tf.function(self._loop)

    def _step(self, x: tf.Tensor, y: tf.Tensor) -> None:
        self.total.assign_add(batch_checksum(x, y))

    def _loop(self, dataset: tf.data.Dataset) -> None:
        for x, y in iter(dataset):  # a While loop over an iterator, not a tf.data reduction
            self._step(x, y)

    @property
    def value(self) -> int:
        """The running total, as a Python int."""
        return int(self.total.numpy())

    @staticmethod
    def _check(dataset: Any, num_batches: Any) -> int:
        check_dataset(dataset)
        spec = dataset.element_spec
        if not (isinstance(spec, tuple) and len(spec) == 2 and all(_BATCH.is_compatible_with(s) for s in spec)):
            raise TypeError(f"dataset must yield (x, y) pairs of int32 matrices, as ptb_batches does; got {spec}")
        return require_int("num_batches", num_batches, minimum=1)

    def run_python_loop(self, dataset: tf.data.Dataset, num_batches: int) -> int:
        """Reset, then call the compiled ``step`` on ``num_batches`` batches from a Python ``for`` loop."""
        num_batches = self._check(dataset, num_batches)
        self.total.assign(0)
        for x, y in dataset.take(num_batches):
            self.step(x, y)
        return self.value

    def run_in_graph(self, dataset: tf.data.Dataset, num_batches: int) -> int:
        """Reset, then run the loop over ``num_batches`` batches inside one ``tf.function`` call."""
        num_batches = self._check(dataset, num_batches)
        self.total.assign(0)
        self.loop(dataset.take(num_batches))
        return self.value

    def run_as_reduction(self, dataset: tf.data.Dataset, num_batches: int) -> int:
        """Reset, then add up ``num_batches`` checksums with ``dataset.reduce``: one tf.data op.

        What ``for x, y in dataset`` inside a ``tf.function`` compiles to. The step runs as a
        tf.data function, on the host's CPU even on a GPU machine: fine for this checksum, not for a
        model step (use :meth:`run_in_graph`).

        >>> from helpers.batching import ptb_batches
        >>> Checksum().run_as_reduction(ptb_batches(range(20), 2, 3), num_batches=3) == Checksum(
        ...     ).run_in_graph(ptb_batches(range(20), 2, 3), num_batches=3)
        True
        """
        num_batches = self._check(dataset, num_batches)
        self.total.assign(dataset.take(num_batches).reduce(tf.constant(0, tf.int64), _add_checksum))
        return self.value


def _add_checksum(total: tf.Tensor, batch: tuple[tf.Tensor, tf.Tensor]) -> tf.Tensor:
    return total + batch_checksum(*batch)
