"""The compiled steps and argument checks behind :mod:`helpers.validation` (notebook 04).

* :class:`CompiledSteps`: a model's evaluation step (sums over a batch) and training step (loss plus
  ``model.losses``, sample weights honoured), each traced once with the batch dimension open;
  whole evaluation passes as one compiled call. Under a ``tf.distribute`` strategy every replica
  gets its share of each batch. A tracing failure names its culprit: the dataset, the loss, a
  metric or the optimizer.
* :func:`unpack`: a batch as Keras reads it (``(x, y)``, ``(x, y, sample_weight)``) or a dict
  ``{"x", "y", "id"[, "sample_weight"]}`` carrying example ids.
* Checks that run before any state changes: :func:`check_metrics` (from
  :mod:`helpers.validation_metrics`, which lays the metrics out per output), :func:`ensure_built`
  (the loss and strategy checks are :func:`helpers.plumbing.check_mean_loss` and
  :func:`helpers.plumbing.check_strategy`).

The loss is :mod:`helpers.loss_terms`' (one term per output, ``loss_weights``, as ``compile``);
with several losses the results also hold each output's unweighted loss as ``<output>_loss``.
"""

from __future__ import annotations

import contextlib
import re
from typing import Any, Callable, Iterator

import tensorflow as tf
import keras

from helpers.loss_terms import loss_terms, output_names, per_output, weighted_sum
from helpers.plumbing import WeakModel, loss_name, num_examples, regularization_loss, relaxed_signature, unpack_batch
from helpers.validation_metrics import check_metrics, flat_metrics, function_sums, metric_name, resolve_metrics

__all__ = ["CompiledSteps", "unpack", "metric_name", "check_metrics", "ensure_built"]


def unpack(element: Any, name: str) -> tuple[Any, Any, Any, Any]:
    """``(x, y, sample_weight or None, ids or None)`` of a Keras tuple or a dict element.

    >>> unpack({"x": 1, "y": 2, "id": 3}, "batch")
    (1, 2, None, 3)
    >>> unpack((1, 2, 0.5), "batch")  # a third tuple element is a sample weight, as in Keras
    (1, 2, 0.5, None)
    >>> unpack({"x": 1}, "val_ds")
    Traceback (most recent call last):
    ...
    TypeError: val_ds: a dict element needs the keys 'x' and 'y' (and may have 'id', 'sample_weight'), got ['x']
    """
    if isinstance(element, dict):
        unknown = sorted(set(element) - {"x", "y", "sample_weight", "id"})
        if unknown or "x" not in element or "y" not in element:
            raise TypeError(f"{name}: a dict element needs the keys 'x' and 'y' (and may have 'id', "
                            f"'sample_weight'), got {sorted(element)}")
        return element["x"], element["y"], element.get("sample_weight"), element.get("id")
    return (*unpack_batch(element, name), None)


# --------------------------------------------------------------------------- compiled steps


class _Failed(Exception):
    """A step failed while being traced: ``stage`` says which part (model, loss, metric i, optimizer)."""

    def __init__(self, stage: str, error: BaseException):
        super().__init__(stage)
        self.stage, self.error = stage, error


@contextlib.contextmanager
def _stage(stage: str) -> Iterator[None]:
    try:
        yield
    except _Failed:
        raise
    except Exception as error:  # noqa: BLE001 - re-raised with its culprit named by CompiledSteps.explain
        raise _Failed(stage, error) from error


def _shard(*parts: Any) -> tuple[Any, ...]:
    """This replica's contiguous share of a batch (sizes differ by at most one; may be empty)."""
    context = tf.distribute.get_replica_context()
    replica = tf.cast(context.replica_id_in_sync_group, tf.int64)
    n, replicas = num_examples(parts[0]), context.num_replicas_in_sync
    start, stop = (n * replica) // replicas, (n * (replica + 1)) // replicas
    return tuple(None if part is None else tf.nest.map_structure(lambda t: t[start:stop], part) for part in parts)


class CompiledSteps:
    """The compiled evaluation (and, with an optimizer, training) step of one model.

    Each step is a ``tf.function`` traced once with the batch dimension open, so every batch size
    (a smaller last batch too) reuses one graph. Under a strategy every replica gets its share
    of the batch. It holds the model weakly: a cached instance never keeps a model alive.

    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> steps = CompiledSteps(model, keras.losses.MeanSquaredError())
    >>> steps.prepare((tf.TensorSpec([None, 2]), tf.TensorSpec([None, 1])), "val_ds", train=False)
    >>> sums, counts = steps.eval_step(tf.ones([3, 2]), tf.zeros([3, 1])); int(counts[0]), steps.traces["eval"]
    (3, 1)
    """

    def __init__(self, model: keras.Model, loss_fn: Callable, metrics: Any = (),
                 optimizer: keras.optimizers.Optimizer | None = None, strategy: Any = None, *,
                 loss_weights: Any = None):
        self._model = WeakModel(model, "these compiled steps")
        self.loss_fn, self.loss_weights, self.optimizer, self.strategy = loss_fn, loss_weights, optimizer, strategy
        self.metrics = check_metrics(metrics)
        self.keras_metrics = [m for m in flat_metrics(self.metrics) if isinstance(m, keras.metrics.Metric)]
        self._names = output_names(model)
        self.columns: list[str] | None = None  # result keys of the summed values, fixed by the first trace
        self.resolved: list[tuple[int, Any, str]] = []  # (output, metric, key), fixed by the first trace
        self.loss_columns: list[str] = []  # "loss", then each output's loss when there are several
        self.eval_step = tf.function(self._eval_batch, autograph=False)
        self.train_step = tf.function(self._train_batch, autograph=False)
        self.eval_pass = tf.function(self._eval_pass, autograph=False)
        self.stream_pass = tf.function(self._stream_pass, autograph=False, reduce_retracing=True)
        self._prepared: list[tuple[bool, Any]] = []  # element specs already traced

    @property
    def model(self) -> keras.Model:
        return self._model()

    def _terms(self, y: Any, y_pred: Any, weight: Any) -> tuple[tf.Tensor, list]:
        """The loss plus ``model.losses``, as Keras' fit/evaluate count it, and its terms."""
        with _stage("loss"):
            terms = loss_terms(self.loss_fn, y, y_pred, weight, loss_weights=self.loss_weights, names=self._names)
            loss = tf.cast(weighted_sum(terms), tf.float32) + regularization_loss(self.model, tf.float32)
            return loss, terms

    def _layout(self, labels: list, terms: list) -> list[tuple[int, Any, str]]:
        """The result keys (fixed by the first trace) and which metric reads which output."""
        columns = ["loss"] + ([f"{t.label}_loss" for t in terms] if len(terms) > 1 else [])
        with _stage("metric 0"):
            resolved = resolve_metrics(self.metrics, labels, columns + ["examples"])
        columns += [key for _, metric, key in resolved if not isinstance(metric, keras.metrics.Metric)]
        if self.columns is None:
            self.columns, self.resolved, self.loss_columns = columns, resolved, columns[:1 + (len(terms) > 1) * len(terms)]
        return resolved

    def _eval_sums(self, x: Any, y: Any, weight: Any) -> tuple[tf.Tensor, tf.Tensor]:
        n = tf.cast(num_examples(x), tf.float32)
        with _stage("model"):
            y_pred = self.model(x, training=False)
        loss, terms = self._terms(y, y_pred, weight)
        sums, counts = [loss * n], [n]
        if len(terms) > 1:
            sums += [tf.cast(t.value, tf.float32) * n for t in terms]
            counts += [n] * len(terms)
        outputs = per_output(y_pred, y_pred, self._names, "y_pred", shared=False)
        targets = per_output(y_pred, y, self._names, "y_true", shared=False)
        weights = per_output(y_pred, weight, self._names, "sample_weight", shared=True)
        labels = [label for label, _ in outputs] if len(outputs) > 1 else [None]
        for i, (output, metric, key) in enumerate(self._layout(labels, terms)):
            with _stage(f"metric {i}"):
                y_t, y_p, w = targets[output][1], outputs[output][1], weights[output][1]
                if isinstance(metric, keras.metrics.Metric):
                    metric.update_state(y_t, y_p, sample_weight=w)
                elif w is not None:
                    raise TypeError("it is a plain function, which cannot weight examples: pass a "
                                    "keras.metrics object, or drop the sample weights")
                else:
                    total, count = function_sums(metric, y_t, y_p, n)
                    sums.append(total)
                    counts.append(count)
        return (tf.stack([tf.where(n > 0, value, 0.0) for value in sums]),  # an empty shard adds 0
                tf.stack([tf.where(n > 0, value, 0.0) for value in counts]))

    def _eval_batch(self, x: Any, y: Any, weight: Any = None) -> tuple[tf.Tensor, tf.Tensor]:
        if self.strategy is None:
            return self._eval_sums(x, y, weight)
        def replica(*batch: Any) -> tf.Tensor:  # sums and counts in one vector: one all-reduce per batch
            return tf.concat(self._eval_sums(*_shard(*batch)), 0)

        both = self.strategy.reduce("SUM", self.strategy.run(replica, args=(x, y, weight)), axis=None)
        sums, counts = tf.split(both, 2)  # one count per summed value: the halves have the same width
        return sums, counts

    def _train_on(self, x: Any, y: Any, weight: Any, share: Any) -> tf.Tensor:
        model = self.model
        with tf.GradientTape() as tape:
            with _stage("model"):
                y_pred = model(x, training=True)
            loss = self._terms(y, y_pred, weight)[0] * share
            objective = self.optimizer.scale_loss(loss)
        with _stage("optimizer"):
            variables = model.trainable_variables
            self.optimizer.apply_gradients(zip(tape.gradient(objective, variables), variables))
        return loss

    def _train_batch(self, x: Any, y: Any, weight: Any = None) -> tf.Tensor:
        if self.strategy is None:
            return self._train_on(x, y, weight, 1.0)

        def replica(x, y, weight):  # this replica's share of the batch mean: n_replica / n
            total = tf.cast(num_examples(x), tf.float32)
            part = _shard(x, y, weight)
            return self._train_on(*part, tf.cast(num_examples(part[0]), tf.float32) / total)

        return self.strategy.reduce("SUM", self.strategy.run(replica, args=(x, y, weight)), axis=None)

    def _add(self, state: tuple, element: Any) -> tuple:
        total, counts, examples, ids = state
        x, y, weight, batch_ids = unpack(element, "batch")
        sums, batch_counts = self.eval_step(x, y, weight)
        if batch_ids is not None:
            ids = ids.write(ids.size(), tf.cast(batch_ids, tf.int64))
        return (total + tf.cast(sums, tf.float64), counts + tf.cast(batch_counts, tf.float64),
                examples + tf.cast(batch_counts[0], tf.float64), ids)

    def _start(self) -> tuple:
        width = len(self.columns)
        ids = tf.TensorArray(tf.int64, size=0, dynamic_size=True, infer_shape=False, element_shape=[None])
        return tf.zeros([width], tf.float64), tf.zeros([width], tf.float64), tf.constant(0.0, tf.float64), ids

    @staticmethod
    def _finish(state: tuple) -> tuple:
        total, counts, examples, ids = state
        return total, counts, examples, tf.cond(ids.size() > 0, ids.concat, lambda: tf.zeros([0], tf.int64))

    def _eval_pass(self, dataset: tf.data.Dataset) -> tuple:
        """A whole pass in one call: a new iterator, a ``while`` loop on its ``get_next_as_optional``
        (iterating the dataset itself would build functions that TensorFlow instantiates anew on
        every call). The loops are written out, not left to AutoGraph: no conversion can fail."""
        iterator = iter(dataset)

        def body(optional: Any, *state: Any) -> tuple:
            state = self._add(state, optional.get_value())
            return (iterator.get_next_as_optional(), *state)

        _, *state = tf.while_loop(lambda optional, *_: optional.has_value(), body,
                                  (iterator.get_next_as_optional(), *self._start()))
        return self._finish(state)

    def _stream_pass(self, iterator: Any, first: Any) -> tuple:
        """A whole pass of a :class:`ValidationStream`: ``first``, then batches up to the marker."""

        def body(is_end: Any, element: Any, *state: Any) -> tuple:
            state = self._add(state, element)
            return (*iterator.get_next(), *state)

        _, _, *state = tf.while_loop(lambda is_end, *_: tf.logical_not(is_end), body,
                                     (*iterator.get_next(), *self._add(self._start(), first)))
        return self._finish(state)

    def prepare(self, spec: Any, name: str, *, train: bool) -> None:
        """Trace a step for a dataset's element ``spec``: no data read, no variable changed. A
        failure names its culprit (the dataset, the loss, a metric, the optimizer)."""
        x, y, weight, _ = unpack(spec, name)
        plain = [loss for loss in tf.nest.flatten(self.loss_fn)
                 if loss is not None and not isinstance(loss, keras.losses.Loss)]
        if weight is not None and plain:
            raise TypeError(f"{name} has sample weights, but loss_fn {loss_name(plain[0])} is a plain "
                            "function that cannot take them: use a keras.losses.Loss object")
        step = self.train_step if train else self.eval_step
        signature = relaxed_signature((x, y) if weight is None else (x, y, weight))
        if (train, signature) in self._prepared:
            return
        try:
            step.get_concrete_function(*signature)
        except _Failed as failed:
            raise self.explain(failed, spec, name) from None
        self._prepared.append((train, signature))

    def explain(self, failed: _Failed, spec: Any, name: str) -> Exception:
        error, stage = failed.error, failed.stage
        first_line = _gist(error)
        kind = type(error) if isinstance(error, (TypeError, ValueError)) else ValueError
        if stage == "model":
            return ValueError(f"{name}: its elements {_shapes(spec)} do not fit the model "
                              f"{self.model.name!r}: {first_line}")
        if stage == "loss":
            what = loss_name(self.loss_fn) if callable(self.loss_fn) else f"({type(self.loss_fn).__name__} of losses)"
            return kind(f"loss_fn {what} on {name}'s batches: {first_line}")
        if stage == "optimizer":
            return kind(f"optimizer {type(self.optimizer).__name__} could not apply the gradients: {first_line}")
        index = int(stage.split()[1])
        if not self.resolved:  # the metrics could not be laid out on the model's outputs
            return kind(f"metrics on {name}'s batches: {first_line}")
        _, metric, key = self.resolved[index]
        return kind(f"metrics[{index}] ({key}) on {name}'s batches: {first_line}")

    @property
    def traces(self) -> dict[str, int]:
        return {"train": self.train_step.experimental_get_tracing_count(),
                "eval": self.eval_step.experimental_get_tracing_count()}


def _gist(error: BaseException) -> str:
    """The informative line of an error message (Keras wraps it in a header and ANSI codes)."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line).strip() for line in str(error).splitlines()]
    lines = [line for line in lines if line and not line.startswith(("Exception encountered", "in user code"))]
    return lines[0] if lines else type(error).__name__


def _shapes(spec: Any) -> str:
    return str(tf.nest.map_structure(lambda s: tuple(s.shape) if hasattr(s, "shape") else s, spec))


def ensure_built(model: keras.Model, spec: Any, name: str) -> None:
    """Build an unbuilt model the way its first call would: on symbolic inputs (no op runs, no
    state changes but the new variables), so that a subclassed model's layers all exist. Inputs
    that do not fit are a ValueError naming ``name``.

    >>> model = keras.Sequential([keras.layers.Dense(1)])
    >>> ensure_built(model, (tf.TensorSpec([None, 3]), tf.TensorSpec([None, 1])), "train_ds")
    >>> model.built, tuple(model.layers[0].kernel.shape)
    (True, (3, 1))
    """
    if not model.built:
        x = unpack(spec, name)[0]
        try:
            model(tf.nest.map_structure(lambda s: keras.KerasTensor(s.shape, dtype=s.dtype.name),
                                        relaxed_signature(x)))
        except (ValueError, TypeError, AttributeError) as error:
            raise ValueError(f"{name}: its elements {_shapes(spec)} do not fit the model {model.name!r}: "
                             f"{_gist(error)}") from None
