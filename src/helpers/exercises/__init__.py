"""Checkers for the notebooks' "Your turn" exercises.

A checker runs the learner's code on cases it builds itself, prints one line on success, and
raises :class:`CheckFailed` with a hint on failure. It never prints the expected solution.
One submodule per topic (``helpers.exercises.decoupling`` ...) holds that notebook's checkers.
"""

from __future__ import annotations

from typing import Any, Callable


class CheckFailed(AssertionError):
    """Raised by a checker: the message says what is wrong, not what the answer is."""


def call_learner(fn: Callable[..., Any], *args: Any, name: str | None = None, **kwargs: Any) -> Any:
    """Call the learner's ``fn``; turn the student stub's ``NotImplementedError`` into feedback."""
    if not callable(fn):
        raise CheckFailed(f"expected a function, got {type(fn).__name__}")
    label = name or getattr(fn, "__name__", "your function")
    try:
        return fn(*args, **kwargs)
    except NotImplementedError:
        raise CheckFailed(
            f"`{label}` is not written yet: replace `raise NotImplementedError()` with your code."
        ) from None


def expect(condition: bool, hint: str) -> None:
    """Raise :class:`CheckFailed` with ``hint`` unless ``condition`` holds."""
    if not condition:
        raise CheckFailed(hint)


def passed(message: str) -> None:
    """Print the success line (deterministic, so nbval can check it)."""
    print(f"Correct: {message}")
