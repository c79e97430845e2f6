"""Checkers for notebook 03 (batch iteration).

``check_batch_positions(fn)``: ``fn(k, n_tokens, batch_size, num_steps)`` must return the positions
in ``raw_ids`` of the inputs ``x`` of batch ``k`` (counted from 0 across epochs, as with
``repeat=True``), an integer array of shape ``[batch_size, num_steps]``.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from helpers.exercises._core import CheckFailed, call_learner, expect, passed

# (n_tokens, batch_size, num_steps): uneven lengths, one stream, one step, a stream length that is
# a multiple of num_steps (where "one window too many" shows), and the notebook's corpus layout.
_CASES = [(70, 4, 5), (101, 3, 7), (60, 4, 5), (23, 1, 4), (50, 6, 1), (1906, 8, 10)]


def _reference(k: int, n_tokens: int, batch_size: int, num_steps: int) -> np.ndarray:
    """Batch ``k`` of the real producer fed with positions, so its values *are* the positions."""
    return _reference_batches(n_tokens, batch_size, num_steps, k + 1)[k]


@functools.lru_cache(maxsize=None)
def _reference_batches(n_tokens: int, batch_size: int, num_steps: int, count: int) -> np.ndarray:
    from helpers.batching import ptb_batches

    dataset = ptb_batches(np.arange(n_tokens), batch_size, num_steps, repeat=True, prefetch=0)
    return np.stack([x.numpy() for x, _ in dataset.take(count)])


def _epoch_size(n_tokens: int, batch_size: int, num_steps: int) -> int:
    from helpers.batching import ptb_layout

    return ptb_layout(n_tokens, batch_size, num_steps).epoch_size


def _as_positions(result: Any, expected_shape: tuple[int, int]) -> np.ndarray:
    try:
        got = np.asarray(result)
    except Exception:  # noqa: BLE001 - anything that is not array-like gets the same feedback
        got = np.asarray(None)
    if got.dtype == object or not (np.issubdtype(got.dtype, np.integer) or np.issubdtype(got.dtype, np.floating)):
        raise CheckFailed(f"return an integer array of positions, got {type(result).__name__}")
    expect(
        got.shape == expected_shape,
        f"batch x has shape [batch_size, num_steps] = {list(expected_shape)}; yours has shape {list(got.shape)}",
    )
    expect(
        np.all(np.round(got) == got),
        "positions are whole numbers: use integer division (//), not /",
    )
    return got.astype(np.int64)


def check_batch_positions(fn: Callable[[int, int, int, int], Any]) -> None:
    """Compare ``fn`` with the producer on its own cases; first inside one epoch, then after wrap-arounds."""
    first_epoch, after_wrap = [], []
    for n_tokens, batch_size, num_steps in _CASES:
        epoch = _epoch_size(n_tokens, batch_size, num_steps)
        first_epoch += [(k, n_tokens, batch_size, num_steps) for k in sorted({0, 1 % epoch, epoch - 1})]
        after_wrap += [(k, n_tokens, batch_size, num_steps) for k in (epoch, 2 * epoch + 1)]

    for k, n_tokens, batch_size, num_steps in first_epoch:
        got = _as_positions(
            call_learner(fn, k, n_tokens, batch_size, num_steps, name="batch_positions"), (batch_size, num_steps)
        )
        expected = _reference(k, n_tokens, batch_size, num_steps)
        if np.array_equal(got, expected):
            continue
        case = f"k={k}, n_tokens={n_tokens}, batch_size={batch_size}, num_steps={num_steps}"
        expect(
            np.array_equal(got[:, 1:] - got[:, :-1], np.ones((batch_size, num_steps - 1), dtype=np.int64)),
            f"({case}) each row of x is num_steps consecutive tokens of one stream: "
            "positions along a row go up by 1",
        )
        expect(
            got[0, 0] == expected[0, 0],
            f"({case}) stream 0 of batch {k} starts at the wrong position: batch k reads window k, "
            "and every window is num_steps tokens long",
        )
        raise CheckFailed(
            f"({case}) stream 0 is right, but stream s is not: how long is each stream after the data is "
            "cut into batch_size rows (the remainder is dropped)?"
        )

    wrong = []  # (case, the learner's first position) for every wrong batch after a wrap-around
    for k, n_tokens, batch_size, num_steps in after_wrap:
        got = _as_positions(
            call_learner(fn, k, n_tokens, batch_size, num_steps, name="batch_positions"), (batch_size, num_steps)
        )
        if not np.array_equal(got, _reference(k, n_tokens, batch_size, num_steps)):
            wrong.append(((k, n_tokens, batch_size, num_steps), int(got[0, 0])))
    if wrong:
        (k, n_tokens, batch_size, num_steps), _ = wrong[0]
        case = f"k={k}, n_tokens={n_tokens}, batch_size={batch_size}, num_steps={num_steps}"
        if all(first == case_[0] * case_[3] for case_, first in wrong):
            raise CheckFailed(
                f"({case}) right inside the first epoch, but not after it: when the windows of a stream "
                "run out, what does the producer (with repeat=True) read next?"
            )
        raise CheckFailed(
            f"({case}) right inside the first epoch, but the wrap-around comes at the wrong batch: "
            "count the windows that fit in one stream, remembering that the last window also needs "
            "one more token for its target y"
        )

    passed(
        f"batch_positions matches the producer on {len(first_epoch) + len(after_wrap)} batches of "
        f"{len(_CASES)} layouts, {len(after_wrap)} of them after an epoch wrap-around."
    )
