"""Argument checks shared by every helper: clear errors that name the bad argument."""

from __future__ import annotations

import numbers
from typing import Any


def require_int(name: str, value: Any, *, minimum: int | None = None, allow_none: bool = False) -> int | None:
    """Return ``value`` as an int; ``TypeError``/``ValueError`` naming ``name`` if it is not one.

    Python and NumPy integers pass; ``bool`` and floats (even ``2.0``) do not.

    >>> require_int("batch_size", 8, minimum=1)
    8
    >>> require_int("batch_size", 0, minimum=1)
    Traceback (most recent call last):
    ...
    ValueError: batch_size must be >= 1, got 0
    """
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        expected = "an int or None" if allow_none else "an int"
        raise TypeError(f"{name} must be {expected}, got {type(value).__name__}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)
