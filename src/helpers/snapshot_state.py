"""State a Keras model keeps outside its variables, which a copy must carry too (notebook 05).

``model.variables`` is not all that decides a model's output. Preprocessing layers keep what
``adapt()`` learnt in places no variable list, ``get_weights()`` or ``sync`` of variables reaches:

* ``Normalization`` computes its ``mean`` and ``variance`` *constants* from its variables when
  it is finalised (after ``adapt``, after loading): a copy whose variables were assigned still
  divides by its own old constants;
* ``StringLookup``, ``IntegerLookup`` (and ``TextVectorization``, through the ``StringLookup``
  inside it) keep their vocabulary in a TensorFlow lookup table (and ``tf_idf`` weights in a plain
  ``tf.Variable``); a copy built from the config has an empty table;
* ``Discretization`` keeps its learnt bin boundaries in a Python list.

:func:`outside_state` lists this state for every layer pair of two models of the same structure,
:func:`copy_outside_state` copies it (eagerly: the known layers above through Keras' own methods),
and :func:`outside_differences` says where two models still differ. Any other layer that holds a
constant tensor, NumPy array or lookup table as an attribute is compared too; a difference there
cannot be copied and is reported by name, so :func:`helpers.snapshots.snapshot` and ``sync``
refuse instead of returning a copy that answers differently.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np
import tensorflow as tf
import keras

__all__ = ["OutsideState", "outside_state", "outside_differences", "copy_outside_state"]

_LOOKUP = (keras.layers.StringLookup, keras.layers.IntegerLookup)
_NOT_OUTPUT = {"token_counts", "token_document_counts", "num_documents", "summary"}  # adapt() accumulators


@dataclass(frozen=True)
class OutsideState:
    """One piece of state outside the variables: ``layer.attribute`` (``kind``: what it is)."""

    label: str
    layer: Any
    attribute: str
    kind: str  # "constants", "vocabulary", "bins", "tensor", "table"

    def value(self) -> Any:
        """The state as plain Python/NumPy values, for comparison (read eagerly, even while a
        ``tf.function`` is traced)."""
        with tf.init_scope():
            return self._value()

    def _value(self) -> Any:
        layer = self.layer
        if self.kind == "constants":
            return [np.asarray(layer.mean), np.asarray(layer.variance)]
        if self.kind == "vocabulary":
            idf = getattr(layer, "idf_weights", None)
            return [np.asarray(layer.get_vocabulary(), dtype=object),
                    None if idf is None else np.asarray(tf.convert_to_tensor(idf))]
        if self.kind == "bins":
            return np.asarray(layer.bin_boundaries if layer.bin_boundaries is not None else [])
        if self.kind == "table":
            keys, values = getattr(layer, self.attribute).export()
            order = np.argsort(np.asarray(keys), kind="stable")
            return [np.asarray(keys)[order], np.asarray(values)[order]]
        return np.asarray(getattr(layer, self.attribute))


def _pairs(source: Any, target: Any, label: str) -> Iterator[tuple[Any, Any, str]]:
    yield source, target, label
    for s, t in zip(source._layers, target._layers):
        yield from _pairs(s, t, f"{label}/{s.name}")


def _entries(layer: Any, label: str) -> list[OutsideState]:
    if isinstance(layer, keras.layers.Normalization):
        return [OutsideState(f"{label} (adapted mean and variance)", layer, "mean", "constants")] \
            if getattr(layer, "input_mean", None) is None and layer.built else []
    if isinstance(layer, _LOOKUP):
        return [OutsideState(f"{label} (vocabulary)", layer, "lookup_table", "vocabulary")]
    if isinstance(layer, keras.layers.Discretization):
        return [OutsideState(f"{label} (bin boundaries)", layer, "bin_boundaries", "bins")]
    found = []
    for attribute, value in vars(layer).items():
        if attribute in _NOT_OUTPUT or isinstance(value, (tf.Variable, keras.Variable)):
            continue
        if isinstance(value, (tf.Tensor, np.ndarray)) and not isinstance(value, tf.RaggedTensor):
            found.append(OutsideState(f"{label}.{attribute}", layer, attribute, "tensor"))
        elif hasattr(value, "lookup") and hasattr(value, "resource_handle"):
            found.append(OutsideState(f"{label}.{attribute} (a lookup table)", layer, attribute, "table"))
    return found


def outside_state(source: keras.Model, target: keras.Model) -> list[tuple[OutsideState, OutsideState]]:
    """Pairs of state outside the variables, layer by layer, for two models of one structure.

    >>> norm = keras.layers.Normalization(name="normalization"); norm.adapt(np.array([[1.0], [3.0]]))
    >>> net = keras.Sequential([keras.Input((1,)), norm], name="net")
    >>> [s.label for s, _ in outside_state(net, keras.models.clone_model(net))]
    ['net/normalization (adapted mean and variance)']
    """
    pairs = []
    for s, t, label in _pairs(source, target, source.name):
        mine, theirs = _entries(s, label), _entries(t, label)
        if [(e.attribute, e.kind) for e in mine] != [(e.attribute, e.kind) for e in theirs]:
            raise ValueError(f"source and target differ in structure at {label!r}: its layers keep different "
                             "state outside their variables")
        pairs += list(zip(mine, theirs))
    return pairs


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if a is None or b is None:
        return a is b
    return a.shape == b.shape and bool(np.all(a == b))


def outside_differences(pairs: list[tuple[OutsideState, OutsideState]]) -> list[OutsideState]:
    """The source entries whose target counterpart holds another value."""
    return [s for s, t in pairs if not _same(s.value(), t.value())]


def copy_outside_state(pairs: list[tuple[OutsideState, OutsideState]]) -> list[OutsideState]:
    """Copy what Keras lets a copy take (eagerly; after the variables were copied); return the
    source entries that still differ (state no helper can copy)."""
    for s, t in pairs:
        if _same(s.value(), t.value()):
            continue
        if s.kind == "constants":
            t.layer.finalize_state()  # Keras' own rule: the constants from the (copied) variables
        elif s.kind == "vocabulary":
            idf = getattr(s.layer, "idf_weights", None)
            vocabulary = s.layer.get_vocabulary()
            if idf is None:
                t.layer.set_vocabulary(vocabulary)
            else:
                t.layer.set_vocabulary(vocabulary, idf_weights=np.asarray(tf.convert_to_tensor(idf)))
        elif s.kind == "bins":
            t.layer.bin_boundaries = None if s.layer.bin_boundaries is None else list(s.layer.bin_boundaries)
    return outside_differences(pairs)
