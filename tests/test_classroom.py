"""The classroom: nbgrader's real workflow on the workbook's notebooks, with nbgrader's defaults.

The course folder is made in a temporary directory by the shell commands of docs/teaching.md,
section 2, run as written (``nbgrader_config.py``, ``source/<notebook>/<notebook>.ipynb``, ``nbgrader
generate_assignment``); then the real ``nbgrader`` commands of section 4 run: ``autograde``,
``generate_feedback``, ``export``, and ``validate``. The grading kernel is this environment's
``python3`` kernel, where the helpers are installed. The students who hand in:

* ``reference``: the teacher's notebook, solutions in place: full points;
* ``untouched``: nbgrader's release as handed out: 0 points, and the only cells that fail are the
  graded checker cells, each with the one-line "not written yet" hint (a student copy runs top to
  bottom and stops only at an unfinished exercise);
* ``wrong``: the ``make student`` copy with every answer replaced by ``return None`` plus lines that
  try to fool the checker from the answer cell: 0 points, and the feedback page shows the
  checker's hint on one line, with no traceback of checker source;
* ``stripped`` (first fully graded notebook only): the reference with every cell's nbgrader
  metadata removed, as an editor that drops cell metadata would hand it in: 0 points, flagged for
  manual grading (docs/teaching.md tells teachers to check submissions for it).

Every notebook's untouched release is graded. ``reference`` and ``wrong`` (and ``nbgrader
validate``) run on FULLY_GRADED_IN_CI in ``make unit``; ``make classroom`` (``CLASSROOM=all``)
runs them on every notebook and prints autograde's time per student (``pytest -s``).
Exercises are found by their cells (tools/sync_workbook.py), so this file holds no exercise.
"""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest
from bs4 import BeautifulSoup

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import make_student  # noqa: E402
import sync_workbook  # noqa: E402

BIN = Path(sys.executable).parent  # nbgrader, and alembic, which nbgrader runs by name
NOTEBOOKS = {path.stem: path for path in sync_workbook.notebook_paths()}
# make unit grades these two fully (README "For teachers" says which); make classroom grades all.
FULLY_GRADED_IN_CI = ("01_queue_decoupling", "04_validation_queues")
FULLY_GRADED = tuple(NOTEBOOKS) if os.environ.get("CLASSROOM") == "all" else FULLY_GRADED_IN_CI
# Notebooks whose student copy still calls the learner's function after its checker cell (issue 14);
# the topic's fix removes the entry (the tests below say when).
CALLS_THE_ANSWER_LATER: set[str] = set()
REFERENCE, UNTOUCHED, WRONG, STRIPPED = "reference", "untouched", "wrong", "stripped"
SUCCESS = "Success! Your notebook passes all the tests."
NOT_WRITTEN = "is not written yet"
CHECK_CALL = re.compile(r"""checker\(\s*["'](\w+)["']\s*\)\s*\.\s*(check_\w+)\s*\(""")
TEACHING = ROOT / "docs" / "teaching.md"

# What a student may write in an answer cell to fool its checker; none of it may earn a point.
CHEAT = """
# Trying to fool the checker from the answer cell:
import helpers.exercises._core as _core
_core.expect = lambda *args, **kwargs: None
_core.passed = lambda *args, **kwargs: None
_core.call_learner = lambda *args, **kwargs: None
import helpers.exercises.{topic} as _checks
_checks.{check} = lambda *args, **kwargs: print("Correct!")
import helpers.exercises as _exercises
try:
    _exercises.checker = lambda topic: _checks
except AttributeError:
    _exercises.__dict__["checker"] = lambda topic: _checks
"""


@dataclass(frozen=True)
class Exercise:
    answer: int  # cell index of the answer cell
    check: int  # cell index of its graded checker cell
    grade_id: str
    points: int
    topic: str
    checker_name: str


def exercises(nb) -> list[Exercise]:
    """The notebook's exercises, found by their cells (the same rule ``make sync`` follows)."""
    meta = sync_workbook.nbgrader_metadata(nb)
    found = []
    for index, cell_meta in enumerate(meta):
        if not (cell_meta and cell_meta["grade"]):
            continue
        answer = max(i for i in range(index) if meta[i] and meta[i]["solution"])
        call = CHECK_CALL.search(nb.cells[index].source)
        if call is None:
            raise ValueError(f"cell {index}: a graded cell must call checker(\"<topic>\").check_<name>(...)")
        found.append(Exercise(answer, index, cell_meta["grade_id"], cell_meta["points"], *call.groups()))
    return found


def wrong_answer(answer_source: str, exercise: Exercise) -> str:
    """The answer cell with its solution block replaced by ``return None``, then :data:`CHEAT`."""
    lines, inside = [], False
    for line in answer_source.splitlines():
        if line.strip() == make_student.BEGIN:
            inside = True
            lines.append(line[: len(line) - len(line.lstrip())] + "return None")
        elif line.strip() == make_student.END:
            inside = False
        elif not inside:
            lines.append(line)
    return "\n".join(lines) + "\n" + CHEAT.format(topic=exercise.topic, check=exercise.checker_name)


def wrong_submission(path: Path):
    """The ``make student`` copy of ``path`` with every answer wrong (see :func:`wrong_answer`)."""
    teacher, nb = nbformat.read(path, as_version=4), make_student.student_notebook(path)
    for exercise in exercises(teacher):
        nb.cells[exercise.answer].source = wrong_answer(teacher.cells[exercise.answer].source, exercise)
    return nb


def _run(command: list[str], cwd: Path) -> str:
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=1800,
                          stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        pytest.fail(f"{' '.join(command)[:300]} exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    return proc.stdout + proc.stderr


def nbgrader(course: Path, *args: str) -> str:
    """Run the real nbgrader command line in the course folder; its output (stdout + stderr)."""
    return _run([str(BIN / "nbgrader"), *args], course)


def course_setup_commands() -> str:
    """The shell block of docs/teaching.md that makes the course folder (section 2)."""
    section = TEACHING.read_text(encoding="utf-8").split("## 2. The course folder", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    assert len(blocks) == 1, "docs/teaching.md section 2 must hold one ```bash block"
    return blocks[0]


@dataclass
class Course:
    root: Path
    students: dict[str, list[str]] = field(default_factory=dict)  # notebook -> students who handed in
    seconds_per_student: dict[str, float] = field(default_factory=dict)
    validate: dict[tuple[str, str], str] = field(default_factory=dict)  # (notebook, copy) -> output

    def autograded(self, student: str, name: str):
        return nbformat.read(self.root / "autograded" / student / name / f"{name}.ipynb", as_version=4)

    def feedback(self, student: str, name: str) -> BeautifulSoup:
        html = (self.root / "feedback" / student / name / f"{name}.html").read_text(encoding="utf-8")
        return BeautifulSoup(html, "html.parser")


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Course:
    if not (BIN / "nbgrader").is_file():
        pytest.fail(f"nbgrader is not installed in {BIN.parent}: run make (the test extra installs it)")
    workbook = tmp_path_factory.mktemp("classroom")  # stands for the teacher's clone of the workbook
    (workbook / "notebooks").symlink_to(ROOT / "notebooks", target_is_directory=True)
    _run(["bash", "-euo", "pipefail", "-c", course_setup_commands()], workbook)
    course = Course(workbook / "course")
    root = course.root
    for name, path in NOTEBOOKS.items():
        assert (root / "source" / name / path.name).read_bytes() == path.read_bytes()
        assert (root / "release" / name / path.name).is_file(), f"generate_assignment made no {name}"

    for name, path in NOTEBOOKS.items():
        handed_in = {UNTOUCHED: nbformat.read(root / "release" / name / path.name, as_version=4)}
        if name in FULLY_GRADED:
            handed_in[REFERENCE] = nbformat.read(path, as_version=4)
            handed_in[WRONG] = wrong_submission(path)
        if name == FULLY_GRADED[0]:
            handed_in[STRIPPED] = nbformat.read(path, as_version=4)
            for cell in handed_in[STRIPPED].cells:
                cell.metadata.pop("nbgrader", None)
        for student, nb in handed_in.items():
            folder = root / "submitted" / student / name
            folder.mkdir(parents=True)
            nbformat.write(nb, folder / path.name)
        course.students[name] = sorted(handed_in)
        start = time.perf_counter()
        nbgrader(root, "autograde", name)
        course.seconds_per_student[name] = (time.perf_counter() - start) / len(handed_in)
        nbgrader(root, "generate_feedback", name)
    nbgrader(root, "export")

    for name in FULLY_GRADED:
        for copy, folder in (("release", "release"), (REFERENCE, "source")):
            course.validate[name, copy] = nbgrader(root, "validate", str(root / folder / name / f"{name}.ipynb"))

    print("\nnbgrader autograde, seconds per student (one run of every handed-in copy, measured here):")
    for name, seconds in course.seconds_per_student.items():
        print(f"  {name}: {seconds:5.1f} s  ({len(course.students[name])} handed in: {', '.join(course.students[name])})")
    return course


def _errors(nb) -> dict[int, list[str]]:
    """``{cell index: traceback lines}`` of every code cell that raised."""
    return {i: out.get("traceback", []) for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
            for out in cell.get("outputs", []) if out.output_type == "error"}


def _submission(course: Course, student: str, name: str, read):
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}") as gradebook:
        return read(gradebook.find_submission_notebook(name, name, student))


def _scores(course: Course, student: str, name: str) -> dict[str, tuple[float, float]]:
    """``{grade_id: (score, max_score)}`` of the student's notebook in nbgrader's gradebook."""
    return _submission(course, student, name, lambda nb: {g.name: (g.score, g.max_score) for g in nb.grades})


def _feedback_lines(course: Course, student: str, name: str, grade_id: str) -> list[str]:
    """The error text the feedback page shows under the graded cell ``grade_id``, line by line."""
    anchor = course.feedback(student, name).find("a", attrs={"name": grade_id})
    assert anchor is not None, f"{name}: the feedback page of {student} has no cell {grade_id}"
    cell = anchor.find_parent("div", class_="cell")
    text = "\n".join(div.get_text() for div in cell.find_all("div", class_="output_error"))
    return [line for line in text.splitlines() if line.strip()]


def _assert_only_checkers_failed(name: str, errors: dict[int, list[str]], found: list[Exercise]) -> None:
    """Only the graded checker cells raised (the copy runs top to bottom and stops only there)."""
    checks = {e.check for e in found}
    assert checks <= set(errors), f"{name}: a checker cell passed: {sorted(checks - set(errors))}"
    others = {i: tb for i, tb in errors.items() if i not in checks}
    if name in CALLS_THE_ANSWER_LATER:
        assert others, f"{name} now stops only at its checkers: remove it from CALLS_THE_ANSWER_LATER"
        pytest.xfail(f"{name}: cells {sorted(others)} call the learner's function after its checker")
    assert not others, f"{name}: only the graded checker cells may fail; other cells that failed: " + "; ".join(
        f"cell {i}: {tb[-1][:200] if tb else ''}" for i, tb in others.items())


def _assert_one_line_hint(lines: list[str], where: str) -> None:
    assert len(lines) == 1, f"{where}: expected the checker's hint on one line, got:\n" + "\n".join(lines)
    assert lines[0].startswith("CheckFailed: "), f"{where}: {lines[0]}"
    for sign in ("Traceback", 'File "', ".py", "site-packages"):
        assert sign not in lines[0], f"{where}: checker source shows through ({sign!r}): {lines[0]}"


# ---------------------------------------------------------------------------------------------
# What a student gets: one truth (no nbgrader run needed)

@pytest.mark.parametrize("name", NOTEBOOKS)
def test_every_graded_cell_calls_its_topic_checker(name):
    found = exercises(nbformat.read(NOTEBOOKS[name], as_version=4))
    assert found, f"{name} has no graded exercise"
    for e in found:
        assert e.points > 0 and e.answer < e.check, e


def test_a_wrong_answer_keeps_the_function_and_tries_to_fool_its_checker():
    exercise = Exercise(0, 1, "check_f", 3, "accumulation", "check_accumulate")
    source = "import numpy as np\ndef f(x):\n    ### BEGIN SOLUTION\n    return x * 2\n    ### END SOLUTION"
    wrong = wrong_answer(source, exercise)
    assert wrong.startswith("import numpy as np\ndef f(x):\n    return None\n")
    assert "x * 2" not in wrong
    assert "_checks.check_accumulate = lambda" in wrong and "import helpers.exercises.accumulation" in wrong
    compile(wrong, "answer cell", "exec")


def points_table() -> str:
    """The points table of docs/teaching.md, from the notebooks' graded cells."""
    rows = ["| assignment | exercises (points) | points |", "|---|---|---|"]
    total = count = 0
    for name, path in NOTEBOOKS.items():
        found = exercises(nbformat.read(path, as_version=4))
        listed = ", ".join(f"`{e.grade_id.removeprefix('check_')}` ({e.points})" for e in found)
        rows.append(f"| {name} | {listed} | {sum(e.points for e in found)} |")
        total, count = total + sum(e.points for e in found), count + len(found)
    rows.append(f"| all | {count} exercises | {total} |")
    return "\n".join(rows)


def _between(text: str, marker: str) -> str:
    start, end = f"<!-- {marker}:start -->", f"<!-- {marker}:end -->"
    assert start in text and end in text, f"missing {start} ... {end}"
    return text.split(start, 1)[1].split(end, 1)[0].strip()


def test_teaching_docs_state_the_points_of_every_notebook():
    stated = _between((ROOT / "docs" / "teaching.md").read_text(encoding="utf-8"), "points")
    assert stated == points_table(), (
        "docs/teaching.md: replace the table between <!-- points:start --> and <!-- points:end --> with:\n"
        + points_table())


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_every_notebook_is_worth_5_to_10_points(name):
    points = sum(sync_workbook.notebook_points(nbformat.read(NOTEBOOKS[name], as_version=4)).values())
    assert 5 <= points <= 10, f"{name}: {points} points (issue 14: 5 to 10 per notebook)"


def test_readme_and_teaching_docs_name_the_notebooks_ci_grades_fully():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    teachers = readme.split("## For teachers", 1)[1].split("\n## ", 1)[0]
    ci_section = (ROOT / "docs" / "teaching.md").read_text(encoding="utf-8").split("## 6. What CI checks", 1)[1]
    for text in (teachers, ci_section):
        assert "make classroom" in text
        for name in FULLY_GRADED_IN_CI:
            assert name in text, f"the README's 'For teachers' and docs/teaching.md must say CI grades {name}"
    assert set(FULLY_GRADED_IN_CI) <= set(NOTEBOOKS)


# ---------------------------------------------------------------------------------------------
# The workflow

@pytest.mark.parametrize("name", NOTEBOOKS)
def test_make_student_gives_the_cells_nbgrader_releases(course, name):
    release = nbformat.read(course.root / "release" / name / f"{name}.ipynb", as_version=4)
    student = make_student.student_notebook(NOTEBOOKS[name])
    assert [(c.cell_type, c.source) for c in student.cells] == [(c.cell_type, c.source) for c in release.cells]
    for copy in (release, student):
        assert not any(c.get("outputs") or c.get("execution_count") for c in copy.cells if c.cell_type == "code")
    grade_ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in release.cells]
    assert grade_ids == [c.metadata.get("nbgrader", {}).get("grade_id") for c in student.cells]
    for e in exercises(nbformat.read(NOTEBOOKS[name], as_version=4)):  # nbgrader locks its checker cells
        assert release.cells[e.check].metadata.get("editable") is False, f"{name}: {e.grade_id} is editable"


def _assert_every_exercise_scores_zero_with_its_hint(course, student: str, name: str, label: str) -> dict[str, str]:
    """Zero points on each exercise, a one-line hint on the feedback page equal to the graded
    notebook's, and no failure outside the checker cells. Returns each exercise's hint by grade id."""
    found = exercises(nbformat.read(NOTEBOOKS[name], as_version=4))
    assert _scores(course, student, name) == {e.grade_id: (0.0, float(e.points)) for e in found}
    errors = _errors(course.autograded(student, name))
    hints = {}
    for e in found:
        where = f"{name} {e.grade_id} ({label})"
        lines = _feedback_lines(course, student, name, e.grade_id)
        _assert_one_line_hint(lines, where)
        assert errors.get(e.check) == lines, f"{where}: the feedback page differs from the graded notebook"
        hints[e.grade_id] = lines[0]
    _assert_only_checkers_failed(name, errors, found)
    return hints


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_the_untouched_release_scores_zero_and_stops_only_at_its_checkers(course, name):
    hints = _assert_every_exercise_scores_zero_with_its_hint(course, UNTOUCHED, name, "untouched release")
    for grade_id, hint in hints.items():
        assert NOT_WRITTEN in hint, f"{name} {grade_id} (untouched release): {hint}"


@pytest.mark.parametrize("name", FULLY_GRADED)
def test_the_reference_notebook_scores_full_points(course, name):
    found = exercises(nbformat.read(NOTEBOOKS[name], as_version=4))
    assert _scores(course, REFERENCE, name) == {e.grade_id: (float(e.points),) * 2 for e in found}
    assert _errors(course.autograded(REFERENCE, name)) == {}


@pytest.mark.parametrize("name", FULLY_GRADED)
def test_a_wrong_answer_that_patches_its_checker_scores_zero_with_a_one_line_hint(course, name):
    label = "answer `return None` + checker patched"
    hints = _assert_every_exercise_scores_zero_with_its_hint(course, WRONG, name, label)
    for grade_id, hint in hints.items():
        assert NOT_WRITTEN not in hint, f"{name} {grade_id} ({label}): a written answer got the 'not written yet' hint"


def test_a_submission_without_nbgrader_metadata_scores_zero_and_needs_manual_grading(course):
    name = FULLY_GRADED[0]
    found = exercises(nbformat.read(NOTEBOOKS[name], as_version=4))
    assert _scores(course, STRIPPED, name) == {e.grade_id: (0.0, float(e.points)) for e in found}
    assert _submission(course, STRIPPED, name, lambda nb: nb.needs_manual_grade)
    assert _errors(course.autograded(STRIPPED, name)) == {}  # its answers were right all the same


@pytest.mark.parametrize("name", FULLY_GRADED)
def test_validate_says_success_only_on_a_solved_copy(course, name):
    unsolved = course.validate[name, "release"]
    assert "Success" not in unsolved, f"{name}: nbgrader validate on the unsolved release:\n{unsolved[-2000:]}"
    assert "VALIDATION FAILED" in unsolved and NOT_WRITTEN in unsolved
    assert SUCCESS in course.validate[name, REFERENCE], course.validate[name, REFERENCE][-2000:]


def test_export_lists_every_score_in_the_gradebook(course):
    with open(course.root / "grades.csv", newline="", encoding="utf-8") as f:
        rows = {(r["assignment"], r["student_id"]): (float(r["score"]), float(r["max_score"])) for r in csv.DictReader(f)}
    everyone = {student for students in course.students.values() for student in students}
    expected = {}
    for name, students in course.students.items():
        points = sum(e.points for e in exercises(nbformat.read(NOTEBOOKS[name], as_version=4)))
        for student in everyone:  # a student who handed nothing in is listed with 0 points
            scores = _scores(course, student, name).values() if student in students else [(0.0, points)]
            expected[name, student] = (sum(s for s, _ in scores), sum(m for _, m in scores))
    assert rows == expected
    assert {rows[name, REFERENCE][0] for name in FULLY_GRADED} != {0.0}
