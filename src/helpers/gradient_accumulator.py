"""The building block of gradient accumulation (notebook 02): :class:`GradientAccumulator`.

Non-trainable float32 variables that keep the size-weighted sum of micro-batch gradients, under
one strategy or none. :mod:`helpers.accumulation` builds its helpers on this class's public API
(and re-exports it); use the class directly to write your own accumulation loop.
"""

from __future__ import annotations

import numbers
from typing import Any, Sequence

import numpy as np

import tensorflow as tf
import keras

__all__ = ["GradientAccumulator"]


class GradientAccumulator:
    """Size-weighted running mean of gradients, kept in non-trainable float32 variables.

    ``add(gradients, weight)`` adds ``weight * gradient`` per variable and ``weight`` to a total;
    ``result()`` divides the two: the weighted mean of everything added since ``reset()``. With
    each micro-batch's number of examples as its weight, ``result()`` is the gradient of the mean
    loss over all the examples, as if they had been one batch. A weight of 0 adds nothing (an
    empty micro-batch or replica shard, whose gradient may be NaN).

    A ``None`` gradient counts as zero. A variable that received no gradient since the last
    ``reset()`` (the loss does not use it) gets ``None`` from ``result()``, so ``apply_gradients``
    leaves it alone as Keras does for one batch: no momentum, no weight decay. Inside a
    ``tf.function`` a ``None`` must be known when the function is traced: there ``result()`` gives
    ``None`` to a variable that no traced ``add`` ever gave a gradient, and a tensor to the others.

    Mixed precision: add the gradients of ``optimizer.scale_loss(loss)`` (a
    ``LossScaleOptimizer``) and pass ``result()`` to ``optimizer.apply_gradients``, which unscales
    once, skips a non-finite window and lowers the scale. Sums of float16 and bfloat16 variables
    are float32 (a float64 variable keeps float64 sums).

    Under ``tf.distribute.MirroredStrategy`` or ``MultiWorkerMirroredStrategy``: create it in
    ``strategy.scope()``; call ``add`` inside ``strategy.run`` with the replica's own example count
    (or what its share's loss divides by; an empty shard adds 0; no collective op); ``result()`` is
    the weighted mean over every replica in either context. A Keras optimizer applies in a replica
    context and sums what the replicas give it: :meth:`gradients_for` says what each gives, with
    one all-reduce per update (two for a clipping or loss-scaling optimizer; one more for float64
    sums, which cannot be packed with float32 ones). Use a plain mean as the loss: Keras loss
    objects divide by the replica count there (for ``fit``)::

        def replica_step(x, y):                              # strategy.run(replica_step, args=batch)
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(y - model(x, training=True)))
            accumulator.add(tape.gradient(loss, model.trainable_variables), tf.shape(x)[0])

        def replica_apply():                                 # strategy.run(replica_apply)
            grads, _ = accumulator.gradients_for(optimizer)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            accumulator.reset()

    :func:`helpers.accumulation.train_accumulated` does all this for a model built in the scope.

    >>> v = tf.Variable([1.0, 2.0])
    >>> acc = GradientAccumulator([v])
    >>> acc.add([tf.constant([1.0, 1.0])], weight=3)
    >>> acc.add([tf.constant([5.0, 9.0])], weight=1)
    >>> [round(float(g), 2) for g in acc.result()[0]], int(acc.count)
    ([2.0, 3.0], 2)
    >>> acc.reset(); int(acc.count)
    0
    """

    def __init__(self, variables: Sequence[Any]):
        if isinstance(variables, (tf.Variable, keras.Variable)) or not isinstance(variables, Sequence):
            raise TypeError(f"variables must be a list of variables, got {type(variables).__name__}")
        variables = list(variables)
        if not variables:
            raise ValueError("variables is empty: pass the model's trainable variables")
        for i, v in enumerate(variables):
            if not isinstance(v, (tf.Variable, keras.Variable)):
                raise TypeError(f"variables[{i}] is a {type(v).__name__}, not a variable")
        self.variables = variables
        on_read = dict(trainable=False, synchronization=tf.VariableSynchronization.ON_READ)
        summed = dict(aggregation=tf.VariableAggregation.SUM, **on_read)
        self._sums = [tf.Variable(tf.zeros(v.shape, _sum_dtype(v)), name=f"accumulated_{i}", **summed)
                      for i, v in enumerate(variables)]
        self._total = tf.Variable(0.0, name="accumulated_weight", **summed)
        # Every replica adds once per micro-step, so the first replica's count is the global count.
        self._count = tf.Variable(0, dtype=tf.int64, name="accumulated_count",
                                  aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA, **on_read)
        # Gradients each variable received since the last reset (read eagerly by result()), and whether
        # any traced add ever brought one (what result() can know inside a tf.function).
        self._seen = tf.Variable(tf.zeros([len(variables)], tf.int64), name="accumulated_seen",
                                 aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA, **on_read)
        self._received = [False] * len(variables)
        specs = [tf.TensorSpec(v.shape, _sum_dtype(v)) for v in variables]
        self._add_fn = tf.function(self._add, input_signature=[
            specs, tf.TensorSpec([], tf.float32), tf.TensorSpec([len(variables)], tf.int64)])
        self._reset_fn = tf.function(self._reset, input_signature=[])

    @property
    def count(self) -> tf.Tensor:
        """How many gradients were added since the last reset (an int64 scalar)."""
        return self._count.read_value()

    @property
    def total_weight(self) -> tf.Tensor:
        """Sum of the weights added since the last reset (over all replicas)."""
        return _replica_sums([self._total])[0]

    def add(self, gradients: Sequence[tf.Tensor | None], weight: Any = 1.0) -> None:
        """Add ``weight * gradients`` (one gradient per variable, in order; ``None`` counts as zero).

        ``weight`` >= 0: normally the micro-batch's number of examples (0 adds nothing).
        """
        if isinstance(gradients, (tf.Tensor, tf.Variable)) or not isinstance(gradients, Sequence):
            raise TypeError(f"gradients must be a list with one gradient per variable, got {type(gradients).__name__}")
        if len(gradients) != len(self.variables):
            raise ValueError(f"gradients has {len(gradients)} entries but the accumulator holds "
                             f"{len(self.variables)} variables: pass one gradient per variable, in order")
        if isinstance(weight, (bool, np.bool_)) or not (tf.is_tensor(weight) or isinstance(weight, numbers.Real)):
            raise TypeError(f"weight must be a number (the micro-batch size), got {type(weight).__name__}")
        if not tf.is_tensor(weight) or tf.executing_eagerly():
            if not float(weight) >= 0:
                raise ValueError(f"weight must be >= 0 (the micro-batch's number of examples), got {float(weight):g}")
        filled, present = [], []
        for i, (g, v) in enumerate(zip(gradients, self.variables)):
            present.append(g is not None)
            if g is None:
                filled.append(tf.zeros(v.shape, _sum_dtype(v)))
                continue
            g = tf.convert_to_tensor(g)
            if not g.shape.is_compatible_with(v.shape):
                raise ValueError(f"gradients[{i}] has shape {g.shape} but variable {_name(v)} has shape "
                                 f"{v.shape}: the gradients do not match the variables")
            filled.append(tf.cast(g, _sum_dtype(v)))
        self._received = [old or new for old, new in zip(self._received, present)]
        weight, present = tf.cast(weight, tf.float32), tf.constant(present, tf.int64)
        if tf.inside_function():
            self._add(filled, weight, present)  # already compiled: inline the ops, no nested function call
        else:
            self._add_fn(filled, weight, present)

    def result(self) -> list[tf.Tensor | None]:
        """The weighted mean of the gradients added since the last reset (zeros if none were);
        ``None`` for a variable that received no gradient since then (inside a ``tf.function``: that
        no traced ``add`` ever gave one). In a replica context, the sums and the total weight cross
        replicas in one all-reduce (one per dtype)."""
        received = self._window_received()
        total, *sums = _replica_sums([self._total] + [s for s, seen in zip(self._sums, received) if seen])
        safe, sums = tf.where(total > 0, total, tf.ones_like(total)), iter(sums)
        return [_mean(next(sums), safe, v.dtype) if seen else None for v, seen in zip(self.variables, received)]

    def gradients_for(self, optimizer: Any,
                      extra: Sequence[Any] = ()) -> tuple[list[tf.Tensor | None], list[tf.Tensor]]:
        """The gradients to hand ``optimizer.apply_gradients`` for the weighted mean, and the float32
        numbers ``extra`` summed over replicas (such as a window's loss).

        Without a strategy: :meth:`result` and ``extra``. Inside ``strategy.run`` with several
        replicas, ``apply_gradients`` sums what the replicas hand it in one all-reduce: each hands
        its own sums divided by the total weight, which goes through an all-reduce of a few numbers
        with ``extra``. Keras clips gradients (``clipnorm``, ``clipvalue``, ``global_clipnorm``), and a
        ``LossScaleOptimizer`` checks their finiteness, on each replica *before* that sum: for
        those, the sums go through one more all-reduce, replica 0 hands the whole mean and the others
        ``mean * 0`` (NaN if the mean is not finite, so that every worker skips the window alike).

        The weights are whatever ``add`` was given: a loss that divides by unmasked entries or by
        the sum of its sample weights adds each replica's share with that denominator, and the
        total weight is their sum over every replica and micro-batch. ``None`` follows
        :meth:`result`'s rule, decided alike on every replica (the same traced ``add`` calls, or the
        same per-window counts), so every worker applies the same variables.
        """
        context = tf.distribute.get_replica_context()
        extra = [tf.cast(e, tf.float32) for e in extra]
        if context is None or context.num_replicas_in_sync == 1:
            if context is None and tf.distribute.get_strategy().num_replicas_in_sync > 1:
                raise RuntimeError("gradients_for() needs a replica context: call it inside strategy.run")
            return self.result(), extra
        present = [i for i, seen in enumerate(self._window_received()) if seen]
        whole = isinstance(optimizer, keras.optimizers.LossScaleOptimizer) or any(
            getattr(optimizer, name, None) is not None for name in ("clipnorm", "clipvalue", "global_clipnorm"))
        sums = [self._sums[i].read_value() for i in present]
        numbers = tf.stack([self._total.read_value()] + extra)
        reduced = _all_reduce(context, (sums if whole else []) + [numbers])
        total, *extra = tf.unstack(reduced[-1])
        total = tf.where(total > 0, total, tf.ones_like(total))
        if whole:
            first = tf.cast(tf.equal(context.replica_id_in_sync_group, 0), tf.float32)
            sums = [s / tf.cast(total, s.dtype) * tf.cast(first, s.dtype) for s in reduced[:-1]]
        else:
            sums = [s / tf.cast(total, s.dtype) for s in sums]
        share = dict(zip(present, sums))
        return [tf.cast(share[i], v.dtype) if i in share else None for i, v in enumerate(self.variables)], extra

    def _window_received(self) -> list[bool]:
        """Which variables get a gradient (the others ``None``). Eagerly: those that received one
        since the last ``reset()`` (a per-window count, the same on every replica). Inside a
        ``tf.function`` a ``None`` is part of the traced graph: those that any traced ``add``
        ever gave one (a variable the loss never uses stays ``None``; one used in some windows
        only gets a zero gradient in the others)."""
        if tf.inside_function():
            return list(self._received)
        return [bool(k) for k in self._seen.read_value().numpy()]

    def reset(self) -> None:
        """Set the sums, the total weight and the count back to zero."""
        self._reset_fn()

    def tracing_count(self) -> int:
        """How many times ``add``'s own compiled function was traced: 1 after any number of eager
        calls. Called from inside a ``tf.function``, ``add`` adds its ops to that function instead."""
        return self._add_fn.experimental_get_tracing_count()

    def _add(self, gradients, weight, present):
        tf.debugging.assert_non_negative(weight, message="weight must be >= 0 (the micro-batch's examples)")
        for s, g in zip(self._sums, gradients):
            s.assign_add(tf.math.multiply_no_nan(g, tf.cast(weight, g.dtype)))  # weight 0 adds 0, even to a NaN
        self._total.assign_add(weight)
        self._count.assign_add(1)
        self._seen.assign_add(present)

    def _reset(self):
        for s in self._sums:
            s.assign(tf.zeros_like(s))
        self._total.assign(0.0)
        self._count.assign(0)
        self._seen.assign(tf.zeros_like(self._seen))


def _sum_dtype(variable) -> tf.DType:
    dtype = tf.as_dtype(variable.dtype)
    return tf.float32 if dtype in (tf.float16, tf.bfloat16) else dtype


def _mean(total_sum: tf.Tensor, total_weight: tf.Tensor, dtype: Any) -> tf.Tensor:
    return tf.cast(total_sum / tf.cast(total_weight, total_sum.dtype), dtype)


def _name(variable) -> str:
    return getattr(variable, "path", None) or getattr(variable, "name", "?")


def _replica_sums(variables: list[tf.Variable]) -> list[tf.Tensor]:
    """ON_READ SUM variables summed over replicas, in replica or in cross-replica context. In a
    replica context all of them go through one all-reduce: one collective op per variable would
    cost one round trip between workers each (MultiWorkerMirroredStrategy)."""
    if tf.distribute.has_strategy() and tf.distribute.in_cross_replica_context():
        return [v.read_value() for v in variables]
    context = tf.distribute.get_replica_context()
    values = [v.read_value() for v in variables]
    if context is not None and context.num_replicas_in_sync > 1:
        return _all_reduce(context, values)
    return values


def _all_reduce(context: Any, values: list[tf.Tensor]) -> list[tf.Tensor]:
    """``values`` summed over replicas, in order: one all-reduce per dtype (a collective packs what it
    sums into one tensor, so float32 sums and a float64 model's sums cannot share one)."""
    by_dtype: dict[tf.DType, list[int]] = {}
    for i, value in enumerate(values):
        by_dtype.setdefault(value.dtype, []).append(i)
    summed: list[Any] = [None] * len(values)
    for indices in by_dtype.values():
        for i, value in zip(indices, context.all_reduce(tf.distribute.ReduceOp.SUM, [values[i] for i in indices])):
            summed[i] = value
    return summed
