"""Shared pytest setup.

Also loaded as a plugin by the notebook replay (`make replay`: ``pytest -p tests.conftest --nbval``)
so that nbval skips stderr: TensorFlow writes C++ log lines there at import time, before any
Python setting can silence them, and a replay must not fail on them.

``--nbval-cells-twice`` (``make replay`` passes it) runs every notebook cell twice in a row, as a
learner does, and checks both runs against the committed outputs (a cell marked
``# NBVAL_IGNORE_OUTPUT`` must still run twice without an error): one kernel per notebook does the
replay and the rerun check (``tests/test_notebook_reruns.py`` shows that it fails when it should).

``make unit`` and the replays run two pytest-xdist workers; TensorFlow keeps its own thread pools
there (docs/decisions.md, "CI time", says why).
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import textwrap

import pytest

# A student's wrong answers (tests/test_classroom.py grades them); not test modules, and their
# file names repeat from notebook to notebook.
collect_ignore = ["classroom_answers"]

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")  # CPU memory statistics (see helpers.runtime)

SECOND_RUN = "on its second run in a row (a learner runs a cell again): "


def pytest_addoption(parser):
    parser.addoption("--nbval-cells-twice", action="store_true", default=False,
                     help="run every notebook cell twice in a row; both runs must match the committed outputs")


def pytest_collectstart(collector):
    path = getattr(collector, "path", None)
    if path is not None and path.suffix == ".ipynb":
        collector.skip_compare += ("stderr",)


def _run_twice(item) -> None:
    """Make an nbval cell item execute its cell twice; the second run is checked like the first."""
    from nbval.plugin import NbCellError

    once = item.runtest
    committed = copy.deepcopy(item.cell.outputs)

    def twice():
        once()
        item.cell.outputs = copy.deepcopy(committed)  # nbval merges the streams of the committed outputs in place
        try:
            once()
        except NbCellError as error:
            raise NbCellError(error.cell_num, SECOND_RUN + str(error), item.cell.source,
                              error.inner_traceback) from None

    item.runtest = twice


def pytest_collection_modifyitems(config, items):
    if not config.getoption("nbval_cells_twice", default=False):
        return
    for item in items:
        if type(item).__name__ == "IPyNbCell":
            _run_twice(item)


@pytest.fixture
def fresh_python():
    """Run a snippet in a new Python process (for device set-up that must precede any TF op).

    Returns the snippet's stdout; fails the test with its stderr if it exits non-zero.
    """

    def run(code: str, timeout: float = 300) -> str:
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
        proc = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            capture_output=True, text=True, timeout=timeout, env=env,
        )
        if proc.returncode != 0:
            pytest.fail(f"subprocess failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
        return proc.stdout

    return run
