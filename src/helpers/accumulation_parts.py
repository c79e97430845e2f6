"""Parts of notebook 02's accumulation outside its compiled loop (split off :mod:`helpers.accumulation`).

* :func:`epoch_stream`: the micro-batches of :func:`helpers.accumulation.train_accumulated`, epoch
  by epoch, with the checks that a finite pass needs.
* :func:`split_weight`: a micro-batch's weight in its window: what its loss divided by, when the
  loss splits into parts weighted that way (else a ``ValueError`` that says why).
* :class:`LossRef`: a ``loss_fn`` (one loss, or a list or dict of them) held weakly, leaf by leaf,
  with its ``loss_weights``; :func:`hashable`: a cache key for a batch signature.
"""

from __future__ import annotations

import warnings
import weakref
from typing import Any, Callable, Iterable, Iterator

import tensorflow as tf

from helpers import plumbing

__all__ = ["epoch_stream", "split_weight", "LossRef", "hashable"]


def epoch_stream(dataset: Any, epochs: int, steps_per_epoch: int | None) -> Iterator[tuple[int, Any, bool]]:
    """Yields ``(index, element, last_of_epoch)`` for every micro-batch of the whole training."""
    plumbing.check_finite(dataset, steps=steps_per_epoch)
    if isinstance(dataset, (tf.Tensor, str, bytes)) or not isinstance(dataset, Iterable):
        raise TypeError(f"dataset must be an iterable of (x, y) micro-batches, got {type(dataset).__name__}")
    if isinstance(dataset, Iterator) and epochs > 1 and steps_per_epoch is None:
        raise ValueError("dataset is an iterator, which can be read only once: pass a list or a tf.data.Dataset "
                         "for several epochs, or steps_per_epoch")
    if steps_per_epoch is not None and isinstance(dataset, tf.data.Dataset):
        size = int(dataset.cardinality())
        if size >= 0 and size < epochs * steps_per_epoch:
            raise ValueError(f"dataset holds {size} micro-batches, fewer than epochs x steps_per_epoch = "
                             f"{epochs * steps_per_epoch}: repeat it (.repeat()) or lower steps_per_epoch")
    return _elements(dataset, epochs, steps_per_epoch)


def _elements(dataset, epochs, steps_per_epoch):
    shared = iter(dataset) if steps_per_epoch is not None else None
    for epoch in range(epochs):
        source = shared if shared is not None else iter(dataset)
        previous, index = None, 0
        for index, element in enumerate(source):
            if previous is not None:
                yield previous[0], previous[1], False
            previous = (index, element)
            if steps_per_epoch is not None and index + 1 == steps_per_epoch:
                break
        if previous is None:
            if epoch == 0:
                return
            raise ValueError(f"dataset yielded no micro-batch in epoch {epoch + 1}")
        yield previous[0], previous[1], True
        if steps_per_epoch is not None and index + 1 < steps_per_epoch:
            warnings.warn(f"dataset ran out after {index + 1} of {steps_per_epoch} micro-batches in epoch "
                          f"{epoch + 1}: training stops there", RuntimeWarning, stacklevel=3)
            return


class LossRef:
    """``loss_fn`` (one loss, or a list or dict of losses) held weakly leaf by leaf, and ``loss_weights``."""

    def __init__(self, loss_fn: Any, loss_weights: Any):
        self._refs = tf.nest.map_structure(_weak, loss_fn)
        self.weights = loss_weights

    def fn(self) -> Any:
        return tf.nest.map_structure(lambda ref: ref(), self._refs)

    def matches(self, loss_fn: Any, loss_weights: Any) -> bool:
        try:
            tf.nest.assert_same_structure(self._refs, loss_fn)
        except (TypeError, ValueError):
            return False
        mine, theirs = tf.nest.flatten(self.fn()), tf.nest.flatten(loss_fn)
        return all(a is b for a, b in zip(mine, theirs)) and self.weights == loss_weights


def hashable(signature: Any) -> Any:
    """A cache key for a batch signature: its leaves and its structure (lists and dicts cannot be keys)."""
    return None if signature is None else (tuple(tf.nest.flatten(signature)),
                                           repr(tf.nest.map_structure(lambda _: 0, signature)))


def split_weight(terms: list, call_losses: int) -> tf.Tensor:
    """The micro-batch's weight in the window's mean: what its loss divided by. Raises (while tracing,
    before anything runs) when the loss cannot be split that way."""
    families = {t.family for t in terms}
    for term in terms:
        if term.family is None:
            raise ValueError(f"cannot split this loss into micro-batches: {term.why}")
    if len(families) > 1:
        described = ", ".join(f"{t.label!r}: {_describe_family(t.family)}" for t in terms)
        raise ValueError("cannot split this loss into micro-batches: its outputs divide by different counts "
                         f"({described}), so no single weight per micro-batch gives the full batch's loss; "
                         "give every output the same reduction and sample weights, or accumulate per output")
    family = next(iter(families))
    if family[0] != "examples" and call_losses:
        raise ValueError(f"cannot split this loss into micro-batches: it divides by {_describe_family(family)}, "
                         f"but {call_losses} of model.losses come from the forward pass (activity regularisers, "
                         "add_loss in call) and are means over examples: one weight per micro-batch cannot be "
                         "right for both")
    return terms[0].denominator


def _describe_family(family: tuple) -> str:
    return {"examples": "the number of examples", "mask": "its unmasked entries",
            "sample_weight": "the sum of its sample weights", "values": "its number of values (a varying shape)",
            }[family[0]]


def _weak(obj: Any) -> Callable[[], Any]:
    try:
        return weakref.ref(obj)
    except TypeError:
        return lambda: obj
