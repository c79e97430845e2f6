#!/usr/bin/env python3
"""Keep the Colab badges, the Colab install cells and the README's notebook table in sync.

The repository address is written once, in pyproject.toml ([project.urls] Repository). This tool
rewrites, from it and from each notebook's first cell:

* the "Open in Colab" badge line in each notebook's first (markdown) cell;
* the Colab-only install cell (the code cell that starts with ``# Colab only:``);
* the table between ``<!-- notebooks:start -->`` and ``<!-- notebooks:end -->`` in README.md.

``python tools/sync_workbook.py`` rewrites; ``--check`` only reports and exits 1 when out of sync.
"""

from __future__ import annotations

import argparse
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


def repository_url() -> str:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return project["urls"]["Repository"].rstrip("/")


def colab_link(notebook: Path) -> str:
    github_path = repository_url().removeprefix("https://github.com/")
    return f"https://colab.research.google.com/github/{github_path}/blob/main/notebooks/{notebook.name}"


def badge(notebook: Path) -> str:
    return f"[![Open In Colab]({BADGE_IMAGE})]({colab_link(notebook)})"


def colab_cell_source() -> str:
    return (
        f"{COLAB_MARK} install the workbook's helpers. Colab keeps its own GPU build of TensorFlow\n"
        "# (--no-deps); everywhere else this cell does nothing.\n"
        "import sys\n"
        "\n"
        'if "google.colab" in sys.modules:\n'
        f'    %pip install --quiet --no-deps "git+{repository_url()}.git"'
    )


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
    return nb


def readme_table() -> str:
    rows = ["| # | notebook | the question it answers | open |", "|---|---|---|---|"]
    for path in notebook_paths():
        title, summary = _title_and_summary(nbformat.read(path, as_version=4))
        rows.append(f"| {path.name[:2]} | [{title}](notebooks/{path.name}) | {summary} | {badge(path)} |")
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
