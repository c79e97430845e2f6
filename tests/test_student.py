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


def _solution_lines(source):
    inside, lines = False, []
    for line in source.splitlines():
        if line.strip() == make_student.BEGIN:
            inside = True
        elif line.strip() == make_student.END:
            inside = False
        elif inside and line.strip() and not line.strip().startswith("#"):
            lines.append(line.strip())
    return lines


def test_student_copies_keep_no_solution_text_and_no_outputs(tmp_path):
    assert make_student.main([str(ROOT / "notebooks"), str(tmp_path)]) == 0
    teacher = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert teacher
    for path in teacher:
        nb = nbformat.read(path, as_version=4)
        solution = [l for c in nb.cells if c.cell_type == "code" for l in _solution_lines(c.source)]
        assert solution, f"{path.name} has no exercise solution marked with {make_student.BEGIN}"
        student = nbformat.read(tmp_path / path.name, as_version=4)
        student_code = "\n".join(c.source for c in student.cells if c.cell_type == "code")
        kept_elsewhere = "\n".join(
            l for c in nb.cells if c.cell_type == "code" for l in c.source.splitlines()
            if l.strip() not in solution
        )
        for line in solution:
            if line not in kept_elsewhere:
                assert line not in student_code, f"{path.name}: solution line survived: {line}"
        assert "raise NotImplementedError()" in student_code
        assert all(not c.get("outputs") for c in student.cells if c.cell_type == "code")


def test_call_learner_turns_the_stub_into_feedback():
    def stub(x):
        raise NotImplementedError()

    with pytest.raises(CheckFailed, match="not written yet"):
        call_learner(stub, 1)
