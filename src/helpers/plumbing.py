"""Shared TensorFlow plumbing for every topic module: one way to do each small thing.

* Input signatures that trace once for every batch size: :func:`relaxed_spec`, :func:`relaxed_signature`.
* Examples in a batch: :func:`num_examples` (a tensor, in graphs), :func:`count_examples` (a Python int).
* Batches the Keras way: :func:`unpack_batch` reads ``(x, y)`` and ``(x, y, sample_weight)``.
* Argument checks that name the argument: :func:`check_model`, :func:`check_keras_steps` (a model
  that overrides ``compute_loss``/``train_step``/``test_step``), :func:`check_loss_fn`,
  :func:`check_optimizer`, :func:`check_dataset`, :func:`check_finite`.
* The loss the way Keras counts it, one term per output (defined in :mod:`helpers.loss_terms`,
  importable from here): :func:`scalar_loss` refuses a per-example loss, :func:`regularization_loss`
  sums ``model.losses``, :func:`total_loss` adds the two; :func:`check_mean_loss` refuses a Keras
  loss that sums over the batch where means are weighted.
* Strategies: :func:`strategy_of` (where a model's variables were created), :func:`check_strategy`
  (the current scope, the optimizer and the metrics agree with the model's strategy).
* Models: :func:`trainable_key` (changes when a layer is frozen or unfrozen), :func:`tf_variable`,
  :class:`WeakModel` (what a compiled step holds, so that no cache keeps a model alive).
* Devices: :func:`wait_for_device` (GPU work is asynchronous; timers must wait for it).

Calling convention of the workbook: a batch is ``(x, y)`` (or Keras' ``(x, y, sample_weight)``);
``loss_fn(y_true, y_pred)`` returns the scalar mean loss over the batch (any Keras loss object);
models are Keras 3 models.
"""

from __future__ import annotations

import weakref
from typing import Any

import tensorflow as tf
import keras

# The loss as Keras counts it lives in helpers.loss_terms (one term per output); these names stay here too.
from helpers.loss_terms import (
    MEAN_REDUCTIONS, check_loss_fn, check_mean_loss, loss_name, num_examples, regularization_loss, scalar_loss,
    total_loss,
)

__all__ = [
    "relaxed_spec", "relaxed_signature", "num_examples", "count_examples", "unpack_batch",
    "check_model", "check_keras_steps", "original_error", "check_loss_fn", "check_optimizer", "check_dataset", "check_finite",
    "scalar_loss", "regularization_loss", "total_loss", "trainable_key", "tf_variable",
    "wait_for_device", "loss_name", "check_mean_loss", "WeakModel", "MEAN_REDUCTIONS", "strategy_of", "check_strategy",
]



# --------------------------------------------------------------------------- input signatures


def relaxed_spec(value: Any, *, keep: str = "inner") -> tf.TypeSpec:
    """The type spec of ``value`` (a tensor, ragged tensor or spec) with its batch dimension open.

    ``keep="inner"`` (default) leaves only the first dimension open, so every batch size shares
    one trace; ``keep="last"`` opens every dimension but the last (batch sizes *and* inner sizes
    such as atom counts or sequence lengths).

    >>> relaxed_spec(tf.zeros([8, 3]))
    TensorSpec(shape=(None, 3), dtype=tf.float32, name=None)
    >>> relaxed_spec(tf.zeros([8, 5, 3]), keep="last").shape.as_list()
    [None, None, 3]
    """
    if keep not in ("inner", "last"):
        raise ValueError(f"keep must be 'inner' or 'last', got {keep!r}")
    spec = value if isinstance(value, tf.TypeSpec) else tf.type_spec_from_value(
        value if isinstance(value, (tf.Tensor, tf.RaggedTensor, tf.SparseTensor)) else tf.convert_to_tensor(value))
    shape = spec.shape
    if shape.rank is None or shape.rank == 0:
        return spec
    dims = shape.as_list()
    if keep == "inner":
        dims = [None] + dims[1:]
    else:
        dims = [None] * (len(dims) - 1) + dims[-1:] if len(dims) > 1 else [None]
    if isinstance(spec, tf.RaggedTensorSpec):
        return tf.RaggedTensorSpec(dims, spec.dtype, spec.ragged_rank, spec.row_splits_dtype)
    if isinstance(spec, tf.TensorSpec):
        return tf.TensorSpec(dims, spec.dtype)
    return spec


def relaxed_signature(structure: Any, *, keep: str = "inner") -> Any:
    """:func:`relaxed_spec` applied to every leaf of a nested structure (``(x, y)``, dicts ...).

    >>> relaxed_signature((tf.zeros([4, 2]), tf.zeros([4])))
    (TensorSpec(shape=(None, 2), dtype=tf.float32, name=None), TensorSpec(shape=(None,), dtype=tf.float32, name=None))
    """
    return tf.nest.map_structure(lambda leaf: relaxed_spec(leaf, keep=keep), structure)


# --------------------------------------------------------------------------- examples and batches


def count_examples(x: Any) -> int:
    """:func:`num_examples` as a Python int, from the static shape when known (no device sync).

    >>> count_examples(tf.zeros([7, 2]))
    7
    """
    first = tf.nest.flatten(x, expand_composites=False)[0]
    if not isinstance(first, tf.RaggedTensor):
        shape = getattr(first, "shape", None)
        if shape is not None and len(shape) > 0 and shape[0] is not None:
            return int(shape[0])
    return int(num_examples(x))


def unpack_batch(element: Any, name: str) -> tuple[Any, Any, Any]:
    """``(x, y)`` or Keras' ``(x, y, sample_weight)`` as ``(x, y, sample_weight or None)``.

    A third element is always a sample weight, as in ``model.fit``; anything else (a bare tensor, a
    dict, four elements) is a ``TypeError`` naming ``name``.

    >>> x, y, w = unpack_batch((tf.zeros([2, 1]), tf.zeros([2])), "batch")
    >>> w is None
    True
    """
    if isinstance(element, (tuple, list)) and len(element) in (2, 3):
        return element[0], element[1], (element[2] if len(element) == 3 else None)
    raise TypeError(f"{name} must be an (x, y) pair or an (x, y, sample_weight) triple, "
                    f"got {_describe(element)}")


def _describe(element: Any) -> str:
    if isinstance(element, (tuple, list)):
        return f"a {type(element).__name__} of {len(element)} elements"
    return f"a {type(element).__name__}"


# --------------------------------------------------------------------------- argument checks


def check_model(model: Any, name: str = "model", *, built: bool = False) -> keras.Model:
    """``model`` if it is a Keras model (and, with ``built=True``, has been built), else a clear error.

    >>> check_model("net")
    Traceback (most recent call last):
    ...
    TypeError: model must be a Keras model, got str
    """
    if not isinstance(model, keras.Model):
        raise TypeError(f"{name} must be a Keras model, got {type(model).__name__}")
    if built and not model.built:
        raise ValueError(f"{name} ({model.name!r}) was never built: it has no variables yet. "
                         "Call it once on a batch (or build it) first.")
    return model


def check_keras_steps(model: keras.Model, *methods: str, name: str = "model") -> None:
    """Refuse a model that overrides one of ``methods`` (``compute_loss``, ``train_step``,
    ``test_step``): ``fit``/``evaluate`` would run the model's own version, while the helpers run
    their own step with ``loss_fn`` and ``model.losses``, and would silently compute something else.

    >>> class Custom(keras.Model):
    ...     def compute_loss(self, *args, **kwargs):
    ...         return super().compute_loss(*args, **kwargs) * 2
    >>> check_keras_steps(Custom(), "compute_loss", "train_step")
    Traceback (most recent call last):
    ...
    ValueError: model Custom overrides compute_loss, which Keras' fit/evaluate run instead of its own; the helpers compute loss_fn plus model.losses themselves and would not follow it: use fit/evaluate, or move that logic into a loss or an add_loss
    """
    for method in methods:
        if getattr(type(model), method, None) is not getattr(keras.Model, method):
            raise ValueError(f"{name} {type(model).__name__} overrides {method}, which Keras' fit/evaluate run instead "
                             "of its own; the helpers compute loss_fn plus model.losses themselves and would not "
                             "follow it: use fit/evaluate, or move that logic into a loss or an add_loss")


def original_error(error: Exception) -> Exception:
    """The error a helper raised while a ``tf.function`` was traced, without AutoGraph's "in user
    code" wrapping (its message starts with the traceback AutoGraph adds, not with what is wrong)."""
    context = error.__context__
    if hasattr(error, "ag_error_metadata") and type(context) is type(error):
        return context
    return error


def check_optimizer(optimizer: Any, name: str = "optimizer") -> keras.optimizers.Optimizer:
    """``optimizer`` if it is a Keras optimizer, else a ``TypeError`` naming it."""
    if not isinstance(optimizer, keras.optimizers.Optimizer):
        raise TypeError(f"{name} must be a Keras optimizer such as keras.optimizers.SGD(0.1), "
                        f"got {type(optimizer).__name__}")
    return optimizer


def check_dataset(dataset: Any, name: str = "dataset") -> tf.data.Dataset:
    """``dataset`` if it is a ``tf.data.Dataset``, else a ``TypeError`` naming it."""
    if not isinstance(dataset, tf.data.Dataset):
        raise TypeError(f"{name} must be a tf.data.Dataset, got {type(dataset).__name__}")
    return dataset


def check_finite(dataset: Any, name: str = "dataset", *, steps: int | None = None) -> None:
    """Refuse a dataset that would make a full pass run forever, unless ``steps`` bounds the pass.

    ``tf.data`` datasets: an infinite cardinality (``.repeat()``, an endless generator declared as
    such) is a ``ValueError`` naming ``name``; a known empty one too. Other iterables: a Python
    iterator cannot say whether it ends, so it passes (document that the caller must bound it).

    >>> check_finite(tf.data.Dataset.range(3).repeat(), "val_ds")
    Traceback (most recent call last):
    ...
    ValueError: val_ds is infinite (it repeats or never ends), so one pass over it would never finish: pass a finite dataset (no .repeat(), or .take(n) first), or bound the pass with steps=...
    """
    if steps is not None or not isinstance(dataset, tf.data.Dataset):
        return
    cardinality = int(dataset.cardinality())
    if cardinality == tf.data.INFINITE_CARDINALITY:
        raise ValueError(f"{name} is infinite (it repeats or never ends), so one pass over it would never "
                         "finish: pass a finite dataset (no .repeat(), or .take(n) first), or bound the "
                         "pass with steps=...")
    if cardinality == 0:
        raise ValueError(f"{name} is empty: it holds no batch")


# --------------------------------------------------------------------------- models and variables


def trainable_key(model: keras.Model) -> tuple[int, ...]:
    """Identity of the model's *current* trainable variables: it changes when a layer is frozen or
    unfrozen, so a compiled step cached under it is rebuilt instead of training the old set.

    >>> net = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> before = trainable_key(net); net.layers[0].trainable = False
    >>> trainable_key(net) == before, trainable_key(net)
    (False, ())
    """
    return tuple(id(v) for v in model.trainable_variables)


class WeakModel:
    """A weak reference to a model for objects that outlive a call (compiled steps in a cache):
    calling it returns the model, or raises a ``ReferenceError`` naming ``owner`` once it is gone.

    >>> net = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> ref = WeakModel(net, "this step")
    >>> ref() is net
    True
    """

    def __init__(self, model: keras.Model, owner: str):
        self._ref = weakref.ref(model)
        self._owner = owner

    def __call__(self) -> keras.Model:
        model = self._ref()
        if model is None:
            raise ReferenceError(f"the model of {self._owner} has been deleted")
        return model


def tf_variable(variable: Any) -> tf.Variable:
    """The ``tf.Variable`` inside a Keras 3 variable (a ``MirroredVariable`` under a strategy).

    Hand this to compiled code that assigns: ``keras.Variable.value`` may be an autocast copy."""
    return getattr(variable, "_value", variable)


# --------------------------------------------------------------------------- strategies


def strategy_of(variables: Any, owner: str = "model") -> Any:
    """The ``tf.distribute`` strategy that ``variables`` were created in (None: plain variables); a
    ``ValueError`` naming ``owner`` when they come from different scopes.

    >>> layer = keras.layers.Dense(1)
    >>> layer.build((None, 2))
    >>> strategy_of(layer.variables, "layer") is None  # built outside any strategy's scope
    True
    """
    found = {}
    for variable in variables:
        value = tf_variable(variable)
        strategy = value.distribute_strategy if isinstance(value, tf.distribute.DistributedValues) else None
        found[id(strategy)] = strategy
    if len(found) > 1:
        raise ValueError(f"{owner} has variables from inside and outside a strategy's scope: create it "
                         "entirely inside strategy.scope() (or entirely outside)")
    return next(iter(found.values()), None)


def check_strategy(model: keras.Model, optimizer: Any = None, metrics: Any = ()) -> Any:
    """The model's strategy (None: one device), once the current scope, the optimizer and the Keras
    metrics agree with it; otherwise an error naming the one that was created elsewhere. Called inside
    ``strategy.run`` it is a ``RuntimeError``: helpers that distribute run the replicas themselves.

    >>> check_strategy(keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])) is None
    True
    """
    if tf.distribute.has_strategy() and not tf.distribute.in_cross_replica_context():
        raise RuntimeError("the helpers run the replicas themselves: call them outside strategy.run()")
    current = tf.distribute.get_strategy() if tf.distribute.has_strategy() else None
    strategy = strategy_of(model.variables, f"model {model.name!r}")

    def where(s: Any) -> str:
        return f"inside {type(s).__name__}.scope()" if s is not None else "outside any strategy's scope"

    if current is not None and current is not strategy:
        raise ValueError(f"called {where(current)}, but model {model.name!r} was built {where(strategy)}: "
                         "build the model, optimizer and metrics inside the scope, or call the helper outside it")
    owners = [(f"optimizer {type(optimizer).__name__}", optimizer)] if optimizer is not None else []
    owners += [(f"metrics[{i}] ({getattr(m, 'name', type(m).__name__)})", m) for i, m in enumerate(metrics)
               if isinstance(m, keras.metrics.Metric)]
    for owner, thing in owners:
        if thing.variables and strategy_of(thing.variables, owner) is not strategy:
            raise ValueError(f"{owner} was created {where(strategy_of(thing.variables, owner))}, but model "
                             f"{model.name!r} {where(strategy)}: create it where the model was created")
    return strategy


# --------------------------------------------------------------------------- devices


def wait_for_device() -> None:
    """Block until every op already launched on every device has finished.

    GPU kernels run asynchronously: a Python call returns when its kernels are *queued*. A timer
    that stops without waiting measures launches, not work. Call it eagerly (not inside
    ``tf.function``); on a CPU with synchronous execution it returns at once.
    """
    tf.test.experimental.sync_devices()
