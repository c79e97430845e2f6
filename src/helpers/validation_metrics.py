"""The metrics of an evaluation, as Keras' ``compile(metrics=...)`` lays them out (notebook 04).

* :func:`check_metrics`: the ``metrics`` argument, checked before anything runs: a sequence of
  Keras metric objects or functions ``f(y_true, y_pred)``, or, for a model with several outputs,
  a dict keyed by output name or a list with one entry (a metric, a list of them, or None) per
  output, as ``compile`` takes them.
* :func:`resolve_metrics`: which metric reads which output, and its key in the results: the
  metric's name (``<output>_<name>`` for a model with several outputs), made unique with ``_1``,
  ``_2``... as Keras does, and never one of the keys the loss already uses (``loss``, ``examples``,
  ``<output>_loss``).
* :func:`function_sums`: a function metric's sum and count on one batch: a batch mean counts
  once per example, one value per example (``keras.metrics.mean_absolute_error``) counts per
  value, unmasked values only when the output carries a Keras mask.
* :func:`metric_value`: a Keras metric's result as a float, or a NumPy array for a metric with
  one value per class (``keras.metrics.F1Score``).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import tensorflow as tf
import keras

__all__ = ["check_metrics", "metric_name", "flat_metrics", "resolve_metrics", "function_sums", "metric_value"]


def metric_name(metric: Any, index: int) -> str:
    """The base key of ``metric`` in results: a Keras metric's ``name``, a function's ``__name__``
    (a lambda is ``lambda``, as Keras names it).

    >>> metric_name(keras.metrics.MeanAbsoluteError(), 0), metric_name(lambda y, p: y, 1)
    ('mean_absolute_error', 'lambda')
    """
    name = getattr(metric, "name", None) or getattr(metric, "__name__", None) or f"metric_{index}"
    return "lambda" if name == "<lambda>" else name


def _check_leaf(metric: Any, where: str) -> None:
    if not (isinstance(metric, keras.metrics.Metric) or (callable(metric) and not isinstance(metric, type))):
        raise TypeError(f"{where} ({metric!r}) is neither a Keras metric nor a function")


def check_metrics(metrics: Any) -> Any:
    """``metrics`` as a tuple (or a dict per output) of Keras metrics or functions, else a TypeError
    naming the bad one.

    >>> check_metrics(["mae"])
    Traceback (most recent call last):
    ...
    TypeError: metrics[0] ('mae') is neither a Keras metric nor a function
    """
    if isinstance(metrics, dict):
        for key, entry in metrics.items():
            for i, metric in enumerate(entry if isinstance(entry, (list, tuple)) else [entry]):
                if metric is not None:
                    _check_leaf(metric, f"metrics[{key!r}]" + (f"[{i}]" if isinstance(entry, (list, tuple)) else ""))
        return dict(metrics)
    if isinstance(metrics, (str, bytes)) or not hasattr(metrics, "__iter__"):
        raise TypeError(f"metrics must be a sequence of Keras metrics or functions, got {type(metrics).__name__}")
    metrics = tuple(tuple(m) if isinstance(m, list) else m for m in metrics)
    for i, entry in enumerate(metrics):
        if isinstance(entry, tuple):  # one entry per output: a list of metrics for output i
            for j, metric in enumerate(entry):
                _check_leaf(metric, f"metrics[{i}][{j}]")
        elif entry is not None:
            _check_leaf(entry, f"metrics[{i}]")
    return metrics


def flat_metrics(metrics: Any) -> list:
    """Every metric in ``metrics`` (checked), in order, without the ``None`` entries."""
    entries = list(metrics.values()) if isinstance(metrics, dict) else list(metrics)
    flat = []
    for entry in entries:
        flat += [m for m in (entry if isinstance(entry, (list, tuple)) else [entry]) if m is not None]
    return flat


def resolve_metrics(metrics: Any, labels: Sequence[str | None], reserved: Sequence[str]) -> list[tuple[int, Any, str]]:
    """``(output index, metric, result key)`` for every metric, in order.

    ``labels``: the model's outputs (one label per output); ``reserved``: keys already taken.

    >>> mae = keras.metrics.MeanAbsoluteError()
    >>> [(i, key) for i, _, key in resolve_metrics([mae, lambda y, p: p, lambda y, p: y], [None], ["loss"])]
    [(0, 'mean_absolute_error'), (0, 'lambda'), (0, 'lambda_1')]
    """
    several = len(labels) > 1
    per_output: list[list] = [[] for _ in labels]
    if not several:
        per_output[0] = flat_metrics(metrics)
    elif isinstance(metrics, dict):
        unknown = [key for key in metrics if key not in labels]
        if unknown:
            raise ValueError(f"metrics has key(s) {unknown} that name no output of the model: its outputs are "
                             f"{list(labels)}")
        for key, entry in metrics.items():
            per_output[list(labels).index(key)] = flat_metrics([entry])
    elif len(metrics) == len(labels):
        per_output = [flat_metrics([entry]) for entry in metrics]
    elif metrics:
        raise ValueError(f"the model has {len(labels)} outputs {list(labels)}: give metrics as a list with one "
                         "entry (a metric, a list of metrics or None) per output, or a dict keyed by output name, "
                         f"as model.compile takes them; got {len(metrics)} entries")
    taken, resolved = set(reserved), []
    for i, found in enumerate(per_output):
        for k, metric in enumerate(found):
            base = metric_name(metric, k)
            key = f"{labels[i]}_{base}" if several else base
            unique, suffix = key, 1
            while unique in taken:
                unique, suffix = f"{key}_{suffix}", suffix + 1
            taken.add(unique)
            resolved.append((i, metric, unique))
    return resolved


def function_sums(metric: Any, y_true: Any, y_pred: Any, examples: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """``(sum, count)`` of a function metric on one batch, in float32: a scalar is the batch's mean
    and counts ``examples`` times; values per example (or per entry) count one each, the unmasked
    ones only when ``y_pred`` carries a Keras mask (as ``MeanMetricWrapper`` does).

    >>> [float(t) for t in function_sums(lambda y, p: tf.abs(y - p), tf.zeros([4]), tf.ones([4]), tf.constant(4.0))]
    [4.0, 4.0]
    """
    values = tf.cast(tf.convert_to_tensor(metric(y_true, y_pred)), tf.float32)
    if values.shape.rank == 0:
        return tf.where(examples > 0, values * examples, 0.0), examples
    mask = getattr(y_pred, "_keras_mask", None)
    if mask is None:
        return tf.reduce_sum(values), tf.cast(tf.size(values), tf.float32)
    mask = tf.cast(mask, tf.float32)
    if mask.shape.rank == values.shape.rank + 1 and mask.shape[-1] == 1:
        mask = tf.squeeze(mask, -1)
    mask = tf.broadcast_to(mask, tf.shape(values)) if mask.shape.rank <= values.shape.rank else mask
    return tf.reduce_sum(values * mask), tf.reduce_sum(mask)


def metric_value(result: Any) -> Any:
    """A Keras metric's ``result()`` for the results dict: a float when it is one number, a NumPy
    array when it has one value per class, a dict of those for a metric that returns a dict.

    >>> metric_value(tf.constant(0.5)), metric_value(tf.constant([0.5, 1.0])).tolist()
    (0.5, [0.5, 1.0])
    """
    if isinstance(result, dict):
        return {key: metric_value(value) for key, value in result.items()}
    value = np.asarray(result)
    return float(value) if value.ndim == 0 else value.astype(np.float64)
