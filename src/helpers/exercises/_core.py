"""The pieces every checker is built from: call the learner's code, judge it, report in one line.

Checkers import these from here (not from the package), so that :func:`helpers.exercises.checker`
can load fresh copies of both the checker and these pieces for every check.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import traceback
import warnings
from typing import Any, Callable, Iterator

from helpers.exercises import CheckFailed

__all__ = ["CheckFailed", "call_learner", "expect", "passed", "autograding", "reporting_when_autograded",
           "stderr_to_stdout"]


def call_learner(fn: Callable[..., Any], *args: Any, name: str | None = None, **kwargs: Any) -> Any:
    """Call the learner's ``fn``. The student stub's ``NotImplementedError`` and any error the learner's
    code raises become a :class:`CheckFailed` that names the error and the learner's line.

    >>> def stub():
    ...     raise NotImplementedError()
    >>> try:
    ...     call_learner(stub)
    ... except CheckFailed as failure:
    ...     print(failure)
    `stub` is not written yet: replace `raise NotImplementedError()` with your code.
    """
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
    """Raise :class:`CheckFailed` with ``hint`` unless ``condition`` holds.

    >>> expect(1 + 1 == 2, "arithmetic is broken")
    """
    if not condition:
        raise CheckFailed(hint)


def passed(message: str) -> None:
    """Print the success line (deterministic, so nbval can check it).

    >>> passed("all cases agree.")
    Correct: all cases agree.
    """
    print(f"Correct: {message}")


def autograding() -> bool:
    """True while ``nbgrader autograde`` runs the notebook (nbgrader sets ``NBGRADER_EXECUTION`` in the
    environment the grading kernel inherits; ``nbgrader validate`` sets it to ``validate``)."""
    return os.environ.get("NBGRADER_EXECUTION") == "autograde"


@contextlib.contextmanager
def stderr_to_stdout() -> Iterator[None]:
    """Warnings and Python-level stderr written inside go to stdout, one line each: nbgrader scores a
    grade cell 0 for *any* stderr output, and a library's warning must not zero a right answer."""
    captured = io.StringIO()
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stderr(captured):
        warnings.simplefilter("always")
        yield
    lines = [f"{w.category.__name__}: {w.message}" for w in caught]
    lines += [line for line in captured.getvalue().splitlines() if line.strip()]
    for line in dict.fromkeys(lines):  # each distinct line once, in order
        print(f"(stderr) {line}")


def reporting_when_autograded(check: Callable[..., Any]) -> Callable[..., Any]:
    """``check``, except that under ``nbgrader autograde`` a :class:`CheckFailed` (or any error) is
    printed (one line) and ``0.0`` returned instead of raised: the hidden tests after it in the grade
    cell still run and decide the points, and a grade cell without hidden tests still scores 0 (its
    result)."""

    @functools.wraps(check)
    def run(*args: Any, **kwargs: Any) -> Any:
        if not autograding():
            return check(*args, **kwargs)
        try:
            with stderr_to_stdout():
                return check(*args, **kwargs)
        except CheckFailed as failure:
            print(f"Visible check failed: {failure}")
            return 0.0
        except Exception as error:  # noqa: BLE001 - whatever the answer did, the hidden test decides
            print(f"Visible check could not finish: {type(error).__name__}: {_first_line(error)}")
            return 0.0

    return run
