"""The loss as Keras' ``compile`` applies it, one term per model output (shared by every topic).

``model.compile(loss=..., loss_weights=...)`` takes one loss for every output, or a list or dict
with one loss per output (``None``: that output has no loss). ``fit`` minimises the sum of each
output's loss times its weight plus ``model.losses``, and ``evaluate`` reports it. The helpers take
the same ``loss_fn`` and ``loss_weights`` and compute the same number here:

* :func:`loss_terms`: one :class:`LossTerm` per output that has a loss: Keras' own value (as on one
  device), its weight, its *denominator* (what the loss's reduction divided by: the number of
  loss values, the unmasked ones, or the sum of the sample weights) and a ``family`` telling whose
  denominators stay proportional from batch to batch. A helper that splits a batch weights each
  part by its denominator, which is exact only when every term shares one family.
* :func:`scalar_loss` (the weighted sum), :func:`regularization_loss` (``model.losses``),
  :func:`total_loss` (both): the number ``fit`` minimises. :mod:`helpers.plumbing` re-exports them.
* Checks that run before anything else: :func:`check_loss_fn`, :func:`check_mean_loss`.

Structures, as in ``compile``: a dict output's keys are its output names; a list or tuple output
takes the names of a functional model's outputs (``model.output_names``), else ``output_0``,
``output_1``, ... A dict of losses or weights is keyed by those names, a list has one entry per
output; ``y_true`` and ``sample_weight`` follow the outputs (one sample weight for all outputs, or
one per output). Outputs nested deeper than one list or dict are refused.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, Callable, Hashable

import tensorflow as tf
import keras

__all__ = [
    "MEAN_REDUCTIONS", "LossTerm", "loss_terms", "weighted_sum", "scalar_loss", "regularization_loss", "total_loss",
    "output_names", "per_output", "check_loss_fn", "check_mean_loss", "loss_name", "num_examples", "call_losses",
]

# AutoGraph leaves these functions as they are: no tensor-dependent Python branches, and converting
# their helpers inside a user's tf.function mis-called them.
_plain = tf.autograph.experimental.do_not_convert

# Keras loss reductions that return the batch mean (a sample-weighted mean divides by the batch size).
MEAN_REDUCTIONS = ("sum_over_batch_size", "mean", "mean_with_sample_weight")


def num_examples(x: Any) -> tf.Tensor:
    """Number of examples in ``x`` as an int64 tensor (first input's leading dimension; rows of a
    ragged tensor). Works in graphs.

    >>> int(num_examples(tf.zeros([5, 3])))
    5
    >>> int(num_examples({"a": tf.ragged.constant([[1], [2, 3]])}))
    2
    """
    first = tf.nest.flatten(x, expand_composites=False)[0]
    if isinstance(first, tf.RaggedTensor):
        return tf.cast(first.nrows(), tf.int64)
    return tf.shape(first, out_type=tf.int64)[0]


def loss_name(loss_fn: Callable) -> str:
    """A readable name for ``loss_fn`` in messages (``MeanSquaredError``, ``mean_squared_error``)."""
    if isinstance(loss_fn, keras.losses.Loss):
        return type(loss_fn).__name__
    return getattr(loss_fn, "__name__", type(loss_fn).__name__)


# --------------------------------------------------------------------------- checks (before anything runs)


def _leaves(loss_fn: Any, name: str) -> list[tuple[str, Any]]:
    """``(name, loss)`` for each loss of a single loss, a list/tuple or a dict of losses."""
    if isinstance(loss_fn, dict):
        return [(f"{name}[{key!r}]", value) for key, value in loss_fn.items()]
    if isinstance(loss_fn, (list, tuple)):
        return [(f"{name}[{i}]", value) for i, value in enumerate(loss_fn)]
    return [(name, loss_fn)]


def check_loss_fn(loss_fn: Any, name: str = "loss_fn", *, loss_weights: Any = None) -> Any:
    """``loss_fn`` if it is a loss ``compile`` would take (a callable ``loss_fn(y_true, y_pred)``, or
    a list or dict of them with ``None`` for outputs without a loss), else a ``TypeError`` naming it;
    ``loss_weights`` must be a number, or a list or dict of numbers.

    >>> check_loss_fn({"a": keras.losses.MeanSquaredError(), "b": None}) is not None
    True
    >>> check_loss_fn("mse")
    Traceback (most recent call last):
    ...
    TypeError: loss_fn must be callable as loss_fn(y_true, y_pred), such as keras.losses.MeanSquaredError(); got str
    """
    leaves = _leaves(loss_fn, name)
    if isinstance(loss_fn, (list, tuple, dict)) and not any(loss is not None for _, loss in leaves):
        raise ValueError(f"{name} holds no loss (every entry is None): give at least one output a loss")
    for where, loss in leaves:
        if loss is None and where != name:
            continue
        if isinstance(loss, (list, tuple, dict)):
            raise TypeError(f"{where} is a {type(loss).__name__}: the helpers take one loss per output "
                            "(outputs nested deeper than one list or dict are not supported)")
        if not callable(loss) or isinstance(loss, type):
            raise TypeError(f"{where} must be callable as {where}(y_true, y_pred), such as "
                            f"keras.losses.MeanSquaredError(); got {type(loss).__name__}")
    _check_weights(loss_weights)
    return loss_fn


def check_mean_loss(loss_fn: Any, name: str = "loss_fn", *, loss_weights: Any = None) -> Any:
    """:func:`check_loss_fn`, and refuse a Keras loss whose reduction is ``"sum"``: helpers that
    weight batch means (accumulation, validation) would count a sum as a mean (a loss with no
    reduction, one value per example, is refused when the loss is first computed).

    >>> check_mean_loss(keras.losses.MeanSquaredError(reduction="sum"))
    Traceback (most recent call last):
    ...
    ValueError: loss_fn MeanSquaredError has reduction='sum', so it returns the batch's sum; the helpers weight batch means by batch sizes: use the default reduction ('sum_over_batch_size')
    """
    check_loss_fn(loss_fn, name, loss_weights=loss_weights)
    for where, loss in _leaves(loss_fn, name):
        reduction = getattr(loss, "reduction", None) if isinstance(loss, keras.losses.Loss) else None
        if reduction == "sum":
            raise ValueError(f"{where} {loss_name(loss)} has reduction={reduction!r}, so it returns the batch's sum; "
                             "the helpers weight batch means by batch sizes: use the default reduction "
                             "('sum_over_batch_size')")
    return loss_fn


def _check_weights(loss_weights: Any) -> None:
    values = (list(loss_weights.values()) if isinstance(loss_weights, dict) else
              list(loss_weights) if isinstance(loss_weights, (list, tuple)) else [loss_weights])
    for value in values:
        if value is None and loss_weights is None:
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            raise TypeError(f"loss_weights must be a number, or a list or dict of numbers (one per output), "
                            f"as in model.compile; got {loss_weights!r}")


# --------------------------------------------------------------------------- outputs and their targets


def output_names(model: Any) -> list[str] | None:
    """The names Keras gives a functional model's outputs (``model.output_names``), else None.

    >>> inputs = keras.Input((2,))
    >>> output_names(keras.Model(inputs, [keras.layers.Dense(1, name="price")(inputs)]))
    ['price']
    """
    try:
        names = list(model.output_names)
    except (AttributeError, TypeError, ValueError):
        return None
    return names or None


def _outputs(y_pred: Any, names: list[str] | None) -> list[tuple[Any, str | None, Any]]:
    """``(key, label, tensor)`` per output: dict keys in Keras' (sorted) order, list positions."""
    if isinstance(y_pred, dict):
        outputs = [(key, str(key), y_pred[key]) for key in sorted(y_pred)]
    elif isinstance(y_pred, (list, tuple)):
        labels = names if names and len(names) == len(y_pred) else [f"output_{i}" for i in range(len(y_pred))]
        outputs = list(zip(range(len(y_pred)), labels, y_pred))
    else:
        return [(None, names[0] if names and len(names) == 1 else None, y_pred)]
    for _, label, value in outputs:
        if isinstance(value, (list, tuple, dict)):
            raise ValueError(f"the model's output {label!r} is itself a {type(value).__name__}: the helpers take "
                             "outputs nested one level deep (a tensor, or a tuple, list or dict of tensors)")
    if not outputs:
        raise ValueError("the model returned an empty structure: no output to compute a loss on")
    return outputs


_MISSING = object()


def per_output(y_pred: Any, value: Any, names: list[str] | None, what: str, *, shared: bool) -> list[tuple[str, Any]]:
    """``(label, entry)`` for each output of ``y_pred``: ``value`` (targets, sample weights, losses)
    laid out on the outputs as ``compile`` does (one value for all outputs when ``shared``).

    >>> [(label, entry) for label, entry in per_output({"b": 1, "a": 2}, {"a": "x", "b": "y"}, None, "y_true",
    ...                                                shared=False)]
    [('a', 'x'), ('b', 'y')]
    """
    outputs = _outputs(y_pred, names)
    entries = _per_output(value, outputs, what, shared=shared)
    return [(label, None if entry is _MISSING else entry) for (_, label, _), entry in zip(outputs, entries)]


def _per_output(spec: Any, outputs: list, what: str, *, shared: bool) -> list[Any]:
    """``spec`` (one value for all outputs when ``shared``, or a list/dict per output) per output."""
    labels = [label for _, label, _ in outputs]
    if isinstance(spec, dict):
        by_key = {key: i for i, (key, _, _) in enumerate(outputs) if key is not None}
        by_label = {label: i for i, label in enumerate(labels) if label is not None}
        if len(outputs) == 1 and len(spec) == 1:  # a single output: its one entry, whatever the key
            return [next(iter(spec.values()))]
        unknown = [k for k in spec if k not in by_key and k not in by_label]
        if unknown:
            raise ValueError(f"{what} has key(s) {unknown} that name no output of the model: its outputs are {labels}")
        found = [_MISSING] * len(outputs)
        for k, value in spec.items():
            found[by_key[k] if k in by_key else by_label[k]] = value
        return found
    if isinstance(spec, (list, tuple)):
        if len(spec) != len(outputs):
            raise ValueError(f"{what} has {len(spec)} entries but the model has {len(outputs)} output(s) {labels}: "
                             "give one per output")
        return list(spec)
    if not shared and len(outputs) > 1:
        raise ValueError(f"the model has {len(outputs)} outputs {labels} but {what} is a single "
                         f"{type(spec).__name__}: give one per output (a tuple, list or dict)")
    return [spec] * len(outputs)


# --------------------------------------------------------------------------- the terms


@dataclass(frozen=True)
class LossTerm:
    """One output's loss in the total, as ``fit`` computes it for one batch.

    ``value``: the loss as on one device (a Keras loss object divides its mean by the number of
    replicas inside a strategy scope; that is undone). ``weight``: its ``loss_weights`` entry.
    ``denominator``: this batch's weight when batch means are averaged into the mean of the
    concatenated batches (float32): what the reduction divided by (the unmasked values, the sum of
    the sample weights), or, for a plain mean over values of a fixed shape per example, the number
    of examples. ``family``: terms of one family have denominators in a fixed ratio on every batch;
    None: the loss does not split into parts weighted that way (``why`` says why).
    """

    label: str
    value: tf.Tensor
    weight: float
    denominator: tf.Tensor
    family: Hashable | None
    why: str = ""


@_plain
def loss_terms(loss_fn: Any, y_true: Any, y_pred: Any, sample_weight: Any = None, *, loss_weights: Any = None,
               names: list[str] | None = None, name: str = "loss_fn") -> list[LossTerm]:
    """One :class:`LossTerm` per output that has a loss, as ``compile(loss=loss_fn,
    loss_weights=loss_weights)`` would compute them (``names``: the model's output names).

    A per-example result (a plain function without a mean, ``reduction=None``) is a ``ValueError``;
    sample weights with a plain function, a ``TypeError``. Both are raised when a ``tf.function``
    is traced, before anything runs.

    >>> terms = loss_terms([keras.losses.MeanSquaredError(), None], (tf.zeros([4, 1]), tf.zeros([4])),
    ...                    (tf.ones([4, 1]), tf.ones([4])))
    >>> [(t.label, float(t.value), float(t.denominator)) for t in terms]
    [('output_0', 1.0, 4.0)]
    """
    outputs = _outputs(y_pred, names)
    losses = _per_output(loss_fn, outputs, name, shared=True)
    weights = _per_output(1.0 if loss_weights is None else loss_weights, outputs, "loss_weights", shared=True)
    targets = _per_output(y_true, outputs, "y_true", shared=False)
    sample_weights = _per_output(sample_weight, outputs, "sample_weight", shared=True)
    shared_weight = not isinstance(sample_weight, (list, tuple, dict))
    several = len(outputs) > 1
    terms = []
    for (key, label, y_p), loss, weight, y_t, sw in zip(outputs, losses, weights, targets, sample_weights):
        if loss is None or loss is _MISSING:
            continue
        where = f"{name} {loss_name(loss)}" + (f" (output {label!r})" if several else "")
        if y_t is None or y_t is _MISSING:
            raise ValueError(f"{where} has no target: y_true gives none for output {label!r}")
        if weight is _MISSING:
            weight = 1.0
        terms.append(_term(loss, y_t, y_p, None if sw is _MISSING else sw, where, label or "output",
                           float(weight), "shared" if shared_weight else label))
    if not terms:
        raise ValueError(f"{name} gives no output a loss")
    return terms


def _term(loss: Callable, y_true: Any, y_pred: Any, sample_weight: Any, where: str, label: str, weight: float,
          weight_source: Any) -> LossTerm:
    rows = tf.cast(num_examples(y_pred), tf.float32)
    mask = getattr(y_pred, "_keras_mask", None)
    if not isinstance(loss, keras.losses.Loss):
        if sample_weight is not None:
            raise TypeError(f"the batch has sample weights, but {where} is a plain function that cannot take "
                            "them: use a keras.losses.Loss object (it weights each example), or drop the weights "
                            "from the dataset")
        value = _scalar(loss(y_true, y_pred), where)
        if mask is not None:  # it may average over every entry or only the unmasked ones: unknown
            return LossTerm(label, value, weight, rows, None,
                            f"{where} is a plain function on a masked output (a Keras mask): whether it averages "
                            "over the unmasked entries or all of them is unknown; use a keras.losses.Loss object, "
                            "which follows the mask")
        return LossTerm(label, value, weight, rows, ("examples",))
    value = _scalar(loss(y_true, y_pred, sample_weight=sample_weight), where)
    return _keras_term(loss, y_true, y_pred, sample_weight, value, where, label, weight, weight_source, rows)


def _keras_term(loss, y_true, y_pred, sample_weight, value, where, label, weight, weight_source, rows) -> LossTerm:
    """Keras' ``Loss.__call__`` read again for what it divided by (``reduce_weighted_values``)."""
    cast = lambda t: tf.cast(t, loss.dtype) if not isinstance(t, tf.RaggedTensor) else t  # noqa: E731
    try:
        values = loss.call(tf.nest.map_structure(cast, y_true), tf.nest.map_structure(cast, y_pred))
    except NotImplementedError:  # a loss that overrides __call__: its own batch mean
        return LossTerm(label, value, weight, rows, ("examples",) if sample_weight is None else None,
                        f"{where} overrides __call__, so what it divides by is unknown")
    values = tf.convert_to_tensor(values)
    in_mask, out_mask = getattr(y_pred, "_keras_mask", None), getattr(values, "_keras_mask", None)
    mask = in_mask if out_mask is None else out_mask if in_mask is None else tf.logical_and(in_mask, out_mask)
    reduction = loss.reduction
    if values.shape.rank == 0:  # Keras returns a rank-0 result as it is: the loss's own mean over the rows
        if reduction in MEAN_REDUCTIONS and sample_weight is None and mask is None:
            return LossTerm(label, value, weight, rows, ("examples",))
        return LossTerm(label, value, weight, rows, None,
                        f"{where} returns one number per batch (y_true and y_pred of rank 1), which Keras then "
                        "weights or masks as a whole: that does not split into parts. Give y_true and y_pred "
                        "a last axis of size 1")
    if reduction not in MEAN_REDUCTIONS:  # "sum": the whole batch's total, not a mean of anything
        return LossTerm(label, value, weight, rows, None, f"{where} has reduction={reduction!r}: a sum, not a mean")
    if tf.distribute.has_strategy():
        value = value * tf.cast(tf.distribute.get_strategy().num_replicas_in_sync, value.dtype)
    size = tf.cast(tf.size(values), tf.float32)
    float_mask = None if mask is None else tf.cast(mask, tf.float32)
    if reduction == "mean_with_sample_weight" and (sample_weight is not None or mask is not None):
        weights = tf.ones([], tf.float32) if sample_weight is None else tf.cast(sample_weight, tf.float32)
        if float_mask is not None:
            float_mask, weights = _same_rank(float_mask, weights)
            weights = weights * float_mask
        family = ("mask", label) if mask is not None else ("sample_weight", weight_source)
        return LossTerm(label, value, weight, tf.reduce_sum(weights), family)
    if mask is not None:  # sum_over_batch_size: the unmasked share of the values
        valid = tf.math.divide_no_nan(tf.reduce_sum(float_mask), tf.cast(tf.size(float_mask), tf.float32))
        return LossTerm(label, value, weight, size * valid, ("mask", label))
    inner = values.shape[1:]
    family = ("examples",) if inner.is_fully_defined() else ("values", label)
    return LossTerm(label, value, weight, size / max(inner.num_elements() or 1, 1) if family[0] == "examples"
                    else size, family)


def _same_rank(a: tf.Tensor, b: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Keras' ``squeeze_or_expand_to_same_rank`` for a mask and sample weights."""
    if b.shape.rank == 0 or a.shape.rank == b.shape.rank:
        return a, b
    if a.shape.rank == b.shape.rank + 1 and a.shape[-1] == 1:
        return tf.squeeze(a, -1), b
    if b.shape.rank == a.shape.rank + 1 and b.shape[-1] == 1:
        return a, tf.squeeze(b, -1)
    return a, b


def _scalar(loss: Any, where: str) -> tf.Tensor:
    loss = tf.convert_to_tensor(loss)
    if loss.shape.rank != 0:
        raise ValueError(f"{where} returned shape {tuple(loss.shape)}, one value per example: pass a loss that "
                         "reduces to the batch mean, such as keras.losses.MeanSquaredError(), or wrap yours in "
                         "tf.reduce_mean")
    return loss


@_plain
def weighted_sum(terms: list[LossTerm]) -> tf.Tensor:
    """Each term's value times its weight, summed in the widest float type among them."""
    dtype = max((t.value.dtype for t in terms), key=lambda d: (d.size, d == tf.float32))  # the widest float
    if len(terms) == 1 and terms[0].weight == 1.0:
        return terms[0].value
    return tf.add_n([tf.cast(t.value, dtype) * tf.cast(t.weight, dtype) for t in terms])


# --------------------------------------------------------------------------- the total


@_plain
def scalar_loss(loss_fn: Any, y_true: Any, y_pred: Any, sample_weight: Any = None, *, loss_weights: Any = None,
                names: list[str] | None = None) -> tf.Tensor:
    """The loss ``compile(loss=loss_fn, loss_weights=loss_weights)`` makes of this batch, without
    ``model.losses``: each output's loss times its weight, summed (see :func:`loss_terms`).

    A per-example loss (``keras.losses.mean_squared_error``, a loss object with
    ``reduction=None``) returns one value per example; a helper that multiplies it by a batch size
    or hands it to ``GradientTape.gradient`` would silently compute something else, so it is
    refused (the static rank is checked, so it fails when a ``tf.function`` is traced, before any
    weight changes). Sample weights need a Keras loss object (plain functions take no weights).

    >>> scalar_loss(keras.losses.mean_squared_error, tf.zeros([4, 1]), tf.ones([4, 1]))
    Traceback (most recent call last):
    ...
    ValueError: loss_fn mean_squared_error returned shape (4,), one value per example: pass a loss that reduces to the batch mean, such as keras.losses.MeanSquaredError(), or wrap yours in tf.reduce_mean
    >>> mse = keras.losses.MeanSquaredError()
    >>> float(scalar_loss(mse, (tf.zeros([2, 1]), tf.zeros([2, 1])), (tf.ones([2, 1]), tf.ones([2, 1]))))
    2.0
    """
    return weighted_sum(loss_terms(loss_fn, y_true, y_pred, sample_weight, loss_weights=loss_weights, names=names))


@_plain
def regularization_loss(model: keras.Model, dtype: Any = None) -> tf.Tensor:
    """The sum of ``model.losses`` (kernel regularisers, ``add_loss``) as Keras adds it to the loss.

    Read it inside the ``GradientTape`` and after the forward pass: weight regularisers are computed
    from the current weights, activity regularisers and ``add_loss`` from that forward pass.

    >>> net = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, kernel_regularizer="l2")])
    >>> float(regularization_loss(net)) > 0
    True
    """
    losses = [tf.convert_to_tensor(loss) for loss in model.losses]
    dtype = tf.as_dtype(dtype) if dtype is not None else (losses[0].dtype if losses else tf.float32)
    if not losses:
        return tf.zeros([], dtype)
    return tf.add_n([tf.cast(tf.reduce_sum(loss), dtype) for loss in losses])


def call_losses(model: keras.Model) -> int:
    """How many of ``model.losses`` come from the last forward pass (activity regularisers,
    ``add_loss`` in ``call``) rather than from the weights (weight regularisers).

    >>> net = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, kernel_regularizer="l2")])
    >>> _ = net(tf.ones([3, 2])); call_losses(net)
    0
    """
    from_weights = sum(getattr(v, "regularizer", None) is not None for v in model.trainable_weights)
    return len(model.losses) - from_weights


@_plain
def total_loss(model: keras.Model, loss_fn: Any, y_true: Any, y_pred: Any, sample_weight: Any = None, *,
               loss_weights: Any = None) -> tf.Tensor:
    """:func:`scalar_loss` plus :func:`regularization_loss`: the loss Keras' ``fit`` minimises and
    ``evaluate`` reports for a model compiled with ``loss_fn`` and ``loss_weights``."""
    loss = scalar_loss(loss_fn, y_true, y_pred, sample_weight, loss_weights=loss_weights, names=output_names(model))
    return loss + regularization_loss(model, loss.dtype)
