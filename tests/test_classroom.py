"""The classroom: nbgrader's real workflow on the workbook's notebooks, hidden tests included.

A temporary folder stands for the teacher's clone of the workbook: its notebooks are this
checkout's, as ``make sync`` writes them, each with its written question inserted
(``tools/classroom.py insert-written``, as the committed notebooks will have it); the Makefile,
``tools/`` and ``classroom/`` are this checkout's, and so is the ``.venv`` (the grading kernel's
``python3``, where the helpers are installed). In it:

1. the teacher's block of docs/teaching.md, section 2, runs as written: ``make course`` (config with
   a grading seed, sources with hidden tests, releases), the teacher's own notebook handed in as
   student ``demo`` for 01, ``nbgrader autograde``, ``generate_feedback`` and ``export``;
2. for every notebook, the full assignment is graded for ``demo`` (the teacher's notebook: full
   points, its written answer left to the teacher) and ``untouched`` (the release as handed out: 0
   points, only the grade cells fail, each with a one-line hint); the time per student is printed;
3. an assignment ``exercises`` holds every notebook's exercises only (its setup cell and its "Your
   turn" section, from the same course source); one student per kind of wrong answer in
   ``tests/classroom_answers/<notebook>/<kind>.py`` (a hard-coded visible answer that also tries
   to patch the checkers, a dodge of the rule, a plausible mistake, a partial answer) hands in
   all five: each exercise scores exactly its ``POINTS``, zero with a one-line hint;
4. the release holds no hidden test, the grading kernel draws the course's seed, ``make course``
   run again changes nothing (and after a notebook changed, keeps every submission and grade),
   ``nbgrader validate`` and a submission without metadata behave as docs/teaching.md says.

Exercises are found by their cells (tools/sync_workbook.py), so this file names none.
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from contextlib import redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest
from bs4 import BeautifulSoup

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import classroom  # noqa: E402
import make_student  # noqa: E402
import sync_workbook  # noqa: E402

from tests import notebook_answers  # noqa: E402

BIN = Path(sys.executable).parent  # nbgrader, and alembic, which nbgrader runs by name
NOTEBOOKS = {path.stem: path for path in sync_workbook.notebook_paths()}
DEMO, UNTOUCHED, STRIPPED = "demo", "untouched", "stripped"
KINDS = notebook_answers.KINDS
EXERCISES = "exercises"  # the assignment of every notebook's exercises only
SUCCESS = "Success! Your notebook passes all the tests."
NOT_WRITTEN = "is not written yet"
CHECK_CALL = re.compile(r"""checker\(\s*["'](\w+)["']\s*\)\s*\.\s*(check_\w+)\s*\(""")
TEACHING = ROOT / "docs" / "teaching.md"
# The helper modules the notebooks' setup cells import, for running answers here.
TOPIC_NAMES = {"01_queue_decoupling": ("decoupling", "molecules"), "03_batch_iteration": ("batching",)}

# What the hard-coded answers also try, from their answer cells; none of it may earn a point.
CHEAT = """
# Trying to fool the grade cell from the answer cell:
import helpers.exercises._core as _core
_core.expect = lambda *args, **kwargs: None
_core.passed = lambda *args, **kwargs: None
_core.call_learner = lambda *args, **kwargs: None
import helpers.exercises._grading as _grading_module
_grading_module.run = lambda *args, **kwargs: 99.0
import helpers.exercises.{topic} as _checks
_checks.{check} = lambda *args, **kwargs: print("Correct!")
import helpers.exercises as _exercises
for _name, _fake in (("checker", lambda topic: _checks), ("grading", lambda *args: 99.0)):
    try:
        setattr(_exercises, _name, _fake)
    except AttributeError:
        _exercises.__dict__[_name] = _fake
"""


@dataclass(frozen=True)
class Exercise:
    answer: int  # cell index of the answer cell
    check: int  # cell index of its grade cell
    grade_id: str
    points: int
    topic: str
    checker_name: str

    @property
    def name(self) -> str:
        return self.grade_id.removeprefix("check_")


def exercises(nb) -> list[Exercise]:
    """The notebook's exercises, found by their cells (the same rule ``make sync`` follows)."""
    meta = sync_workbook.nbgrader_metadata(nb)
    found = []
    for index, cell_meta in enumerate(meta):
        if not (cell_meta and cell_meta["grade"] and cell_meta["grade_id"].startswith("check_")):
            continue
        answer = max(i for i in range(index) if meta[i] and meta[i]["solution"])
        call = CHECK_CALL.search(nb.cells[index].source)
        if call is None:
            raise ValueError(f"cell {index}: a graded cell must call checker(\"<topic>\").check_<name>(...)")
        found.append(Exercise(answer, index, cell_meta["grade_id"], cell_meta["points"], *call.groups()))
    return found


def written(nb) -> dict[str, int]:
    """``{grade_id: points}`` of the notebook's written answer cells."""
    return {m["grade_id"]: m["points"] for m in sync_workbook.nbgrader_metadata(nb) if m and m["grade"]
            and m["grade_id"].startswith("written_")}


def teacher_notebook(name: str):
    """The notebook as the teacher has it after ``make sync`` and the written question's insertion."""
    return classroom.with_written_question(sync_workbook.synced_notebook(NOTEBOOKS[name]), name)


def kind_submission(release, teacher, name: str, kind: str):
    """``release`` (a student copy) with every answer cell replaced by ``kind``'s wrong answer (the
    hard-coded ones followed by :data:`CHEAT`)."""
    nb = nbformat.from_dict(release)
    for e in exercises(teacher):
        source = notebook_answers.answer_cell_source(name, kind, e.name)
        if kind == "hardcoded":
            source += "\n" + CHEAT.format(topic=e.topic, check=e.checker_name)
        nb.cells[e.answer].source = source
    return nb


def _run(command: list[str], cwd: Path) -> str:
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    env.pop("WORKBOOK_GRADING_SEED", None)  # the course's config decides
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=3600,
                          stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        pytest.fail(f"{' '.join(command)[:300]} exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return proc.stdout + proc.stderr


def nbgrader(course: Path, *args: str) -> str:
    """Run the real nbgrader command line in the course folder; its output (stdout + stderr)."""
    return _run([str(BIN / "nbgrader"), *args], course)


def teacher_block() -> str:
    """The shell block of docs/teaching.md that a teacher pastes (section 2)."""
    section = TEACHING.read_text(encoding="utf-8").split("## 2. ", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    assert len(blocks) == 1, "docs/teaching.md section 2 must hold one ```bash block"
    return blocks[0]


def _tree_digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@dataclass
class Course:
    workbook: Path
    root: Path
    seconds_per_student: dict[str, float] = field(default_factory=dict)  # wall time
    cpu_seconds_per_student: dict[str, float] = field(default_factory=dict)  # nbgrader's and its kernels'
    students: dict[str, list[str]] = field(default_factory=dict)  # assignment -> students who handed in
    outputs: dict[str, str] = field(default_factory=dict)  # what the commands printed, by step
    before_rerun: dict[str, dict] = field(default_factory=dict)

    def autograded(self, student: str, assignment: str, notebook: str | None = None):
        path = self.root / "autograded" / student / assignment / f"{notebook or assignment}.ipynb"
        return nbformat.read(path, as_version=4)

    def feedback(self, student: str, name: str) -> BeautifulSoup:
        html = (self.root / "feedback" / student / name / f"{name}.html").read_text(encoding="utf-8")
        return BeautifulSoup(html, "html.parser")


def _make_workbook(folder: Path) -> Path:
    """A teacher's clone: this checkout's Makefile, pyproject, constraints, tools, classroom, .venv and
    src (links), and the notebooks as ``make sync`` writes them, with their written questions."""
    for item in ("Makefile", "pyproject.toml", "constraints.txt", "src", "classroom", ".venv"):
        (folder / item).symlink_to(ROOT / item)
    shutil.copytree(ROOT / "tools", folder / "tools", ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "notebooks").mkdir()
    for name, path in NOTEBOOKS.items():
        nbformat.write(teacher_notebook(name), folder / "notebooks" / path.name)
    return folder


def _hand_in(course: Course, student: str, assignment: str, nb, notebook: str | None = None) -> None:
    folder = course.root / "submitted" / student / assignment
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / f"{notebook or assignment}.ipynb")
    if student not in course.students.setdefault(assignment, []):
        course.students[assignment].append(student)


def _children_cpu_seconds() -> float:
    """CPU time of every finished child process (nbgrader, and the kernels it ran) so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _autograde(course: Course, assignment: str, graded_now: int) -> None:
    start, cpu = time.perf_counter(), _children_cpu_seconds()
    nbgrader(course.root, "autograde", assignment)
    course.seconds_per_student[assignment] = (time.perf_counter() - start) / graded_now
    course.cpu_seconds_per_student[assignment] = (_children_cpu_seconds() - cpu) / graded_now


def _cell_seconds(nb) -> dict[str, float]:
    """Where a graded notebook's time went: all its cells, the cells that time something with
    ``helpers.measure``, and the grade cells (visible checks and hidden tests)."""
    import datetime

    def seconds(cell) -> float:
        timing = cell.metadata.get("execution", {})
        if "iopub.execute_input" not in timing or "shell.execute_reply" not in timing:
            return 0.0
        start, end = (datetime.datetime.fromisoformat(timing[k].replace("Z", "+00:00"))
                      for k in ("iopub.execute_input", "shell.execute_reply"))
        return (end - start).total_seconds()

    code = [c for c in nb.cells if c.cell_type == "code"]
    return {"cells": sum(map(seconds, code)),
            "measure": sum(seconds(c) for c in code if "measure." in c.source),
            "grade": sum(seconds(c) for c in code if c.metadata.get("nbgrader", {}).get("grade"))}


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Course:
    if not (BIN / "nbgrader").is_file():
        pytest.fail(f"nbgrader is not installed in {BIN.parent}: run make (the test extra installs it)")
    workbook = _make_workbook(tmp_path_factory.mktemp("workbook"))
    course = Course(workbook, workbook / "course")
    start = time.perf_counter()
    course.outputs["teacher block"] = _run(["bash", "-euo", "pipefail", "-c", teacher_block()], workbook)
    course.outputs["teacher block seconds"] = f"{time.perf_counter() - start:.1f}"
    root = course.root
    first = next(iter(NOTEBOOKS))
    course.students[first] = [DEMO]  # handed in and graded by the teacher's block

    for name, path in NOTEBOOKS.items():  # the full notebooks
        if name != first:
            _hand_in(course, DEMO, name, nbformat.read(workbook / "notebooks" / path.name, as_version=4))
        _hand_in(course, UNTOUCHED, name, nbformat.read(root / "release" / name / path.name, as_version=4))
        _autograde(course, name, graded_now=1 if name == first else 2)
    nbgrader(root, "generate_feedback", first)  # the untouched release's page (demo's: the teacher's block)

    folder = root / "source" / EXERCISES  # every notebook's exercises, one assignment
    folder.mkdir(parents=True)
    for name, path in NOTEBOOKS.items():
        source = nbformat.read(root / "source" / name / path.name, as_version=4)
        nbformat.write(classroom.exercises_only(source), folder / path.name)
    nbgrader(root, "generate_assignment", EXERCISES)
    for name, path in NOTEBOOKS.items():
        release = nbformat.read(root / "release" / EXERCISES / path.name, as_version=4)
        teacher = classroom.exercises_only(teacher_notebook(name))
        for kind in KINDS:
            _hand_in(course, kind, EXERCISES, kind_submission(release, teacher, name, kind), name)
        if name == first:  # the teacher's answers, but an editor dropped every cell's metadata
            for cell in teacher.cells:
                cell.metadata.pop("nbgrader", None)
            _hand_in(course, STRIPPED, EXERCISES, teacher, name)
    _autograde(course, EXERCISES, graded_now=len(KINDS) * len(NOTEBOOKS) + 1)
    nbgrader(root, "export")

    last = list(NOTEBOOKS)[-1]
    solved = workbook / f"{last}.ipynb"
    nbformat.write(classroom.exercises_only(teacher_notebook(last)), solved)
    for copy, path in (("release", root / "release" / EXERCISES / f"{last}.ipynb"), ("solved", solved)):
        course.outputs[f"validate {copy}"] = nbgrader(root, "validate", str(path))

    course.before_rerun = {folder: _tree_digest(root / folder) for folder in ("submitted", "autograded", "feedback")}
    course.before_rerun["files"] = {f: (root / f).read_bytes() for f in ("nbgrader_config.py", "gradebook.db")}
    course.outputs["make course again"] = _run(["make", "-s", "course"], workbook)

    print("\nnbgrader autograde, seconds per student: wall time (this machine, shared; load average "
          f"{os.getloadavg()[0]:.1f} at the end) and CPU time, and where the teacher's notebook spent its time:")
    for name in NOTEBOOKS:
        spent = _cell_seconds(course.autograded(DEMO, name))
        print(f"  {name}: {course.seconds_per_student[name]:5.1f} s wall, {course.cpu_seconds_per_student[name]:5.1f} s "
              f"CPU  (cells {spent['cells']:.1f} s, of which timing with helpers.measure {spent['measure']:.1f} s, "
              f"grade cells {spent['grade']:.1f} s)")
    full = sum(course.seconds_per_student[name] for name in NOTEBOOKS)
    full_cpu = sum(course.cpu_seconds_per_student[name] for name in NOTEBOOKS)
    print(f"  all five full notebooks: {full:.1f} s wall, {full_cpu:.1f} s CPU per student")
    print(f"  exercises only, all five notebooks: {course.seconds_per_student[EXERCISES] * len(NOTEBOOKS):.1f} s "
          f"per student; the teacher's block took {course.outputs['teacher block seconds']} s")
    return course


def _errors(nb) -> dict[int, list[str]]:
    """``{cell index: traceback lines}`` of every code cell that raised."""
    return {i: out.get("traceback", []) for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
            for out in cell.get("outputs", []) if out.output_type == "error"}


def _result(cell) -> str | None:
    return next((out["data"]["text/plain"] for out in cell.get("outputs", []) if out.output_type == "execute_result"),
                None)


def _submission(course: Course, student: str, assignment: str, read, notebook: str | None = None):
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}") as gradebook:
        return read(gradebook.find_submission_notebook(notebook or assignment, assignment, student))


def _scores(course: Course, student: str, assignment: str, notebook: str | None = None) -> dict[str, tuple[float, float]]:
    """``{grade_id: (score, max_score)}`` of the student's notebook in nbgrader's gradebook."""
    return _submission(course, student, assignment, lambda nb: {g.name: (g.score, g.max_score) for g in nb.grades},
                       notebook)


def _feedback_lines(course: Course, student: str, name: str, grade_id: str) -> list[str]:
    """The error text the feedback page shows under the graded cell ``grade_id``, line by line."""
    anchor = course.feedback(student, name).find("a", attrs={"name": grade_id})
    assert anchor is not None, f"{name}: the feedback page of {student} has no cell {grade_id}"
    cell = anchor.find_parent("div", class_="cell")
    text = "\n".join(div.get_text() for div in cell.find_all("div", class_="output_error"))
    return [line for line in text.splitlines() if line.strip()]


def _assert_one_line_hint(lines: list[str], where: str) -> None:
    assert len(lines) == 1, f"{where}: expected the hint on one line, got:\n" + "\n".join(lines)
    assert lines[0].startswith("CheckFailed: "), f"{where}: {lines[0]}"
    for sign in ("Traceback", 'File "', ".py", "site-packages"):
        assert sign not in lines[0], f"{where}: checker source shows through ({sign!r}): {lines[0]}"


# ---------------------------------------------------------------------------------------------
# What the files say (no nbgrader run needed)

@pytest.mark.parametrize("name", NOTEBOOKS)
def test_every_graded_cell_calls_its_topic_checker_and_has_a_hidden_test_worth_its_points(name):
    nb = sync_workbook.synced_notebook(NOTEBOOKS[name])
    found = exercises(nb)
    assert found, f"{name} has no graded exercise"
    for e in found:
        assert e.points > 0 and e.answer < e.check, e
        path = sync_workbook.hidden_test_path(name, e.name)
        assert sync_workbook.hidden_points(path) == e.points
        assert path.read_text(encoding="utf-8").rstrip().endswith(f'grading("{e.name}", _hidden)'), path


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_committed_notebooks_hold_no_hidden_test(name):
    """The hidden tests go into the course's source only (docs/teaching.md says why)."""
    text = NOTEBOOKS[name].read_text(encoding="utf-8")
    assert "HIDDEN TESTS" not in text and "grading(" not in text


def test_hidden_tests_go_into_the_grade_cells_and_come_out_again():
    name = next(iter(NOTEBOOKS))
    nb = classroom.course_notebook(NOTEBOOKS[name])
    for e in exercises(nb):
        source = nb.cells[e.check].source
        assert source.count(make_student.BEGIN_HIDDEN) == 1 and source.rstrip().endswith(make_student.END_HIDDEN)
        _, code = classroom.hidden_test(name, e.name)
        assert code in source
        visible = make_student.strip_hidden_tests(source)
        assert visible == sync_workbook.synced_notebook(NOTEBOOKS[name]).cells[e.check].source
        again = classroom.with_hidden_tests(nb, name).cells[e.check].source  # idempotent
        assert again == source


def test_a_notebook_whose_points_differ_from_its_hidden_tests_is_refused():
    name = next(iter(NOTEBOOKS))
    nb = sync_workbook.synced_notebook(NOTEBOOKS[name])
    e = exercises(nb)[0]
    nb.cells[e.check].source = nb.cells[e.check].source.replace(f"# Graded: {e.points} ", f"# Graded: {e.points + 1} ")
    with pytest.raises(ValueError, match="run `make sync`"):
        classroom.with_hidden_tests(nb, name)


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_the_written_question_goes_in_front_of_the_takeaways_once(name):
    nb = teacher_notebook(name)
    question, answer = classroom.written_cells(name)
    at = [i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and c.source == answer]
    assert len(at) == 1 and nb.cells[at[0] - 1].source == question
    assert nb.cells[at[0] + 1].source.startswith(classroom.TAKEAWAYS)
    assert written(nb) == {"written_1": 2}
    again = classroom.with_written_question(nbformat.from_dict(nb), name)
    assert [c.source for c in again.cells] == [c.source for c in nb.cells]
    student = make_student.student_cells(nbformat.from_dict(nb))
    assert student.cells[at[0]].source == make_student.TEXT_STUB and student.cells[at[0] - 1].source == question


def test_a_written_answer_cell_is_a_manually_graded_solution_cell_after_its_question():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("**Written question (2 points).** Why?"),
                nbformat.v4.new_markdown_cell("**Model answer** (2 points, graded by hand)\n\nBecause.")]
    assert sync_workbook.nbgrader_metadata(nb) == [None, {
        "grade": True, "grade_id": "written_1", "locked": False, "points": 2, "schema_version": 3,
        "solution": True, "task": False}]
    nb.cells[0] = nbformat.v4.new_code_cell("x = 1")
    with pytest.raises(ValueError, match="right after its question's markdown cell"):
        sync_workbook.nbgrader_metadata(nb)


def test_a_grade_cell_gets_its_points_from_its_hidden_test_and_needs_one(tmp_path, monkeypatch):
    name = next(iter(NOTEBOOKS))
    nb = nbformat.read(NOTEBOOKS[name], as_version=4)
    e = exercises(nb)[0]
    nb.cells[e.check].source = nb.cells[e.check].source.replace(f"# Graded: {e.points} ", "# Graded: 99 ", 1)
    path = tmp_path / f"{name}.ipynb"
    nbformat.write(nb, path)
    synced = sync_workbook.synced_notebook(path)
    points = sync_workbook.hidden_points(sync_workbook.hidden_test_path(name, e.name))
    assert synced.cells[e.check].source.startswith(f"# Graded: {points} points\n")
    assert synced.cells[e.check].metadata["nbgrader"]["points"] == points
    monkeypatch.setattr(sync_workbook, "HIDDEN", tmp_path / "nowhere")
    with pytest.raises(ValueError, match=f"exercise '{e.name}' has no hidden test"):
        sync_workbook.synced_notebook(path)


def points_table() -> str:
    """The points table of docs/teaching.md, from the notebooks as ``make sync`` writes them and
    their written questions."""
    rows = ["| assignment | exercises (points) | written | points |", "|---|---|---|---|"]
    total = count = total_written = 0
    for name in NOTEBOOKS:
        nb = teacher_notebook(name)
        found, hand = exercises(nb), sum(written(nb).values())
        listed = ", ".join(f"`{e.name}` ({e.points})" for e in found)
        points = sum(e.points for e in found)
        rows.append(f"| {name} | {listed} | {hand} | {points + hand} |")
        total, count, total_written = total + points, count + len(found), total_written + hand
    rows.append(f"| all | {count} exercises: {total} | {total_written} | {total + total_written} |")
    return "\n".join(rows)


def _between(text: str, marker: str) -> str:
    start, end = f"<!-- {marker}:start -->", f"<!-- {marker}:end -->"
    assert start in text and end in text, f"missing {start} ... {end}"
    return text.split(start, 1)[1].split(end, 1)[0].strip()


def test_teaching_docs_state_the_points_of_every_notebook():
    stated = _between(TEACHING.read_text(encoding="utf-8"), "points")
    assert stated == points_table(), (
        "docs/teaching.md: replace the table between <!-- points:start --> and <!-- points:end --> with:\n"
        + points_table())


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_every_notebook_is_worth_5_to_10_autograded_points_and_a_written_question(name):
    nb = teacher_notebook(name)
    points = sum(e.points for e in exercises(nb))
    assert 5 <= points <= 10, f"{name}: {points} autograded points (5 to 10 per notebook)"
    assert sum(written(nb).values()) == 2


def test_readme_and_teaching_docs_name_make_course_and_make_classroom():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    teachers = readme.split("## For teachers", 1)[1].split("\n## ", 1)[0]
    assert "make classroom" in teachers
    # the README's block is the one the course fixture runs as written (docs/teaching.md, section 2)
    assert re.findall(r"```bash\n(.*?)```", teachers, re.S) == [teacher_block()]
    assert "make course" in teacher_block()
    ci_section = TEACHING.read_text(encoding="utf-8").split("## 7. What CI checks", 1)[1]
    assert "make classroom" in ci_section and "make course" in ci_section


# ---------------------------------------------------------------------------------------------
# The workflow

@pytest.mark.parametrize("name", NOTEBOOKS)
def test_make_student_gives_the_cells_nbgrader_releases(course, name):
    release = nbformat.read(course.root / "release" / name / f"{name}.ipynb", as_version=4)
    student = make_student.student_notebook(course.workbook / "notebooks" / f"{name}.ipynb")
    assert [(c.cell_type, c.source) for c in student.cells] == [(c.cell_type, c.source) for c in release.cells]
    for copy in (release, student):
        assert not any(c.get("outputs") or c.get("execution_count") for c in copy.cells if c.cell_type == "code")
    grade_ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in release.cells]
    assert grade_ids == [c.metadata.get("nbgrader", {}).get("grade_id") for c in student.cells]
    for e in exercises(teacher_notebook(name)):  # nbgrader locks its checker cells
        assert release.cells[e.check].metadata.get("editable") is False, f"{name}: {e.grade_id} is editable"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_the_release_holds_no_hidden_test(course, name):
    visible = "\n".join(c.source for c in teacher_notebook(name).cells)
    for assignment in (name, EXERCISES):
        source = nbformat.read(course.root / "source" / assignment / f"{name}.ipynb", as_version=4)
        release = nbformat.read(course.root / "release" / assignment / f"{name}.ipynb", as_version=4)
        released = "\n".join(c.source for c in release.cells)
        release_lines = {line.strip() for line in released.splitlines()}
        assert any(make_student.BEGIN_HIDDEN in c.source for c in source.cells)
        assert "HIDDEN TESTS" not in released
        for e in exercises(teacher_notebook(name)):
            _, code = classroom.hidden_test(name, e.name)
            distinctive = {line.strip() for line in code.splitlines() if len(line.strip()) > 25} - {
                line.strip() for line in visible.splitlines()}
            assert len(distinctive) > 5, e
            leaked = sorted(distinctive & release_lines)
            assert not leaked, f"{assignment}/{name}: the release shows hidden-test lines: {leaked[:2]}"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_the_untouched_release_scores_zero_and_stops_only_at_its_grade_cells(course, name):
    nb = teacher_notebook(name)
    found = exercises(nb)
    scores = _scores(course, UNTOUCHED, name)
    assert scores == {e.grade_id: (0.0, float(e.points)) for e in found} | {
        g: (0.0, float(p)) for g, p in written(nb).items()}
    errors = _errors(course.autograded(UNTOUCHED, name))
    for e in found:
        where = f"{name} {e.grade_id} (untouched release)"
        _assert_one_line_hint(errors.get(e.check, []), where)
        assert NOT_WRITTEN in errors[e.check][0] and errors[e.check][0].startswith(f"CheckFailed: 0 of {e.points} points: ")
        if name == next(iter(NOTEBOOKS)):  # the feedback page shows the same line
            assert _feedback_lines(course, UNTOUCHED, name, e.grade_id) == errors[e.check], where
    others = {i: tb[-1][:200] if tb else "" for i, tb in errors.items() if i not in {e.check for e in found}}
    assert not others, f"{name}: only the grade cells may fail; other cells that failed: {others}"
    assert not _submission(course, UNTOUCHED, name, lambda s: s.needs_manual_grade)  # nothing written


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_grading_runs_the_exercises_and_skips_teaching_cells(course, name):
    code = [cell for cell in course.autograded(DEMO, name).cells if cell.cell_type == "code"]
    skipped = [cell for cell in code if "skip-execution" in cell.metadata.get("tags", [])]
    assert skipped and not any(cell.outputs for cell in skipped), f"{name}: no teaching cell skipped"
    graded = [cell for cell in code if cell.metadata.get("nbgrader", {}).get("grade")]
    assert graded and all(cell.outputs for cell in graded)


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_the_teachers_notebook_scores_full_points_and_leaves_its_written_answer_to_the_teacher(course, name):
    nb = teacher_notebook(name)
    scores = _scores(course, DEMO, name)
    assert scores == {e.grade_id: (float(e.points),) * 2 for e in exercises(nb)} | {
        g: (0.0, float(p)) for g, p in written(nb).items()}
    autograded = course.autograded(DEMO, name)
    assert _errors(autograded) == {}
    for e in exercises(nb):  # the hidden tests ran and decided: the cell's result is its points
        assert _result(autograded.cells[e.check]) == f"{float(e.points)}"
        assert "hidden test: " in "".join(o.get("text", "") for o in autograded.cells[e.check].outputs)
    assert _submission(course, DEMO, name, lambda s: s.needs_manual_grade)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_each_wrong_answer_scores_its_points_under_autograde(course, name, kind):
    expected = notebook_answers.wrong_answers(name, kind).POINTS
    teacher = classroom.exercises_only(teacher_notebook(name))
    found = exercises(teacher)
    assert set(expected) == {e.name for e in found}, f"{kind}.py must give POINTS for every exercise of {name}"
    assert _scores(course, kind, EXERCISES, name) == {
        e.grade_id: (float(expected[e.name]), float(e.points)) for e in found} | {
        g: (0.0, float(p)) for g, p in written(teacher).items()}
    autograded = course.autograded(kind, EXERCISES, name)
    errors = _errors(autograded)
    for e in found:
        where = f"{name} {e.name} ({kind})"
        if expected[e.name] == 0:
            assert e.check in errors, f"{where}: 0 points needs a failing cell with a hint"
            _assert_one_line_hint(errors[e.check], where)
        else:
            assert e.check not in errors and _result(autograded.cells[e.check]) == f"{float(expected[e.name])}", where
    assert set(errors) <= {e.check for e in found}, f"{name} ({kind}): a cell other than a grade cell failed"


def test_partial_credit_is_awarded_in_every_notebook(course):
    for name in NOTEBOOKS:
        partial = notebook_answers.wrong_answers(name, "partial").POINTS
        assert any(0 < points for points in partial.values()), name
        scores = _scores(course, "partial", EXERCISES, name)
        assert any(0 < score < most for score, most in scores.values()), f"{name}: no partial score in {scores}"


def test_the_grading_kernel_draws_the_courses_seed(course, monkeypatch):
    """The hidden cases of the teacher's notebook, graded by nbgrader, are the ones this seed gives."""
    seed = re.search(r'"WORKBOOK_GRADING_SEED", "(\d+)"', (course.root / "nbgrader_config.py").read_text()).group(1)
    compared = 0
    for name in list(NOTEBOOKS)[2:]:  # three notebooks whose hidden tests are quick here
        autograded = course.autograded(DEMO, name)
        for e in exercises(teacher_notebook(name)):
            text = "".join(o.get("text", "") for o in autograded.cells[e.check].outputs)
            graded = [line for line in text.splitlines() if line.startswith("hidden test: ")]
            here = {}
            for value in (seed, ""):
                monkeypatch.setenv("WORKBOOK_GRADING_SEED", value)
                namespace = {module: __import__(f"helpers.{module}", fromlist=["_"]) for module in TOPIC_NAMES.get(name, ())}
                if name == "03_batch_iteration":  # exercise 2's answer resets with the notebook's copy 2,
                    namespace["reset_stateful"] = namespace["batching"].reset_stateful  # whose tested twin this is
                with redirect_stdout(io.StringIO()) as out:
                    notebook_answers.run_hidden(name, e.name, notebook_answers.answer(name, e.name, namespace), namespace)
                here[value] = [line for line in out.getvalue().splitlines() if line.startswith("hidden test: ")]
            assert graded == here[seed], f"{name} {e.name}: graded with other cases than seed {seed} gives"
            compared += here[seed] != here[""]
    assert compared >= 3, "the course's seed gave the default seed's cases: the comparison proves nothing"


def test_a_submission_without_nbgrader_metadata_scores_zero_and_needs_manual_grading(course):
    name = next(iter(NOTEBOOKS))
    assert {score for score, _ in _scores(course, STRIPPED, EXERCISES, name).values()} == {0.0}
    assert _submission(course, STRIPPED, EXERCISES, lambda nb: nb.needs_manual_grade, name)
    assert _errors(course.autograded(STRIPPED, EXERCISES, name)) == {}  # its answers were right all the same


def test_validate_says_success_only_on_a_solved_copy(course):
    unsolved, solved = course.outputs["validate release"], course.outputs["validate solved"]
    assert "Success" not in unsolved and "VALIDATION FAILED" in unsolved and NOT_WRITTEN in unsolved, unsolved[-2000:]
    assert SUCCESS in solved, solved[-2000:]


def _assignment_scores(course: Course, student: str, assignment: str) -> list[tuple[float, float]]:
    notebooks = [p.stem for p in (course.root / "source" / assignment).glob("*.ipynb")]
    return [pair for notebook in notebooks for pair in _scores(course, student, assignment, notebook).values()]


def test_export_lists_every_score_in_the_gradebook(course):
    with open(course.root / "grades.csv", newline="", encoding="utf-8") as f:
        rows = {(r["assignment"], r["student_id"]): (float(r["score"]), float(r["max_score"])) for r in csv.DictReader(f)}
    everyone = {student for students in course.students.values() for student in students}
    expected = {}
    for assignment, students in course.students.items():
        maximum = sum(most for _, most in _assignment_scores(course, students[0], assignment))
        for student in everyone:  # a student who handed nothing in is listed with 0 points
            scores = _assignment_scores(course, student, assignment) if student in students else [(0.0, maximum)]
            expected[assignment, student] = (sum(s for s, _ in scores), sum(m for _, m in scores))
    assert rows == expected


def test_make_course_again_changes_nothing(course):
    assert "generated: nothing" in course.outputs["make course again"]
    for folder, digest in course.before_rerun.items():
        if folder == "files":
            for name, content in digest.items():
                assert (course.root / name).read_bytes() == content, f"make course changed {name}"
        else:
            assert _tree_digest(course.root / folder) == digest, f"make course changed {folder}/"


def test_make_course_after_a_notebook_changed_keeps_submissions_and_grades(course):
    name = list(NOTEBOOKS)[-1]
    path = course.workbook / "notebooks" / f"{name}.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells[0].source += "\n\nA sentence the teacher added."
    nbformat.write(nb, path)
    scores = {(s, a): _assignment_scores(course, s, a) for a, students in course.students.items() for s in students}
    kept = {folder: _tree_digest(course.root / folder) for folder in ("submitted", "autograded", "feedback")}
    output = _run(["make", "-s", "course"], course.workbook)
    assert f"generated: {name}" in output
    assert "A sentence the teacher added." in (course.root / "release" / name / f"{name}.ipynb").read_text()
    assert {(s, a): _assignment_scores(course, s, a) for a, students in course.students.items() for s in students} == scores
    assert {folder: _tree_digest(course.root / folder) for folder in kept} == kept
