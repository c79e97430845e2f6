"""Every code cell run twice in place, in order, prints the same both times.

That is what a learner does all the time: run a cell, run it again. ``make replay`` checks it on
every notebook while it replays them: ``--nbval-cells-twice`` (``tests/conftest.py``) executes each
cell twice in a row in the replay's one fresh kernel, and both runs must print what the committed
notebook holds (stdout and text results, as nbval compares them; not figures, not stderr). A cell
marked ``# NBVAL_IGNORE_OUTPUT`` must still run twice without an error. One kernel per notebook
does both checks (this file used to execute every notebook again for it; docs/decisions.md,
"CI time").

The tests here show on a tiny notebook that the check fails when it should, and that ``make replay``
asks for it.
"""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_notebook, new_output

ROOT = Path(__file__).resolve().parents[1]

CELLS = {  # source, what its first run prints (the committed output)
    "prints the same": ('print("same")\nprint("lines")', "same\nlines\n"),
    "counts its runs": ('runs = globals().get("runs", 0) + 1\nprint(f"run {runs}")', "run 1\n"),
    "fails when run again": ('# NBVAL_IGNORE_OUTPUT\nassert "done" not in globals(), "already done"\ndone = True\n'
                             'print("timing 1.23 s")', "timing 4.56 s\n"),
}


def _notebook(path: Path) -> Path:
    """The cells above, each with its committed output as Jupyter stores it: one stream output per print."""
    nb = new_notebook(cells=[
        new_code_cell(source, execution_count=n,
                      outputs=[new_output("stream", name="stdout", text=line) for line in text.splitlines(True)])
        for n, (source, text) in enumerate(CELLS.values(), start=1)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


def _replay(notebook: Path, *options: str) -> dict[str, str]:
    """``{cell: "passed" | "failed: <message>"}`` from nbval run as ``make replay`` runs it."""
    report = notebook.with_suffix(f".{len(options)}.xml")
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
                    "--nbval", "--nbval-current-env", f"--junitxml={report}", *options, str(notebook)],
                   cwd=ROOT, capture_output=True, text=True, timeout=300)
    names = list(CELLS)
    outcome = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        failure = case.find("failure")
        index = int(case.get("name").split()[-1])
        outcome[names[index]] = "passed" if failure is None else f"failed: {failure.get('message', '')}" \
            f"{failure.text or ''}"
    return outcome


def test_a_cell_that_prints_or_fails_differently_on_its_second_run_fails_the_replay(tmp_path):
    notebook = _notebook(tmp_path / "cells.ipynb")
    assert _replay(notebook) == dict.fromkeys(CELLS, "passed")  # each cell run once: all as committed

    twice = _replay(notebook, "--nbval-cells-twice")
    assert twice["prints the same"] == "passed"
    assert twice["counts its runs"].startswith("failed"), twice
    assert "on its second run" in twice["counts its runs"] and "run 2" in twice["counts its runs"]
    assert twice["fails when run again"].startswith("failed"), twice
    assert "already done" in twice["fails when run again"]


def test_make_replay_runs_every_cell_twice_and_the_colab_replay_once():
    proc = subprocess.run(["make", "-n", "replay", "replay-colab"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    replays = [line for line in proc.stdout.splitlines() if "--nbval " in line]
    assert len(replays) == 2, proc.stdout
    assert "--nbval-cells-twice" in replays[0] and "--nbval-cells-twice" not in replays[1]
