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
  :class:`History`. :class:`ExampleCount`: a Keras metric counting the examples of a pass.

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
from typing import Any, Callable, Sequence

import numpy as np
import tensorflow as tf
import keras

from helpers.arguments import require_int
from helpers.plumbing import (
    check_dataset, check_finite, check_mean_loss, check_model, check_optimizer, check_strategy, count_examples,
    num_examples, strategy_of, trainable_key,
)
from helpers.progress import Progress
from helpers.workers import cluster_workers, require_same_batch
from helpers.validation_steps import CompiledSteps, check_metrics, ensure_built, metric_name, unpack

__all__ = [
    "FEATURES", "MAX_PER_CHUNK", "chunk_examples", "generated_dataset", "example_ids", "drop_ids", "collect",
    "ValidationStream", "evaluate", "eval_trace_count", "History", "train_with_validation", "ExampleCount",
]

FEATURES = 4
MAX_PER_CHUNK = 32
_TASK_SEED = 2017  # the hidden function y = f(x): the same for every data seed, so train and val agree


# --------------------------------------------------------------------------- data


def chunk_examples(chunk: int, *, seed: int = 0, features: int = FEATURES,
                   max_per_chunk: int = MAX_PER_CHUNK) -> tuple[np.ndarray, np.ndarray]:
    """The examples generated from raw chunk number ``chunk``: ``(x [n, features], y [n, 1])``.

    ``n`` is between 1 and ``max_per_chunk`` and depends on ``(seed, chunk)`` only, like a data
    generator that makes a varying number of examples from each raw input file. The target is
    ``y = x @ w + 0.5 sin(3 x_0) + noise`` with ``w`` fixed for every seed.

    >>> x, y = chunk_examples(0, seed=1)
    >>> x.shape[1], y.shape[1], 1 <= len(x) <= MAX_PER_CHUNK
    (4, 1, True)
    """
    rng = np.random.default_rng([seed, chunk])
    n = int(rng.integers(1, max_per_chunk + 1))  # what _chunk_size draws
    x = rng.normal(size=(n, features)).astype(np.float32)
    w = np.random.default_rng(_TASK_SEED).normal(size=(features, 1)).astype(np.float32)
    y = x @ w + 0.5 * np.sin(3.0 * x[:, :1]) + 0.1 * rng.normal(size=(n, 1))
    return x, y.astype(np.float32)


def _chunk_size(chunk: int, seed: int, max_per_chunk: int) -> int:
    """How many examples :func:`chunk_examples` makes from ``chunk`` (its first draw)."""
    return int(np.random.default_rng([seed, chunk]).integers(1, max_per_chunk + 1))


def generated_dataset(chunks: int | None, batch_size: int, *, seed: int = 0, features: int = FEATURES,
                      max_per_chunk: int = MAX_PER_CHUNK, with_ids: bool = False,
                      on_chunk: Callable[[int], Any] | None = None) -> tf.data.Dataset:
    """A dataset generated on the fly, batched, of unknown size; ``chunks=None`` never ends.

    Every iteration generates chunks ``0, 1, 2, ...`` anew with :func:`chunk_examples` (one NumPy
    call per chunk, in ``tf.numpy_function``): the same examples in the same order, their number
    known only after a full pass. Elements are ``(x, y)``, ready for Keras; with ``with_ids``,
    dicts ``{"x", "y", "id"}``, where example ``i`` of chunk ``c`` has id ``c * max_per_chunk + i``:
    an id names one example whatever order it is read in (:func:`example_ids` lists them).
    ``on_chunk(chunk)`` is called each time a chunk is generated, to watch passes re-generate
    (from ``tf.data``'s threads, which may generate a pass's chunks in parallel and out of order;
    the examples keep their order).
    Cardinality: unknown when finite, declared infinite when ``chunks`` is None.

    >>> ds = generated_dataset(5, batch_size=4, seed=1, with_ids=True)
    >>> int(ds.cardinality()) == tf.data.UNKNOWN_CARDINALITY, sorted(ds.element_spec)
    (True, ['id', 'x', 'y'])
    """
    require_int("chunks", chunks, minimum=0, allow_none=True)  # None: an endless stream
    for name, value in (("batch_size", batch_size), ("features", features), ("max_per_chunk", max_per_chunk)):
        require_int(name, value, minimum=1)
    if on_chunk is not None and not callable(on_chunk):
        raise TypeError(f"on_chunk must be callable as on_chunk(chunk) or None, got {type(on_chunk).__name__}")

    def make(chunk: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if on_chunk is not None:
            on_chunk(int(chunk))
        return chunk_examples(int(chunk), seed=seed, features=features, max_per_chunk=max_per_chunk)

    def one_chunk(chunk: tf.Tensor) -> Any:
        x, y = tf.numpy_function(make, [chunk], [tf.float32, tf.float32], stateful=False)
        x, y = tf.ensure_shape(x, [None, features]), tf.ensure_shape(y, [None, 1])
        if not with_ids:
            return x, y
        ids = chunk * max_per_chunk + tf.range(tf.shape(x, out_type=tf.int64)[0], dtype=tf.int64)
        return {"x": x, "y": y, "id": ids}

    numbers = tf.data.Dataset.counter() if chunks is None else tf.data.Dataset.range(chunks)
    examples = numbers.map(one_chunk).unbatch()
    if chunks is None:
        examples = examples.apply(tf.data.experimental.assert_cardinality(tf.data.INFINITE_CARDINALITY))
    return examples.batch(batch_size)


def example_ids(chunks: int | None, *, seed: int = 0, max_per_chunk: int = MAX_PER_CHUNK,
                first: int | None = None) -> np.ndarray:
    """The ids of the examples that chunks ``0, 1, ...`` make, in generation order, computed with
    NumPy alone (no ``tf.data``): what one pass over ``generated_dataset(chunks, ..., seed=seed,
    with_ids=True)`` must read. ``first``: only the first ``first`` ids; ``chunks=None``, the
    endless stream, needs it.

    >>> example_ids(2, seed=1)[:3].tolist(), len(example_ids(None, seed=1, first=40))
    ([0, 1, 2], 40)
    """
    require_int("chunks", chunks, minimum=0, allow_none=True)
    require_int("max_per_chunk", max_per_chunk, minimum=1)
    require_int("first", first, minimum=0, allow_none=True)
    if chunks is None and first is None:
        raise ValueError("example_ids(None, ...) is the endless stream: say how many ids with first=")
    parts, count, chunk = [np.zeros(0, np.int64)], 0, 0
    while (chunks is None or chunk < chunks) and (first is None or count < first):
        n = _chunk_size(chunk, seed, max_per_chunk)
        parts.append(chunk * max_per_chunk + np.arange(n, dtype=np.int64))
        count, chunk = count + n, chunk + 1
    return np.concatenate(parts)[:first]


def drop_ids(element: dict) -> tuple:
    """``{"x", "y", "id"[, "sample_weight"]} -> (x, y[, sample_weight])``: ``dataset.map(drop_ids)``
    makes a dataset with ids ready for Keras' ``fit``/``evaluate``."""
    if not isinstance(element, dict):
        raise TypeError(f"drop_ids maps dict elements with an 'id' key, got {type(element).__name__}")
    x, y, weight, _ = unpack(element, "element")
    return (x, y) if weight is None else (x, y, weight)


def collect(dataset: tf.data.Dataset) -> Any:
    """One pass over a finite dataset, concatenated as NumPy arrays: a tuple ``(x, y[, w])`` for
    tuple elements, a dict for dict elements.

    >>> x, y = collect(generated_dataset(3, batch_size=4))
    >>> len(x) == len(y)
    True
    """
    check_dataset(dataset, "dataset")
    check_finite(dataset, "dataset")
    batches = [tf.nest.map_structure(np.asarray, batch) for batch in dataset]
    if not batches:
        raise ValueError("dataset is empty: it produced no batch")
    return tf.nest.map_structure(lambda *parts: np.concatenate(parts), *batches)


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

    def _start_pass(self) -> Any:
        """The first batch of the next pass (read now, or earlier by a check); refuses an empty pass."""
        first, self._first = self._first, None
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


def _eval_steps(model: keras.Model, loss_fn: Callable, metrics: Sequence[Any], strategy: Any) -> CompiledSteps:
    """The model's cached evaluation steps (held weakly: the cache dies with the model)."""
    per_model = _EVAL_STEPS.setdefault(model, {})
    key = (id(loss_fn), tuple(map(id, metrics)), trainable_key(model), id(strategy))
    if key not in per_model:
        per_model[key] = CompiledSteps(model, loss_fn, metrics, strategy=strategy)
    return per_model[key]


def eval_trace_count(model: keras.Model, loss_fn: Callable, metrics: Sequence[Any] = ()) -> int:
    """How many times :func:`evaluate`'s compiled step was traced for this model, loss and metrics.

    >>> model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(1)])
    >>> mse = keras.losses.MeanSquaredError()
    >>> _ = evaluate(model, generated_dataset(5, batch_size=4), mse)
    >>> eval_trace_count(model, mse)
    1
    """
    check_model(model)
    steps = _eval_steps(model, loss_fn, tuple(metrics), strategy_of(model.variables, "model"))
    return steps.traces["eval"]


def evaluate(model: keras.Model, dataset: tf.data.Dataset | ValidationStream, loss_fn: Callable,
             metrics: Sequence[Any] = (), *, return_ids: bool = False) -> dict[str, Any]:
    """One full pass over ``dataset``: the mean loss (and metrics) over *examples*, and how many.

    A dataset is iterated afresh on every call; a :class:`ValidationStream` gives its next pass:
    either way every example once, in the same order. A batch's mean counts as many times as the
    batch has examples, so a smaller last batch weighs less; ``model.losses`` (regularisers) are
    added, and sample weights (a third element) are passed to the loss, as Keras'
    ``model.evaluate`` does. ``metrics``: Keras metric objects (reset first) or functions
    ``f(y_true, y_pred) -> mean over the batch``. Results are floats keyed by name, plus
    ``examples`` and, with ``return_ids``, ``ids`` (from dict elements). Nothing in the model changes.

    >>> model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(1)])
    >>> sorted(evaluate(model, generated_dataset(5, batch_size=4), keras.losses.MeanSquaredError()))
    ['examples', 'loss']

    Raises TypeError for a non-model, non-dataset, bad loss or metric; ValueError for an infinite or
    empty dataset, a per-example loss (``keras.losses.mean_squared_error``), elements that do not
    fit the model, or a model, optimizer or metric created in a different strategy scope.
    """
    check_model(model)
    if not isinstance(dataset, ValidationStream):
        check_dataset(dataset, "dataset")
        check_finite(dataset, "dataset")
    check_mean_loss(loss_fn)
    metrics = check_metrics(metrics)
    name = dataset.name if isinstance(dataset, ValidationStream) else "dataset"
    ensure_built(model, dataset.element_spec, name)
    strategy = check_strategy(model, None, metrics)
    with strategy.scope() if strategy is not None else contextlib.nullcontext():
        steps = _eval_steps(model, loss_fn, metrics, strategy)
        steps.prepare(dataset.element_spec, name, train=False)
        return _run_pass(steps, dataset, name, return_ids=return_ids)


def _run_pass(steps: CompiledSteps, data: tf.data.Dataset | ValidationStream, name: str, *,
              return_ids: bool) -> dict[str, Any]:
    first = data._start_pass() if isinstance(data, ValidationStream) else None  # before any reset
    if cluster_workers(steps.strategy) > 1:  # every worker must read the same batches
        require_same_batch(steps.strategy, next(iter(data)) if first is None else first, name)
    for metric in steps.metrics:
        if isinstance(metric, keras.metrics.Metric):
            metric.reset_state()
    if first is None:
        sums, count, ids = steps.eval_pass(data)
    else:
        sums, count, ids = steps.stream_pass(data._iterator, first)
        data.passes += 1
    count = float(count)
    if not count:
        raise ValueError(f"{name} is empty: one pass produced no example")
    means = iter((sums / count).numpy().tolist())
    result: dict[str, Any] = {"loss": next(means)}
    for i, metric in enumerate(steps.metrics):
        result[metric_name(metric, i)] = (float(metric.result()) if isinstance(metric, keras.metrics.Metric)
                                           else next(means))
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
                          metrics: Sequence[Any] = (), at_start: bool = True, verbose: bool = False) -> History:
    """Train ``steps`` steps on ``train_ds``; every ``every`` steps, one full pass over ``val_ds``.

    One process, one copy of the weights. The training iterator is made once and evaluation never
    touches it, so training reads the same batches as without evaluation. Each evaluation is one
    exact pass of ``val_ds`` (read through a :class:`ValidationStream`): every example once, in
    order, size unknown in advance. Training minimises the loss plus ``model.losses`` with sample
    weights honoured, as Keras' ``fit`` does. ``train_ds`` may be a dataset (read from its start)
    or an iterator (read from where it is). ``at_start``: evaluate before the first step too.

    >>> model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(1)])
    >>> history = train_with_validation(model, keras.optimizers.SGD(0.05), keras.losses.MeanSquaredError(),
    ...     generated_dataset(None, 8), generated_dataset(4, 8, seed=1), steps=6, every=3)
    >>> history.eval_step, history.traces
    ([0, 3, 6], {'train': 1, 'eval': 1})

    Every argument is checked before the first step, so a bad one leaves the model and optimizer
    as they were: TypeError for wrong types; ValueError for ``steps < 1``, ``every < 1``, an
    infinite or empty ``val_ds``, a per-example loss, elements that do not fit the model, a
    training batch smaller than the number of replicas, or a model, optimizer or metric created in a
    different strategy scope. A ``train_ds`` of unknown size that runs out before ``steps`` is found
    only then (ValueError naming the step; the steps taken stay taken).
    """
    check_model(model)
    check_optimizer(optimizer)
    check_mean_loss(loss_fn)
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
    strategy = check_strategy(model, optimizer, metrics)
    with strategy.scope() if strategy is not None else contextlib.nullcontext():
        train_steps = CompiledSteps(model, loss_fn, metrics, optimizer=optimizer, strategy=strategy)
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
