"""The exercise answers as the notebooks define them, for the checkers' unit tests.

The reference solution lives in one place, the notebook's answer cell; tests take it from there
instead of keeping a copy that could drift:

    from tests.notebook_answers import answer, stub
    accumulate = answer("02_gradient_accumulation", "accumulate")
    check(accumulate)                       # the reference passes
    check(stub("02_gradient_accumulation", "accumulate"))   # the student copy's stub fails

The answer cell runs in a namespace holding ``np``, ``tf`` and ``keras`` plus ``namespace``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import make_student  # noqa: E402

BEGIN = "### BEGIN SOLUTION"


def answer_cell(notebook: str, name: str) -> str:
    """The source of the code cell of ``notebooks/<notebook>.ipynb`` that defines ``name`` and
    holds a solution block."""
    path = ROOT / "notebooks" / (notebook if notebook.endswith(".ipynb") else notebook + ".ipynb")
    cells = [c.source for c in nbformat.read(path, as_version=4).cells
             if c.cell_type == "code" and BEGIN in c.source and f"def {name}(" in c.source]
    if len(cells) != 1:
        raise LookupError(f"{path.name}: expected one answer cell defining {name}(), found {len(cells)}")
    return cells[0]


def _run(source: str, name: str, where: str, namespace: dict[str, Any] | None) -> Callable:
    import keras
    import numpy as np
    import tensorflow as tf

    scope: dict[str, Any] = {"np": np, "tf": tf, "keras": keras, **(namespace or {})}
    exec(compile(source, where, "exec"), scope)  # noqa: S102 - our own notebook's cell
    return scope[name]


def answer(notebook: str, name: str, namespace: dict[str, Any] | None = None) -> Callable:
    """The reference solution ``name`` from the notebook's answer cell."""
    return _run(answer_cell(notebook, name), name, f"{notebook}:{name}", namespace)


def stub(notebook: str, name: str, namespace: dict[str, Any] | None = None) -> Callable:
    """``name`` as the student copy has it (solution replaced by ``raise NotImplementedError()``)."""
    source = make_student.strip_solutions(answer_cell(notebook, name))
    return _run(source, name, f"{notebook}:{name} (student)", namespace)


HIDDEN = ROOT / "classroom" / "hidden"


def hidden_source(notebook: str, exercise: str) -> str:
    """The hidden test of ``exercise`` as ``make course`` writes it into the grade cell (its first line,
    ``# Graded: N points``, excluded)."""
    text = (HIDDEN / notebook / f"{exercise}.py").read_text(encoding="utf-8")
    return text.split("\n", 1)[1]


def run_hidden(notebook: str, exercise: str, answer_fn: Callable, namespace: dict[str, Any] | None = None) -> float:
    """Run the hidden test of ``exercise`` on ``answer_fn`` as a grade cell would, in a namespace that
    holds ``np``, ``tf``, ``keras``, ``namespace`` and the answer; the cell's result (the points), or
    the ``CheckFailed`` it raises."""
    import ast

    import keras
    import numpy as np
    import tensorflow as tf

    scope: dict[str, Any] = {"np": np, "tf": tf, "keras": keras, **(namespace or {}), exercise: answer_fn}
    tree = ast.parse(hidden_source(notebook, exercise))
    *body, last = tree.body
    if not isinstance(last, ast.Expr):
        raise ValueError(f"{notebook}/{exercise}.py must end with the grading(...) expression")
    exec(compile(ast.Module(body=body, type_ignores=[]), f"hidden {exercise}", "exec"), scope)  # noqa: S102
    return eval(compile(ast.Expression(last.value), f"hidden {exercise}", "eval"), scope)  # noqa: S307


WRONG = ROOT / "tests" / "classroom_answers"
KINDS = ("hardcoded", "dodge", "mistake", "partial")


def wrong_answers(notebook: str, kind: str) -> Any:
    """The module ``tests/classroom_answers/<notebook>/<kind>.py``: one wrong answer per exercise,
    ``POINTS`` (what each must score under the hidden tests) and ``PASSES_VISIBLE``."""
    import importlib.util

    path = WRONG / notebook / f"{kind}.py"
    spec = importlib.util.spec_from_file_location(f"classroom_answers_{notebook}_{kind}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def answer_cell_source(notebook: str, kind: str, exercise: str) -> str:
    """The answer cell a student who wrote ``kind``'s answer to ``exercise`` hands in: the module's
    own statements (aliases, constants; not its imports, ``POINTS`` or ``PASSES_VISIBLE``), then the
    function."""
    import ast

    source = (WRONG / notebook / f"{kind}.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    kept = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):  # the docstring
            continue
        if isinstance(node, ast.Assign) and {getattr(t, "id", "") for t in node.targets} & {"POINTS", "PASSES_VISIBLE"}:
            continue
        if isinstance(node, ast.FunctionDef) and node.name != exercise:
            continue
        kept.append(ast.get_source_segment(source, node))
    if not any(text.startswith(f"def {exercise}(") for text in kept):
        raise LookupError(f"{notebook}/{kind}.py defines no {exercise}()")
    return "\n\n".join(kept)
