"""Checkers and grading for the notebooks' "Your turn" exercises, graded by nbgrader in a classroom.

Every exercise is two cells. The answer cell holds the solution between nbgrader's markers
``### BEGIN SOLUTION`` and ``### END SOLUTION``. The grade cell right after it starts with a line
that gives its points, calls the visible checker through :func:`checker`, and ends with the hidden
tests, which only the teacher's notebook holds (nbgrader removes them from the release and puts
them back when it grades)::

    # Graded: 4 points
    from helpers.exercises import checker
    checker("accumulation").check_accumulate(accumulate)
    ### BEGIN HIDDEN TESTS
    ...                                   # cases drawn from the teacher's seed, expectations computed here
    grading("accumulate", _hidden)        # the points earned, as the cell's result
    ### END HIDDEN TESTS

A visible checker runs the learner's code on cases it builds itself, prints one ``Correct: ...``
line on success and raises :class:`CheckFailed` with a hint on failure; it never prints the
solution. When nbgrader autogrades (``NBGRADER_EXECUTION=autograde``) it prints the hint instead of
raising, so that the hidden tests still run and decide the points (see :func:`grading`). A failure
shows as one line in the notebook and in nbgrader's feedback, not as a traceback of checker code.
One submodule per topic holds that notebook's checkers and the fixtures its hidden tests use (models
that record how they were run, counting iterators); none of them computes an answer.

:func:`checker` and :func:`grading` load fresh copies of the topic's checker module and of the
private modules checkers are built from (``_core``, ``_guards``, ``_grading``), from their files,
at every call: an answer cell that patched an imported checker, its hints, tolerances or
``expect``/``passed`` cannot change what the grade cell checks. This package's own names
(``checker``, ``grading``, ``CheckFailed`` ...) cannot be replaced either. (A learner who replaces
modules in ``sys.modules`` or Python's builtins can fool any check running in their own kernel;
teachers read the answers too.)
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType
from typing import Any, Callable

__all__ = ["CheckFailed", "checker", "grading", "call_learner", "expect", "passed", "TOPICS"]

TOPICS = ("decoupling", "accumulation", "batching", "validation", "snapshots")
# The modules checkers are built from, loaded fresh (in this order) for every check and grade.
_SUPPORT = ("helpers.exercises._core", "helpers.exercises._guards", "helpers.exercises._grading")


class CheckFailed(AssertionError):
    """Raised by a checker: the message says what is wrong, not what the answer is.

    IPython shows it as one line (``_render_traceback_``), so a notebook and nbgrader's feedback show
    the hint, not the checker's source.
    """

    def _render_traceback_(self) -> list[str]:
        return [f"CheckFailed: {self}"]


from helpers.exercises._core import call_learner, expect, passed  # noqa: E402  (needs CheckFailed)


def _fresh(name: str) -> ModuleType:
    """A new module object for ``name``, executed from its file while registered under its name (as
    an import does: dataclasses and the like look the module up there)."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(name)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _load_fresh(name: str) -> ModuleType:
    """A fresh copy of module ``name``, whose imports of the support modules get fresh copies too.
    The modules imported before stay what ``sys.modules`` holds afterwards."""
    names = dict.fromkeys((*_SUPPORT, name))
    installed = {each: sys.modules.get(each) for each in names}
    try:
        for support in _SUPPORT:
            _fresh(support)
        return sys.modules[name] if name in _SUPPORT else _fresh(name)
    finally:
        for each, module in installed.items():
            if module is None:
                sys.modules.pop(each, None)
            else:
                sys.modules[each] = module


def checker(topic: str) -> ModuleType:
    """A fresh copy of ``helpers/exercises/<topic>.py``, loaded from its file now.

    Its ``check_*`` functions raise :class:`CheckFailed` on a wrong answer, except while nbgrader
    autogrades, where they print the hint and return ``0.0`` (the cell's score if no hidden test
    follows).

    >>> checker("accumulation").check_accumulate.__name__
    'check_accumulate'
    """
    if topic not in TOPICS:
        raise ValueError(f"topic must be one of {', '.join(TOPICS)}, got {topic!r}")
    module = _load_fresh(f"helpers.exercises.{topic}")
    core = _load_fresh("helpers.exercises._core")
    for name in [n for n in getattr(module, "__all__", ()) if n.startswith("check_")]:
        setattr(module, name, core.reporting_when_autograded(getattr(module, name)))
    return module


def grading(exercise: str, hidden_test: Callable[[Any], None]) -> float:
    """Run an exercise's hidden test and return the points it earned (the grade cell's result).

    ``hidden_test(grade)`` draws its cases from ``grade.rng`` (seeded by the teacher's
    ``WORKBOOK_GRADING_SEED`` and the exercise's name), runs the learner's code and scores it in
    ``with grade.part(points, label):`` blocks. A broken rule (``grade.require``) or no point at all
    raises :class:`CheckFailed` with the reason (nbgrader then scores 0); otherwise the points earned
    are returned, and nbgrader takes them as the cell's partial credit.

    >>> def hidden(grade):
    ...     with grade.part(2, "two is even"):
    ...         expect(2 % 2 == 0, "two is odd")
    >>> grading("example", hidden)
    hidden test: 2/2  two is even
    2.0
    """
    return _load_fresh("helpers.exercises._grading").run(exercise, hidden_test)


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
