"""Small, honest timing tools for the notebooks' Cost sections and ``benchmarks/``.

Times are medians over repeats after warm-up calls (tracing and first-call costs excluded).
Report ratios against a baseline measured in the same run; never assert a time in a test.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Sequence


def median_seconds(fn: Callable[[], Any], *, repeat: int = 5, warmup: int = 1, number: int = 1) -> float:
    """Median wall time in seconds of ``number`` back-to-back calls of ``fn``, over ``repeat`` runs.

    ``fn``'s result is materialised (``.numpy()`` on tensors) so asynchronous GPU work is counted.

    >>> median_seconds(lambda: sum(range(1000)), repeat=3) >= 0
    True
    """
    if repeat < 1:
        raise ValueError(f"repeat must be >= 1, got {repeat}")
    if number < 1:
        raise ValueError(f"number must be >= 1, got {number}")
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    for _ in range(warmup):
        _materialise(fn())
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            result = fn()
        _materialise(result)
        samples.append((time.perf_counter() - start) / number)
    return statistics.median(samples)


def _materialise(result: Any) -> None:
    if hasattr(result, "numpy"):
        result.numpy()
    elif isinstance(result, (list, tuple)):
        for item in result:
            _materialise(item)
    elif isinstance(result, dict):
        for item in result.values():
            _materialise(item)


def ratio_table(rows: Sequence[tuple[str, float]], *, baseline: str, unit: str = "ms", scale: float = 1e3) -> str:
    """Format ``(name, seconds)`` rows as a table with each row's ratio to the ``baseline`` row.

    >>> print(ratio_table([("old", 0.002), ("new", 0.001)], baseline="old"))
    method                          ms    ratio
    old                          2.000    1.00x
    new                          1.000    0.50x
    (ratio = time / time of 'old'; below 1 is faster)
    """
    names = [name for name, _ in rows]
    if baseline not in names:
        raise ValueError(f"baseline {baseline!r} is not one of the rows {names}")
    base = dict(rows)[baseline]
    width = max(24, *(len(n) for n in names))
    lines = [f"{'method':<{width}} {unit:>9} {'ratio':>8}"]
    for name, seconds in rows:
        lines.append(f"{name:<{width}} {seconds * scale:>9.3f} {seconds / base:>7.2f}x")
    lines.append(f"(ratio = time / time of {baseline!r}; below 1 is faster)")
    return "\n".join(lines)
