"""Checkers for the notebooks' "Your turn" exercises, graded by nbgrader in a classroom.

Every exercise is two cells. The answer cell holds the solution between nbgrader's markers
``### BEGIN SOLUTION`` and ``### END SOLUTION``. The checker cell right after it starts with a line
that gives its points, and calls a checker through :func:`checker`::

    # Graded: 3 points
    from helpers.exercises import checker
    checker("accumulation").check_accumulate(accumulate)

A checker runs the learner's code on cases it builds itself, prints one ``Correct: ...`` line on
success, and raises :class:`CheckFailed` with a hint on failure; it never prints the solution. A
failure shows as one line in the notebook and in nbgrader's feedback, not as a traceback of checker
code. One submodule per topic holds that notebook's checkers.

:func:`checker` loads a fresh copy of the topic's checker module, and of the pieces checkers are
built from (:mod:`helpers.exercises._core`), from their files at every call: an answer cell that
patched an imported checker, its hints, tolerances or ``expect``/``passed`` cannot change what the
checker cell checks. This package's own names (``checker``, ``CheckFailed`` …) cannot be replaced
either. (A learner who replaces modules in ``sys.modules`` or Python's builtins can fool any checker
running in their own kernel; teachers read the answers too.)
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType
from typing import Any

__all__ = ["CheckFailed", "checker", "call_learner", "expect", "passed", "TOPICS"]

TOPICS = ("decoupling", "accumulation", "batching", "validation", "snapshots")


class CheckFailed(AssertionError):
    """Raised by a checker: the message says what is wrong, not what the answer is.

    IPython shows it as one line (``_render_traceback_``), so a notebook and nbgrader's feedback show
    the hint, not the checker's source.
    """

    def _render_traceback_(self) -> list[str]:
        return [f"CheckFailed: {self}"]


from helpers.exercises._core import call_learner, expect, passed  # noqa: E402  (needs CheckFailed)


def _fresh(name: str) -> ModuleType:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def checker(topic: str) -> ModuleType:
    """A fresh copy of ``helpers/exercises/<topic>.py``, loaded from its file now.

    >>> checker("accumulation").check_accumulate.__name__
    'check_accumulate'
    """
    if topic not in TOPICS:
        raise ValueError(f"topic must be one of {', '.join(TOPICS)}, got {topic!r}")
    core_name = "helpers.exercises._core"
    installed = sys.modules.get(core_name)
    sys.modules[core_name] = _fresh(core_name)  # the fresh checker imports the fresh pieces
    try:
        return _fresh(f"helpers.exercises.{topic}")
    finally:
        if installed is not None:
            sys.modules[core_name] = installed


class _Guarded(ModuleType):
    """This package as a module whose public names cannot be replaced or deleted from a cell:
    ``helpers.exercises.checker = lambda topic: ...`` raises, and a name written into the module's
    ``__dict__`` directly is ignored in favour of the original."""

    def __getattribute__(self, name: str) -> Any:
        if name in _ORIGINALS:
            return _ORIGINALS[name]
        return super().__getattribute__(name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _ORIGINALS and value is not _ORIGINALS[name]:
            raise AttributeError(f"helpers.exercises.{name} cannot be replaced: the checker cells rely on it")
        super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        if name in _ORIGINALS:
            raise AttributeError(f"helpers.exercises.{name} cannot be deleted: the checker cells rely on it")
        super().__delattr__(name)


_ORIGINALS = {name: globals()[name] for name in __all__}
sys.modules[__name__].__class__ = _Guarded
