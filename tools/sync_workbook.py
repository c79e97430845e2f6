#!/usr/bin/env python3
"""Keep the Colab badges, the Colab install cells and the README's notebook table in sync.

The repository address is written once, in pyproject.toml ([project.urls] Repository). This tool
rewrites, from it and from each notebook's first cell:

* the "Open in Colab" badge line in each notebook's first (markdown) cell;
* the Colab-only install cell (the code cell that starts with ``# Colab only:``), which installs the
  tagged release ``v<version>`` of ``[project] version``;
* nbgrader's cell metadata for every exercise (schema version 3): the code cell holding
  ``### BEGIN SOLUTION`` is a solution cell (``grade_id`` ``answer_<function>``); the code cell right
  after it must start with ``# Graded: N points`` and becomes a locked, autograded test cell with N
  points (``grade_id`` ``check_<function>``); a markdown cell that starts with
  ``**Model answer** (N points, graded by hand)`` (a written question's answer, right after the
  question's markdown cell) becomes a manually graded answer cell (``grade_id`` ``written_<k>``);
  no other cell carries nbgrader metadata;
* the points of each exercise: the grade cell's ``# Graded: N points`` line is rewritten from its
  hidden test, ``classroom/hidden/<notebook>/<function>.py``, whose first line says how many points
  its parts add up to (every exercise needs one: the grades come from it, see docs/teaching.md);
* the notebook's kernelspec, written as JupyterLab writes it (:data:`KERNELSPEC`), so that opening a
  notebook in JupyterLab changes nothing and a save shows no diff;
* the table between ``<!-- notebooks:start -->`` and ``<!-- notebooks:end -->`` in README.md: per
  notebook its title, its one-line question and the first cell's ``**Time to run:**`` and ``**Time to
  do the exercises:**`` lines (a dash where the first cell does not say).

``python tools/sync_workbook.py`` rewrites; ``--check`` only reports and exits 1 when out of sync.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
README = ROOT / "README.md"
TABLE_START, TABLE_END = "<!-- notebooks:start -->", "<!-- notebooks:end -->"
COLAB_MARK = "# Colab only:"
BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"
BEGIN_SOLUTION = "### BEGIN SOLUTION"
GRADED = re.compile(r"^# Graded: (\d+) points?\b")
# ipykernel's own kernelspec (tests/test_workbook_sync.py compares): JupyterLab writes it into every
# notebook it opens, so a notebook that carries another display name opens modified.
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
TIME_TO_RUN = re.compile(r"\*\*Time to run:\*\*\s*(.+?)\s*$", re.M)
TIME_TO_DO = re.compile(r"\*\*Time (?:to do|for) (?:the )?exercises:\*\*\s*(.+?)\s*$", re.M)
HEADING_POINTS = re.compile(r"\((\d+) points?\)")
WRITTEN = re.compile(r"^\*\*Model answer\*\* \((\d+) points?, graded by hand\)")
HIDDEN = ROOT / "classroom" / "hidden"


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def repository_url() -> str:
    return _project()["urls"]["Repository"].rstrip("/")


def release_tag() -> str:
    """The git tag of this version's release (``v`` + ``[project] version``): Colab installs it."""
    return f"v{_project()['version']}"


def colab_link(notebook: Path) -> str:
    """Colab's address for ``notebook`` at this version's tag: the notebook and the helpers its
    install cell fetches come from one release."""
    github_path = repository_url().removeprefix("https://github.com/")
    return f"https://colab.research.google.com/github/{github_path}/blob/{release_tag()}/notebooks/{notebook.name}"


def badge(notebook: Path) -> str:
    return f"[![Open In Colab]({BADGE_IMAGE})]({colab_link(notebook)})"


def colab_cell_source() -> str:
    return (
        f"{COLAB_MARK} install the workbook's helpers. Colab keeps its own GPU build of TensorFlow\n"
        "# (--no-deps); everywhere else this cell does nothing.\n"
        "import sys\n"
        "\n"
        'if "google.colab" in sys.modules:\n'
        f'    %pip install --quiet --no-deps "git+{repository_url()}.git@{release_tag()}"'
    )


def nbgrader_metadata(nb, name: str = "notebook") -> list[dict | None]:
    """nbgrader's metadata for each cell of ``nb`` (None: no nbgrader metadata), from the cells' text."""
    result: list[dict | None] = [None] * len(nb.cells)
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    ids: set[str] = set()
    written = 0
    for i, cell in enumerate(nb.cells):
        match = WRITTEN.match(cell.source) if cell.cell_type == "markdown" else None
        if match is None:
            continue
        if i == 0 or nb.cells[i - 1].cell_type != "markdown":
            raise ValueError(f"{name} cell {i}: a written answer cell must come right after its question's "
                             "markdown cell")
        written += 1
        result[i] = {"grade": True, "grade_id": f"written_{written}", "locked": False, "points": int(match.group(1)),
                     "schema_version": 3, "solution": True, "task": False}
    for k, i in enumerate(code):
        source = nb.cells[i].source
        if BEGIN_SOLUTION not in source:
            if GRADED.match(source) and not (k and BEGIN_SOLUTION in nb.cells[code[k - 1]].source):
                raise ValueError(f"{name} cell {i}: a '# Graded:' cell must come right after an answer cell")
            continue
        match = re.search(r"^\s*def (\w+)", source, re.M)
        exercise = match.group(1) if match else f"exercise_{len(ids) // 2 + 1}"
        nxt = code[k + 1] if k + 1 < len(code) else None
        graded = GRADED.match(nb.cells[nxt].source) if nxt is not None else None
        if graded is None:
            raise ValueError(f"{name} cell {i}: the code cell after an answer cell must start with "
                             "'# Graded: N points' and call its checker")
        for grade_id in (f"answer_{exercise}", f"check_{exercise}"):
            if grade_id in ids:
                raise ValueError(f"{name}: two exercises are named {exercise!r}")
            ids.add(grade_id)
        result[i] = {"grade": False, "grade_id": f"answer_{exercise}", "locked": False,
                     "schema_version": 3, "solution": True, "task": False}
        result[nxt] = {"grade": True, "grade_id": f"check_{exercise}", "locked": True,
                       "points": int(graded.group(1)), "schema_version": 3, "solution": False, "task": False}
    return result


def notebook_points(nb) -> dict[str, int]:
    """``{grade_id: points}`` of the notebook's graded cells (autograded and written)."""
    return {meta["grade_id"]: meta["points"] for meta in nbgrader_metadata(nb) if meta and meta["grade"]}


def hidden_test_path(notebook: str, exercise: str) -> Path:
    """Where the hidden test of ``exercise`` (an answer cell's function) in ``notebook`` (a file stem) lives."""
    return HIDDEN / notebook / f"{exercise}.py"


def shown(path: Path) -> str:
    """``path`` relative to the workbook when it is inside it (for messages)."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def hidden_points(path: Path) -> int:
    """The points a hidden test's parts add up to: its first line, ``# Graded: N points``."""
    first = path.read_text(encoding="utf-8").split("\n", 1)[0]
    match = GRADED.match(first)
    if match is None:
        raise ValueError(f"{path}: the first line must be '# Graded: N points' (what its parts add up to)")
    return int(match.group(1))


def _graded_from_hidden_tests(nb, stem: str) -> None:
    """Rewrite each grade cell's ``# Graded: N points`` line with its hidden test's points."""
    for i, meta in enumerate(nbgrader_metadata(nb, stem)):
        if not (meta and meta["grade"] and meta["grade_id"].startswith("check_")):
            continue
        exercise = meta["grade_id"].removeprefix("check_")
        path = hidden_test_path(stem, exercise)
        if not path.is_file():
            raise ValueError(f"{stem}: exercise {exercise!r} has no hidden test: write "
                             f"{shown(path)} (docs/teaching.md says how)")
        first, newline, rest = nb.cells[i].source.partition("\n")
        points = hidden_points(path)
        nb.cells[i].source = GRADED.sub(f"# Graded: {points} points", first, count=1) + newline + rest
        _heading_points(nb, i, points)


def _heading_points(nb, grade_at: int, points: int) -> None:
    """The exercise's text says the points its grade cell gives: the nearest markdown cell above the
    solution that says ``(N points)`` has N rewritten (a learner must not read 5 where 6 are graded)."""
    for cell in reversed(nb.cells[:grade_at - 1]):
        if cell.cell_type == "code" and GRADED.match(cell.source):
            return  # the previous exercise's grade cell: this exercise's text names no points
        if cell.cell_type == "markdown" and not WRITTEN.match(cell.source) and HEADING_POINTS.search(cell.source):
            cell.source = HEADING_POINTS.sub(f"({points} point{'s' if points != 1 else ''})", cell.source, count=1)
            return


def notebook_paths() -> list[Path]:
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def _title_and_summary(nb) -> tuple[str, str]:
    lines = nb.cells[0].source.splitlines()
    title = next((l[2:].strip() for l in lines if l.startswith("# ")), "")
    summary = next((l[2:].strip() for l in lines if l.startswith("> ")), "")
    if not title or not summary:
        raise ValueError("the first cell needs a '# Title' line and a '> one-line question' line")
    return title, summary


def synced_notebook(path: Path):
    """The notebook at ``path`` with its badge line and Colab cell rewritten."""
    nb = nbformat.read(path, as_version=4)
    if not nb.cells or nb.cells[0].cell_type != "markdown":
        raise ValueError(f"{path.name}: the first cell must be the markdown title cell")
    lines = [l for l in nb.cells[0].source.splitlines() if BADGE_IMAGE not in l]
    title_at = next(i for i, l in enumerate(lines) if l.startswith("# "))
    body = lines[title_at + 1:]
    while body and not body[0].strip():
        body.pop(0)
    lines = lines[: title_at + 1] + ["", badge(path), ""] + body
    nb.cells[0].source = "\n".join(lines)

    colab = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith(COLAB_MARK)]
    if colab:
        colab[0].source = colab_cell_source()
    else:
        nb.cells.insert(1, nbformat.v4.new_code_cell(colab_cell_source()))
    _graded_from_hidden_tests(nb, path.stem)
    return with_nbgrader_metadata(nb, path.name)


def with_nbgrader_metadata(nb, name: str = "notebook"):
    """``nb`` with every cell's nbgrader metadata written from the cells' text (changed in place)."""
    for cell, meta in zip(nb.cells, nbgrader_metadata(nb, name)):
        if meta is None:
            cell.metadata.pop("nbgrader", None)
        else:
            cell.metadata["nbgrader"] = meta
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    return nb


def _times(nb) -> tuple[str, str]:
    """The first cell's time to run and time to do the exercises (a dash where it does not say)."""
    source = nb.cells[0].source
    found = [pattern.search(source) for pattern in (TIME_TO_RUN, TIME_TO_DO)]
    return tuple(match.group(1).rstrip(".") if match else "—" for match in found)


def readme_table() -> str:
    rows = ["| # | notebook | the question it answers | time to run | time for the exercises | open |",
            "|---|---|---|---|---|---|"]
    for path in notebook_paths():
        nb = nbformat.read(path, as_version=4)
        title, summary = _title_and_summary(nb)
        run, do = _times(nb)
        link = f"[{title}](notebooks/{path.name})"
        rows.append(f"| {path.name[:2]} | {link} | {summary} | {run} | {do} | {badge(path)} |")
    return "\n".join(rows)


def synced_readme() -> str:
    text = README.read_text(encoding="utf-8")
    if TABLE_START not in text or TABLE_END not in text:
        raise ValueError(f"README.md needs the markers {TABLE_START} and {TABLE_END}")
    head, rest = text.split(TABLE_START, 1)
    _, tail = rest.split(TABLE_END, 1)
    return f"{head}{TABLE_START}\n{readme_table()}\n{TABLE_END}{tail}"


def out_of_sync() -> list[str]:
    """Names of the files that a sync would change."""
    stale = []
    for path in notebook_paths():
        if nbformat.writes(synced_notebook(path)) != nbformat.writes(nbformat.read(path, as_version=4)):
            stale.append(str(path.relative_to(ROOT)))
    if synced_readme() != README.read_text(encoding="utf-8"):
        stale.append("README.md")
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report files out of sync; change nothing")
    args = parser.parse_args(argv)
    if args.check:
        stale = out_of_sync()
        for name in stale:
            print(f"out of sync: {name} (run `make sync`)")
        return 1 if stale else 0
    for path in notebook_paths():
        nbformat.write(synced_notebook(path), path)
    README.write_text(synced_readme(), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
