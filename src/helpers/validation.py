"""Evaluate a validation set every K training steps, in one process, without disturbing training
(notebook 04).

In TF1 a validation *queue* either cycled forever (a pass took extra examples and shifted the
order) or ran once and closed for good. In TF2 a finite ``tf.data.Dataset`` is a recipe, not a
queue: every ``for batch in dataset`` starts a fresh pass from the beginning, in the same order,
while the training iterator keeps its place.

* :func:`generated_dataset`: examples made on the fly by a Python generator, a varying number per
  raw "chunk", so TensorFlow does not know the size (cardinality unknown); each example has an id.
* :func:`evaluate`: one full pass; the mean over examples (a smaller last batch weighs by its size).
* :func:`train_with_validation`: train ``steps`` steps, evaluate every ``every`` steps.
* :class:`History`: what :func:`train_with_validation` returns; ``history.plot()`` draws it.

Batches are ``(x, y)`` pairs, or ``(x, y, ids)`` triples where ``ids`` are example ids: the
helpers never pass ids to the model or the loss, they only record them (``return_ids=True``,
``History.train_ids`` / ``History.val_ids``). Keras itself would read a third element as sample
weights, so drop the ids (``dataset.map(drop_ids)``) before handing such a dataset to
``model.fit``/``model.evaluate``.
"""

from __future__ import annotations

import dataclasses
import math
import weakref
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np
import tensorflow as tf
import keras

from helpers.arguments import require_int
from helpers.progress import Progress

FEATURES = 4
MAX_PER_CHUNK = 32
_TASK_SEED = 2017  # the hidden function y = f(x): the same for every data seed, so train and val agree


# --------------------------------------------------------------------------- data


def _task_weights(features: int) -> np.ndarray:
    return np.random.default_rng(_TASK_SEED).normal(size=(features, 1)).astype(np.float32)


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
    n = int(rng.integers(1, max_per_chunk + 1))
    x = rng.normal(size=(n, features)).astype(np.float32)
    y = x @ _task_weights(features) + 0.5 * np.sin(3.0 * x[:, :1]) + 0.1 * rng.normal(size=(n, 1))
    return x, y.astype(np.float32)


def drop_ids(x: Any, y: Any, ids: Any = None) -> tuple[Any, Any]:
    """``(x, y, ids) -> (x, y)``: for ``dataset.map(drop_ids)`` before Keras' ``fit``/``evaluate``."""
    return x, y


def generated_dataset(chunks: int | None, batch_size: int, *, seed: int = 0, features: int = FEATURES,
                      max_per_chunk: int = MAX_PER_CHUNK, with_ids: bool = True) -> tf.data.Dataset:
    """A dataset generated on the fly, batched, of unknown size; ``chunks=None`` never ends.

    A Python generator turns raw chunks ``0, 1, 2, ...`` into a varying number of examples each
    (:func:`chunk_examples`), so the number of examples is only known after a full pass. Every
    iteration of the dataset calls the generator anew: the same examples in the same order.
    Elements are ``(x, y, ids)`` (ids count examples from 0 in generation order), or ``(x, y)``
    with ``with_ids=False``. The last batch of a finite dataset may be smaller.

    Cardinality: ``tf.data.UNKNOWN_CARDINALITY`` for a finite dataset;
    ``tf.data.INFINITE_CARDINALITY`` when ``chunks`` is None (declared, so that :func:`evaluate`
    can refuse it instead of running forever).

    >>> ds = generated_dataset(5, batch_size=4, seed=1)
    >>> int(ds.cardinality()) == tf.data.UNKNOWN_CARDINALITY
    True
    >>> n = sum(len(ids) for _, _, ids in ds)  # known only now
    """
    require_int("chunks", chunks, minimum=0, allow_none=True)  # None: an endless stream
    for name, value in (("batch_size", batch_size), ("features", features), ("max_per_chunk", max_per_chunk)):
        require_int(name, value, minimum=1)

    def generate() -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        next_id, chunk = 0, 0
        while chunks is None or chunk < chunks:
            x, y = chunk_examples(chunk, seed=seed, features=features, max_per_chunk=max_per_chunk)
            yield x, y, np.arange(next_id, next_id + len(x), dtype=np.int64)
            next_id += len(x)
            chunk += 1

    signature = (
        tf.TensorSpec([None, features], tf.float32),
        tf.TensorSpec([None, 1], tf.float32),
        tf.TensorSpec([None], tf.int64),
    )
    if not with_ids:
        # No ids, so no running count to carry from chunk to chunk: each chunk is generated by one
        # NumPy call in a `map` over the chunk numbers. Same examples, same order, size still
        # unknown (unbatch), about half the cost of `from_generator`'s Python bridge per pass.
        def one_chunk(chunk: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            x, y = tf.numpy_function(
                lambda c: chunk_examples(int(c), seed=seed, features=features, max_per_chunk=max_per_chunk),
                [chunk], [tf.float32, tf.float32], stateful=False)
            return tf.ensure_shape(x, signature[0].shape), tf.ensure_shape(y, signature[1].shape)

        numbers = tf.data.Dataset.counter() if chunks is None else tf.data.Dataset.range(chunks)
        dataset = numbers.map(one_chunk).unbatch()
        if chunks is None:
            dataset = dataset.apply(tf.data.experimental.assert_cardinality(tf.data.INFINITE_CARDINALITY))
        return dataset.batch(batch_size)
    dataset = tf.data.Dataset.from_generator(generate, output_signature=signature).unbatch()
    if chunks is None:
        dataset = dataset.apply(tf.data.experimental.assert_cardinality(tf.data.INFINITE_CARDINALITY))
    return dataset.batch(batch_size)


def collect(dataset: tf.data.Dataset) -> tuple[np.ndarray, ...]:
    """One pass over a finite dataset, concatenated as NumPy arrays (``x, y`` and ``ids`` if present).

    >>> x, y, ids = collect(generated_dataset(3, batch_size=4))
    >>> len(x) == len(y) == len(ids)
    True
    """
    _check_finite(dataset, "dataset")
    parts = [[np.asarray(part) for part in batch] for batch in dataset]
    if not parts:
        raise ValueError("dataset is empty: it produced no batch")
    return tuple(np.concatenate(column) for column in zip(*parts))


# --------------------------------------------------------------------------- compiled steps


def _relaxed_spec(spec: Any) -> Any:
    """``spec`` with the batch (first) dimension of every tensor set to None."""
    def relax(s):
        if isinstance(s, tf.TensorSpec) and s.shape.rank:
            return tf.TensorSpec([None] + s.shape.as_list()[1:], s.dtype)
        return s

    return tf.nest.map_structure(relax, spec)


def _split(element: Any, name: str) -> tuple[Any, Any, Any]:
    """``(x, y)`` or ``(x, y, ids)`` -> ``(x, y, ids or None)``; anything else is a ValueError."""
    if isinstance(element, (tuple, list)) and len(element) in (2, 3):
        return element[0], element[1], (element[2] if len(element) == 3 else None)
    raise ValueError(
        f"{name}: each element must be an (x, y) pair or an (x, y, ids) triple, got {_describe(element)}"
    )


def _describe(element: Any) -> str:
    return str(tf.nest.map_structure(lambda s: getattr(s, "shape", s), element))


def _num_examples(x: Any) -> tf.Tensor:
    return tf.shape(tf.nest.flatten(x)[0])[0]


class _Steps:
    """The compiled evaluation (and, with an optimizer, training) step of one model.

    Each step is one ``tf.function`` traced once with the batch dimension set to None, so every
    batch size (including a smaller last batch) reuses the same graph.
    """

    def __init__(self, model: keras.Model, loss_fn: Callable, metrics: Sequence[Any] = (),
                 optimizer: keras.optimizers.Optimizer | None = None):
        self.model, self.loss_fn, self.metrics, self.optimizer = model, loss_fn, tuple(metrics), optimizer
        self.eval_step = tf.function(self._eval_step)
        self.train_step = tf.function(self._train_step)
        self.eval_pass = tf.function(self._eval_pass)

    def _eval_step(self, x, y):
        y_pred = self.model(x, training=False)
        n = tf.cast(_num_examples(x), tf.float32)
        loss = tf.cast(self.loss_fn(y, y_pred), tf.float32)
        sums = [loss * n]
        for metric in self.metrics:
            if isinstance(metric, keras.metrics.Metric):
                metric.update_state(y, y_pred)
            else:
                sums.append(tf.cast(metric(y, y_pred), tf.float32) * n)
        return tf.stack(sums), n

    def _eval_pass(self, dataset, name, collect_ids):
        """One whole pass in one compiled call: a fresh iterator and a ``while`` loop over it.

        Returns the per-example sums of :meth:`_eval_step`'s values, the number of examples
        (float64) and, with ``collect_ids``, the ids of ``(x, y, ids)`` elements in order. The loop
        iterates ``iter(dataset)`` (AutoGraph makes that a ``while`` loop on the iterator's
        ``get_next_as_optional``), not the dataset itself, which AutoGraph would turn into
        ``scan`` + ``reduce`` functions that TensorFlow instantiates anew on every call.
        """
        width = 1 + sum(not isinstance(m, keras.metrics.Metric) for m in self.metrics)  # loss + function metrics
        total = tf.zeros([width], tf.float32)
        count = tf.constant(0.0, tf.float64)
        ids = tf.TensorArray(tf.int64, size=0, dynamic_size=True, infer_shape=False,
                             element_shape=tf.TensorShape([None]))
        for element in iter(dataset):
            x, y, batch_ids = _split(element, name)
            batch_sums, n = self.eval_step(x, y)
            total += batch_sums
            count += tf.cast(n, tf.float64)
            if collect_ids and batch_ids is not None:
                ids = ids.write(ids.size(), tf.cast(batch_ids, tf.int64))
        all_ids = tf.cond(ids.size() > 0, ids.concat, lambda: tf.zeros([0], tf.int64))
        return total, count, all_ids

    def _train_step(self, x, y):
        with tf.GradientTape() as tape:
            y_pred = self.model(x, training=True)
            loss = self.loss_fn(y, y_pred)
        variables = self.model.trainable_variables
        gradients = tape.gradient(loss, variables)
        self.optimizer.apply_gradients(zip(gradients, variables))
        return loss

    def prepare(self, spec: Any, *, train: bool) -> None:
        """Trace the step for ``spec`` with a None batch dimension (a cache hit when already traced)."""
        if not self.model.built:
            self.model.build(_relaxed_spec(spec[0]).shape)
        step = self.train_step if train else self.eval_step
        step.get_concrete_function(*_relaxed_spec(spec))

    @property
    def traces(self) -> dict[str, int]:
        return {"train": self.train_step.experimental_get_tracing_count(),
                "eval": self.eval_step.experimental_get_tracing_count()}

    def names(self) -> list[str]:
        return ["loss"] + [getattr(m, "name", None) or getattr(m, "__name__", f"metric_{i}")
                           for i, m in enumerate(self.metrics)]


_EVAL_CACHE: "weakref.WeakKeyDictionary[keras.Model, dict]" = weakref.WeakKeyDictionary()


def _eval_steps(model: keras.Model, loss_fn: Callable, metrics: Sequence[Any]) -> _Steps:
    per_model = _EVAL_CACHE.setdefault(model, {})
    key = (id(loss_fn), tuple(id(m) for m in metrics))
    if key not in per_model:
        per_model[key] = _Steps(model, loss_fn, metrics)
    return per_model[key]


def eval_trace_count(model: keras.Model, loss_fn: Callable, metrics: Sequence[Any] = ()) -> int:
    """How many times :func:`evaluate`'s compiled step was traced for this model, loss and metrics.

    >>> model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(1)])
    >>> mse = keras.losses.MeanSquaredError()
    >>> _ = evaluate(model, generated_dataset(5, batch_size=4), mse)
    >>> eval_trace_count(model, mse)
    1
    """
    return _eval_steps(model, loss_fn, metrics).traces["eval"]


# --------------------------------------------------------------------------- checks


def _check_model(model: Any, name: str = "model") -> None:
    if not isinstance(model, keras.Model):
        raise TypeError(f"{name} must be a Keras model, got {type(model).__name__}")


def _check_dataset(dataset: Any, name: str) -> None:
    if not isinstance(dataset, tf.data.Dataset):
        raise TypeError(f"{name} must be a tf.data.Dataset, got {type(dataset).__name__}")


def _check_finite(dataset: tf.data.Dataset, name: str) -> None:
    _check_dataset(dataset, name)
    cardinality = int(dataset.cardinality())
    if cardinality == tf.data.INFINITE_CARDINALITY:
        raise ValueError(
            f"{name} is infinite (it repeats or never ends): one evaluation pass would never finish. "
            "Pass a finite dataset (no .repeat(), or .take(n) first)."
        )
    if cardinality == 0:
        raise ValueError(f"{name} is empty: there is nothing to evaluate")


def _check_metrics(metrics: Any) -> tuple:
    if isinstance(metrics, (str, bytes)) or not isinstance(metrics, Iterable):
        raise TypeError(f"metrics must be a sequence of Keras metrics or functions, got {type(metrics).__name__}")
    metrics = tuple(metrics)
    for metric in metrics:
        if not (isinstance(metric, keras.metrics.Metric) or callable(metric)):
            raise TypeError(f"metrics: {metric!r} is neither a Keras metric nor a function")
    return metrics


def _check_fits(steps: _Steps, dataset: tf.data.Dataset, name: str) -> None:
    """Trace the evaluation step for ``dataset``'s elements; a shape or structure that does not fit
    the model becomes a ValueError naming ``name`` (no data is read, no weight changes)."""
    spec = dataset.element_spec
    x_spec, y_spec, _ = _split(spec, name)
    try:
        steps.prepare((x_spec, y_spec), train=False)
    except (ValueError, TypeError, tf.errors.InvalidArgumentError) as error:
        raise ValueError(f"{name}: its elements {_describe(spec)} do not fit the model: {error}") from None


# --------------------------------------------------------------------------- evaluate


def evaluate(model: keras.Model, dataset: tf.data.Dataset, loss_fn: Callable, metrics: Sequence[Any] = (),
             *, return_ids: bool = False) -> dict[str, Any]:
    """One full pass over ``dataset``: the mean loss (and metrics) over *examples*, and how many.

    Every call iterates ``dataset`` afresh, so every call sees every example once, in the same
    order. A batch's mean counts as many times as the batch has examples, so a smaller last batch
    weighs less. ``metrics`` are Keras metric objects (reset before the pass) or functions
    ``f(y_true, y_pred) -> mean over the batch`` (weighted like the loss). Results are Python
    floats keyed by name, plus ``examples`` (an int) and, with ``return_ids``, ``ids`` (the
    example ids in the order seen, from ``(x, y, ids)`` elements). Nothing in the model changes.

    >>> model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(1)])
    >>> result = evaluate(model, generated_dataset(5, batch_size=4), keras.losses.MeanSquaredError())
    >>> sorted(result)
    ['examples', 'loss']

    Raises TypeError for a non-model, non-dataset or bad metric; ValueError for an infinite or empty
    dataset, or one whose elements do not fit the model.
    """
    _check_model(model)
    _check_finite(dataset, "dataset")
    if not callable(loss_fn):
        raise TypeError(f"loss_fn must be callable, got {type(loss_fn).__name__}")
    metrics = _check_metrics(metrics)
    steps = _eval_steps(model, loss_fn, metrics)
    _check_fits(steps, dataset, "dataset")
    return _run_evaluation(steps, dataset, "dataset", return_ids=return_ids)


def _run_evaluation(steps: _Steps, dataset: tf.data.Dataset, name: str, *, return_ids: bool) -> dict[str, Any]:
    for metric in steps.metrics:
        if isinstance(metric, keras.metrics.Metric):
            metric.reset_state()
    # The whole pass is one compiled call: no Python round trip per batch (see _Steps._eval_pass).
    sums, count, ids = steps.eval_pass(dataset, name, bool(return_ids))
    count = float(count)
    if not count:
        raise ValueError(f"{name} is empty: one pass produced no example")
    means = iter((sums / count).numpy().tolist())
    result: dict[str, Any] = {"loss": next(means)}
    for metric, label in zip(steps.metrics, steps.names()[1:]):
        result[label] = float(metric.result()) if isinstance(metric, keras.metrics.Metric) else next(means)
    result["examples"] = int(count)
    if return_ids:
        result["ids"] = ids.numpy()
    return result


# --------------------------------------------------------------------------- training loop


@dataclasses.dataclass
class History:
    """What :func:`train_with_validation` returns.

    ``step`` and ``train_loss``: one entry per training step (steps count from 1).
    ``eval_step`` and ``val``: one entry per evaluation; ``val[i]`` is :func:`evaluate`'s dict after
    ``eval_step[i]`` training steps (0 = before training). ``train_ids`` / ``val_ids``: the example
    ids the loop consumed, when the datasets carry ids. ``traces``: how often each compiled step
    was traced (1 and 1 when nothing retraced).
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

    def plot(self, ax: Any = None, *, metric: str = "loss", smooth: int = 1) -> Any:
        """Training loss per step (a running mean over ``smooth`` steps) and validation ``metric``
        at each evaluation point, on ``ax`` (a new figure's axes when None). Returns ``ax``."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots()
        train = np.asarray(self.train_loss, dtype=float)
        if smooth > 1 and len(train) >= smooth:
            kernel = np.ones(smooth) / smooth
            ax.plot(self.step[smooth - 1:], np.convolve(train, kernel, mode="valid"),
                    label=f"training loss (mean of {smooth} steps)", alpha=0.8)
        else:
            ax.plot(self.step, train, label="training loss", alpha=0.8)
        if self.val:
            ax.plot(self.eval_step, self.val_metric(metric), "o-", label=f"validation {metric} (full pass)")
        ax.set_xlabel("training step")
        ax.set_ylabel(metric)
        ax.legend()
        return ax


def train_with_validation(model: keras.Model, optimizer: keras.optimizers.Optimizer, loss_fn: Callable,
                          train_ds: tf.data.Dataset | Iterator, val_ds: tf.data.Dataset | None, steps: int,
                          every: int, *, metrics: Sequence[Any] = (), at_start: bool = True,
                          verbose: bool = False) -> History:
    """Train ``steps`` steps on ``train_ds``; every ``every`` steps, one full pass over ``val_ds``.

    One process, one copy of the weights: the evaluation uses the model being trained. Each
    evaluation iterates ``val_ds`` afresh (every example once, same order, size unknown in advance);
    the training iterator is created once and never touched by evaluation, so the training stream
    is the same as without evaluation. ``train_ds`` may be a dataset (read from its start) or an
    iterator over one (read from where it is, to continue an earlier run). With ``at_start`` the
    first evaluation happens before any training step (``eval_step`` 0). ``val_ds=None`` trains
    without evaluating. Both steps are compiled once; a smaller last batch does not retrace.

    >>> model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(1)])
    >>> history = train_with_validation(model, keras.optimizers.SGD(0.05), keras.losses.MeanSquaredError(),
    ...     generated_dataset(None, 8), generated_dataset(4, 8, seed=1), steps=6, every=3)
    >>> history.eval_step, history.traces
    ([0, 3, 6], {'train': 1, 'eval': 1})

    Every argument is checked before the first step, so a bad one leaves the model and optimizer
    as they were: TypeError for wrong types; ValueError for ``steps < 1``, ``every < 1``, an
    infinite or empty ``val_ds``, or elements that do not fit the model.
    """
    _check_model(model)
    if not isinstance(optimizer, keras.optimizers.Optimizer):
        raise TypeError(f"optimizer must be a Keras optimizer, got {type(optimizer).__name__}")
    if not callable(loss_fn):
        raise TypeError(f"loss_fn must be callable, got {type(loss_fn).__name__}")
    require_int("steps", steps, minimum=1)
    require_int("every", every, minimum=1)
    metrics = _check_metrics(metrics)

    if isinstance(train_ds, tf.data.Dataset):
        train_spec, train_iterator = train_ds.element_spec, None
        cardinality = int(train_ds.cardinality())
        if 0 <= cardinality < steps:
            raise ValueError(f"train_ds has {cardinality} batches, fewer than steps={steps}: add .repeat()")
    elif isinstance(train_ds, tf.data.Iterator):
        train_spec, train_iterator = train_ds.element_spec, train_ds
    else:
        raise TypeError(f"train_ds must be a tf.data.Dataset or an iterator over one, got {type(train_ds).__name__}")

    train_steps = _Steps(model, loss_fn, metrics, optimizer=optimizer)
    x_spec, y_spec, _ = _split(train_spec, "train_ds")
    if val_ds is not None:
        _check_finite(val_ds, "val_ds")
        _check_fits(train_steps, val_ds, "val_ds")
        # Empty with unknown size? Look at one batch now (a separate pass), not after `every` steps.
        if int(val_ds.cardinality()) == tf.data.UNKNOWN_CARDINALITY and next(iter(val_ds.take(1)), None) is None:
            raise ValueError("val_ds is empty: one pass produced no example")
    try:
        # Trace on the specs alone: no data read, no variable changed.
        if not model.built:
            model.build(_relaxed_spec(x_spec).shape)
        if not optimizer.built:
            optimizer.build(model.trainable_variables)
        train_steps.prepare((x_spec, y_spec), train=True)
    except (ValueError, TypeError, tf.errors.InvalidArgumentError) as error:
        raise ValueError(f"train_ds: its elements {_describe(train_spec)} do not fit the model: {error}") from None

    history = History()
    progress = Progress(total=steps, verbose=verbose)

    def validate(step: int) -> None:
        result = _run_evaluation(train_steps, val_ds, "val_ds", return_ids=True)
        history.val_ids.append(result.pop("ids"))
        history.eval_step.append(step)
        history.val.append(result)

    if val_ds is not None and at_start:
        validate(0)
    iterator = train_iterator if train_iterator is not None else iter(train_ds)
    for step in range(1, steps + 1):
        element = next(iterator, None)
        if element is None:
            raise ValueError(f"train_ds ran out after {step - 1} of {steps} steps: add .repeat()")
        x, y, ids = _split(element, "train_ds")
        loss = float(train_steps.train_step(x, y))
        history.step.append(step)
        history.train_loss.append(loss)
        if ids is not None:
            history.train_ids.append(ids.numpy())
        if val_ds is not None and step % every == 0:
            validate(step)
            progress.update(step, loss=loss, val_loss=history.val[-1]["loss"])
        else:
            progress.update(step, loss=loss)
    history.traces = train_steps.traces
    return history
