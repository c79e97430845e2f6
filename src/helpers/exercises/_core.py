"""The pieces every checker is built from: call the learner's code, judge it, report in one line.

Checkers import these from here (not from the package), so that :func:`helpers.exercises.checker`
can load fresh copies of both the checker and these pieces for every check.
"""

from __future__ import annotations

import traceback
from typing import Any, Callable

from helpers.exercises import CheckFailed

__all__ = ["CheckFailed", "call_learner", "expect", "passed"]


def call_learner(fn: Callable[..., Any], *args: Any, name: str | None = None, **kwargs: Any) -> Any:
    """Call the learner's ``fn``. The student stub's ``NotImplementedError`` and any error the learner's
    code raises become a :class:`CheckFailed` that names the error and the learner's line."""
    label = name or getattr(fn, "__name__", "your function")
    if not callable(fn):
        raise CheckFailed(f"`{label}` should be a function, got {type(fn).__name__}")
    try:
        return fn(*args, **kwargs)
    except NotImplementedError:
        raise CheckFailed(f"`{label}` is not written yet: replace `raise NotImplementedError()` with your code.") from None
    except CheckFailed:
        raise
    except Exception as error:  # noqa: BLE001 - any error in the learner's code is feedback
        raise CheckFailed(f"`{label}` raised {type(error).__name__}: {_first_line(error)}{_where(error)}") from None


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else "(no message)"


def _where(error: BaseException) -> str:
    """`` (line 4: `code`)`` for the innermost frame of the learner's own code (a notebook cell)."""
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if "ipykernel" in f.filename or f.filename.startswith("<")]
    if not frames:
        return ""
    frame = frames[-1]
    code = f": `{frame.line.strip()}`" if frame.line else ""
    return f" (in {frame.name}, line {frame.lineno}{code})"


def expect(condition: bool, hint: str) -> None:
    """Raise :class:`CheckFailed` with ``hint`` unless ``condition`` holds."""
    if not condition:
        raise CheckFailed(hint)


def passed(message: str) -> None:
    """Print the success line (deterministic, so nbval can check it)."""
    print(f"Correct: {message}")
