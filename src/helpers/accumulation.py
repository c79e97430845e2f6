"""Gradient accumulation: train with a large batch that does not fit in memory (notebook 02).

Split a batch of ``N`` examples into micro-batches, compute each micro-batch's gradient one after
the other, add them up weighted by micro-batch size, and apply the optimizer once. For a loss that
is a mean over examples, the result is the gradient of the large batch, while memory only ever
holds one micro-batch's activations.

* :class:`GradientAccumulator` (from :mod:`helpers.gradient_accumulator`): one float32 variable per
  trainable variable; ``add``, ``result`` (the size-weighted mean), ``reset``, ``count``.
* :func:`accumulated_gradients`: the large-batch gradient, computed one micro-batch at a time.
* :func:`train_accumulated`: one optimizer update per ``accumulation_steps`` micro-batches.
* :func:`micro_batches`: split one batch into micro-batches of given sizes.
* :func:`without_line`: a ``train_step`` class with one line taken out, to measure what it does.

Both functions follow Keras' rules: the trainable variables are read at every call, the loss is
the one ``fit`` minimises (one loss per output with ``loss_weights``, plus ``model.losses``),
``(x, y, sample_weight)`` batches are weighted as ``fit`` weights them, each micro-batch counts as
much as its loss's denominator (examples, unmasked entries, sample weights), a
``LossScaleOptimizer`` or ``loss_scale_factor`` scales the loss, and a model built in
``strategy.scope()`` is trained over all its replicas. What they cannot do right (a loss that does
not split into micro-batches, a per-example loss, an endless dataset, ...) is refused before any
state changes.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import weakref
from typing import Any, Callable, Iterable, Sequence

import tensorflow as tf
import keras

from helpers import loss_terms, plumbing, workers
from helpers.accumulation_parts import LossRef, epoch_stream, hashable, split_weight
from helpers.gradient_accumulator import GradientAccumulator
from helpers.arguments import require_int
from helpers.progress import Progress

LossFn = Callable[..., Any]

__all__ = ["GradientAccumulator", "accumulated_gradients", "train_accumulated", "micro_batches", "without_line"]


def without_line(cls: type, text: str) -> type:
    """A subclass of ``cls`` whose ``train_step`` is ``cls``'s without the lines that contain ``text``: notebook 02's
    Cost measures ``AccumulatingAll`` without its ``set_loop_options(parallel_iterations=1)`` line.

    The source is read with :func:`inspect.getsource` (a notebook cell's too) and compiled under a name that
    AutoGraph can read back. Raises ``ValueError`` if no line contains ``text``.
    """
    import inspect
    import linecache
    import textwrap

    step = cls.train_step
    step = getattr(step, "python_function", step)  # under @tf.function: the Python function
    lines = textwrap.dedent(inspect.getsource(step)).splitlines(keepends=True)
    kept = [line for line in lines if text not in line]
    if len(kept) == len(lines):
        raise ValueError(f"no line of {cls.__name__}.train_step contains {text!r}")
    source = "".join(kept)
    name = f"<{cls.__name__} without {text}>"
    linecache.cache[name] = (len(source), None, kept, name)  # AutoGraph reads the source back
    scope = dict(step.__globals__)
    exec(compile(source, name, "exec"), scope)  # noqa: S102
    return type(f"{cls.__name__}Without", (cls,), {"train_step": scope["train_step"]})


def micro_batches(batch: tuple, sizes: Sequence[int]) -> list[tuple]:
    """Split one ``(x, y)`` or ``(x, y, sample_weight)`` batch into consecutive micro-batches.

    >>> parts = micro_batches((tf.zeros([12, 2]), tf.zeros([12])), [5, 5, 2])
    >>> [int(x.shape[0]) for x, _ in parts]
    [5, 5, 2]
    """
    parts_in = plumbing.unpack_batch(batch, "batch")
    names = ("x", "y", "sample_weight")
    present = [(name, part) for name, part in zip(names, parts_in) if part is not None]
    n = plumbing.count_examples(parts_in[0])
    for name, part in present:
        rows = {plumbing.count_examples(leaf) for leaf in tf.nest.flatten(part)} - {n}
        if rows:
            raise ValueError(f"batch's {name} has {rows.pop()} rows but x has {n} examples: "
                             "every part of a batch needs one row per example")
    sizes = list(sizes)
    if not sizes:
        raise ValueError("sizes is empty: give at least one micro-batch size")
    for i, s in enumerate(sizes):
        require_int(f"sizes[{i}]", s, minimum=1)
    if sum(sizes) != n:
        raise ValueError(f"sizes add up to {sum(sizes)} but the batch has {n} examples")
    bounds = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
    return [tuple(tf.nest.map_structure(lambda t: t[lo:hi], part) for _, part in present)
            for lo, hi in zip(bounds[:-1], bounds[1:])]


# --------------------------------------------------------------------------- one compiled loop per model


class _Loop:
    """The compiled micro-step, update and fused "last micro-step + update" for one model (held
    weakly), one ``loss_fn`` and one set of trainable variables. It alone uses its accumulator."""

    def __init__(self, model: keras.Model, loss: LossRef, strategy: tf.distribute.Strategy):
        self._model = plumbing.WeakModel(model, "this accumulation loop")
        self.loss = loss
        self.names = loss_terms.output_names(model)
        self.key = plumbing.trainable_key(model)
        self.variables = list(model.trainable_variables)
        self.strategy = strategy
        self.replicas = strategy.num_replicas_in_sync
        with strategy.scope():
            self.accumulator = GradientAccumulator(self.variables)
            # This replica's (loss x weight, weight) in the window, weight being what its loss divides by.
            self.window_loss = tf.Variable(tf.zeros([2]), trainable=False, aggregation=tf.VariableAggregation.SUM,
                                           synchronization=tf.VariableSynchronization.ON_READ)
        self._steps: dict = {}  # batch signature -> compiled micro-step
        self._updates: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # optimizer -> {key: fn}

    @contextlib.contextmanager
    def emptied_on_error(self):
        """Every update and every result leaves the accumulator empty; so does a failed call."""
        try:
            yield
        except BaseException:
            self.reset()
            raise

    def reset(self) -> None:
        self.accumulator.reset()
        self._reset_loss()

    @tf.function(input_signature=[])
    def _reset_loss(self):
        self.window_loss.assign(tf.zeros([2]))

    def micro_step(self, batch: tuple) -> Callable:
        """Compiled ``(batch, scale) -> None`` that adds to the accumulator and to the window's loss
        (no collective op: each replica keeps its own share until the update)."""
        signature = plumbing.relaxed_signature(batch)
        key = hashable(signature)
        if key not in self._steps:
            self._steps[key] = tf.function(self._micro, input_signature=[signature, _SCALAR])
        return self._steps[key]

    def update(self, optimizer, batch: tuple | None) -> Callable:
        """Compiled update: ``()`` applies the window; with a batch, ``(batch, scale)`` adds it first.
        Either returns the window's ``(sum of loss x weight, sum of weights)`` over every replica."""
        per_optimizer = self._updates.setdefault(optimizer, {})
        signature = None if batch is None else plumbing.relaxed_signature(batch)
        # Which variables get None is fixed when an update is traced: after a new micro-step brought
        # a gradient to a variable that had none, trace again rather than drop that gradient.
        key = (hashable(signature), tuple(self.accumulator._received))
        if key not in per_optimizer:
            opt = weakref.ref(optimizer)  # the cache must not keep the optimizer alive
            if batch is None:
                fn = tf.function(lambda: self._apply(opt()), input_signature=[])
            else:
                fn = tf.function(lambda b, s: self._micro_and_apply(opt(), b, s), input_signature=[signature, _SCALAR])
            per_optimizer[key] = fn
        return per_optimizer[key]

    def _micro(self, batch, scale):
        if self.replicas == 1:
            self._replica_micro(batch, scale)
        else:
            self.strategy.run(self._replica_micro, args=(batch, scale))

    def _replica_micro(self, batch, scale):
        if self.replicas > 1:  # this replica's contiguous share of the micro-batch, maybe empty
            replica = tf.cast(tf.distribute.get_replica_context().replica_id_in_sync_group, tf.int64)
            n = plumbing.num_examples(batch[0])
            lo, hi = n * replica // self.replicas, n * (replica + 1) // self.replicas
            batch = tf.nest.map_structure(lambda t: t[lo:hi], batch)
        n = plumbing.num_examples(batch[0])

        def forward_backward():
            with tf.GradientTape() as tape:
                loss, weight = self._loss_and_weight(*plumbing.unpack_batch(batch, "batch"))
                scaled = tf.cast(loss, tf.float32) * scale  # the loss scale, before the backward pass
            return loss, weight, tape.gradient(scaled, self.variables)

        if self.replicas == 1:
            loss, weight, grads = forward_backward()
        else:  # an empty shard runs no layer (BatchNorm would record NaN statistics)
            missing = []

            def run():
                loss, weight, grads = forward_backward()
                missing[:] = [i for i, g in enumerate(grads) if g is None]
                return [tf.cast(loss, tf.float32), weight] + [  # an Embedding's IndexedSlices made dense for cond
                    tf.zeros(v.shape, v.dtype) if g is None else tf.cast(tf.convert_to_tensor(g), v.dtype)
                    for g, v in zip(grads, self.variables)]

            def skip():
                return [tf.zeros([]), tf.zeros([])] + [tf.zeros(v.shape, v.dtype) for v in self.variables]

            out = tf.cond(n > 0, run, skip)
            loss, weight = out[0], out[1]
            grads = [None if i in missing else g for i, g in enumerate(out[2:])]
        self.accumulator.add(grads, weight)
        self.window_loss.assign_add(tf.stack([tf.math.multiply_no_nan(tf.cast(loss, tf.float32), weight), weight]))

    def _loss_and_weight(self, x, y, sample_weight):
        """The loss Keras' ``fit`` minimises for this batch, and the batch's weight in the mean: what
        the loss divided by (see :func:`helpers.loss_terms.loss_terms`)."""
        model = self._model()
        y_pred = model(x, training=True)
        terms = loss_terms.loss_terms(self.loss.fn(), y, y_pred, sample_weight, loss_weights=self.loss.weights,
                                      names=self.names)
        weight = split_weight(terms, loss_terms.call_losses(model))
        loss = loss_terms.weighted_sum(terms)
        loss = loss + plumbing.regularization_loss(model, loss.dtype)
        return loss, weight

    def _apply(self, optimizer):
        if self.replicas == 1:
            return self._replica_apply(optimizer)
        window_loss = self.strategy.run(self._replica_apply, args=(optimizer,))
        return self.strategy.experimental_local_results(window_loss)[0]  # the same on every replica

    def _replica_apply(self, optimizer):
        """Apply the window's weighted mean gradient and reset; returns the window's (loss x weight,
        weight) summed over all replicas (in the same all-reduce as the accumulator's total weight)."""
        grads, window_loss = self.accumulator.gradients_for(optimizer, tf.unstack(self.window_loss.read_value()))
        optimizer.apply_gradients(zip(grads, self.variables))
        self.accumulator.reset()
        self.window_loss.assign(tf.zeros([2]))
        return tf.stack(window_loss)

    def _micro_and_apply(self, optimizer, batch, scale):
        self._micro(batch, scale)
        return self._apply(optimizer)


_SCALAR = tf.TensorSpec([], tf.float32)
_PER_MODEL = 4  # compiled loops kept per model (different losses or trainable sets), newest first
_LOOPS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> [_Loop]; loops hold no model


def _loop(model: keras.Model, loss_fn: Any, loss_weights: Any, strategy: tf.distribute.Strategy) -> _Loop:
    """The cached loop for this model, loss and *current* trainable variables (a new one after a
    layer is frozen or unfrozen)."""
    key, loops = plumbing.trainable_key(model), _LOOPS.setdefault(model, [])
    same = [old for old in loops
            if old.key == key and old.loss.matches(loss_fn, loss_weights) and old.strategy is strategy]
    loop = same[0] if same else _Loop(model, LossRef(loss_fn, loss_weights), strategy)
    loops[:] = ([loop] + [old for old in loops if old is not loop])[:_PER_MODEL]
    return loop


def _check(model: Any, loss_fn: Any, loss_weights: Any, optimizer: Any) -> tf.distribute.Strategy:
    """Argument checks shared by both functions; returns the strategy the model's variables live in."""
    plumbing.check_model(model)
    plumbing.check_keras_steps(model, "compute_loss", "train_step")
    plumbing.check_mean_loss(loss_fn, loss_weights=loss_weights)
    strategy = plumbing.check_strategy(model, optimizer)
    if not model.trainable_variables:
        raise ValueError(f"model ({model.name!r}) has no trainable variables: build it (call it once on a batch), "
                         "or unfreeze a layer")
    overwritten = [v.path for v in model.trainable_variables if getattr(v, "overwrite_with_gradient", False)]
    if overwritten:
        raise ValueError(f"variable {overwritten[0]!r} has overwrite_with_gradient=True (float8 training): the "
                         "optimizer writes its 'gradient' into it as a new value, which a mean over micro-batches "
                         "would change; train this model with fit")
    regularised = [layer.name for layer in _layers(model) if getattr(layer, "activity_regularizer", None)]
    if regularised and not _activity_regularisers_are_means():
        raise ValueError(f"layer {regularised[0]!r} has an activity regulariser, which Keras {keras.__version__} "
                         "sums over the batch: micro-batches would count it as a mean. Remove it, or use a "
                         "Keras that divides it by the batch size (3.15 does)")
    return strategy or tf.distribute.get_strategy()


def _layers(layer: Any) -> list:
    flatten = getattr(layer, "_flatten_layers", None)  # Keras' own walk over nested layers
    return list(flatten()) if flatten else [layer]


@functools.cache
def _activity_regularisers_are_means() -> bool:
    """Does this Keras divide an activity regulariser by the batch size (a mean over examples)?"""
    probe = keras.layers.Identity(activity_regularizer=keras.regularizers.L2(1.0))
    probe(tf.ones([4, 1]))
    return abs(float(probe.losses[0]) - 1.0) < 1e-6  # a sum over the 4 examples would be 4


def _traced(*fns: Any) -> None:
    """Trace each compiled function now if it never was: its checks (a per-example loss ...) fail
    before anything runs."""
    for fn in fns:
        if fn.experimental_get_tracing_count() == 0:
            try:
                fn.get_concrete_function(*fn.input_signature)
            except (TypeError, ValueError) as error:
                raise plumbing.original_error(error) from None


def _scale(optimizer: Any) -> Any:
    """The loss scale for the micro-steps, as ``optimizer.scale_loss`` applies it: a
    LossScaleOptimizer's current scale, an optimizer's ``loss_scale_factor``, else 1."""
    if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        return plumbing.tf_variable(optimizer.dynamic_scale) if optimizer.built else float(optimizer.initial_scale)
    factor = getattr(optimizer, "loss_scale_factor", None)
    return 1.0 if factor is None else float(factor)


def _tensor(value: Any) -> Any:
    return value if isinstance(value, (tf.RaggedTensor, tf.SparseTensor)) else tf.convert_to_tensor(value)


def _batch(element: Any, where: str) -> tuple:
    x, y, sample_weight = plumbing.unpack_batch(element, where)
    if plumbing.count_examples(x) == 0:
        raise ValueError(f"{where} has zero examples: drop empty micro-batches")
    return tuple(tf.nest.map_structure(_tensor, part) for part in (x, y, sample_weight) if part is not None)


# --------------------------------------------------------------------------- the functions


def accumulated_gradients(model: keras.Model, loss_fn: LossFn, micro_batches: Iterable[tuple], *,
                          optimizer: keras.optimizers.Optimizer | None = None,
                          loss_weights: Any = None) -> list[tf.Tensor | None]:
    """Gradient of the loss of all ``micro_batches`` together, one micro-batch at a time.

    The loss is the one ``fit`` minimises for ``compile(loss=loss_fn, loss_weights=loss_weights)``:
    one loss for every output, or a list or dict with one per output, summed with their weights
    (:mod:`helpers.loss_terms`), plus ``model.losses``. Each micro-batch's gradient is weighted by
    what its loss divides by: its number of examples for a plain mean (so micro-batches of 5, 5
    and 2 give the gradient of the concatenated batch), its unmasked entries for a Keras loss on a
    masked output or with ``ignore_class``, the sum of its sample weights for
    ``reduction="mean_with_sample_weight"``. Refused (``ValueError``, while tracing, before
    anything runs), because no such weight gives the full batch's loss: outputs whose losses
    divide by different counts, a Keras loss on rank-1 targets and outputs with sample weights or a
    mask (Keras then weights one number per batch), a plain function on a masked output,
    ``model.losses`` from the forward pass with a loss that does not divide by examples, a
    ``reduction="sum"`` or per-example loss; and a model that overrides ``compute_loss`` or
    ``train_step`` (``fit`` would run those instead). Weight regularisers come out exactly as for the full
    batch; a batch-dependent ``add_loss`` term counts as the size-weighted mean of its micro-batch
    values (exact for a mean over examples, such as Keras 3.15's activity regularisers; not for a
    sum over examples or a batch statistic; a Keras that sums activity regularisers, such as 3.13,
    gets a ``ValueError``). The model runs with ``training=True`` (BatchNorm sees one
    micro-batch, Dropout draws masks per micro-batch: neither can equal the full batch). Micro-batches may be ``(x, y)`` or ``(x, y, sample_weight)`` (a Keras loss object
    weights each example, as in ``fit``); ``x`` and ``y`` may be tensors, ragged tensors, lists or
    dicts, as ``fit`` takes them.

    One gradient per *current* trainable variable (``None`` where the loss does not use it).
    ``optimizer``: pass one to get what ``tape.gradient(optimizer.scale_loss(loss), ...)`` gives
    for the full batch (scaled by a ``LossScaleOptimizer``'s scale or a ``loss_scale_factor``;
    ``apply_gradients`` unscales it); an optimizer that scales nothing changes nothing. A model
    built in ``strategy.scope()`` spreads each micro-batch over the replicas.

    >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    >>> x, y = tf.ones([12, 3]), tf.zeros([12, 1])
    >>> grads = accumulated_gradients(model, keras.losses.MeanSquaredError(), micro_batches((x, y), [5, 5, 2]))
    >>> len(grads) == len(model.trainable_variables)
    True
    """
    if optimizer is not None:
        plumbing.check_optimizer(optimizer)
    strategy = _check(model, loss_fn, loss_weights, None)
    if isinstance(micro_batches, tuple) and len(micro_batches) in (2, 3) and tf.is_tensor(micro_batches[0]):
        raise TypeError("micro_batches must be a list of (x, y) micro-batches, got a single (x, y) batch")
    batches = [_batch(b, f"micro_batches[{i}]") for i, b in enumerate(micro_batches)]
    if not batches:
        raise ValueError("micro_batches is empty: pass at least one (x, y) micro-batch")
    workers.require_same_batch(strategy, batches[0], "micro_batches")
    loop = _loop(model, loss_fn, loss_weights, strategy)
    with strategy.scope(), loop.emptied_on_error():
        scale = _scale(optimizer)
        steps = [loop.micro_step(b) for b in batches]
        _traced(*steps)
        for fn, b in zip(steps, batches):
            fn(b, scale)
        grads = loop.accumulator.result()
        loop.reset()
    return grads


def train_accumulated(model: keras.Model, optimizer: keras.optimizers.Optimizer, loss_fn: LossFn,
                      dataset: Iterable[tuple], accumulation_steps: int, *, epochs: int = 1,
                      steps_per_epoch: int | None = None, verbose: bool = True,
                      loss_weights: Any = None) -> dict[str, Any]:
    """Train with one optimizer update per ``accumulation_steps`` micro-batches of ``dataset``.

    Each update applies the weighted mean gradient of its window (see :func:`accumulated_gradients`
    for the loss, what weights a micro-batch, what is refused, regularisers and strategies), with
    ``optimizer.apply_gradients``: clipping, weight decay, constraints, EMA as Keras applies them.
    An optimizer with ``gradient_accumulation_steps`` and a variable with
    ``overwrite_with_gradient`` (float8 training) are refused.
    The window restarts at every epoch; when an epoch ends inside a window, the partial window is
    applied as one more update weighted by its own examples, never carried over. With a
    ``LossScaleOptimizer`` each micro-batch's loss is scaled by the current scale and the window
    is unscaled once; a window with a non-finite gradient changes no weight and lowers the scale
    (an optimizer's ``loss_scale_factor`` is applied and undone the same way).

    ``dataset``: a finite iterable of micro-batches, read once per epoch. An endless one
    (``.repeat()``) needs ``steps_per_epoch``: then one stream is read for the whole call,
    ``steps_per_epoch`` micro-batches per epoch, as in ``fit``.

    Returns ``{"loss": [...], "examples": [...], "updates": int, "partial_updates": int}``,
    ``loss[k]`` being the training loss of update ``k``'s examples as one batch (what ``fit``
    reports for that batch: weighted like the gradient).

    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> data = [(tf.ones([4, 2]), tf.ones([4, 1]))] * 5
    >>> h = train_accumulated(model, keras.optimizers.SGD(0.1), keras.losses.MeanSquaredError(),
    ...                       data, accumulation_steps=2, verbose=False)
    >>> h["updates"], h["partial_updates"], h["examples"]
    (3, 1, [8, 8, 4])
    """
    plumbing.check_optimizer(optimizer)
    require_int("accumulation_steps", accumulation_steps, minimum=1)
    require_int("epochs", epochs, minimum=1)
    require_int("steps_per_epoch", steps_per_epoch, minimum=1, allow_none=True)
    if getattr(optimizer, "gradient_accumulation_steps", None):
        raise ValueError("optimizer already accumulates (gradient_accumulation_steps is set): "
                         "use a plain optimizer, or Keras' built-in accumulation alone")
    strategy = _check(model, loss_fn, loss_weights, optimizer)
    stream = epoch_stream(dataset, epochs, steps_per_epoch)
    first = next(stream, None)
    if first is None:
        raise ValueError("dataset is empty: it yielded no micro-batch")
    loop = _loop(model, loss_fn, loss_weights, strategy)
    history: dict[str, Any] = {"loss": [], "examples": [], "updates": 0, "partial_updates": 0}
    try:
        total = epochs * -(-(steps_per_epoch or len(dataset)) // accumulation_steps)
    except TypeError:
        total = None  # an iterable of unknown length: the progress bar counts without a total
    bar = Progress(total, verbose=verbose, label="update")
    with strategy.scope(), loop.emptied_on_error():
        batch = _batch(first[1], f"dataset element {first[0]}")
        workers.require_same_batch(strategy, batch, "dataset")  # several workers: all read the same batches
        _traced(loop.micro_step(batch))  # the loss's checks, before the optimizer changes
        if not optimizer.built:
            optimizer.build(loop.variables)  # eagerly: Keras creates its variables here
        _traced(loop.update(optimizer, batch))
        window: list[int] = []  # examples per micro-batch of the current window
        for index, element, last_of_epoch in itertools.chain([first], stream):
            batch = _batch(element, f"dataset element {index}")
            full = len(window) + 1 == accumulation_steps
            fn = loop.update(optimizer, batch) if full else loop.micro_step(batch)
            window_loss = fn(batch, _scale(optimizer))
            window.append(plumbing.count_examples(batch[0]))
            if full or last_of_epoch:
                if not full:
                    window_loss = loop.update(optimizer, None)()
                loss_sum, total_weight = window_loss.numpy().tolist()  # read once per update: no sync per micro-batch
                history["loss"].append(loss_sum / total_weight if total_weight else 0.0)
                history["examples"].append(sum(window))
                history["updates"] += 1
                history["partial_updates"] += int(not full)
                bar.update(history["updates"], loss=history["loss"][-1])
                window = []
    return history
