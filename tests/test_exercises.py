"""helpers.exercises: checkers cannot be patched from an answer cell, and fail in one line."""

import pytest

import helpers.exercises as exercises
from helpers.exercises import CheckFailed, checker
from tests.notebook_answers import stub


def test_patching_the_imported_checker_or_its_pieces_changes_nothing(monkeypatch):
    import helpers.exercises._core as core
    import helpers.exercises.accumulation as imported

    monkeypatch.setattr(imported, "check_accumulate", lambda fn: print("Correct!"))
    monkeypatch.setattr(core, "expect", lambda *args, **kwargs: None)
    monkeypatch.setattr(core, "call_learner", lambda *args, **kwargs: None)
    with pytest.raises(CheckFailed, match="not written yet"):
        checker("accumulation").check_accumulate(stub("02_gradient_accumulation", "accumulate"))


def test_the_package_names_cannot_be_replaced_or_deleted():
    original = exercises.checker
    with pytest.raises(AttributeError, match="cannot be replaced"):
        exercises.checker = lambda topic: None
    with pytest.raises(AttributeError, match="cannot be deleted"):
        del exercises.CheckFailed
    exercises.__dict__["checker"] = lambda topic: None
    try:
        from helpers.exercises import checker as imported_again
        assert imported_again is original and exercises.checker is original
    finally:
        exercises.__dict__["checker"] = original


def test_a_failure_renders_as_one_line():
    error = CheckFailed("your accumulator averaged 3 micro-batches equally")
    assert error._render_traceback_() == ["CheckFailed: your accumulator averaged 3 micro-batches equally"]


def test_an_error_in_the_learners_code_becomes_one_line_feedback():
    def answer(model, loss_fn, x, y, max_examples):
        return [1 / 0]

    with pytest.raises(CheckFailed, match=r"^`accumulate` raised ZeroDivisionError: division by zero"):
        checker("accumulation").check_accumulate(answer)


def test_unknown_topic_is_named():
    with pytest.raises(ValueError, match="topic must be one of"):
        checker("nope")
