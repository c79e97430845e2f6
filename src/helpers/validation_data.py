"""The validation data of notebook 04: examples generated on the fly, a varying number per raw
chunk, so TensorFlow does not know the dataset's size; the ids that name each example.

Split off :mod:`helpers.validation` (which re-exports every name here): :func:`chunk_examples`,
:func:`generated_dataset`, :func:`example_ids`, :func:`drop_ids`, :func:`collect`.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import tensorflow as tf

from helpers.arguments import require_int
from helpers.plumbing import check_dataset, check_finite
from helpers.validation_steps import unpack

__all__ = ["FEATURES", "MAX_PER_CHUNK", "chunk_examples", "generated_dataset", "example_ids", "drop_ids", "collect"]

FEATURES = 4
MAX_PER_CHUNK = 32
_TASK_SEED = 2017  # the hidden function y = f(x): the same for every data seed, so train and val agree


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
