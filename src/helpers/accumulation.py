"""Gradient accumulation: train with a large batch that does not fit in memory (notebook 02).

Split a batch of ``N`` examples into micro-batches, compute each micro-batch's gradient one after
the other, add them up weighted by micro-batch size, and apply the optimizer once. For a loss that
is a mean over examples, the result is the gradient of the large batch, while memory only ever
holds one micro-batch's activations.

* :class:`GradientAccumulator`: one non-trainable variable per trainable variable; ``add``,
  ``result`` (the size-weighted mean), ``reset``, ``count``. Compiled; works under
  ``tf.distribute.MirroredStrategy``.
* :func:`accumulated_gradients`: the large-batch gradient, computed one micro-batch at a time.
* :func:`train_accumulated`: a training loop with one optimizer update per ``accumulation_steps``
  micro-batches; a leftover partial window at the end of an epoch is applied, weighted by size.
* :func:`micro_batches`: split one ``(x, y)`` batch into micro-batches of given sizes.

Calling convention (as in every helper module): a batch is an ``(x, y)`` pair and
``loss_fn(y_true, y_pred)`` returns the scalar *mean* loss over the batch (a Keras loss works).
"""

from __future__ import annotations

import weakref
from typing import Any, Callable, Iterable, Sequence

import tensorflow as tf
import keras

from helpers.arguments import require_int
from helpers.progress import Progress

LossFn = Callable[[Any, Any], Any]

__all__ = [
    "GradientAccumulator",
    "accumulated_gradients",
    "train_accumulated",
    "micro_batches",
    "num_examples",
]


# --------------------------------------------------------------------------- the accumulator


class GradientAccumulator:
    """Size-weighted running mean of gradients, stored in non-trainable variables.

    ``add(gradients, weight)`` adds ``weight * gradient`` to one accumulator variable per model
    variable and ``weight`` to a running total; ``result()`` divides the two, so it returns the
    weighted mean of everything added since the last ``reset()``. Use the micro-batch's number
    of examples as its weight: then ``result()`` is the gradient of the mean loss over all the
    examples, exactly as if they had been one batch.

    A ``None`` gradient (the loss does not use that variable) counts as zero.

    Under ``tf.distribute.MirroredStrategy`` create it inside ``strategy.scope()`` and call ``add``
    inside ``strategy.run``: each replica accumulates its own share (the variables are
    ``ON_READ``), and ``result()`` sums shares and weights over replicas, so it is the weighted
    mean over every example on every replica, in either context. Apply it in cross-replica
    context (outside ``strategy.run``), where the optimizer does not sum over replicas again.

    >>> v = tf.Variable([1.0, 2.0])
    >>> acc = GradientAccumulator([v])
    >>> acc.add([tf.constant([1.0, 1.0])], weight=3)
    >>> acc.add([tf.constant([5.0, 9.0])], weight=1)
    >>> [round(float(g), 2) for g in acc.result()[0]], int(acc.count)
    ([2.0, 3.0], 2)
    >>> acc.reset(); int(acc.count)
    0
    """

    def __init__(self, variables: Sequence[tf.Variable]):
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
        self._sums = [
            tf.Variable(tf.zeros(v.shape, _dtype(v)), name=f"accumulated_{i}",
                        aggregation=tf.VariableAggregation.SUM, **on_read)
            for i, v in enumerate(variables)
        ]
        self._total = tf.Variable(0.0, name="accumulated_weight",
                                  aggregation=tf.VariableAggregation.SUM, **on_read)
        # Every replica adds once per micro-step, so the first replica's count is the global count.
        self._count = tf.Variable(0, dtype=tf.int64, name="accumulated_count",
                                  aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA, **on_read)
        specs = [tf.TensorSpec(v.shape, _dtype(v)) for v in variables]
        self._add_fn = tf.function(self._add, input_signature=[specs, tf.TensorSpec([], tf.float32)])
        self._reset_fn = tf.function(self._reset, input_signature=[])

    # -- public API

    @property
    def count(self) -> tf.Tensor:
        """How many gradients were added since the last reset (an int64 scalar)."""
        return self._count.read_value()

    @property
    def total_weight(self) -> tf.Tensor:
        """Sum of the weights added since the last reset (over all replicas)."""
        return self._read(self._total)

    def add(self, gradients: Sequence[tf.Tensor | None], weight: Any = 1.0) -> None:
        """Add ``weight * gradients`` (one gradient per variable, ``None`` counts as zero).

        ``weight`` must be positive: normally the micro-batch's number of examples.
        """
        filled = self._filled(gradients)
        if isinstance(weight, bool):
            raise TypeError("weight must be a number (the micro-batch size), got bool")
        if not tf.is_tensor(weight) or tf.executing_eagerly():
            value = float(weight)
            if not value > 0:
                raise ValueError(f"weight must be > 0 (the micro-batch's number of examples), got {value:g}")
        self._add_fn(filled, tf.cast(weight, tf.float32))

    def _filled(self, gradients) -> list[tf.Tensor]:
        """Check ``gradients`` against the variables; ``None`` becomes zeros, dtypes follow the variables."""
        if isinstance(gradients, (tf.Tensor, tf.Variable)) or not isinstance(gradients, Sequence):
            raise TypeError(f"gradients must be a list with one gradient per variable, "
                            f"got {type(gradients).__name__}")
        if len(gradients) != len(self.variables):
            raise ValueError(f"gradients has {len(gradients)} entries but the accumulator holds "
                             f"{len(self.variables)} variables: pass one gradient per variable, in order")
        filled = []
        for i, (g, v) in enumerate(zip(gradients, self.variables)):
            if g is None:
                filled.append(tf.zeros(v.shape, _dtype(v)))
                continue
            if isinstance(g, tf.IndexedSlices):
                g = tf.convert_to_tensor(g)
            g = tf.convert_to_tensor(g)
            if not g.shape.is_compatible_with(v.shape):
                raise ValueError(f"gradients[{i}] has shape {g.shape} but variable {_name(v)} has "
                                 f"shape {v.shape}: the gradients do not match the variables")
            filled.append(tf.cast(g, _dtype(v)))
        return filled

    def result(self) -> list[tf.Tensor]:
        """The weighted mean of the gradients added since the last reset (zeros if none)."""
        total = self._read(self._total)
        safe = tf.where(total > 0, total, tf.ones_like(total))
        return [self._read(s) / tf.cast(safe, s.dtype) for s in self._sums]

    def reset(self) -> None:
        """Set the sums, the total weight and the count back to zero."""
        self._reset_fn()

    def _result_with_scaled(self, scaled, weight):
        """``result()`` as it would be after one more add of ``scaled`` (gradients already multiplied
        by ``weight``), without writing the sums. For a compiled body only; it skips storing the last
        gradient and reading it back.
        """
        total = self._read(self._total) + weight
        safe = tf.where(total > 0, total, tf.ones_like(total))
        return [(self._read(s) + g) / tf.cast(safe, s.dtype) for s, g in zip(self._sums, scaled)]

    def tracing_count(self) -> int:
        """How many times ``add`` was traced (1 after any number of calls)."""
        return self._add_fn.experimental_get_tracing_count()

    # -- compiled bodies

    def _add(self, gradients, weight):
        tf.debugging.assert_positive(weight, message="weight must be > 0 (the micro-batch's number of examples)")
        self._add_scaled([g * tf.cast(weight, s.dtype) for s, g in zip(self._sums, gradients)], weight)

    def _add_scaled(self, scaled, weight):
        """Add gradients already multiplied by ``weight`` (compiled bodies whose caller checked ``weight``)."""
        for s, g in zip(self._sums, scaled):
            s.assign_add(g)
        self._total.assign_add(weight)
        self._count.assign_add(1)

    def _reset(self):
        for s in self._sums:
            s.assign(tf.zeros_like(s))
        self._total.assign(0.0)
        self._count.assign(0)

    @staticmethod
    def _read(variable: tf.Variable) -> tf.Tensor:
        """Sum over replicas whether called in replica or in cross-replica context."""
        if tf.distribute.has_strategy() and tf.distribute.in_cross_replica_context():
            return variable.read_value()  # an ON_READ SUM variable reads as the sum over replicas
        context = tf.distribute.get_replica_context()
        if context is not None and context.num_replicas_in_sync > 1:
            return context.all_reduce(tf.distribute.ReduceOp.SUM, variable.read_value())
        return variable.read_value()


def _dtype(variable) -> tf.DType:
    return tf.as_dtype(variable.dtype)


def _name(variable) -> str:
    return getattr(variable, "path", None) or getattr(variable, "name", "?")


# --------------------------------------------------------------------------- batches


def num_examples(x: Any) -> tf.Tensor:
    """Number of examples in ``x`` (the first input's leading dimension; rows of a ragged tensor).

    >>> int(num_examples(tf.zeros([5, 3])))
    5
    """
    first = tf.nest.flatten(x, expand_composites=False)[0]
    if isinstance(first, tf.RaggedTensor):
        return first.nrows()
    return tf.shape(first, out_type=tf.int64)[0]


def _count_examples(x: Any) -> int:
    """Python int of :func:`num_examples`, from the static shape when it is known (no device sync)."""
    first = tf.nest.flatten(x)[0]
    if not isinstance(first, tf.RaggedTensor):
        shape = getattr(first, "shape", None)
        if shape is not None and len(shape) > 0 and shape[0] is not None:
            return int(shape[0])
    return int(num_examples(x))


def micro_batches(batch: tuple[Any, Any], sizes: Sequence[int]) -> list[tuple[Any, Any]]:
    """Split one ``(x, y)`` batch into consecutive micro-batches of the given ``sizes``.

    >>> parts = micro_batches((tf.zeros([12, 2]), tf.zeros([12])), [5, 5, 2])
    >>> [int(x.shape[0]) for x, _ in parts]
    [5, 5, 2]
    """
    x, y = _as_pair(batch, "batch")
    n = int(num_examples(x))
    sizes = list(sizes)
    if not sizes:
        raise ValueError("sizes is empty: give at least one micro-batch size")
    for i, s in enumerate(sizes):
        require_int(f"sizes[{i}]", s, minimum=1)
    if sum(sizes) != n:
        raise ValueError(f"sizes add up to {sum(sizes)} but the batch has {n} examples")
    parts, start = [], 0
    for s in sizes:
        cut = lambda t: t[start:start + s]  # noqa: E731
        parts.append((tf.nest.map_structure(cut, x), tf.nest.map_structure(cut, y)))
        start += s
    return parts


def _as_pair(batch: Any, where: str) -> tuple[Any, Any]:
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        raise TypeError(f"{where} must be an (x, y) pair, got {type(batch).__name__}")
    return batch[0], batch[1]


# --------------------------------------------------------------------------- compiled micro-step


def _relaxed(value: Any) -> tf.TypeSpec:
    """A spec for ``value`` with the batch dimension left open (one trace for every size)."""
    if isinstance(value, tf.RaggedTensor):
        spec = tf.type_spec_from_value(value)
        return tf.RaggedTensorSpec([None] + spec.shape[1:].as_list(), spec.dtype, spec.ragged_rank,
                                   spec.row_splits_dtype)
    value = tf.convert_to_tensor(value)
    return tf.TensorSpec([None] + value.shape[1:].as_list(), value.dtype)


class _MicroStep:
    """Compiled ``(x, y) -> (loss, n)`` that adds the micro-batch's gradient to an accumulator."""

    def __init__(self, model: keras.Model, loss_fn: LossFn, accumulator: GradientAccumulator,
                 variables: Sequence[tf.Variable]):
        self._model = weakref.ref(model)  # the cache below must not keep the model alive
        self.loss_fn, self.accumulator = loss_fn, accumulator
        self.variables = list(variables)
        self._fn = None
        self._signature = None
        # False once anything may have been added since the last reset/apply; then the next
        # window starts with a reset. True lets a window start without that extra compiled call.
        self.clean = False

    def __call__(self, x, y):
        if self._fn is None:
            self._signature = [tf.nest.map_structure(_relaxed, x), tf.nest.map_structure(_relaxed, y)]
            self._fn = tf.function(self._step, input_signature=self._signature)
        self.clean = False
        return self._fn(x, y)

    def reset(self) -> None:
        """Reset the accumulator (skipped when nothing was added since the last reset or update)."""
        if not self.clean:
            self.accumulator.reset()
            self.clean = True

    def _scaled_gradients(self, x, y):
        """Mean loss, the gradients of ``n * loss`` (so already weighted by size), ``n`` and its float.

        Weighting the scalar loss before the backward pass costs one multiply instead of one per
        gradient element. The callers have checked in Python that ``n > 0``.
        """
        n = num_examples(x)
        with tf.GradientTape() as tape:
            loss = self.loss_fn(y, self._model()(x, training=True))
            scaled_loss = loss * tf.cast(n, loss.dtype)
        scaled = self.accumulator._filled(tape.gradient(scaled_loss, self.variables))
        return loss, scaled, n, tf.cast(n, tf.float32)

    def _step(self, x, y):
        loss, scaled, n, weight = self._scaled_gradients(x, y)
        self.accumulator._add_scaled(scaled, weight)
        return loss, n

    def step_and_apply(self, optimizer, x, y):
        """The last micro-step of a window fused with the update, in one compiled call.

        Same numbers as ``self(x, y)`` followed by ``_apply_fn(optimizer, ...)()``: the weighted mean
        includes this micro-batch's gradient, the optimizer applies it, the accumulator is reset.
        It saves one compiled call per update and the write and re-read of the last gradient.
        """
        if self._fn is None:  # the first micro-batch fixes the signature (batch dimension open)
            self._signature = [tf.nest.map_structure(_relaxed, x), tf.nest.map_structure(_relaxed, y)]
            self._fn = tf.function(self._step, input_signature=self._signature)
        fn = _fused_fn(optimizer, self)
        self.clean = False
        result = fn(x, y)
        self.clean = True
        return result

    def _step_and_apply_body(self, optimizer, x, y):
        loss, scaled, n, weight = self._scaled_gradients(x, y)
        mean = self.accumulator._result_with_scaled(scaled, weight)
        optimizer.apply_gradients(zip(mean, self.variables))
        self.accumulator._reset()
        return loss, n

    def tracing_count(self) -> int:
        return 0 if self._fn is None else self._fn.experimental_get_tracing_count()


# One accumulator and compiled step per (model, loss_fn), so repeated calls do not retrace.
_STEPS: "weakref.WeakKeyDictionary[keras.Model, dict]" = weakref.WeakKeyDictionary()


def _micro_step(model: keras.Model, loss_fn: LossFn) -> _MicroStep:
    per_model = _STEPS.setdefault(model, {})
    key = id(loss_fn)
    step = per_model.get(key)
    if step is None or step.loss_fn is not loss_fn:
        variables = model.trainable_variables
        if not variables:
            raise ValueError("model has no trainable variables: build it (call it once) before accumulating")
        step = _MicroStep(model, loss_fn, GradientAccumulator(variables), variables)
        per_model[key] = step
    return step


def _check_model_and_loss(model: Any, loss_fn: Any) -> None:
    if not isinstance(model, keras.Model):
        raise TypeError(f"model must be a keras.Model, got {type(model).__name__}")
    if not callable(loss_fn):
        raise TypeError(f"loss_fn must be callable as loss_fn(y_true, y_pred), got {type(loss_fn).__name__}")


# --------------------------------------------------------------------------- the functions


def accumulated_gradients(model: keras.Model, loss_fn: LossFn,
                          micro_batches: Iterable[tuple[Any, Any]]) -> list[tf.Tensor]:
    """Gradient of the mean loss over all examples of all ``micro_batches``, one micro-batch at a time.

    Each micro-batch's gradient is weighted by its number of examples, so micro-batches of
    unequal size (``5, 5, 2``) give the same gradient as the concatenated batch. Only one
    micro-batch's activations are alive at any time. The model runs with ``training=True``
    (Dropout and BatchNorm behave as in training). Returns one tensor per trainable variable.

    >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    >>> x, y = tf.ones([12, 3]), tf.zeros([12, 1])
    >>> grads = accumulated_gradients(model, keras.losses.MeanSquaredError(),
    ...                               micro_batches((x, y), [5, 5, 2]))
    >>> len(grads) == len(model.trainable_variables)
    True
    """
    _check_model_and_loss(model, loss_fn)
    if isinstance(micro_batches, tuple) and len(micro_batches) == 2 and tf.is_tensor(micro_batches[0]):
        raise TypeError("micro_batches must be a list of (x, y) pairs, got a single (x, y) pair")
    step = _micro_step(model, loss_fn)
    step.reset()
    seen = 0
    for i, batch in enumerate(micro_batches):
        x, y = _as_pair(batch, f"micro_batches[{i}]")
        if _count_examples(x) == 0:
            raise ValueError(f"micro_batches[{i}] has zero examples: drop empty micro-batches")
        step(x, y)
        seen += 1
    if seen == 0:
        raise ValueError("micro_batches is empty: pass at least one (x, y) micro-batch")
    grads = step.accumulator.result()
    step.accumulator.reset()
    step.clean = True
    return grads


def train_accumulated(
    model: keras.Model,
    optimizer: keras.optimizers.Optimizer,
    loss_fn: LossFn,
    dataset: Iterable[tuple[Any, Any]],
    accumulation_steps: int,
    *,
    epochs: int = 1,
    verbose: bool = True,
) -> dict[str, Any]:
    """Train with one optimizer update per ``accumulation_steps`` micro-batches of ``dataset``.

    Each update applies the size-weighted mean gradient of its window of micro-batches: with
    micro-batches of ``b`` examples this is training with batches of ``accumulation_steps * b``.
    The window restarts at every epoch. **Leftover**: when an epoch's micro-batch count is not a
    multiple of ``accumulation_steps``, the last, partial window is applied as one more update,
    weighted by its own examples (the gradient of the mean loss over those examples); it is
    never dropped and never carried into the next epoch or the next call. The returned history
    says how many updates were partial.

    ``dataset`` is any finite iterable of ``(x, y)`` micro-batches (a ``tf.data.Dataset``
    works); it is iterated once per epoch. ``verbose`` shows a progress bar (one tick per update).

    Returns ``{"loss": [...], "examples": [...], "updates": int, "partial_updates": int}``
    where ``loss[k]`` is the mean training loss over the examples of update ``k``.

    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> data = [(tf.ones([4, 2]), tf.ones([4, 1]))] * 5
    >>> h = train_accumulated(model, keras.optimizers.SGD(0.1), keras.losses.MeanSquaredError(),
    ...                       data, accumulation_steps=2, verbose=False)
    >>> h["updates"], h["partial_updates"], h["examples"]
    (3, 1, [8, 8, 4])
    """
    _check_model_and_loss(model, loss_fn)
    if not isinstance(optimizer, keras.optimizers.Optimizer):
        raise TypeError(f"optimizer must be a keras optimizer, got {type(optimizer).__name__}")
    require_int("accumulation_steps", accumulation_steps, minimum=1)
    require_int("epochs", epochs, minimum=1)
    if getattr(optimizer, "gradient_accumulation_steps", None):
        raise ValueError("optimizer already accumulates (gradient_accumulation_steps is set): "
                         "use a plain optimizer, or Keras' built-in accumulation alone")

    step = _micro_step(model, loss_fn)
    accumulator = step.accumulator
    variables = step.variables
    apply_fn = _apply_fn(optimizer, accumulator, variables)
    step.reset()  # nothing from an earlier call carries over (a no-op when the last window was applied)

    history: dict[str, Any] = {"loss": [], "examples": [], "updates": 0, "partial_updates": 0}
    total = None
    try:
        total = epochs * -(-len(dataset) // accumulation_steps)  # type: ignore[arg-type]
    except TypeError:
        pass
    bar = Progress(total, verbose=verbose, label="update")

    def apply(window, partial, applied=False):
        if not applied:
            apply_fn()
            step.clean = True
        # Read the losses only now: no host synchronisation between micro-batches.
        window_n = sum(n for _, n in window)
        history["loss"].append(sum(float(loss) * n for loss, n in window) / window_n)
        history["examples"].append(window_n)
        history["updates"] += 1
        history["partial_updates"] += int(partial)
        bar.update(history["updates"], loss=history["loss"][-1])

    for _ in range(epochs):
        window: list[tuple[tf.Tensor, int]] = []  # (mean loss, examples) per micro-batch
        seen = 0
        for i, batch in enumerate(dataset):
            x, y = _as_pair(batch, f"dataset element {i}")
            n = _count_examples(x)
            if n == 0:
                raise ValueError(f"dataset element {i} has zero examples: drop empty micro-batches")
            seen += 1
            if len(window) + 1 == accumulation_steps:
                # Last micro-batch of a full window: its step and the update are one compiled call.
                loss, _ = step.step_and_apply(optimizer, x, y)
                window.append((loss, n))
                apply(window, partial=False, applied=True)
                window = []
            else:
                loss, _ = step(x, y)
                window.append((loss, n))
        if seen == 0:
            raise ValueError("dataset is empty: it yielded no micro-batch")
        if window:
            apply(window, partial=True)
    return history


def _apply_fn(optimizer, accumulator: GradientAccumulator, variables) -> Callable[[], None]:
    """Compiled "apply the accumulated mean, then reset", cached per optimizer."""
    if not optimizer.built:
        optimizer.build(variables)  # optimizer variables are created eagerly, not inside the trace
    cache = _APPLY.setdefault(optimizer, {})
    fn = cache.get(id(accumulator))
    if fn is None:
        @tf.function
        def fn():
            optimizer.apply_gradients(zip(accumulator.result(), variables))
            accumulator._reset()
        cache[id(accumulator)] = fn
    return fn


_APPLY: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()


def _fused_fn(optimizer, step: _MicroStep) -> Callable[[Any, Any], Any]:
    """Compiled "last micro-step + apply + reset" for ``step``, cached per optimizer."""
    _apply_fn(optimizer, step.accumulator, step.variables)  # builds the optimizer eagerly if needed
    cache = _FUSED.setdefault(optimizer, {})
    fn = cache.get(id(step))
    if fn is None:
        fn = tf.function(lambda x, y: step._step_and_apply_body(optimizer, x, y), input_signature=step._signature)
        cache[id(step)] = fn
    return fn


_FUSED: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()
