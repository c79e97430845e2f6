"""A committed notebook as the book shows it: everything a reader may see, nothing a grader keeps.

The book publishes the notebooks as the replay checked them (outputs as committed, nothing
executed), with four changes made here, all from the cells' own text and nbgrader metadata, so
they hold for whatever ``notebooks/`` holds:

* **Hidden tests go**: every block from a line holding ``### BEGIN HIDDEN TESTS`` to the line
  holding ``### END HIDDEN TESTS`` (markers included, in any cell), as nbgrader's release removes it.
* **Solutions go**: every ``### BEGIN SOLUTION`` … ``### END SOLUTION`` block of a code cell becomes
  the learner's stub (``# YOUR CODE HERE`` + ``raise NotImplementedError()``, at the marker's
  indentation), as in ``make lab``'s copies; in a markdown cell the block becomes one line saying
  it is left out. A written question's answer cell (nbgrader ``solution`` metadata on a markdown
  cell, or a cell starting ``**Model answer**``) becomes :data:`WRITTEN_STUB`.
* **Outputs that came from them go**: a cell that lost text, and every graded (checker) cell,
  has its outputs cleared: "Correct: …" printed by the reference solution would be a lie below a
  stub. A note before the first exercise says so (:data:`EXERCISE_NOTE`).
* **Reading offline**: Colab's badge image is replaced by a copy served with the site, and a
  ``Download the notebook`` link (the page's own notebook, as shown) follows it; a notebook
  without a badge gets both under its title.

Unbalanced markers are an error naming the notebook and cell: a solution must never be published
because a marker was mistyped.

>>> import nbformat
>>> nb = nbformat.v4.new_notebook(cells=[
...     nbformat.v4.new_markdown_cell("# 09 · Demo"),
...     nbformat.v4.new_code_cell("def f():\\n    ### BEGIN SOLUTION\\n    return 42\\n    ### END SOLUTION"),
...     nbformat.v4.new_code_cell("# Graded: 1 point\\ncheck(f)\\n"
...                               "### BEGIN HIDDEN TESTS\\nsecret()\\n### END HIDDEN TESTS",
...                               outputs=[nbformat.v4.new_output("stream", text="Correct\\n")])])
>>> shown, removed = reader_notebook(nb, "09_demo.ipynb", badge="../images/colab-badge.svg",
...                                  colab="https://colab.example/09_demo.ipynb")
>>> print(shown.cells[-2].source)
def f():
    # YOUR CODE HERE
    raise NotImplementedError()
>>> print(shown.cells[-1].source)
# Graded: 1 point
check(f)
>>> removed
{'solutions': 1, 'hidden_tests': 1, 'written_answers': 0, 'outputs_cleared': 1}
"""

from __future__ import annotations

import copy
import re

import nbformat

__all__ = ["BEGIN_SOLUTION", "END_SOLUTION", "BEGIN_HIDDEN", "END_HIDDEN", "BADGE_IMAGE", "WRITTEN_STUB",
           "EXERCISE_NOTE", "remove_blocks", "is_written_answer", "reader_notebook"]

BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"
CODE_STUB = ("# YOUR CODE HERE", "raise NotImplementedError()")
MARKDOWN_STUB = ("*(The solution is left out of the book.)*",)
WRITTEN_STUB = ("**Your answer here.** *(The model answer is left out of the book: teachers have it in the "
                "repository's notebooks.)*")
WRITTEN_ANSWER = re.compile(r"^\s*\*\*Model answer\*\*")
GRADED = re.compile(r"^# Graded: \d+ points?\b")
EXERCISE_NOTE = ("```{note}\nIn the book, each exercise's solution is left out, and so is what its checker "
                 "printed when the notebook ran with the solution. Run the notebook (Colab badge above, or "
                 "`make lab`) to write your answer: the checker cell says `Correct` or what is wrong.\n```")


def remove_blocks(source: str, begin: str, end: str, stub: tuple[str, ...] = (), where: str = "cell",
                  exact: bool = True) -> tuple[str, int]:
    """``source`` with every ``begin`` … ``end`` block (marker lines included) replaced by ``stub``
    at the begin marker's indentation; returns the text and the number of blocks.

    ``exact``: a marker is a line equal to it (after stripping); otherwise any line containing it
    (nbgrader's rule for hidden tests). Unbalanced or nested markers raise ``ValueError`` naming
    ``where``.

    >>> remove_blocks("a\\n  ### B\\n  x\\n  ### E\\nb", "### B", "### E", ("# stub",))
    ('a\\n  # stub\\nb', 1)
    """
    def is_marker(line: str, marker: str) -> bool:
        return line.strip() == marker if exact else marker in line

    out: list[str] = []
    inside, blocks = False, 0
    for line in source.split("\n"):
        if is_marker(line, begin):
            if inside:
                raise ValueError(f"{where}: nested {begin!r}")
            inside, blocks = True, blocks + 1
            indent = line[: len(line) - len(line.lstrip())]
            out += [indent + s for s in stub]
        elif is_marker(line, end):
            if not inside:
                raise ValueError(f"{where}: {end!r} without {begin!r}")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError(f"{where}: {begin!r} without {end!r}")
    return "\n".join(out), blocks


def is_written_answer(cell) -> bool:
    """True for a written question's answer cell: a markdown cell that nbgrader marks as a solution, or
    that starts with ``**Model answer**``."""
    return cell.cell_type == "markdown" and (bool(cell.metadata.get("nbgrader", {}).get("solution"))
                                             or bool(WRITTEN_ANSWER.match(cell.source)))


def _is_graded(cell) -> bool:
    return cell.cell_type == "code" and (bool(cell.metadata.get("nbgrader", {}).get("grade"))
                                         or bool(GRADED.match(cell.source)))


def _clear_outputs(cell) -> bool:
    had = bool(cell.get("outputs"))
    if cell.cell_type == "code":
        cell.outputs = []
    return had


def _badge_and_download(first: str, name: str, badge: str, colab: str) -> str:
    download = f"{{download}}`Download the notebook <{name}>`"
    lines = first.split("\n")
    at = next((i for i, line in enumerate(lines) if BADGE_IMAGE in line), None)
    if at is None:
        title = next((i for i, line in enumerate(lines) if line.startswith("# ")), -1)
        lines[title + 1:title + 1] = ["", f"[![Open In Colab]({badge})]({colab})", download]
        return "\n".join(lines)
    lines[at] = lines[at].replace(BADGE_IMAGE, badge)
    lines.insert(at + 1, download)
    return "\n".join(lines)


def reader_notebook(nb, name: str, badge: str, colab: str):
    """The book's copy of ``nb`` (a notebook called ``name``; ``nb`` is not changed) and what was
    removed: ``{"solutions", "hidden_tests", "written_answers", "outputs_cleared"}`` counts.

    ``badge`` is the site's own Colab badge image, relative to the notebook's page; ``colab`` the
    notebook's Colab address, used when the notebook has no badge of its own.
    """
    nb = copy.deepcopy(nb)
    removed = {"solutions": 0, "hidden_tests": 0, "written_answers": 0, "outputs_cleared": 0}
    first_exercise = None
    for index, cell in enumerate(nb.cells):
        where = f"{name} cell {index}"
        source, hidden = remove_blocks(cell.source, BEGIN_HIDDEN, END_HIDDEN, where=where, exact=False)
        stub = CODE_STUB if cell.cell_type == "code" else MARKDOWN_STUB
        source, solutions = remove_blocks(source, BEGIN_SOLUTION, END_SOLUTION, stub, where=where)
        removed["hidden_tests"] += hidden
        removed["solutions"] += solutions
        if solutions and cell.cell_type == "code" and first_exercise is None:
            first_exercise = index
        if is_written_answer(cell):
            source = WRITTEN_STUB
            removed["written_answers"] += 1
        cell.source = source
        if (hidden or solutions or _is_graded(cell)) and _clear_outputs(cell):
            removed["outputs_cleared"] += 1
    if first_exercise is not None:
        nb.cells.insert(first_exercise, nbformat.v4.new_markdown_cell(EXERCISE_NOTE))
    if nb.cells and nb.cells[0].cell_type == "markdown":
        nb.cells[0].source = _badge_and_download(nb.cells[0].source, name, badge, colab)
    else:
        nb.cells.insert(0, nbformat.v4.new_markdown_cell(_badge_and_download("", name, badge, colab)))
    return nb, removed
