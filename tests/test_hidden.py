"""The hidden tests of classroom/hidden/, run directly (no nbgrader): the reference answer gets full
points whatever the seed, each wrong answer in tests/classroom_answers/ gets exactly its points, the
visible checkers pass the hard-coded answers they should (that is what the hidden tests are for), and
the installed package holds nothing that computes an exercise's answer.

tests/test_classroom.py grades the same answers under the real ``nbgrader autograde``.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import pkgutil
import sys
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

import helpers.exercises as exercises
from helpers.exercises import CheckFailed, checker, grading
from tests import notebook_answers
from tests.notebook_answers import KINDS, answer, run_hidden, wrong_answers

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import sync_workbook  # noqa: E402

TOPICS = {"01_queue_decoupling": "decoupling", "02_gradient_accumulation": "accumulation",
          "03_batch_iteration": "batching", "04_validation_queues": "validation", "05_network_snapshots": "snapshots"}
NAMES = {"01_queue_decoupling": ("decoupling", "molecules"), "03_batch_iteration": ("batching",)}
EXERCISES = [(path.parent.name, path.stem) for path in sorted(notebook_answers.HIDDEN.glob("*/*.py"))]
SEEDS = ("", "77")  # the default seed, and one a course could draw (test_classroom grades with a random one)


def namespace(notebook: str) -> dict:
    """What the notebook defines before its exercises and their answers use: the helper modules its
    setup cell imports and, for notebook 01, its own bridge ``scipy_objective`` (run from the notebook's
    cell) and ``signature`` (the molecule data's ``element_spec``); for notebook 03 its
    ``reset_stateful`` (copy 2 of its recipe)."""
    names = {name: importlib.import_module(f"helpers.{name}") for name in NAMES.get(notebook, ())}
    if notebook == "01_queue_decoupling":
        names["scipy_objective"] = notebook_definition(notebook, "scipy_objective")
        names["signature"] = names["molecules"].molecule_dataset(num_molecules=2, batch_size=1, seed=0).element_spec
    if notebook == "03_batch_iteration":  # exercise 2's answer resets with batching.reset_stateful; a learner's may
        names["reset_stateful"] = names["batching"].reset_stateful  # call the notebook's own, whose tested twin this is
    return names


def notebook_definition(notebook: str, name: str):
    """``name`` as the notebook's one code cell that defines it (``def name(``) defines it."""
    import nbformat

    nb = nbformat.read(ROOT / "notebooks" / f"{notebook}.ipynb", as_version=4)
    cells = [c.source for c in nb.cells if c.cell_type == "code" and f"def {name}(" in c.source]
    assert len(cells) == 1, f"{notebook} defines {name} in one code cell"
    scope = {"np": np, "tf": tf, "keras": keras}
    exec(compile(cells[0], f"{notebook}:{name}", "exec"), scope)  # noqa: S102
    return scope[name]


def score(notebook: str, exercise: str, fn) -> tuple[float, str]:
    """(points, printed lines) of the hidden test on ``fn``; a CheckFailed counts 0."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            points = run_hidden(notebook, exercise, fn, namespace(notebook))
        except CheckFailed as failure:
            print(f"CheckFailed: {failure}")
            points = 0.0
    return points, out.getvalue()


def test_every_exercise_of_every_notebook_has_a_hidden_test():
    import nbformat

    wanted = set()
    for path in sync_workbook.notebook_paths():
        nb = nbformat.read(path, as_version=4)
        wanted |= {(path.stem, m["grade_id"].removeprefix("check_")) for m in sync_workbook.nbgrader_metadata(nb)
                   if m and m["grade_id"].startswith("check_")}
    assert wanted == set(EXERCISES)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("notebook, exercise", EXERCISES)
def test_the_reference_answer_gets_every_point_of_its_parts(notebook, exercise, seed, monkeypatch):
    monkeypatch.setenv("WORKBOOK_GRADING_SEED", seed)
    points, printed = score(notebook, exercise, answer(notebook, exercise, namespace(notebook)))
    declared = sync_workbook.hidden_points(sync_workbook.hidden_test_path(notebook, exercise))
    parts = [line for line in printed.splitlines() if line.startswith("hidden test: ")]
    assert points == declared, printed
    assert sum(int(line.split()[2].split("/")[1]) for line in parts) == declared, printed


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("notebook", sorted(TOPICS))
def test_each_wrong_answer_gets_exactly_its_points(notebook, kind, monkeypatch):
    seed = "77"
    monkeypatch.setenv("WORKBOOK_GRADING_SEED", seed)
    module = wrong_answers(notebook, kind)
    for exercise, expected in module.POINTS.items():
        points, printed = score(notebook, exercise, getattr(module, exercise))
        assert points == expected, f"{notebook} {exercise} ({kind}, seed {seed}):\n{printed}"
        if expected == 0:
            assert "CheckFailed: 0 " in printed, printed


@pytest.mark.parametrize("notebook", sorted(TOPICS))
def test_the_visible_checker_passes_the_hard_coded_answers_it_is_said_to(notebook):
    """Answers hard-coded to the visible cases pass the visible checks: only the hidden tests catch them."""
    module = wrong_answers(notebook, "hardcoded")
    for exercise in module.POINTS:
        with contextlib.redirect_stdout(io.StringIO()):
            try:
                getattr(checker(TOPICS[notebook]), f"check_{exercise}")(getattr(module, exercise))
                passed = True
            except CheckFailed:
                passed = False
        assert passed == (exercise in module.PASSES_VISIBLE), f"{notebook} {exercise}"


def test_different_seeds_draw_different_cases(monkeypatch):
    notebook, exercise = "04_validation_queues", "validate_at"
    labels = set()
    for seed in SEEDS:
        monkeypatch.setenv("WORKBOOK_GRADING_SEED", seed)
        _, printed = score(notebook, exercise, answer(notebook, exercise))
        labels.add(printed)
    assert len(labels) == len(SEEDS)


# --------------------------------------------------------------------------- grading() itself


def test_grading_scores_parts_and_zero_raises_the_first_reason(capsys):
    def hidden(grade):
        with grade.part(2, "right"):
            pass
        with grade.part(1, "wrong"):
            exercises.expect(False, "the second case is off")

    assert grading("demo", hidden) == 2.0
    assert capsys.readouterr().out == "hidden test: 2/2  right\nhidden test: 0/1  wrong: the second case is off\n"

    def nothing(grade):
        with grade.part(3, "wrong"):
            raise CheckFailed("off by one")

    with pytest.raises(CheckFailed, match=r"^0 of 3 points: off by one$"):
        grading("demo", nothing)


def test_a_broken_rule_scores_zero_whatever_else_passed():
    def hidden(grade):
        with grade.part(2, "right"):
            pass
        with grade.part(1, "rule"):
            grade.require(False, "ran the model on 12 examples at once")

    with pytest.raises(CheckFailed, match=r"^0 points: ran the model on 12 examples at once$"):
        grading("demo", hidden)


def test_grading_turns_stderr_and_warnings_into_stdout(capsys):
    import warnings

    def hidden(grade):
        with grade.part(1, "noisy"):
            warnings.warn("a library's warning")
            print("to stderr", file=sys.stderr)

    assert grading("demo", hidden) == 1.0
    captured = capsys.readouterr()
    assert captured.err == "" and "(stderr) UserWarning: a library's warning" in captured.out
    assert "(stderr) to stderr" in captured.out


@pytest.mark.parametrize("value", ["-3", "seven", "1.5"])
def test_a_bad_grading_seed_is_named(value, monkeypatch):
    monkeypatch.setenv("WORKBOOK_GRADING_SEED", value)
    with pytest.raises(ValueError, match="WORKBOOK_GRADING_SEED must be a whole number"):
        grading("demo", lambda grade: None)


@pytest.mark.parametrize("points", [0, -1, 1.5, True])
def test_a_part_needs_whole_positive_points(points):
    def hidden(grade):
        with grade.part(points, "x"):
            pass

    with pytest.raises(ValueError, match="points must be a whole number >= 1"):
        grading("demo", hidden)


def test_grading_refuses_a_test_that_is_not_a_function_or_grades_nothing():
    with pytest.raises(TypeError, match="hidden_test must be a function"):
        grading("demo", None)
    with pytest.raises(CheckFailed, match="graded nothing"):
        grading("demo", lambda grade: None)
    with pytest.raises(ValueError, match="exercise must be the exercise's name"):
        grading("", lambda grade: None)


def test_under_autograde_a_visible_check_prints_its_hint_and_returns_zero(monkeypatch, capsys):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    stub = notebook_answers.stub("04_validation_queues", "mean_loss")
    assert checker("validation").check_mean_loss(stub) == 0.0
    assert capsys.readouterr().out.startswith("Visible check failed: `mean_loss` is not written yet")
    monkeypatch.setenv("NBGRADER_EXECUTION", "validate")  # nbgrader validate: the check raises
    with pytest.raises(CheckFailed, match="not written yet"):
        checker("validation").check_mean_loss(stub)


# --------------------------------------------------------------------------- no answer in the package


# Reference solutions the package held before the hidden tests (issue 21): they must stay gone.
GONE = {"decoupling": ("_armijo_reference", "_gradient_check_reference"),
        "batching": ("_expected_positions", "_reference", "_reference_batches")}


def _functions(module) -> dict[str, object]:
    found = {}
    for name, value in vars(module).items():
        if inspect.isfunction(value) and value.__module__ == module.__name__:
            found[name] = value
        elif inspect.isclass(value) and value.__module__ == module.__name__:
            found |= {f"{name}.{n}": f for n, f in vars(value).items() if inspect.isfunction(f)}
    return found


def _exercise_signatures() -> dict[str, list[str]]:
    """``{exercise: its parameters}`` from the notebooks' answer cells."""
    signatures = {}
    for notebook, exercise in EXERCISES:
        fn = answer(notebook, exercise, namespace(notebook))
        signatures[exercise] = list(inspect.signature(fn).parameters)
    return signatures


def test_the_package_holds_no_reference_solution(monkeypatch):
    """Nothing in ``helpers.exercises`` that looks like an exercise's answer (its parameters, or its
    name) earns a point when handed in as that answer; the references it once held are gone."""
    monkeypatch.setenv("WORKBOOK_GRADING_SEED", "5")
    modules = [importlib.import_module(f"helpers.exercises.{m.name}")
               for m in pkgutil.iter_modules(exercises.__path__)] + [exercises]
    signatures = _exercise_signatures()
    tried = []
    for module in modules:
        functions = _functions(module)
        topic = module.__name__.rsplit(".", 1)[-1]
        for name in GONE.get(topic, ()):
            assert name not in functions, f"{module.__name__}.{name} is back"
        for name, fn in functions.items():
            params = [p for p in inspect.signature(fn).parameters if p != "self"]
            for notebook, exercise in EXERCISES:
                if name == f"check_{exercise}" or (params != signatures[exercise] and exercise not in name):
                    continue
                points, printed = score(notebook, exercise, fn)
                assert points == 0, f"{module.__name__}.{name} scores {points} as {exercise}:\n{printed}"
                tried.append(name)
    assert "state" in tried  # state(model) has remember's parameters: the scan does look
