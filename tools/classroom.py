#!/usr/bin/env python3
"""The teacher's side of the workbook: the course folder, hidden tests, written questions.

* ``course FOLDER`` (``make course``): makes or updates an nbgrader course folder. The first run writes
  ``nbgrader_config.py`` (course id, and a grading seed drawn now, which the grading kernel inherits
  as ``WORKBOOK_GRADING_SEED``); every run copies each notebook to ``source/<name>/<name>.ipynb`` with
  its hidden tests written into its grade cells, and has ``nbgrader generate_assignment`` write the
  release when the source changed. A second run changes nothing that exists: not the seed, not
  ``submitted/``, ``autograded/``, ``feedback/`` or ``gradebook.db``.
* ``insert-written NOTEBOOK ...``: puts the notebook's written question
  (``classroom/written/<name>.md``: the question cell, ``<!-- cell -->``, the model-answer cell) in
  front of its "## Takeaways" cell, or rewrites it where it already is.

The hidden tests (``classroom/hidden/<name>/<exercise>.py``) go into the course's source only: the
committed notebooks are what self-learners read, and the hidden tests are grading code.

    python tools/classroom.py course course
    python tools/classroom.py insert-written notebooks/01_queue_decoupling.ipynb
"""

from __future__ import annotations

import argparse
import hashlib
import os
import secrets
import subprocess
import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sync_workbook  # noqa: E402
from make_student import BEGIN_HIDDEN, END_HIDDEN, strip_hidden_tests  # noqa: E402

ROOT = sync_workbook.ROOT
WRITTEN_DIR = ROOT / "classroom" / "written"
CELL_BREAK = "<!-- cell -->"
COURSE_ID = "tf-pipelines-workbook"
SEED_VARIABLE = "WORKBOOK_GRADING_SEED"
TIMEOUT = 300  # seconds per cell: a right answer must not score 0 because the grading machine is busy
SETUP_MARK = "runtime.setup("
YOUR_TURN, TAKEAWAYS = "## Your turn", "## Takeaways"


def hidden_test(stem: str, exercise: str) -> tuple[int, str]:
    """``(points, code)`` of the exercise's hidden test: the code is the file after its first line."""
    path = sync_workbook.hidden_test_path(stem, exercise)
    if not path.is_file():
        raise ValueError(f"{stem}: exercise {exercise!r} has no hidden test ({sync_workbook.shown(path)})")
    code = path.read_text(encoding="utf-8").split("\n", 1)[1].strip("\n")
    for marker in (BEGIN_HIDDEN, END_HIDDEN, "BEGIN SOLUTION", "END SOLUTION"):
        if marker.removeprefix("### ") in code:
            raise ValueError(f"{sync_workbook.shown(path)} must not contain {marker!r}")
    return sync_workbook.hidden_points(path), code


def with_hidden_tests(nb, stem: str):
    """``nb`` with each grade cell's hidden test written after its visible check, between nbgrader's
    markers (replacing any there). Refuses a notebook whose points differ from its hidden tests'."""
    for i, meta in enumerate(sync_workbook.nbgrader_metadata(nb, stem)):
        if not (meta and meta["grade"] and meta["grade_id"].startswith("check_")):
            continue
        points, code = hidden_test(stem, meta["grade_id"].removeprefix("check_"))
        if meta["points"] != points:
            raise ValueError(f"{stem}: {meta['grade_id']} is worth {meta['points']} points in the notebook but its "
                             f"hidden test gives {points}: run `make sync`")
        visible = strip_hidden_tests(nb.cells[i].source, f"{stem} cell {i}").rstrip("\n")
        nb.cells[i].source = f"{visible}\n{BEGIN_HIDDEN}\n{code}\n{END_HIDDEN}"
    return nb


def course_notebook(path: Path):
    """The notebook at ``path`` as the course's source holds it: as ``make sync`` writes it (points
    and nbgrader metadata from the cells and the hidden tests), with the hidden tests in its grade
    cells; outputs as committed."""
    return with_hidden_tests(sync_workbook.synced_notebook(path), path.stem)


def exercises_only(nb):
    """A copy of ``nb`` with only its setup cell and its "## Your turn" section (to the next "## "
    heading): an assignment that grades the exercises without the teaching cells."""
    cells = nb.cells
    setup = [i for i, c in enumerate(cells) if c.cell_type == "code" and SETUP_MARK in c.source]
    start = next((i for i, c in enumerate(cells) if c.cell_type == "markdown" and YOUR_TURN in c.source), None)
    if not setup or start is None:
        raise ValueError(f"the notebook needs a setup cell (calling {SETUP_MARK}...) and a {YOUR_TURN!r} section")
    end = next((i for i in range(start + 1, len(cells))
                if cells[i].cell_type == "markdown" and cells[i].source.startswith("## ")), len(cells))
    copy = nbformat.from_dict(nb)
    copy.cells = [copy.cells[setup[0]]] + copy.cells[start:end]
    return copy


def written_cells(stem: str) -> tuple[str, str]:
    """(question, model answer) of the notebook's written question."""
    path = WRITTEN_DIR / f"{stem}.md"
    parts = [part.strip("\n") for part in path.read_text(encoding="utf-8").split(CELL_BREAK)]
    if len(parts) != 2 or not sync_workbook.WRITTEN.match(parts[1]):
        raise ValueError(f"{sync_workbook.shown(path)}: the question, a {CELL_BREAK!r} line, then the answer cell "
                         "starting '**Model answer** (N points, graded by hand)'")
    return parts[0], parts[1]


def with_written_question(nb, stem: str):
    """``nb`` with its written question in front of "## Takeaways" (or rewritten where it is)."""
    question, answer = written_cells(stem)
    at = next((i for i, c in enumerate(nb.cells)
               if c.cell_type == "markdown" and sync_workbook.WRITTEN.match(c.source)), None)
    if at is not None:
        nb.cells[at - 1].source, nb.cells[at].source = question, answer
    else:
        before = next((i for i, c in enumerate(nb.cells)
                       if c.cell_type == "markdown" and c.source.startswith(TAKEAWAYS)), None)
        if before is None:
            raise ValueError(f"{stem}: no {TAKEAWAYS!r} cell to put the written question in front of")
        nb.cells[before:before] = [nbformat.v4.new_markdown_cell(question), nbformat.v4.new_markdown_cell(answer)]
    return sync_workbook.with_nbgrader_metadata(nb, stem)


# --------------------------------------------------------------------------- the course folder


def config_text(seed: int) -> str:
    return f'''# nbgrader's configuration of this course, written by `make course` (tools/classroom.py).
import os

c = get_config()
c.CourseDirectory.course_id = "{COURSE_ID}"
# The hidden tests draw their cases from this seed (the grading kernel inherits it). Keep it to
# reproduce the grades; change it (or set {SEED_VARIABLE} before grading) for new hidden cases.
os.environ.setdefault("{SEED_VARIABLE}", "{seed}")
# A right answer must not score 0 because the grading machine is busy (nbgrader's default: 30 s).
c.Execute.timeout = {TIMEOUT}
# Grading runs the setup cell, the exercises and the cells they use, not the teaching cells (the
# feedback page shows those without outputs): helpers.exercises.grading_cells. Delete these three
# lines to run every cell.
from helpers.exercises.grading_cells import SkipTeachingCells
from nbgrader.converters.autograde import Autograde
c.Autograde.autograde_preprocessors = [SkipTeachingCells] + Autograde.class_traits()["autograde_preprocessors"].default()
'''


def _nbgrader(course: Path, *args: str) -> None:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    subprocess.run([str(Path(sys.executable).parent / "nbgrader"), *args, "--log-level=WARN"], cwd=course, env=env,
                   check=True)


def _digest(nb) -> str:
    return hashlib.sha256(nbformat.writes(nb).encode()).hexdigest()


def build_course(course: Path, notebooks: list[Path], seed: int | None = None) -> list[str]:
    """Make or update the course folder; the assignments whose release was (re)generated."""
    course.mkdir(parents=True, exist_ok=True)
    config = course / "nbgrader_config.py"
    if not config.exists():
        config.write_text(config_text(secrets.randbelow(2**31) if seed is None else seed), encoding="utf-8")
    generated = []
    for path in notebooks:
        name = path.stem
        source = course / "source" / name / path.name
        nb = course_notebook(path)
        if source.is_file() and (course / "release" / name / path.name).is_file() and \
                _digest(nbformat.read(source, as_version=4)) == _digest(nb):
            continue
        source.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, source)
        _nbgrader(course, "generate_assignment", name, "--force")
        generated.append(name)
    return generated


def next_steps(course: Path, notebooks: list[Path]) -> str:
    names = [p.stem for p in notebooks]
    return "\n".join([
        f"Course folder: {course}",
        f"  hand out:     {course}/release/<assignment>/<assignment>.ipynb",
        f"  collect into: {course}/submitted/<student_id>/<assignment>/<assignment>.ipynb",
        f"  assignments:  {', '.join(names)}",
        "Then grade, from the course folder, with this workbook's .venv on the PATH:",
        f'  cd {course} && export PATH="{Path(sys.executable).parent}:$PATH"',
        "  nbgrader autograde <assignment> && nbgrader generate_feedback <assignment> && nbgrader export",
        "Written questions are graded by hand: nbgrader formgrader, or docs/instructor.md's rubrics.",
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    course = commands.add_parser("course", help="make or update the nbgrader course folder")
    course.add_argument("folder", type=Path)
    course.add_argument("--notebooks", type=Path, default=sync_workbook.NOTEBOOKS)
    course.add_argument("--seed", type=int, default=None, help="the grading seed of a new course (default: random)")
    insert = commands.add_parser("insert-written", help="put each notebook's written question in")
    insert.add_argument("notebooks", type=Path, nargs="+")
    args = parser.parse_args(argv)
    if args.command == "insert-written":
        for path in args.notebooks:
            nbformat.write(with_written_question(nbformat.read(path, as_version=4), path.stem), path)
            print(f"written question: {path}")
        return 0
    notebooks = sorted(args.notebooks.glob("[0-9][0-9]_*.ipynb"))
    if not notebooks:
        raise SystemExit(f"no notebooks in {args.notebooks}")
    generated = build_course(args.folder.resolve(), notebooks, args.seed)
    print(f"generated: {', '.join(generated) or 'nothing (every release is up to date)'}")
    print(next_steps(args.folder.resolve(), notebooks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
