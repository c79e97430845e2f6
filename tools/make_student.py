#!/usr/bin/env python3
"""Write student copies of the notebooks: solutions removed, outputs cleared.

In code cells, every block from a ``### BEGIN SOLUTION`` line to its ``### END SOLUTION`` line
(nbgrader's markers) becomes ``# YOUR CODE HERE`` + ``raise NotImplementedError()`` at the
marker's indentation. The checker cell that follows then tells the student the exercise is not
done yet, without revealing anything.

    python tools/make_student.py notebooks build/student
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"


def strip_solutions(source: str, where: str = "cell") -> str:
    """``source`` with each marked solution block replaced by the stub."""
    out: list[str] = []
    inside = False
    for line in source.splitlines():
        stripped = line.strip()
        if stripped == BEGIN:
            if inside:
                raise ValueError(f"{where}: nested {BEGIN}")
            inside = True
            indent = line[: len(line) - len(line.lstrip())]
            out += [f"{indent}# YOUR CODE HERE", f"{indent}raise NotImplementedError()"]
        elif stripped == END:
            if not inside:
                raise ValueError(f"{where}: {END} without {BEGIN}")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError(f"{where}: {BEGIN} without {END}")
    return "\n".join(out)


def student_notebook(path: Path):
    nb = nbformat.read(path, as_version=4)
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        cell.source = strip_solutions(cell.source, where=f"{path.name} cell {index}")
        cell.outputs = []
        cell.execution_count = None
    return nb


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
