#!/usr/bin/env python3
"""``make book``: the workbook as a static site, from the committed notebooks, without executing them.

1. Assemble the sources in ``<out>/src``: the landing page (``book/index.md``, with the notebook
   table and the table of contents written in), every ``notebooks/NN_*.ipynb`` as the book shows it
   (:mod:`reader_copy`: solutions, hidden tests and model answers left out), and ``docs/`` as it is.
   A relative link to a file of the repository that is not in the book (``../tests/x.py``,
   ``../README.md``) becomes a link to that file in the repository at this version's tag.
2. Run Sphinx (``book/conf.py``: myst-nb, sphinx-book-theme, MathJax served from the site) with
   warnings as errors, into ``<out>/html``; a fresh build every time.
3. Check every internal link and anchor of the site, offline (:mod:`site_check`).

    python book/make_book.py                      # build/book/html/index.html
    python book/make_book.py --notebooks DIR --out build/other

Decisions (tool, solutions, hidden tests, publishing): docs/decisions.md, "Static book".
"""

from __future__ import annotations

import argparse
import importlib.util
import posixpath
import re
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

BOOK = Path(__file__).resolve().parent
ROOT = BOOK.parent
sys.path.insert(0, str(BOOK))
from reader_copy import reader_notebook  # noqa: E402
from site_check import broken_links  # noqa: E402

__all__ = ["OUT", "BookBuild", "notebook_paths", "repository_link", "rewrite_links", "assemble", "build", "main"]

# Where the docs pages go in the table of contents; pages not named here come last, by name.
DOCS_ORDER = {
    "Topic notes, one per notebook": ["decoupling", "accumulation", "batching", "validation", "snapshots"],
    "Running and teaching": ["gpu", "multi-worker", "teaching", "instructor"],
}
OTHER_DOCS = "How the workbook is made"
OUT = ROOT / "build" / "book"  # the site: OUT / "html"
BOOK_TOOLS = ("sphinx", "myst_nb", "sphinx_book_theme", "sphinx-mathjax-offline")  # import names
LINK = re.compile(r"(\]\()(<[^>]*>|[^()\s]+)((?:\s+\"[^\"]*\")?\))")
REFERENCE = re.compile(r"^(\s*\[[^\]]+\]:\s*)(\S+)", re.M)
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


@dataclass
class BookBuild:
    """What a build made: the site, its sources, the time Sphinx took and what was left out."""

    html: Path
    src: Path
    seconds: float
    removed: dict[str, dict[str, int]] = field(default_factory=dict)


def notebook_paths(folder: Path) -> list[Path]:
    """The numbered notebooks of ``folder`` (``NN_name.ipynb``), in order."""
    return sorted(folder.glob("[0-9][0-9]_*.ipynb"))


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def repository_link(path: str) -> str:
    """The repository's address of ``path`` (relative to its root) at this version's tag.

    >>> repository_link("tests/test_book.py").endswith("/blob/v" + _project()["version"] + "/tests/test_book.py")
    True
    """
    project = _project()
    kind = "tree" if (ROOT / path).is_dir() else "blob"
    return f"{project['urls']['Repository'].rstrip('/')}/{kind}/v{project['version']}/{path}"


def rewrite_links(text: str, where: str, in_book: set[str]) -> str:
    """``text`` (markdown of the file ``where``, relative to the repository's root) with each relative
    link to a repository file outside the book made a link into the repository; links into the book,
    external links, anchors and links to nothing are left as they are (Sphinx reports the last).

    >>> rewrite_links("[t](../tests/test_book.py#L3) [n](02_x.ipynb)", "notebooks/01_x.ipynb",
    ...               {"notebooks/02_x.ipynb"}).split(")")[0].endswith("tests/test_book.py#L3")
    True
    """
    def target(link: str) -> str:
        bare = link[1:-1] if link.startswith("<") else link
        path, hash_, fragment = bare.partition("#")
        if not path or SCHEME.match(path) or path.startswith("/"):
            return link
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(where), path))
        if resolved in in_book or resolved.startswith("..") or not (ROOT / resolved).exists():
            return link
        return repository_link(resolved) + hash_ + fragment

    text = LINK.sub(lambda m: m.group(1) + target(m.group(2)) + m.group(3), text)
    return REFERENCE.sub(lambda m: m.group(1) + target(m.group(2)), text)


def _first_lines(nb) -> tuple[str, str, str]:
    """A notebook's title, one-line question and time to run, from its first markdown cell."""
    first = next((c.source for c in nb.cells if c.cell_type == "markdown"), "")
    lines = first.splitlines()
    title = next((l[2:].strip() for l in lines if l.startswith("# ")), "")
    question = next((l[2:].strip() for l in lines if l.startswith("> ")), "")
    run = re.search(r"\*\*Time to run:\*\*\s*(.+?)\s*$", first, re.M)
    return title, question, run.group(1).rstrip(".") if run else "—"


def _notebook_table(notebooks: list[Path]) -> str:
    rows = ["| # | notebook | the question it answers | time to run |", "|---|---|---|---|"]
    for path in notebooks:
        title, question, run = _first_lines(nbformat.read(path, as_version=4))
        rows.append(f"| {path.name[:2]} | [{title or path.stem}](notebooks/{path.name}) | {question} | {run} |")
    return "\n".join(rows)


def _toctree(caption: str, entries: list[str]) -> str:
    return "\n".join([f"```{{toctree}}", f":caption: {caption}", ":maxdepth: 1", "", *entries, "```", ""])


def _contents(notebooks: list[Path], docs: list[str]) -> str:
    parts = [_toctree("Notebooks", [f"notebooks/{p.stem}" for p in notebooks])]
    placed: set[str] = set()
    for caption, names in DOCS_ORDER.items():
        entries = [f"docs/{n}" for n in names if n in docs]
        placed.update(names)
        if entries:
            parts.append(_toctree(caption, entries))
    rest = [f"docs/{n}" for n in sorted(docs) if n not in placed]
    if rest:
        parts.append(_toctree(OTHER_DOCS, rest))
    return "\n".join(parts)


def assemble(notebooks: list[Path], docs: Path | None, src: Path) -> dict[str, dict[str, int]]:
    """Write the book's sources to ``src`` (emptied first); returns what each notebook lost."""
    if not notebooks:
        raise ValueError("notebooks: no NN_name.ipynb to publish")
    if src.exists():
        shutil.rmtree(src)
    (src / "notebooks").mkdir(parents=True)
    shutil.copytree(BOOK / "images", src / "images")
    doc_pages = sorted(docs.rglob("*.md")) if docs else []
    in_book = {f"notebooks/{p.name}" for p in notebooks}
    in_book |= {f"docs/{p.relative_to(docs).as_posix()}" for p in docs.rglob("*") if p.is_file()} if docs else set()

    removed = {}
    project = _project()
    github = project["urls"]["Repository"].rstrip("/").removeprefix("https://github.com/")
    for path in notebooks:
        colab = f"https://colab.research.google.com/github/{github}/blob/v{project['version']}/notebooks/{path.name}"
        nb, removed[path.name] = reader_notebook(nbformat.read(path, as_version=4), path.name,
                                                 badge="../images/colab-badge.svg", colab=colab)
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                cell.source = rewrite_links(cell.source, f"notebooks/{path.name}", in_book)
        nbformat.write(nb, src / "notebooks" / path.name)
    if docs:
        for path in sorted(docs.rglob("*")):
            target = src / "docs" / path.relative_to(docs)
            if path.is_dir():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if path.suffix == ".md":
                where = f"docs/{path.relative_to(docs).as_posix()}"
                target.write_text(rewrite_links(path.read_text(encoding="utf-8"), where, in_book), encoding="utf-8")
            else:
                shutil.copy2(path, target)
    landing = (BOOK / "index.md").read_text(encoding="utf-8")
    landing = landing.replace("<!-- notebooks -->", _notebook_table(notebooks))
    landing = landing.replace("<!-- contents -->", _contents(notebooks, [p.stem for p in doc_pages
                                                                          if p.parent == docs]))
    (src / "index.md").write_text(rewrite_links(landing, "index.md", in_book), encoding="utf-8")
    return removed


def build(out: Path, notebooks: list[Path], docs: Path | None) -> BookBuild:
    """Assemble and build the book in ``out`` (``out/src``, ``out/html``); raise ``RuntimeError`` with
    Sphinx's warnings if it warned, or with the broken links if any internal link does not resolve."""
    missing = [name for name in BOOK_TOOLS if importlib.util.find_spec(name) is None]
    if missing:
        raise RuntimeError(f"{', '.join(missing)} not installed: `make book` installs the book's tools "
                           "(pyproject.toml's `book` extra, pinned by constraints.txt)")
    start = time.monotonic()
    src, html = out / "src", out / "html"
    removed = assemble(notebooks, docs, src)
    if html.exists():
        shutil.rmtree(html)
    command = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", "-c", str(BOOK),
               "-d", str(out / "doctrees"), str(src), str(html)]
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"sphinx-build failed (warnings are errors):\n{proc.stderr}{proc.stdout}")
    broken = broken_links(html)
    if broken:
        raise RuntimeError("broken internal links:\n" + "\n".join(broken))
    return BookBuild(html=html, src=src, seconds=time.monotonic() - start, removed=removed)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notebooks", type=Path, default=ROOT / "notebooks", help="folder of NN_*.ipynb")
    parser.add_argument("--docs", type=Path, default=ROOT / "docs", help="folder of markdown pages")
    parser.add_argument("--out", type=Path, default=OUT, help="build folder")
    args = parser.parse_args(argv)
    try:
        result = build(args.out, notebook_paths(args.notebooks), args.docs)
    except (RuntimeError, ValueError) as error:
        print(f"make book: {error}", file=sys.stderr)
        return 1
    left_out = {k: sum(r[k] for r in result.removed.values()) for k in ("solutions", "hidden_tests",
                                                                        "written_answers")}
    print(f"book: {result.html / 'index.html'} ({len(result.removed)} notebooks; left out: "
          f"{left_out['solutions']} solutions, {left_out['hidden_tests']} hidden tests, "
          f"{left_out['written_answers']} model answers) in {result.seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
