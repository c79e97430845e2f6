"""Evaluate a validation set every K training steps, in one process, without disturbing training
(notebook 04).

In TF1 a validation *queue* either cycled forever (a pass took extra examples and shifted the
order) or ran once and closed for good. In TF2 a finite ``tf.data.Dataset`` is a recipe, not a
queue: every ``for batch in dataset`` starts a fresh pass from the beginning, in the same order,
while the training iterator keeps its place.

* :func:`generated_dataset`: examples made on the fly from numbered raw chunks, a varying number
  per chunk, so TensorFlow does not know the size (cardinality unknown).
* :func:`evaluate`: one full pass; the mean over examples (a smaller last batch weighs by its size),
  plus ``model.losses``, as Keras' ``model.evaluate`` reports it.
* :class:`ValidationStream`: exact passes read from one long-lived iterator (cheaper per pass).
* :func:`train_with_validation`: train ``steps`` steps, evaluate every ``every`` steps; a
  :class:`History`. :class:`KeepBest`: the same inside ``model.fit`` (a callback), with the
  best weights kept and early stopping. :class:`ExampleCount`: a Keras metric counting examples.

Batches are Keras' ``(x, y)`` or ``(x, y, sample_weight)`` (a third element is always a sample
weight), or dicts ``{"x", "y", "id"[, "sample_weight"]}`` whose example ids the helpers record and
never give to the model; ``dataset.map(drop_ids)`` makes them Keras tuples again.

Strategies: a model built inside ``strategy.scope()`` (``MirroredStrategy``) is trained and
evaluated on every replica, each batch split between them, inside or outside the scope; the loss
is undone from the ``1 / replicas`` that Keras' loss objects apply inside a scope.
"""

from __future__ import annotations

import contextlib
import dataclasses
import weakref
from typing import Any, Callable

import numpy as np
import tensorflow as tf
import keras

from helpers.arguments import require_int
from helpers.plumbing import (
    check_dataset, check_finite, check_keras_steps, check_mean_loss, check_model, check_optimizer, check_strategy,
    count_examples, num_examples, strategy_of, trainable_key,
)
from helpers.progress import Progress
from helpers.validation_data import (  # noqa: F401  (split off; part of this module's API)
    FEATURES, MAX_PER_CHUNK, chunk_examples, collect, drop_ids, example_ids, generated_dataset,
)
from helpers.validation_metrics import flat_metrics, metric_value
from helpers.validation_steps import CompiledSteps, check_metrics, ensure_built, unpack
from helpers.workers import cluster_workers, require_same_batch

__all__ = [
    "FEATURES", "MAX_PER_CHUNK", "chunk_examples", "generated_dataset", "example_ids", "drop_ids", "collect",
    "ValidationStream", "evaluate", "eval_trace_count", "History", "train_with_validation", "KeepBest",
    "ExampleCount",
]

# --------------------------------------------------------------------------- exact passes


class ValidationStream:
    """Exact passes over a finite dataset, read from one long-lived iterator.

    ``for batch in dataset`` builds a new iterator for every pass, and TensorFlow sets up the whole
    input pipeline again each time. The stream builds one iterator over
    ``dataset`` + an end-of-pass marker, repeated: each pass runs the dataset's recipe again from
    its source (a generator is called again, the examples are made afresh, a shuffle reshuffles),
    and ends exactly at the marker, so every pass reads every example once, in order, whatever
    the size. Hand it to :func:`evaluate` or :func:`train_with_validation` instead of the dataset.

    >>> stream = ValidationStream(generated_dataset(3, batch_size=4, with_ids=True))
    >>> model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(1)])
    >>> passes = [evaluate(model, stream, keras.losses.MeanSquaredError(), return_ids=True) for _ in range(2)]
    >>> np.array_equal(passes[0]["ids"], passes[1]["ids"]), stream.passes
    (True, 2)
    """

    def __init__(self, dataset: tf.data.Dataset, name: str = "val_ds"):
        check_dataset(dataset, name)
        check_finite(dataset, name)
        self.name, self.element_spec, self.passes = name, dataset.element_spec, 0
        end = tf.nest.map_structure(lambda spec: _empty_batch(spec, name), dataset.element_spec)
        flagged = tf.data.Dataset.zip((tf.data.Dataset.from_tensors(False).repeat(), dataset))
        stream = flagged.concatenate(tf.data.Dataset.from_tensors((True, end))).repeat()
        options = tf.data.Options()
        options.experimental_optimization.inject_prefetch = False  # read a pass only when asked
        self._iterator = iter(stream.with_options(options))
        self._first: Any = None
        self.interrupted = False  # a pass failed midway: the next one first reads up to the marker

    def _start_pass(self) -> Any:
        """The first batch of the next pass (read now, or earlier by a check); refuses an empty pass."""
        first, self._first = self._first, None
        while self.interrupted:  # skip what a failed pass left unread, so the next pass starts at its start
            self.interrupted = not bool(next(self._iterator)[0])
        if first is None:
            is_end, first = next(self._iterator)
            if bool(is_end):
                raise ValueError(f"{self.name} is empty: one pass produced no example")
        return first


def _empty_batch(spec: Any, name: str) -> tf.Tensor:
    if not isinstance(spec, tf.TensorSpec) or spec.shape.rank is None or spec.shape.rank == 0:
        raise TypeError(f"{name}: ValidationStream needs batches of dense tensors, got {spec}; "
                        "pass the dataset itself to evaluate()")
    return tf.zeros([0] + [d or 0 for d in spec.shape.as_list()[1:]], spec.dtype)


# --------------------------------------------------------------------------- evaluate


_EVAL_STEPS: "weakref.WeakKeyDictionary[keras.Model, dict]" = weakref.WeakKeyDictionary()


def _eval_steps(model: keras.Model, loss_fn: Any, metrics: Any, strategy: Any, loss_weights: Any) -> CompiledSteps:
    """The model's cached evaluation steps (held weakly: the cache dies with the model; the steps
    hold the losses and metrics, so their ids stay theirs)."""
    per_model = _EVAL_STEPS.setdefault(model, {})
    layout = lambda s: (tuple(map(id, tf.nest.flatten(s))), repr(tf.nest.map_structure(lambda _: 0, s)))  # noqa
    key = (layout(loss_fn), layout(flat_metrics(metrics)), repr(metrics if isinstance(metrics, dict) else 0),
           repr(loss_weights), trainable_key(model), id(strategy))
    if key not in per_model:
        per_model[key] = CompiledSteps(model, loss_fn, metrics, strategy=strategy, loss_weights=loss_weights)
    return per_model[key]


def eval_trace_count(model: keras.Model, loss_fn: Any, metrics: Any = (), *, loss_weights: Any = None) -> int:
    """How many times :func:`evaluate`'s compiled step was traced for this model, loss and metrics.

    >>> model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(1)])
    >>> mse = keras.losses.MeanSquaredError()
    >>> _ = evaluate(model, generated_dataset(5, batch_size=4), mse)
    >>> eval_trace_count(model, mse)
    1
    """
    check_model(model)
    steps = _eval_steps(model, loss_fn, check_metrics(metrics), strategy_of(model.variables, "model"), loss_weights)
    return steps.traces["eval"]


def evaluate(model: keras.Model, dataset: tf.data.Dataset | ValidationStream, loss_fn: Any,
             metrics: Any = (), *, return_ids: bool = False, loss_weights: Any = None) -> dict[str, Any]:
    """One full pass over ``dataset``: the mean loss (and metrics) over *examples*, and how many.

    A dataset is iterated afresh on every call; a :class:`ValidationStream` gives its next pass:
    either way every example once, in the same order. The loss is what ``model.evaluate`` reports
    for ``compile(loss=loss_fn, loss_weights=loss_weights)``: one loss for every output, or a list
    or dict with one per output, summed with their weights (:mod:`helpers.loss_terms`), plus
    ``model.losses``; sample weights (a third element; one for all outputs or one per output) go to
    the losses. A batch's loss counts as many times as the batch has examples (a smaller last batch
    weighs less), as Keras' loss tracker counts it; with several losses each output's unweighted
    loss is reported too (``<output>_loss``, a mean over examples).

    ``metrics``: Keras metric objects (reset first; sample weights honoured, like ``compile``'s
    ``weighted_metrics``; a metric with one value per class gives an array) or functions
    ``f(y_true, y_pred)`` returning the batch mean (weighted by the batch's examples) or one value
    per example (averaged over all of them, unmasked ones only, as Keras does). With several
    outputs: a dict keyed by output name or a list with one entry per output, as ``compile`` takes
    them. Keys are unique (``_1``, ``_2`` ... as Keras adds them) and never ``loss`` or ``examples``.
    Results are keyed by name, plus ``examples`` and, with ``return_ids``, ``ids`` (from dict
    elements). Nothing in the model changes (but what a layer writes in its own ``call``, as in
    ``model.evaluate``).

    >>> model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(1)])
    >>> sorted(evaluate(model, generated_dataset(5, batch_size=4), keras.losses.MeanSquaredError()))
    ['examples', 'loss']

    Raises TypeError for a non-model, non-dataset, bad loss or metric, sample weights with a plain
    function; ValueError for an infinite or empty dataset, a per-example loss
    (``keras.losses.mean_squared_error``) or ``reduction="sum"``, losses, targets or metrics that do
    not fit the model's outputs, elements that do not fit the model, a model that overrides
    ``compute_loss`` or ``test_step`` (``evaluate`` would run those), or a model, optimizer or
    metric created in a different strategy scope.
    """
    check_model(model)
    check_keras_steps(model, "compute_loss", "test_step")
    if not isinstance(dataset, ValidationStream):
        check_dataset(dataset, "dataset")
        check_finite(dataset, "dataset")
    check_mean_loss(loss_fn, loss_weights=loss_weights)
    metrics = check_metrics(metrics)
    name = dataset.name if isinstance(dataset, ValidationStream) else "dataset"
    ensure_built(model, dataset.element_spec, name)
    strategy = check_strategy(model, None, flat_metrics(metrics))
    with strategy.scope() if strategy is not None else contextlib.nullcontext():
        steps = _eval_steps(model, loss_fn, metrics, strategy, loss_weights)
        steps.prepare(dataset.element_spec, name, train=False)
        return _run_pass(steps, dataset, name, return_ids=return_ids)


def _run_pass(steps: CompiledSteps, data: tf.data.Dataset | ValidationStream, name: str, *,
              return_ids: bool) -> dict[str, Any]:
    first = data._start_pass() if isinstance(data, ValidationStream) else None  # before any reset
    if first is not None:
        data.interrupted = True  # until the pass ends: an error from here on leaves the stream inside a pass
    if cluster_workers(steps.strategy) > 1:  # every worker must read the same batches
        require_same_batch(steps.strategy, next(iter(data)) if first is None else first, name)
    for metric in steps.keras_metrics:
        metric.reset_state()
    if first is None:
        sums, counts, count, ids = steps.eval_pass(data)
    else:
        sums, counts, count, ids = steps.stream_pass(data._iterator, first)
        data.interrupted = False
        data.passes += 1
    count = float(count)
    if not count:
        raise ValueError(f"{name} is empty: one pass produced no example")
    means = dict(zip(steps.columns, np.divide(sums.numpy(), np.maximum(counts.numpy(), 1e-300)).tolist()))
    result: dict[str, Any] = {key: means[key] for key in steps.loss_columns}
    for _, metric, key in steps.resolved:
        result[key] = metric_value(metric.result()) if isinstance(metric, keras.metrics.Metric) else means[key]
    result["examples"] = int(count)
    if return_ids:
        result["ids"] = ids.numpy()
    return result


# --------------------------------------------------------------------------- training loop


@dataclasses.dataclass
class History:
    """What :func:`train_with_validation` returns (``helpers.plots.validation_curve`` draws it).

    ``step`` and ``train_loss``: one entry per training step (steps count from 1).
    ``eval_step`` and ``val``: one entry per evaluation; ``val[i]`` is :func:`evaluate`'s dict after
    ``eval_step[i]`` training steps (0 = before training). ``train_ids`` / ``val_ids``: the example
    ids read, for datasets of dict elements. ``traces``: how often each compiled step was traced.
    """

    step: list[int] = dataclasses.field(default_factory=list)
    train_loss: list[float] = dataclasses.field(default_factory=list)
    eval_step: list[int] = dataclasses.field(default_factory=list)
    val: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    train_ids: list[np.ndarray] = dataclasses.field(default_factory=list)
    val_ids: list[np.ndarray] = dataclasses.field(default_factory=list)
    traces: dict[str, int] = dataclasses.field(default_factory=dict)

    def val_metric(self, name: str = "loss") -> list[float]:
        """One value of validation metric ``name`` per evaluation."""
        return [result[name] for result in self.val]


def train_with_validation(model: keras.Model, optimizer: keras.optimizers.Optimizer, loss_fn: Callable,
                          train_ds: tf.data.Dataset | tf.data.Iterator,
                          val_ds: tf.data.Dataset | ValidationStream | None, steps: int, every: int, *,
                          metrics: Any = (), at_start: bool = True, verbose: bool = False,
                          loss_weights: Any = None) -> History:
    """Train ``steps`` steps on ``train_ds``; every ``every`` steps, one full pass over ``val_ds``.

    One process, one copy of the weights. The training iterator is made once and evaluation never
    touches it, so training reads the same batches as without evaluation. Each evaluation is one
    exact pass of ``val_ds`` (read through a :class:`ValidationStream`): every example once, in
    order, size unknown in advance. Training minimises the loss plus ``model.losses`` with sample
    weights honoured, as Keras' ``fit`` does (losses, ``loss_weights`` and ``metrics`` as in
    :func:`evaluate`). ``train_ds`` may be a dataset (read from its start)
    or an iterator (read from where it is). ``at_start``: evaluate before the first step too.

    >>> model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(1)])
    >>> history = train_with_validation(model, keras.optimizers.SGD(0.05), keras.losses.MeanSquaredError(),
    ...     generated_dataset(None, 8), generated_dataset(4, 8, seed=1), steps=6, every=3)
    >>> history.eval_step, history.traces
    ([0, 3, 6], {'train': 1, 'eval': 1})

    Every argument is checked before the first step, so a bad one leaves the model and optimizer
    as they were: TypeError for wrong types; ValueError for ``steps < 1``, ``every < 1``, an
    infinite or empty ``val_ds``, a per-example loss, losses or metrics that do not fit the model's
    outputs, elements that do not fit the model, a model that overrides ``compute_loss``,
    ``train_step`` or ``test_step``, a training batch smaller than the number of replicas, or a
    model, optimizer or metric created in a different strategy scope. A ``train_ds`` of unknown size that runs out before ``steps`` is found
    only then (ValueError naming the step; the steps taken stay taken).
    """
    check_model(model)
    check_keras_steps(model, "compute_loss", "train_step", "test_step")
    check_optimizer(optimizer)
    check_mean_loss(loss_fn, loss_weights=loss_weights)
    require_int("steps", steps, minimum=1)
    require_int("every", every, minimum=1)
    metrics = check_metrics(metrics)
    if isinstance(train_ds, tf.data.Dataset):
        if 0 <= int(train_ds.cardinality()) < steps:
            raise ValueError(f"train_ds has {int(train_ds.cardinality())} batches, fewer than steps={steps}: "
                             "add .repeat()")
    elif not isinstance(train_ds, tf.data.Iterator):
        raise TypeError(f"train_ds must be a tf.data.Dataset or an iterator over one, got {type(train_ds).__name__}")
    if val_ds is not None and not isinstance(val_ds, ValidationStream):
        val_ds = ValidationStream(val_ds, "val_ds")
    ensure_built(model, train_ds.element_spec, "train_ds")
    strategy = check_strategy(model, optimizer, flat_metrics(metrics))
    with strategy.scope() if strategy is not None else contextlib.nullcontext():
        train_steps = CompiledSteps(model, loss_fn, metrics, optimizer=optimizer, strategy=strategy,
                                    loss_weights=loss_weights)
        if val_ds is not None:
            train_steps.prepare(val_ds.element_spec, val_ds.name, train=False)
            val_ds._first = val_ds._start_pass()  # an empty val_ds fails now, not after `every` steps
        if not optimizer.built:
            optimizer.build(model.trainable_variables)
        train_steps.prepare(train_ds.element_spec, "train_ds", train=True)
        return _train(train_steps, train_ds, val_ds, steps, every, at_start, verbose)


def _train(train_steps: CompiledSteps, train_ds: Any, val_ds: ValidationStream | None, steps: int, every: int,
           at_start: bool, verbose: bool) -> History:
    history, progress = History(), Progress(total=steps, verbose=verbose)
    replicas = train_steps.strategy.num_replicas_in_sync if train_steps.strategy is not None else 1

    def validate(step: int) -> None:
        result = _run_pass(train_steps, val_ds, val_ds.name, return_ids=True)
        history.val_ids.append(result.pop("ids"))
        history.eval_step.append(step)
        history.val.append(result)

    if val_ds is not None and at_start:
        validate(0)
    iterator = train_ds if isinstance(train_ds, tf.data.Iterator) else iter(train_ds)
    for step in range(1, steps + 1):
        element = next(iterator, None)
        if element is None:
            raise ValueError(f"train_ds ran out after {step - 1} of {steps} steps: add .repeat()")
        x, y, weight, ids = unpack(element, "train_ds")
        if step == 1:
            require_same_batch(train_steps.strategy, element, "train_ds")
        if count_examples(x) < replicas:
            raise ValueError(f"train_ds: batch {step} has {count_examples(x)} examples for {replicas} replica(s), "
                             "so a replica would train on none (its loss, and BatchNorm's statistics, would be "
                             "NaN or 0): use batches of at least that many examples")
        loss = float(train_steps.train_step(x, y, weight))
        history.step.append(step)
        history.train_loss.append(loss)
        if ids is not None:
            history.train_ids.append(ids.numpy())
        if val_ds is not None and step % every == 0:
            validate(step)
        progress.update(step, loss=loss, **({"val_loss": history.val[-1]["loss"]} if history.val else {}))
    history.traces = train_steps.traces
    return history


class KeepBest(keras.callbacks.Callback):
    """A callback for ``model.fit``: one full pass over ``val_ds`` (:func:`evaluate`) before the
    first step and after every ``every`` training steps, counted across epochs.

    Each pass's results go into that batch's logs as ``val_<name>`` (callbacks listed after this
    one see them), and an epoch's last pass into the epoch's logs (``History`` and
    ``EarlyStopping`` read those; an epoch with no pass gets none). ``curve``: ``(step, val loss)``
    of every pass; ``results``: :func:`evaluate`'s dicts. ``restore_best``: keep the weights of the
    pass with the lowest loss (``best_step``, ``best_loss``) and put them back when ``fit`` ends.
    ``patience``: stop ``fit`` after that many passes without a lower loss (None: never).

    >>> model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> callback = KeepBest(generated_dataset(4, 8, seed=1), 3, keras.losses.MeanSquaredError())
    >>> _ = model.fit(generated_dataset(None, 8), steps_per_epoch=6, callbacks=[callback], verbose=0)
    >>> [step for step, _ in callback.curve]
    [0, 3, 6]

    TypeError/ValueError (naming the argument) for a bad ``val_ds``, ``every``, ``loss_fn``,
    ``metrics`` or ``patience``; ValueError in ``on_train_begin``, before any step, for
    ``compile(steps_per_execution=N)`` with N > 1 (``fit`` would call back once per N steps).
    """

    def __init__(self, val_ds: tf.data.Dataset, every: int, loss_fn: Any, metrics: Any = (), *,
                 restore_best: bool = False, patience: int | None = None, loss_weights: Any = None):
        super().__init__()
        self.every = require_int("every", every, minimum=1)
        self.patience = require_int("patience", patience, minimum=1, allow_none=True)
        check_mean_loss(loss_fn, loss_weights=loss_weights)
        self.stream = ValidationStream(val_ds, "val_ds")
        self.loss_fn, self.metrics, self.loss_weights = loss_fn, check_metrics(metrics), loss_weights
        self.restore_best = bool(restore_best)
        self.curve: list[tuple[int, float]] = []
        self.results: list[dict[str, Any]] = []
        self.best_step: int | None = None
        self.best_loss = float("inf")
        self.best_weights: list[np.ndarray] | None = None
        self._since_best = 0
        self._epoch_logs: dict[str, Any] = {}

    def on_train_begin(self, logs: dict | None = None) -> None:
        if int(getattr(self.model, "steps_per_execution", 1) or 1) != 1:
            raise ValueError("KeepBest needs compile(steps_per_execution=1): fit calls back once per "
                             f"{int(self.model.steps_per_execution)} steps, so passes would be skipped")
        step = int(self.model.optimizer.iterations)
        if not self.curve or self.curve[-1][0] != step:
            self._validate(step, {})

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._epoch_logs = {}

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        step = int(self.model.optimizer.iterations)
        if step % self.every == 0:
            self._validate(step, logs if logs is not None else {})

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if logs is not None:
            logs.update(self._epoch_logs)

    def on_train_end(self, logs: dict | None = None) -> None:
        if self.restore_best and self.best_weights is not None:
            self.model.set_weights(self.best_weights)

    def _validate(self, step: int, logs: dict) -> None:
        result = evaluate(self.model, self.stream, self.loss_fn, self.metrics, loss_weights=self.loss_weights)
        loss = float(result["loss"])
        self.curve.append((step, loss))
        self.results.append(result)
        self._epoch_logs = {f"val_{key}": value for key, value in result.items() if key != "examples"}
        logs.update(self._epoch_logs)
        if loss < self.best_loss:
            self.best_step, self.best_loss, self._since_best = step, loss, 0
            self.best_weights = self.model.get_weights() if self.restore_best else None
        else:
            self._since_best += 1
            if self.patience is not None and self._since_best >= self.patience:
                self.model.stop_training = True  # fit stops after this step


class ExampleCount(keras.metrics.Metric):
    """A Keras metric: how many examples the current epoch or evaluation has seen.

    >>> count = ExampleCount()
    >>> count.update_state(tf.zeros([5, 1]), tf.zeros([5, 1])); int(count.result())
    5
    """

    def __init__(self, name: str = "examples", **kwargs: Any):
        super().__init__(name=name, **kwargs)
        self.count = self.add_variable(shape=(), initializer="zeros", name="count", aggregation="sum")

    def update_state(self, y_true: Any, y_pred: Any = None, sample_weight: Any = None) -> None:
        self.count.assign_add(tf.cast(num_examples(y_true), self.count.dtype))

    def result(self) -> tf.Tensor:
        return tf.identity(self.count)
