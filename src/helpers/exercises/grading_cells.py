"""When nbgrader grades a notebook, run only the cells the grade depends on.

A graded notebook is a whole chapter: most of its cells teach (they train models, time code, draw
figures) and none of the points depend on them. :class:`SkipTeachingCells`, an nbgrader autograde
preprocessor that ``make course`` registers in the course's ``nbgrader_config.py``, tags every code
cell the grade does not need with ``skip-execution`` (nbclient's tag for a cell it leaves alone), so
autograde runs the setup cell, the exercises and what they use, and the feedback page shows the
teaching cells without outputs.

Which cells the grade needs (:func:`cells_grading_needs`), from the code alone:

* the setup cell (it calls ``runtime.setup(``) and every code cell nbgrader knows (answer and grade
  cells, hidden tests included), whatever they contain;
* then, from the last cell back to the first, every cell that binds a name a needed cell after it
  reads (an assignment, ``def``, ``class``, ``import``, a ``for`` or ``with`` target), and every cell
  that reads such a name, unless an import bound it (the cell may change the object:
  ``model.fit(...)``); a needed cell's own reads are needed in turn, a function's included (it
  reads them when it is called);
* every cell Python cannot parse (IPython magics aside), to be safe.

A learner's answer that uses a function or a dataset from the teaching cells therefore gets the
cells that make it, and the cells that change it, exactly as in their notebook.

>>> sources = ["from helpers import runtime\\nDEVICE = runtime.setup(seed=0)\\nimport numpy as np",
...            "data = np.arange(3)", "slow = sum(range(10**6))", "def f(): return data.sum()",
...            "answer = f()"]
>>> sorted(cells_grading_needs(sources, required={4}))
[0, 1, 3, 4]
"""

from __future__ import annotations

import symtable
from collections.abc import Iterable, Sequence

from nbconvert.preprocessors import Preprocessor
from traitlets import Bool

__all__ = ["SkipTeachingCells", "cells_grading_needs", "SKIP_TAG", "SETUP_MARK"]

SKIP_TAG = "skip-execution"  # nbclient's NotebookClient.skip_cells_with_tag
SETUP_MARK = "runtime.setup("


class _Names:
    """What a cell does with the notebook's global names: binds (assigns, defines, imports), imports
    (the bound names that come from an import), and reads (loads at the top level, or inside a
    function, class or comprehension where the name is not local)."""

    def __init__(self, source: str) -> None:
        code = "\n".join(line[:len(line) - len(line.lstrip())] + "pass" if line.lstrip().startswith(("%", "!"))
                         else line for line in source.splitlines())  # an IPython magic: a statement
        top = symtable.symtable(code, "<cell>", "exec")  # SyntaxError: the caller keeps the cell
        self.binds: set[str] = set()
        self.imports: set[str] = set()
        self.reads: set[str] = set()
        for symbol in top.get_symbols():
            if symbol.is_assigned() or symbol.is_imported() or symbol.is_namespace():
                self.binds.add(symbol.get_name())
            if symbol.is_imported():
                self.imports.add(symbol.get_name())
            if symbol.is_referenced():
                self.reads.add(symbol.get_name())
        self._nested(top.get_children())

    def _nested(self, tables) -> None:
        for table in tables:
            for symbol in table.get_symbols():
                if symbol.is_global():  # not local to the function, class or comprehension
                    if symbol.is_referenced():
                        self.reads.add(symbol.get_name())
                    if symbol.is_declared_global() and symbol.is_assigned():
                        self.binds.add(symbol.get_name())
            self._nested(table.get_children())


def cells_grading_needs(sources: Sequence[str], required: Iterable[int]) -> set[int]:
    """Indices of the code cells (``sources``, in order) that grading must run: ``required`` (the
    setup and nbgrader's cells) and, walking back, every cell that binds or changes a name a needed
    cell after it reads."""
    needed = set(required)
    names: dict[int, _Names | None] = {}
    for i, source in enumerate(sources):
        try:
            names[i] = _Names(source)
        except SyntaxError:
            names[i] = None
            needed.add(i)
    parsed = [n for n in names.values() if n is not None]
    imported = set().union(*(n.imports for n in parsed))
    notebook_names = set().union(*(n.binds for n in parsed)) - imported  # not builtins, not modules
    wanted: set[str] = set()  # names read by a needed cell after the current one
    for i in range(len(sources) - 1, -1, -1):
        cell = names[i]
        if i not in needed and cell is not None:
            changes = cell.reads & notebook_names & wanted  # it may change the object: model.fit(...)
            if cell.binds & wanted or changes:
                needed.add(i)
        if i in needed and cell is not None:
            wanted |= cell.reads
    return needed


class SkipTeachingCells(Preprocessor):
    """nbgrader autograde preprocessor: tags the code cells the grade does not need with
    ``skip-execution``; register it before nbgrader's ``Execute`` (``make course`` does)."""

    enabled = Bool(True, help="Skip the cells grading does not need").tag(config=True)  # nbconvert's: False

    def preprocess(self, nb, resources):
        code = [cell for cell in nb.cells if cell.cell_type == "code"]
        required = [i for i, cell in enumerate(code)
                    if SETUP_MARK in cell.source or cell.metadata.get("nbgrader", {}).get("solution")
                    or cell.metadata.get("nbgrader", {}).get("grade")]
        if not any(SETUP_MARK in cell.source for cell in code):
            return nb, resources  # not a workbook notebook: run everything
        keep = cells_grading_needs([cell.source for cell in code], required)
        for i, cell in enumerate(code):
            tags = cell.metadata.setdefault("tags", [])
            if i not in keep and SKIP_TAG not in tags:
                tags.append(SKIP_TAG)
        return nb, resources
