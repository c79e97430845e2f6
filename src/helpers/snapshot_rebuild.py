"""A fresh copy of any built Keras model: same class, configuration, input shapes and ``trainable``
flags, new variables (notebook 05's :func:`helpers.snapshots.snapshot` then copies the values).

``keras.models.clone_model`` does this for Sequential and functional models. A subclassed model has
no layer graph to clone; Keras rebuilds it from ``get_config()``, but for a model subclass without
its own ``get_config()`` Keras records only the *defaults* of the constructor's arguments (the values
passed are lost), and a constructor without arguments fails (Keras passes it ``trainable`` and
``dtype``). :func:`fresh_copy` rebuilds what it can rebuild exactly and refuses the rest, saying what
to do.
"""

from __future__ import annotations

import contextlib
import inspect
from typing import Any

import tensorflow as tf
import keras

from helpers.plumbing import check_model, strategy_of

__all__ = ["fresh_copy"]


def fresh_copy(model: keras.Model) -> keras.Model:
    """A new, built model like ``model``, with its own freshly initialised variables.

    * Sequential and functional models: ``keras.models.clone_model``; nested models and custom
      layers inside go through the same rules.
    * A subclassed model whose class defines ``get_config()`` (or ``from_config()``): rebuilt from
      its config. One whose ``__init__`` takes no arguments (``QNetwork()``): constructed again,
      under the dtype policy the original has.
    * Built by a symbolic call on the input shapes Keras recorded at the first call, else layer by
      layer from each layer's recorded input shape (a model holding a stateful RNN records none).
    * Created in ``model``'s distribution strategy, if any; each layer's ``trainable`` flag copied.

    >>> net = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    >>> twin = fresh_copy(net)
    >>> twin is net, twin.built, [v.shape for v in twin.variables] == [v.shape for v in net.variables]
    (False, True, True)

    Raises ``TypeError`` for a model it cannot rebuild exactly (a model subclass whose ``__init__``
    takes arguments and whose class has no ``get_config()``; a config that cannot rebuild it; a copy
    that cannot be built): the message says what to do. ``ValueError`` if ``model`` was never built.
    """
    check_model(model, "model", built=True)
    strategy = strategy_of(model.variables) if not tf.distribute.has_strategy() else None
    with strategy.scope() if strategy is not None else contextlib.nullcontext():
        copy = _construct(model)
        if not copy.built:
            _build_like(copy, model)
    _copy_flags(model, copy)
    return copy


_FUNCTIONAL = ("Sequential", "Functional")


def _defined_outside_keras(cls: type, name: str) -> bool:
    """Whether a layer class of ``cls``'s MRO, other than Keras' own, defines ``name``."""
    return any(name in vars(c) for c in cls.__mro__
               if issubclass(c, keras.layers.Layer) and not c.__module__.startswith("keras."))


def _advice(layer: Any) -> str:
    cls = type(layer).__name__
    return (f"give {cls} a get_config() that returns its constructor arguments, or build the copy "
            f"yourself (copy = {cls}(...); copy(x)) and fill it with snapshots.sync(model, copy)")


def _construct(layer: Any) -> Any:
    """A new, unbuilt layer or model of the same class and configuration as ``layer``."""
    cls = type(layer)
    if cls.__module__.startswith("keras.") and cls.__name__ in _FUNCTIONAL:
        return keras.models.clone_model(layer, clone_function=_construct)  # nested layers through here
    custom_config = _defined_outside_keras(cls, "get_config") or _defined_outside_keras(cls, "from_config")
    if custom_config or not _defined_outside_keras(cls, "__init__"):
        try:
            return cls.from_config(layer.get_config())
        except Exception as error:  # noqa: BLE001 - any failure: say what to do
            raise TypeError(f"cannot rebuild a copy of {layer.name!r} ({cls.__name__}) from its config "
                            f"({type(error).__name__}: {_first_line(error)}): {_advice(layer)}") from None
    parameters = [p.name for p in inspect.signature(cls.__init__).parameters.values()
                  if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)][1:]
    if isinstance(layer, keras.Model):
        if parameters:
            raise TypeError(
                f"cannot rebuild a copy of {layer.name!r} ({cls.__name__}): its __init__ "
                f"takes arguments ({', '.join(parameters)}) and Keras records only their defaults for a "
                f"model subclass without get_config(). To copy it, {_advice(layer)}")
        previous = keras.config.dtype_policy()
        keras.config.set_dtype_policy(layer.dtype_policy)  # what the constructor saw
        try:
            return cls()
        except Exception as error:  # noqa: BLE001
            raise TypeError(f"could not construct {cls.__name__}() again ({type(error).__name__}: "
                            f"{_first_line(error)}): {_advice(layer)}") from None
        finally:
            keras.config.set_dtype_policy(previous)
    try:  # a custom layer inside a Sequential/functional model: Keras recorded its arguments
        config = layer.get_config()
        return cls(**{k: v for k, v in config.items() if k in parameters or _takes_kwargs(cls)})
    except Exception as error:  # noqa: BLE001
        raise TypeError(f"cannot rebuild a copy of layer {layer.name!r} ({cls.__name__}) "
                        f"({type(error).__name__}: {_first_line(error)}): {_advice(layer)}") from None


def _takes_kwargs(cls: type) -> bool:
    return any(p.kind == p.VAR_KEYWORD for p in inspect.signature(cls.__init__).parameters.values())


def _build_like(copy: keras.Model, model: keras.Model) -> None:
    """Build ``copy`` as ``model`` was built: a symbolic call on the input shapes Keras recorded
    (its own way), else layer by layer from each layer's recorded input shape (a model whose first
    call could not be traced, e.g. one holding a stateful RNN, has no recorded input shape)."""
    config = model.get_build_config() or {}
    try:
        if "input_shape" in config:
            copy(keras.tree.map_shape_structure(keras.KerasTensor, config["input_shape"]))
        elif "shapes_dict" in config:
            copy(**{k.removesuffix("_shape"): keras.KerasTensor(s) for k, s in config["shapes_dict"].items()})
    except Exception:  # noqa: BLE001 - build layer by layer below
        pass
    if not copy.built:
        _build_layers_like(copy, model)


def _build_layers_like(target: Any, source: Any) -> None:
    if target.built or not source.built:
        return
    for s, t in zip(source._layers, target._layers):
        _build_layers_like(t, s)
    config = source.get_build_config()
    if config and (not isinstance(target, keras.Model) or _defined_outside_keras(type(target), "build")):
        target.build_from_config(config)
    target.built = True  # as Keras marks a model whose first call it could not trace


def _copy_flags(source: Any, target: Any) -> None:
    """Give every layer of ``target`` the ``trainable`` flag of its counterpart in ``source``."""
    target.trainable = source.trainable
    for s, t in zip(source._layers, target._layers):
        _copy_flags(s, t)


def _first_line(error: Exception) -> str:
    return next((line.strip() for line in str(error).splitlines() if line.strip()), "")
