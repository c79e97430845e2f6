"""What a hidden test is built from: the teacher's seed, parts worth points, rules that zero a grade.

An exercise's hidden test (``classroom/hidden/<notebook>/<exercise>.py``, written into its grade cell
by ``make sync``) is a function ``hidden(grade)`` run by :func:`helpers.exercises.grading`::

    def _hidden(grade):
        n = int(grade.rng.integers(13, 30))               # a case the student never saw
        with grade.part(2, f"{n} examples"):               # 2 points if the block runs through
            got = grade.call(answer, n)                    # the learner's function, errors become hints
            grade.require(rule_kept, "what the rule is")   # a broken rule: 0 points for the exercise
            expect(close(got, computed_here), "what is wrong")

The cases come from ``grade.rng``: a NumPy generator seeded by the teacher's grading seed (the
environment variable ``WORKBOOK_GRADING_SEED``, which the course's ``nbgrader_config.py`` sets; a
fixed default when it is unset, so that the teacher's notebook replays the same everywhere) and the
exercise's name. This module holds no expected value: each hidden test computes its own.
"""

from __future__ import annotations

import contextlib
import os
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np

from helpers.exercises import CheckFailed
from helpers.exercises._core import call_learner, stderr_to_stdout

__all__ = ["SEED_VARIABLE", "DEFAULT_SEED", "grading_seed", "exercise_rng", "Grade", "run"]

SEED_VARIABLE = "WORKBOOK_GRADING_SEED"
DEFAULT_SEED = 2024  # when the teacher set none: learners, CI replays, the teacher's own notebook


def grading_seed() -> int:
    """The teacher's grading seed from ``WORKBOOK_GRADING_SEED`` (:data:`DEFAULT_SEED` when unset).

    >>> isinstance(grading_seed(), int)
    True
    """
    text = os.environ.get(SEED_VARIABLE, "").strip()
    if not text:
        return DEFAULT_SEED
    if not text.isdigit():
        raise ValueError(f"{SEED_VARIABLE} must be a whole number >= 0 (the course's grading seed), got {text!r}")
    return int(text)


def exercise_rng(exercise: str, seed: int | None = None) -> np.random.Generator:
    """The generator an exercise's hidden cases come from: one stream per (seed, exercise name).

    >>> float(exercise_rng("mean_loss", 1).random()) == float(exercise_rng("mean_loss", 1).random())
    True
    """
    if not isinstance(exercise, str) or not exercise:
        raise ValueError(f"exercise must be the exercise's name, got {exercise!r}")
    return np.random.default_rng([grading_seed() if seed is None else seed, zlib.crc32(exercise.encode())])


class _RuleBroken(Exception):
    """A hidden test's rule was broken: the exercise scores 0, whatever else was right."""


@dataclass
class Part:
    points: int
    label: str
    passed: bool = False
    hint: str = ""


class Grade:
    """The parts of one exercise's hidden test, as they run (see the module's docstring)."""

    def __init__(self, exercise: str, seed: int | None = None):
        self.exercise = exercise
        self.rng = exercise_rng(exercise, seed)
        self.parts: list[Part] = []

    @property
    def earned(self) -> float:
        return float(sum(p.points for p in self.parts if p.passed))

    @property
    def total(self) -> int:
        return sum(p.points for p in self.parts)

    @contextlib.contextmanager
    def part(self, points: int, label: str) -> Iterator[None]:
        """``points`` if the block runs through; 0 for this part if it raises (the hint is kept)."""
        if isinstance(points, bool) or not isinstance(points, int) or points < 1:
            raise ValueError(f"points must be a whole number >= 1, got {points!r}")
        part = Part(points, label)
        self.parts.append(part)
        try:
            yield
            part.passed = True
        except _RuleBroken:
            raise
        except CheckFailed as failure:
            part.hint = str(failure)
        except Exception as error:  # noqa: BLE001 - the learner's objects can fail in the test's own code
            part.hint = f"the hidden test could not use your result: {type(error).__name__}: {_first_line(error)}"
        print(f"hidden test: {part.points if part.passed else 0}/{part.points}  {label}"
              + ("" if part.passed else f": {part.hint}"))

    def require(self, condition: bool, hint: str) -> None:
        """Unless ``condition`` holds, the exercise scores 0 with ``hint`` (a rule of the exercise)."""
        if not condition:
            raise _RuleBroken(hint)

    def call(self, fn: Callable[..., Any], *args: Any, name: str | None = None) -> Any:
        """The learner's ``fn(*args)``; its errors (the stub's included) become hints."""
        return call_learner(fn, *args, name=name)


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else "(no message)"


def run(exercise: str, hidden_test: Callable[[Grade], None], seed: int | None = None) -> float:
    """Run ``hidden_test(grade)``; the points earned, or :class:`CheckFailed` when there are none."""
    if not callable(hidden_test):
        raise TypeError(f"hidden_test must be a function of the grade, got {type(hidden_test).__name__}")
    grade = Grade(exercise, seed)
    reason = ""
    with stderr_to_stdout():
        try:
            hidden_test(grade)
        except _RuleBroken as rule:
            reason = str(rule)
        except CheckFailed as failure:  # raised outside any part: nothing more can be graded
            reason = str(failure)
    if reason:
        raise CheckFailed(f"0 points: {reason}")
    if not grade.parts:
        raise CheckFailed(f"the hidden test of {exercise} graded nothing: tell your teacher")
    if grade.earned == 0:
        raise CheckFailed(f"0 of {grade.total} points: {next(p.hint for p in grade.parts if not p.passed)}")
    return grade.earned
