"""Every code cell run twice in place, in order, prints the same both times.

That is what a learner does all the time: run a cell, run it again. Each notebook is executed in one
fresh kernel; every code cell runs twice in a row, and the second run's printed output (stdout and
text results; not figures, not stderr, not cells marked ``# NBVAL_IGNORE_OUTPUT``) must equal the
first run's. A cell that fails on its second run fails the test too.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _sanitizers() -> list[tuple[re.Pattern, str]]:
    lines = (ROOT / "tests" / "nbval_sanitize.cfg").read_text().splitlines()
    pairs = zip(lines[0::2], lines[1::2])
    return [(re.compile(a.removeprefix("regex: ")), b.removeprefix("replace: ")) for a, b in pairs]


SANITIZERS = _sanitizers()


def printed(cell) -> list[str]:
    """What nbval compares, sanitized: stdout and text/plain results, in order (errors too)."""
    out = []
    for output in cell.get("outputs", []):
        if output.output_type == "stream" and output.name == "stdout":
            out.append(output.text)
        elif output.output_type in ("execute_result", "display_data"):
            out.append(output.get("data", {}).get("text/plain", ""))
        elif output.output_type == "error":
            out.append(f"{output.ename}: {output.evalue}")
    text = "".join(out)
    for pattern, replacement in SANITIZERS:
        text = pattern.sub(replacement, text)
    return text.splitlines()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_cell_run_twice_prints_the_same(path):
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    differences = []
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            runs = []
            for attempt in ("first", "second"):
                try:
                    client.execute_cell(cell, index)
                except CellExecutionError as error:
                    pytest.fail(f"{path.name} cell {index} failed on its {attempt} run:\n{str(error)[-1500:]}")
                runs.append(printed(cell))
            if "NBVAL_IGNORE_OUTPUT" in cell.source:
                continue
            if runs[0] != runs[1]:
                first, second = runs
                line = next((i for i, (a, b) in enumerate(zip(first, second)) if a != b), min(len(first), len(second)))
                differences.append(f"cell {index}, line {line}: first {first[line:line + 1]} then "
                                   f"{second[line:line + 1]}")
    assert not differences, f"{path.name}: a second run printed something else:\n" + "\n".join(differences)
