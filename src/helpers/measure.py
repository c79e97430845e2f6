"""Honest measurements for the notebooks' Cost sections and ``benchmarks/``: time and memory.

* Time: :func:`median_seconds` (one function), :func:`interleaved` (several, taking turns, so a
  change of machine load hits them alike). Both wait for all device work before the clock stops
  (:func:`helpers.plumbing.wait_for_device`), whatever the timed function returns: on a GPU,
  kernels run asynchronously and a function returning ``None`` would otherwise time only launches.
* Memory: :func:`peak_memory_bytes` (``tf.config.experimental.get_memory_info``).
* Reports: :func:`ratio_table` (every row against a baseline measured in the same run),
  :func:`target_line` (one line per benchmark target, the same in every ``benchmarks/bench_*.py``),
  :func:`header` (what ran where).

Report ratios against a baseline measured in the same run; never assert a time in a test.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any, Callable, Mapping, Sequence

from helpers.arguments import require_int

__all__ = ["median_seconds", "interleaved", "peak_memory_bytes", "ratio_table", "target_line", "header"]


def _settle(result: Any) -> None:
    """Wait for ``result`` and for every op already launched on any device."""
    import tensorflow as tf

    from helpers.plumbing import wait_for_device

    for item in tf.nest.flatten(result, expand_composites=True):
        if hasattr(item, "numpy"):
            item.numpy()
    wait_for_device()


def _timed(fn: Callable[[], Any], number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        result = fn()
    _settle(result)
    return (time.perf_counter() - start) / number


def _check_callable(fn: Any, name: str) -> None:
    if not callable(fn):
        raise TypeError(f"{name} must be callable with no arguments, got {type(fn).__name__}")


def median_seconds(fn: Callable[[], Any], *, repeat: int = 5, warmup: int = 1, number: int = 1) -> float:
    """Median wall time in seconds of ``number`` back-to-back calls of ``fn``, over ``repeat`` runs.

    Warm-up calls come first (tracing and first-call costs excluded). Each run ends only when the
    devices are idle, so asynchronous GPU work is counted even when ``fn`` returns ``None``.

    >>> median_seconds(lambda: sum(range(1000)), repeat=3) >= 0
    True
    """
    _check_callable(fn, "fn")
    require_int("repeat", repeat, minimum=1)
    require_int("warmup", warmup, minimum=0)
    require_int("number", number, minimum=1)
    for _ in range(warmup):
        _settle(fn())
    return statistics.median(_timed(fn, number) for _ in range(repeat))


def interleaved(fns: Mapping[str, Callable[[], Any]], *, rounds: int = 5, warmup: int = 1,
                statistic: str = "median") -> dict[str, float]:
    """Seconds per call of each function in ``fns``, measured in ``rounds`` rounds in which every
    function runs once, in turn; the ``statistic`` (``"median"`` or ``"min"``, the least disturbed
    run as ``timeit`` advises) of its rounds. Each call ends only when the devices are idle.

    >>> times = interleaved({"a": lambda: sum(range(100)), "b": lambda: sum(range(1000))}, rounds=3)
    >>> sorted(times)
    ['a', 'b']
    """
    if not fns:
        raise ValueError("fns must name at least one function to time")
    for name, fn in fns.items():
        _check_callable(fn, f"fns[{name!r}]")
    require_int("rounds", rounds, minimum=1)
    require_int("warmup", warmup, minimum=0)
    if statistic not in ("median", "min"):
        raise ValueError(f"statistic must be 'median' or 'min', got {statistic!r}")
    for _ in range(warmup):
        for fn in fns.values():
            _settle(fn())
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            samples[name].append(_timed(fn, 1))
    reduce = statistics.median if statistic == "median" else min
    return {name: reduce(values) for name, values in samples.items()}


def peak_memory_bytes(fn: Callable[[], Any], device: str | None = None) -> int:
    """Peak bytes allocated on ``device`` while ``fn()`` runs (after one warm-up call).

    Uses ``tf.config.experimental.get_memory_info``, which works on the CPU once ``helpers`` has set
    ``TF_CPU_ALLOCATOR_USE_BFC`` (see :mod:`helpers.runtime`). The peak includes what was already
    allocated when ``fn`` started (weights, optimizer state).

    >>> import tensorflow as tf
    >>> peak_memory_bytes(lambda: tf.ones([256, 256]) @ tf.ones([256, 256])) > 0
    True
    """
    import tensorflow as tf

    _check_callable(fn, "fn")
    if device is None:
        device = "GPU:0" if tf.config.list_logical_devices("GPU") else "CPU:0"
    _settle(fn())
    try:
        tf.config.experimental.reset_memory_stats(device)
    except ValueError as error:
        raise RuntimeError(
            f"TensorFlow keeps no memory statistics for {device}. On the CPU they need the "
            "environment variable TF_CPU_ALLOCATOR_USE_BFC=true before TensorFlow runs its first op "
            "(importing helpers before tensorflow sets it); restart the kernel and import helpers first."
        ) from error
    _settle(fn())
    return int(tf.config.experimental.get_memory_info(device)["peak"])


def ratio_table(rows: Sequence[tuple[str, float]], *, baseline: str, unit: str = "ms", scale: float = 1e3) -> str:
    """Format ``(name, seconds)`` rows as a table with each row's ratio to the ``baseline`` row.

    The baseline must be a positive, finite time (a difference of two timings can be zero or
    negative: measure totals instead and compare those).

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
    if not (isinstance(base, (int, float)) and math.isfinite(base) and base > 0):
        raise ValueError(f"baseline {baseline!r} is {base!r} seconds: a ratio needs a positive time. "
                         "Compare totals (step + copy vs step alone), not differences of timings.")
    width = max(24, *(len(n) for n in names))
    lines = [f"{'method':<{width}} {unit:>9} {'ratio':>8}"]
    for name, seconds in rows:
        lines.append(f"{name:<{width}} {seconds * scale:>9.3f} {seconds / base:>7.2f}x")
    lines.append(f"(ratio = time / time of {baseline!r}; below 1 is faster)")
    return "\n".join(lines)


def target_line(description: str, value: float, limit: float, *, at_most: bool = True, unit: str = "x") -> str:
    """One benchmark target, printed the same way in every benchmark.

    >>> target_line("ours / full batch per sample", 1.07, 1.15)
    'target  ours / full batch per sample: 1.070x <= 1.15x  met'
    >>> target_line("sync cheaper than a checkpoint", 8.0, 10, at_most=False)
    'target  sync cheaper than a checkpoint: 8.000x >= 10x  NOT met'
    """
    met = value <= limit if at_most else value >= limit
    return f"target  {description}: {value:.3f}{unit} {'<=' if at_most else '>='} {limit:g}{unit}  {'met' if met else 'NOT met'}"


def header(title: str) -> str:
    """The first line of every benchmark: what it measures, and the versions and device it ran on."""
    import tensorflow as tf

    from helpers import runtime

    device = "/GPU:0" if tf.config.list_logical_devices("GPU") else "/CPU:0"
    return f"== {title}\n   {runtime.describe_device(device)}"
