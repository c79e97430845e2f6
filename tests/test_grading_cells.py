"""helpers.exercises.grading_cells: which cells nbgrader runs when it grades (the rest teach).

The rule must never drop a cell an answer depends on: a function, a dataset or a model from the
teaching cells, or a cell that changes such an object. nbgrader's real run with the preprocessor is
in tests/test_classroom.py (full points for the teacher's notebook, the wrong answers' exact points).
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from helpers.exercises.grading_cells import SKIP_TAG, SkipTeachingCells, cells_grading_needs

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import classroom  # noqa: E402
import sync_workbook  # noqa: E402

SETUP = "from helpers import runtime\nDEVICE = runtime.setup(seed=0)\nimport numpy as np\nimport keras"


def needs(*sources: str, required=(0,)) -> list[int]:
    """The needed cells when the last cell is the answer and ``required`` the others nbgrader knows."""
    return sorted(cells_grading_needs(list(sources), {*required, len(sources) - 1}))


def test_teaching_cells_that_bind_nothing_the_answer_reads_are_skipped():
    assert needs(SETUP, "slow = sum(range(10))", "print(np.ones(3))", "def answer(x):\n    return np.sum(x)") == [0, 3]


def test_a_function_the_answer_calls_comes_with_the_cells_it_reads():
    cells = [SETUP, "data = np.arange(3)", "unrelated = 1", "def total():\n    return data.sum()",
             "answer = total()"]
    assert needs(*cells) == [0, 1, 3, 4]


def test_a_cell_that_changes_an_object_the_answer_reads_is_run():
    cells = [SETUP, "model = keras.Sequential([keras.layers.Dense(1)])", "model.fit(x, y)",
             "history = other.fit(x, y)", "def answer():\n    return model.predict(x)"]
    assert needs(*cells) == [0, 1, 2, 4]  # x and y are bound nowhere: builtins or names of the answer's


def test_parameters_and_locals_of_the_answer_are_not_the_notebooks_names():
    cells = [SETUP, "model = 1\nx = 2", "def answer(model, loss_fn):\n    x = model(3)\n    return [x for x in range(x)]"]
    assert needs(*cells) == [0, 2]


def test_reads_of_modules_and_builtins_do_not_keep_a_cell():
    cells = [SETUP, "print(len(np.zeros(3)), keras.__version__)", "def answer():\n    return np.zeros(len([1]))"]
    assert needs(*cells) == [0, 2]


def test_a_name_bound_again_later_is_taken_from_every_cell_that_binds_it():
    cells = [SETUP, "rate = 0.1", "rate = rate * 2", "other = 3", "def answer():\n    return rate"]
    assert needs(*cells) == [0, 1, 2, 4]


def test_magics_parse_and_a_cell_python_cannot_parse_is_kept():
    colab = 'import sys\nif "google.colab" in sys.modules:\n    %pip install --quiet something'
    assert needs(colab, SETUP, "def answer():\n    return 1", required=(1,)) == [1, 2]
    assert needs(SETUP, "print(unclosed", "def answer():\n    return 1") == [0, 1, 2]


def _notebook(*sources: str, answer: int, grade: int):
    nb = new_notebook(cells=[new_markdown_cell("# a notebook")] + [new_code_cell(s) for s in sources])
    nb.cells[answer + 1].metadata["nbgrader"] = {"solution": True, "grade": False, "grade_id": "answer"}
    nb.cells[grade + 1].metadata["nbgrader"] = {"solution": False, "grade": True, "grade_id": "check"}
    return nb


def test_the_preprocessor_tags_only_the_skipped_code_cells():
    nb = _notebook(SETUP, "slow = 1", "helper = 2", "def answer():\n    return helper", "print(answer())",
                   answer=3, grade=4)
    nb, _ = SkipTeachingCells()(nb, {})  # as nbgrader calls it: enabled without configuration
    tagged = [i for i, cell in enumerate(nb.cells) if SKIP_TAG in cell.metadata.get("tags", [])]
    assert tagged == [2]  # "slow = 1"; the markdown cell and every needed cell untouched


def test_a_notebook_without_the_workbooks_setup_cell_runs_every_cell():
    nb = _notebook("import numpy as np", "slow = 1", "def answer():\n    return 1", "print(answer())",
                   answer=2, grade=3)
    nb, _ = SkipTeachingCells().preprocess(nb, {})
    assert not any(SKIP_TAG in cell.metadata.get("tags", []) for cell in nb.cells)


@pytest.mark.parametrize("path", sync_workbook.notebook_paths(), ids=lambda p: p.stem)
def test_grading_a_workbook_notebook_runs_the_setup_and_every_exercise_cell(path):
    nb = classroom.course_notebook(path)  # the course's source: hidden tests included
    nb, _ = SkipTeachingCells().preprocess(nb, {})
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    run = [cell for cell in code if SKIP_TAG not in cell.metadata.get("tags", [])]
    graded = [cell for cell in code if cell.metadata.get("nbgrader", {}).get("solution")
              or cell.metadata.get("nbgrader", {}).get("grade")]
    assert any("runtime.setup(" in cell.source for cell in run)
    assert all(cell in run for cell in graded)
    assert len(run) < len(code), f"{path.stem}: grading runs every cell"
