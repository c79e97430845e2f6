"""Shared pytest setup.

Also loaded as a plugin by the notebook replay (`make replay`: ``pytest -p tests.conftest --nbval``)
so that nbval skips stderr: TensorFlow writes C++ log lines there at import time, before any
Python setting can silence them, and a replay must not fail on them.
"""

from __future__ import annotations

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


def pytest_collectstart(collector):
    path = getattr(collector, "path", None)
    if path is not None and path.suffix == ".ipynb":
        collector.skip_compare += ("stderr",)


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
