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
