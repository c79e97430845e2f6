#!/usr/bin/env python3
"""Write student copies of the notebooks: solutions and hidden tests removed, outputs cleared.

What nbgrader's ``generate_assignment`` does to the same notebook (a test compares them cell by cell):

* in code cells, every block from a ``### BEGIN SOLUTION`` line to its ``### END SOLUTION`` line
  becomes ``# YOUR CODE HERE`` + ``raise NotImplementedError()`` at the marker's indentation (the
  checker cell that follows then tells the student the exercise is not done yet), and every block
  from ``### BEGIN HIDDEN TESTS`` to ``### END HIDDEN TESTS`` goes, markers included;
* a written question's answer cell (a markdown cell starting ``**Model answer** (N points, graded by
  hand)``) becomes ``YOUR ANSWER HERE``.

    python tools/make_student.py notebooks build/student
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

from sync_workbook import WRITTEN

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
TEXT_STUB = "YOUR ANSWER HERE"  # nbgrader's ClearSolutions.text_stub


def _replace_blocks(source: str, begin: str, end: str, stub: list[str], *, exact: bool, where: str) -> str:
    """``source`` with each ``begin`` ... ``end`` block (markers included) replaced by ``stub``, indented
    as its ``begin`` line. ``exact``: a marker is the whole stripped line, else any line holding it.
    A cell's last newline stays (not splitlines()), as in nbgrader's release."""
    def is_marker(line: str, marker: str) -> bool:
        return line.strip() == marker if exact else marker in line

    out: list[str] = []
    inside = False
    for line in source.split("\n"):
        if is_marker(line, begin):
            if inside:
                raise ValueError(f"{where}: nested {begin}")
            inside = True
            indent = line[: len(line) - len(line.lstrip())]
            out += [indent + text for text in stub]
        elif is_marker(line, end):
            if not inside:
                raise ValueError(f"{where}: {end} without {begin}")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError(f"{where}: {begin} without {end}")
    return "\n".join(out)


def strip_solutions(source: str, where: str = "cell") -> str:
    """``source`` with each marked solution block replaced by the stub."""
    return _replace_blocks(source, BEGIN, END, ["# YOUR CODE HERE", "raise NotImplementedError()"],
                           exact=True, where=where)


def strip_hidden_tests(source: str, where: str = "cell") -> str:
    """``source`` without its ``### BEGIN HIDDEN TESTS`` ... ``### END HIDDEN TESTS`` blocks (markers
    included), as nbgrader's release has it."""
    return _replace_blocks(source, BEGIN_HIDDEN, END_HIDDEN, [], exact=False, where=where)


def student_cells(nb, name: str = "notebook"):
    """``nb`` as students get it (changed in place and returned)."""
    for index, cell in enumerate(nb.cells):
        where = f"{name} cell {index}"
        if cell.cell_type == "markdown" and WRITTEN.match(cell.source):
            cell.source = TEXT_STUB
        if cell.cell_type != "code":
            continue
        cell.source = strip_solutions(strip_hidden_tests(cell.source, where), where=where)
        cell.outputs = []
        cell.execution_count = None
    return nb


def student_notebook(path: Path):
    return student_cells(nbformat.read(path, as_version=4), path.name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="folder with the teacher notebooks")
    parser.add_argument("target", type=Path, help="folder for the student copies")
    args = parser.parse_args(argv)
    notebooks = sorted(args.source.glob("[0-9][0-9]_*.ipynb"))
    if not notebooks:
        raise SystemExit(f"no notebooks found in {args.source}")
    args.target.mkdir(parents=True, exist_ok=True)
    for path in notebooks:
        nbformat.write(student_notebook(path), args.target / path.name)
        print(f"student copy: {args.target / path.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
