"""``make book``: the workbook as a static site, built, link-checked and read in headless Chromium.

One build of the real book (``build/book/html``, as ``make book`` makes it; its time goes to
``build/book/times.txt``) and one of a fixture notebook that holds everything the book must leave
out: a solution, an nbgrader hidden test, a written question's model answer and the checker output
the solution printed, each marked with a unique word that no file of the site may contain.

In the browser, every page is opened from ``file://`` with every non-file request refused and
recorded: none may be made; every image is drawn (``naturalWidth > 0``), a notebook page shows as
many figures as its committed outputs, every equation is typeset by MathJax with no error, and no
``$`` is left in the text outside code. Screenshots go to ``build/book/screenshots/``. Each check is
also shown to fail on a broken page. Chromium is Debian's package (``make chromium``); without it
the browser tests are skipped, saying how to get it, and fail instead in CI (``CI=true``).
"""

from __future__ import annotations

import base64
import io
import json
import re
import sys
import time
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book"))
sys.path.insert(0, str(ROOT / "tools"))
import make_book  # noqa: E402
import reader_copy  # noqa: E402
import sync_workbook  # noqa: E402
from site_check import broken_links, page_links  # noqa: E402

from tests.browser import chromium_or_skip  # noqa: E402

OUT = ROOT / "build" / "book"  # make_book's own
SHOTS = OUT / "screenshots"
NOTEBOOKS = make_book.notebook_paths(ROOT / "notebooks")
DOCS = sorted(p.stem for p in (ROOT / "docs").glob("*.md"))
VIEWPORT = {"width": 1280, "height": 900}
# Words that exist only in what the fixture's book must leave out.
SECRETS = {"solution": "solution_word_7e1c", "hidden test": "hidden_case_3f9a",
           "model answer": "model_answer_b42d", "checker output": "reference_output_51aa"}
SHOWN = "visible_output_0c7d"


@pytest.fixture(scope="module")
def timings():
    times: dict[str, float] = {}
    yield times
    OUT.mkdir(parents=True, exist_ok=True)
    lines = [f"{name}  {seconds:.1f} s" for name, seconds in times.items()]
    (OUT / "times.txt").write_text("make book and its checks (this machine, its load at the time):\n"
                                   + "\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def book(timings):
    result = make_book.build(OUT, NOTEBOOKS, ROOT / "docs")
    timings["build of the book (assemble, sphinx-build -W, link check)"] = result.seconds
    return result


def _figure_png() -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([0, 1, 2], [0, 1, 4])
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode()


def fixture_notebook():
    """A notebook as the classroom issue makes them: an exercise with its solution, a grade cell with
    a hidden test and the checker's output, a written question with its model answer."""
    v4 = nbformat.v4
    solution = {"grade": False, "grade_id": "answer_f", "locked": False, "schema_version": 3, "solution": True,
                "task": False}
    grade = {"grade": True, "grade_id": "check_f", "locked": True, "points": 2, "schema_version": 3,
             "solution": False, "task": False}
    written = {"grade": True, "grade_id": "written_1", "locked": False, "points": 2, "schema_version": 3,
               "solution": True, "task": False}
    cells = [
        v4.new_markdown_cell("# 09 · A fixture\n\n> Does the book leave out what it must?\n\n"
                             "The mean $\\bar x = \\frac{1}{N}\\sum_i x_i$, weights $\\boldsymbol{\\theta}$ (a TeX "
                             "extension MathJax loads when it meets it) and\n\n$$y = x^2$$"),
        v4.new_code_cell("print('visible')", outputs=[v4.new_output("stream", text=f"{SHOWN}\n")]),
        v4.new_code_cell("draw()", outputs=[v4.new_output("display_data", data={"image/png": _figure_png(),
                                                                                 "text/plain": "<Figure>"})]),
        v4.new_markdown_cell("**Exercise 1.** Write `f`."),
        v4.new_code_cell(f"def f(x):\n    ### BEGIN SOLUTION\n    {SECRETS['solution']} = 2 * x\n"
                         f"    return {SECRETS['solution']}\n    ### END SOLUTION", metadata={"nbgrader": solution}),
        v4.new_code_cell(f"# Graded: 2 points\ncheck(f)\n### BEGIN HIDDEN TESTS\n"
                         f"grading(f, cases={SECRETS['hidden test']!r})\n### END HIDDEN TESTS",
                         metadata={"nbgrader": grade},
                         outputs=[v4.new_output("stream", text=f"Correct: {SECRETS['checker output']}\n")]),
        v4.new_markdown_cell("**Written question (2 points).** Why?"),
        v4.new_markdown_cell(f"**Model answer** (2 points, graded by hand)\n\nBecause {SECRETS['model answer']}.",
                             metadata={"nbgrader": written}),
    ]
    return v4.new_notebook(cells=cells, metadata={"kernelspec": dict(sync_workbook.KERNELSPEC)})


@pytest.fixture(scope="module")
def fixture_book(tmp_path_factory, timings):
    folder = tmp_path_factory.mktemp("fixture")
    (folder / "notebooks").mkdir()
    nbformat.write(fixture_notebook(), folder / "notebooks" / "09_fixture.ipynb")
    result = make_book.build(folder / "book", make_book.notebook_paths(folder / "notebooks"), docs=None)
    timings["build of the fixture's book (one notebook, no docs)"] = result.seconds
    return result


# --- the build ---------------------------------------------------------------------------------------

def test_every_page_is_built(book):
    pages = ["index.html"] + [f"notebooks/{p.stem}.html" for p in NOTEBOOKS] + [f"docs/{d}.html" for d in DOCS]
    missing = [p for p in pages if not (book.html / p).is_file()]
    assert not missing, f"not built: {missing}"
    landing = (book.html / "index.html").read_text()
    for path in NOTEBOOKS:
        assert f'href="notebooks/{path.stem}.html"' in landing, f"the landing page does not link {path.name}"
    assert 'href="docs/teaching.html"' in landing


def test_internal_links_resolve_and_nothing_loads_from_a_network(book):
    assert broken_links(book.html) == []
    assert (book.html / "_static" / "mathjax" / "tex-chtml.js").is_file()
    with_math = [p for p in book.html.rglob("*.html") if 'class="math' in p.read_text()]
    assert with_math, "no page has an equation"
    for page in with_math:
        scripts = page_links(page)[1]
        assert any(tag == "script" and src.endswith("_static/mathjax/tex-chtml.js") for tag, src in scripts), page


def test_a_warning_fails_the_build(tmp_path):
    nb = fixture_notebook()
    nb.cells.append(nbformat.v4.new_markdown_cell("See [the missing page](no_such_page.md)."))
    (tmp_path / "notebooks").mkdir()
    nbformat.write(nb, tmp_path / "notebooks" / "09_fixture.ipynb")
    with pytest.raises(RuntimeError, match="warnings are errors(.|\n)*no_such_page"):
        make_book.build(tmp_path / "book", make_book.notebook_paths(tmp_path / "notebooks"), docs=None)


def test_without_the_books_tools_the_build_says_how_to_get_them(monkeypatch, tmp_path):
    real = make_book.importlib.util.find_spec
    monkeypatch.setattr(make_book.importlib.util, "find_spec", lambda name: None if name == "myst_nb" else real(name))
    with pytest.raises(RuntimeError, match="myst_nb not installed: `make book` installs"):
        make_book.build(tmp_path, NOTEBOOKS, None)
    assert not (tmp_path / "src").exists()


def test_links_to_repository_files_outside_the_book_point_into_the_repository():
    text = "[tests](../tests/test_book.py) [notes](../docs/gpu.md#top) [site](https://x.org/a.md) [gone](../nope.md)"
    rewritten = make_book.rewrite_links(text, "notebooks/01_x.ipynb", {"docs/gpu.md"})
    assert f"[tests]({make_book.repository_link('tests/test_book.py')})" in rewritten
    assert "/blob/v" in rewritten and "[notes](../docs/gpu.md#top)" in rewritten
    assert "[site](https://x.org/a.md)" in rewritten and "[gone](../nope.md)" in rewritten


def test_the_book_extra_is_pinned_and_installed_as_pinned():
    """Like every dependency (tests/test_workbook_sync.py checks the other extras): the book's tools and
    everything they pull in are pinned in constraints.txt, and this environment has those versions."""
    import tomllib
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pins = {canonicalize_name(line.split("==")[0]): line.split("==")[1]
            for line in (ROOT / "constraints.txt").read_text().splitlines() if "==" in line}
    book = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["book"]
    seen, todo = set(), [Requirement(spec) for spec in book]
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if name in seen or (req.marker and not req.marker.evaluate({"extra": ""})):
            continue
        seen.add(name)
        assert name in pins, f"{name} (needed by the book) is not pinned in constraints.txt"
        assert req.specifier.contains(pins[name]), f"constraints.txt: {name}=={pins[name]} does not satisfy {req}"
        assert metadata.version(name) == pins[name], f"{name} {metadata.version(name)} installed, {pins[name]} pinned"
        todo += [Requirement(spec) for spec in metadata.requires(name) or []]
    assert {"sphinx", "myst-nb", "sphinx-book-theme", "sphinx-mathjax-offline", "docutils"} <= seen


def test_the_readme_says_how_the_book_is_built_and_published():
    readme = (ROOT / "README.md").read_text()
    workflow = (ROOT / ".github" / "workflows" / "book.yml").read_text()
    makefile = (ROOT / "Makefile").read_text()
    for promise in ("make book", "build/book/html", ".github/workflows/book.yml", "make book-check",
                    "never run", "placeholder"):
        assert promise in readme, f"the README no longer says {promise!r}"
    assert "\nbook:" in makefile and "book/make_book.py" in makefile and "tests/test_book.py" in makefile
    assert re.search(r"^test: .*\breplay book-check\b", makefile, re.M), "make test runs the book after the replay"
    assert "run: make book" in workflow and "path: build/book/html" in workflow and 'tags: ["v*"]' in workflow
    assert make_book.OUT == OUT and OUT / "html" == ROOT / "build" / "book" / "html"


# --- what the book leaves out ------------------------------------------------------------------------

def _site_text(site: Path) -> dict[str, str]:
    return {p.relative_to(site).as_posix(): p.read_text(errors="replace") for p in site.rglob("*")
            if p.is_file() and p.suffix in (".html", ".js", ".txt", ".ipynb", ".md", ".json", ".inv")
            and "_static" not in p.parts}


def test_the_fixtures_book_has_no_solution_no_hidden_test_no_model_answer(fixture_book):
    removed = fixture_book.removed["09_fixture.ipynb"]
    assert removed == {"solutions": 1, "hidden_tests": 1, "written_answers": 1, "outputs_cleared": 1}
    files = _site_text(fixture_book.html)
    assert any(name.endswith("09_fixture.ipynb") for name in files), "the downloadable notebook is missing"
    leaks = [f"{what} in {name}" for name, text in files.items() for what, word in SECRETS.items() if word in text]
    assert not leaks, leaks
    assert not [name for name, text in files.items() if "HIDDEN TESTS" in text or "BEGIN SOLUTION" in text]
    page = files["notebooks/09_fixture.html"]
    assert SHOWN in page and "NotImplementedError" in page and "check" in page
    assert "left out of the book" in page


def test_unbalanced_markers_stop_the_build_instead_of_publishing_a_solution(tmp_path):
    nb = fixture_notebook()
    nb.cells[4].source = nb.cells[4].source.replace("    ### END SOLUTION", "")
    (tmp_path / "notebooks").mkdir()
    nbformat.write(nb, tmp_path / "notebooks" / "09_fixture.ipynb")
    with pytest.raises(ValueError, match="09_fixture.ipynb cell 4: '### BEGIN SOLUTION' without"):
        make_book.assemble(make_book.notebook_paths(tmp_path / "notebooks"), None, tmp_path / "src")


def _solution_lines(nb) -> set[str]:
    """Lines of the notebook's solution blocks and model answers (12 characters or more) that occur
    nowhere else in it: not in another line of a cell, not in an output."""
    inside, lines, elsewhere = False, set(), []
    for cell in nb.cells:
        if reader_copy.is_written_answer(cell):
            lines.update(line.strip() for line in cell.source.splitlines()[1:] if line.strip())
            continue
        for line in cell.source.splitlines():
            stripped = line.strip()
            if stripped in (reader_copy.BEGIN_SOLUTION, reader_copy.END_SOLUTION):
                inside = stripped == reader_copy.BEGIN_SOLUTION
            elif stripped:
                (lines.add(stripped) if inside else elsewhere.append(stripped))
        elsewhere += [json.dumps(output) for output in cell.get("outputs", [])]
    other = "\n".join(elsewhere)
    return {line for line in lines if len(line) >= 12 and line not in other}


def _notebook_text(path: Path) -> str:
    """Every cell's text and every text output of the notebook at ``path``, unescaped."""
    nb = nbformat.read(path, as_version=4)
    outputs = [o.get("text", "") + "".join(v for v in o.get("data", {}).values() if isinstance(v, str))
               for c in nb.cells for o in c.get("outputs", [])]
    return "\n".join([c.source for c in nb.cells] + outputs)


def _page_text(path: Path) -> str:
    from bs4 import BeautifulSoup

    return BeautifulSoup(path.read_text(), "html.parser").get_text()


def test_the_real_books_notebook_pages_hold_no_solution_and_no_model_answer(book):
    checked = 0
    for path in NOTEBOOKS:
        solution = _solution_lines(nbformat.read(path, as_version=4))
        checked += len(solution)
        copies = [book.html / "notebooks" / f"{path.stem}.html", *book.html.rglob(path.name)]
        assert len(copies) >= 3, f"{path.name}: the page, its source and its download: {copies}"
        for copy in copies:
            text = _page_text(copy) if copy.suffix == ".html" else _notebook_text(copy)
            found = sorted(line for line in solution if line in text)
            assert not found, f"{copy.relative_to(book.html)} shows solution lines: {found[:3]}"
            assert "HIDDEN TESTS" not in text
    assert checked >= 2 * len(NOTEBOOKS), "too few solution lines to check: are the markers still there?"


def test_notebook_pages_show_the_committed_outputs_a_colab_badge_and_a_download_link(book):
    from bs4 import BeautifulSoup

    for path in NOTEBOOKS:
        shown = nbformat.read(book.src / "notebooks" / path.name, as_version=4)
        page = BeautifulSoup((book.html / "notebooks" / f"{path.stem}.html").read_text(), "html.parser")
        badge = page.find("a", href=sync_workbook.colab_link(path))
        assert badge is not None and badge.img is not None and not badge.img["src"].startswith("http"), path.name
        download = [a for a in page.find_all("a", href=True) if a["href"].endswith(f"/{path.name}")
                    and "_downloads" in a["href"]]
        assert download and "Download the notebook" in download[0].get_text(), path.name
        downloaded = nbformat.read(book.html / "notebooks" / download[0]["href"], as_version=4)
        assert downloaded == shown
        text = page.get_text()
        streams = [o["text"] for c in shown.cells if c.cell_type == "code" for o in c.outputs
                   if o.output_type == "stream" and o.name == "stdout"]
        missing = [s for s in streams if s.strip() not in text]
        assert streams and not missing, f"{path.name}: printed outputs missing from the page: {missing[:2]}"
        figures = sum("image/png" in o.get("data", {}) for c in shown.cells if c.cell_type == "code" for o in c.outputs)
        assert len(page.select(".cell_output img")) == figures > 0, path.name


# --- in the browser, from file:// ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def browser():
    with chromium_or_skip("the book's browser check") as instance:
        yield instance


@pytest.fixture
def offline_page(browser):
    """A page whose every request that is not for a file is refused; ``page.network`` lists them."""
    context = browser.new_context(viewport=VIEWPORT)
    network: list[str] = []

    def refuse(route):
        if route.request.url.startswith("file:"):
            route.continue_()
        else:
            network.append(route.request.url)
            route.abort()

    context.route("**/*", refuse)
    page = context.new_page()
    page.network = network
    yield page
    context.close()


_READ = """async () => {
  const wait = (p, ms) => Promise.race([p, new Promise(r => setTimeout(r, ms))]);
  const mathjax_failed = [];
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    try { await wait(MathJax.startup.promise, 20000); } catch (e) { mathjax_failed.push(String(e).slice(0, 200)); }
  }
  const images = Array.from(document.querySelectorAll('img'));
  images.forEach(i => { i.loading = 'eager'; });
  await wait(Promise.all(images.map(i => i.decode().catch(() => null))), 20000);
  const math = Array.from(document.querySelectorAll('.math'));
  const skipped = 'pre, code, script, style, textarea, .math, mjx-container';
  const outsideCode = {acceptNode: n => n.parentElement.closest(skipped) ? NodeFilter.FILTER_REJECT
                                                                         : NodeFilter.FILTER_ACCEPT};
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT, outsideCode);
  const dollars = [];
  while (walker.nextNode()) {
    const text = walker.currentNode.textContent;
    if (text.includes('$')) dollars.push(text.trim().slice(0, 80));
  }
  return {
    images: images.length,
    undrawn: images.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src')),
    figures: document.querySelectorAll('.cell_output img').length,
    math: math.length,
    untypeset: math.filter(m => !m.querySelector('mjx-container')).map(m => m.textContent.slice(0, 80)),
    math_errors: Array.from(document.querySelectorAll('mjx-merror')).map(e => e.textContent.slice(0, 80)),
    mathjax_failed,
    dollars,
  };
}"""


def read_page(page, path: Path) -> dict:
    """Open ``path`` from ``file://`` and report what a reader sees (see ``_READ``)."""
    page.goto(path.resolve().as_uri())
    page.wait_for_load_state("load")
    seen = page.evaluate(_READ)
    seen["network"] = list(page.network)
    return seen


def _problems(seen: dict, figures: int | None = None) -> list[str]:
    checks = ("undrawn", "untypeset", "math_errors", "mathjax_failed", "dollars", "network")
    problems = [f"{key}: {seen[key]}" for key in checks if seen[key]]
    if figures is not None and seen["figures"] != figures:
        problems.append(f"{seen['figures']} figures shown, {figures} committed")
    return problems


def _shoot(page, name: str, selector: str | None = None) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    target = SHOTS / f"{name}.png"
    if selector:
        page.locator(selector).first.scroll_into_view_if_needed()
        page.wait_for_timeout(200)
    page.screenshot(path=str(target))
    return target


def test_every_page_read_offline_shows_its_figures_and_typeset_math(book, offline_page, timings):
    start = time.monotonic()
    pages = sorted(p for p in book.html.rglob("*.html") if "_static" not in p.relative_to(book.html).parts)
    report = {}
    for path in pages:
        name = path.relative_to(book.html).with_suffix("").as_posix()
        committed = None
        if name.startswith("notebooks/"):
            shown = nbformat.read(book.src / f"{name}.ipynb", as_version=4)
            committed = sum("image/png" in o.get("data", {}) for c in shown.cells if c.cell_type == "code"
                            for o in c.outputs)
        seen = read_page(offline_page, path)
        report[name] = _problems(seen, committed)
        shot = name.replace("/", "-")
        _shoot(offline_page, shot)
        if seen["figures"]:
            _shoot(offline_page, f"{shot}-figure", ".cell_output img")
        if seen["math"]:
            _shoot(offline_page, f"{shot}-math", ".math")
    timings[f"browser check: {len(pages)} pages from file://, screenshots"] = time.monotonic() - start
    assert {name: problems for name, problems in report.items() if problems} == {}
    assert len(list(SHOTS.glob("*.png"))) >= len(pages)
    typeset = read_page(offline_page, book.html / "notebooks" / "02_gradient_accumulation.html")
    assert typeset["math"] > 0, "notebook 02's equations are gone from the page"


def test_the_fixtures_page_read_offline(fixture_book, offline_page):
    seen = read_page(offline_page, fixture_book.html / "notebooks" / "09_fixture.html")
    _shoot(offline_page, "fixture-09_fixture-exercise", ".admonition")
    assert _problems(seen, figures=1) == []
    assert seen["math"] == 3 and seen["images"] >= 2  # the figure and the Colab badge


def test_the_browser_check_finds_what_is_broken(tmp_path, offline_page):
    page = tmp_path / "broken.html"
    page.write_text('<html><body><p>raw $x^2$ left</p><span class="math">\\(y\\)</span>'
                    '<div class="cell_output"><img src="gone.png"></div>'
                    '<script src="https://cdn.example.org/tex-chtml.js"></script></body></html>')
    seen = read_page(offline_page, page)
    problems = "\n".join(_problems(seen, figures=2))
    for expected in ("undrawn: ['gone.png']", "untypeset: ['\\\\(y\\\\)']", "dollars: ['raw $x^2$ left']",
                     "network: ['https://cdn.example.org/tex-chtml.js']", "1 figures shown, 2 committed"):
        assert expected in problems, problems
    assert re.search(r"no file gone\.png", "\n".join(broken_links(tmp_path)))


def test_the_browser_check_finds_a_mathjax_part_missing_from_the_site(fixture_book, offline_page, tmp_path):
    """MathJax loads a TeX extension (here \\boldsymbol's) only when a page needs it: without it in the
    site, the page's equations stay raw and the check says so."""
    import shutil

    site = tmp_path / "html"
    shutil.copytree(fixture_book.html, site)
    shutil.rmtree(site / "_static" / "mathjax" / "input" / "tex" / "extensions")
    problems = "\n".join(_problems(read_page(offline_page, site / "notebooks" / "09_fixture.html")))
    assert "boldsymbol.js" in problems and "untypeset" in problems, problems
