"""`make student`: solutions removed, stubs in place, checkers reject the stub."""

import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import make_student  # noqa: E402

from helpers.exercises import CheckFailed, call_learner  # noqa: E402


def test_solution_block_becomes_a_stub_at_its_indentation():
    source = "def f(x):\n    ### BEGIN SOLUTION\n    return x * 2\n    ### END SOLUTION\n\ncheck(f)"
    assert make_student.strip_solutions(source) == (
        "def f(x):\n    # YOUR CODE HERE\n    raise NotImplementedError()\n\ncheck(f)"
    )


@pytest.mark.parametrize("source", [
    "### BEGIN SOLUTION\nx = 1",
    "x = 1\n### END SOLUTION",
    "### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION",
])
def test_unbalanced_markers_are_an_error(source):
    with pytest.raises(ValueError, match="SOLUTION"):
        make_student.strip_solutions(source, where="nb cell 3")


def _split_lines(source):
    """(stripped code lines inside solution blocks, stripped lines outside them)."""
    inside, solution, outside = False, [], []
    for line in source.splitlines():
        if line.strip() == make_student.BEGIN:
            inside = True
        elif line.strip() == make_student.END:
            inside = False
        elif inside:
            if line.strip() and not line.strip().startswith("#"):
                solution.append(line.strip())
        else:
            outside.append(line.strip())
    return solution, outside


def test_student_copies_keep_no_solution_text_and_no_outputs(tmp_path):
    assert make_student.main([str(ROOT / "notebooks"), str(tmp_path)]) == 0
    teacher = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert teacher
    for path in teacher:
        nb = nbformat.read(path, as_version=4)
        split = [_split_lines(c.source) for c in nb.cells if c.cell_type == "code"]
        solution = [l for sol, _ in split for l in sol]
        outside = {l for _, out in split for l in out}
        assert solution, f"{path.name} has no exercise solution marked with {make_student.BEGIN}"
        student = nbformat.read(tmp_path / path.name, as_version=4)
        student_lines = {l.strip() for c in student.cells if c.cell_type == "code" for l in c.source.splitlines()}
        for line in solution:
            if line not in outside:  # a line the notebook also shows outside the exercise may stay
                assert line not in student_lines, f"{path.name}: solution line survived: {line}"
        assert "raise NotImplementedError()" in student_lines
        assert all(not c.get("outputs") for c in student.cells if c.cell_type == "code")


def test_call_learner_turns_the_stub_into_feedback():
    def stub(x):
        raise NotImplementedError()

    with pytest.raises(CheckFailed, match="not written yet"):
        call_learner(stub, 1)


def test_hidden_tests_are_removed_with_their_markers():
    source = "# Graded: 2 points\ncheck(f)\n### BEGIN HIDDEN TESTS\ngrading('f', _hidden)\n### END HIDDEN TESTS"
    assert make_student.strip_hidden_tests(source) == "# Graded: 2 points\ncheck(f)"


@pytest.mark.parametrize("source", [
    "### BEGIN HIDDEN TESTS\nx = 1",
    "x = 1\n### END HIDDEN TESTS",
    "### BEGIN HIDDEN TESTS\n### BEGIN HIDDEN TESTS\n### END HIDDEN TESTS",
])
def test_unbalanced_hidden_test_markers_are_an_error(source):
    with pytest.raises(ValueError, match="HIDDEN TESTS"):
        make_student.strip_hidden_tests(source, where="nb cell 3")


def test_a_written_answer_becomes_nbgraders_text_stub_and_the_question_stays():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("**Written question (2 points).** Why?"),
                nbformat.v4.new_markdown_cell("**Model answer** (2 points, graded by hand)\n\nBecause."),
                nbformat.v4.new_markdown_cell("**Model answer** is what this cell talks about, not one")]
    student = make_student.student_cells(nb)
    assert [c.source for c in student.cells] == ["**Written question (2 points).** Why?", "YOUR ANSWER HERE",
                                                 "**Model answer** is what this cell talks about, not one"]
