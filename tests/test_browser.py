"""Every notebook run from JupyterLab's own menu in headless Chromium, as a learner runs it.

JupyterLab is started from this environment as ``make lab`` starts it (``tools/lab.py``, learner:
nbgrader hidden), serving copies of the committed notebooks in a temporary folder (a run must not
rewrite the committed files). For each notebook: it opens unmodified (JupyterLab rewrote nothing);
Edit → Clear Outputs of All Cells, then Run → Run All Cells; then every code cell has run, no output
is an error or a stderr block (JupyterLab 4 renders tracebacks as ``application/vnd.jupyter.stderr``),
it drew as many figures as the committed notebook holds and each image decoded
(``naturalWidth > 0``), and the kernel is idle. Screenshots and the time each notebook took go to
``build/browser/`` (the README's picture is taken from there: ``docs/images/``).

A learner's copy (``make lab``'s) opens unmodified too, without nbgrader's menu, and Run All Cells
stops at its first exercise with a one-line message; a teacher's JupyterLab (``make teach``'s) shows
nbgrader's menu.

Chromium is Debian's package (``make chromium``). Without it the tests are skipped, saying how to
get it; in CI (``CI=true``) they fail instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

import tests.browser as browser_module
from tests.browser import (STDERR_MIME, BrowserMissing, JupyterLab, chromium_executable, chromium_or_skip, click_menu,
                           is_dirty, menu_labels, open_notebook, report, run_all_cells)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import lab as lab_tool  # noqa: E402
import sync_workbook  # noqa: E402

NOTEBOOKS = sync_workbook.notebook_paths()
OUT = ROOT / "build" / "browser"
VIEWPORT = {"width": 1280, "height": 800}
README_IMAGE = ROOT / "docs" / "images" / "jupyterlab.png"
README_SOURCE = OUT / "01_queue_decoupling-readme.png"  # what the test writes for docs/images/


def _stays_clean(page, seconds: float = 5.0) -> bool:
    """Not marked modified at any reading over ``seconds`` (JupyterLab rewrites metadata as the kernel
    connects, which may come late on a loaded machine)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if is_dirty(page):
            return False
        time.sleep(0.25)
    return True


def _figures(path: Path) -> int:
    nb = nbformat.read(path, as_version=4)
    return sum(1 for cell in nb.cells if cell.cell_type == "code" for output in cell.get("outputs", [])
               if output.get("output_type") in ("display_data", "execute_result")
               and any(mime.startswith("image/") for mime in output.get("data", {})))


@pytest.fixture(scope="module")
def browser():
    with chromium_or_skip("the browser test") as instance:
        yield instance


@pytest.fixture(scope="module")
def learner_lab(tmp_path_factory, browser):
    folder = tmp_path_factory.mktemp("lab")
    for path in NOTEBOOKS:
        shutil.copy(path, folder / path.name)
    with JupyterLab(root=folder, role="learner") as server:
        yield server


@pytest.fixture(scope="module")
def timings():
    times: dict[str, float] = {}
    yield times
    _write_times(times)


def _write_times(times: dict[str, float]) -> None:
    """build/browser/times.txt: this run's time per notebook. pytest-xdist's workers (make browser runs
    two) each add theirs under a lock; a file from an earlier run is replaced."""
    import fcntl

    run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"{os.getpid()}-{time.time()}"
    header = ("Run All Cells in JupyterLab, headless Chromium (this machine, its load at the time, two "
              f"notebooks at once under make browser; run {run}):")
    OUT.mkdir(parents=True, exist_ok=True)
    with open(OUT / "times.txt", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        lines = handle.read().splitlines()
        kept = lines[1:] if lines and lines[0] == header else []
        kept += [f"{name}  {seconds:.0f} s" for name, seconds in times.items()]
        handle.seek(0)
        handle.truncate()
        handle.write("\n".join([header, *sorted(kept)]) + "\n")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_from_jupyterlabs_menu(path, browser, learner_lab, timings):
    page = browser.new_page(viewport=VIEWPORT)
    try:
        open_notebook(page, learner_lab, path.name)
        assert _stays_clean(page), f"{path.name} opens modified: JupyterLab rewrote it (run `make sync`)"
        click_menu(page, "Edit", "Clear Outputs of All Cells")
        cleared = report(page)
        assert cleared.images == cleared.executed_cells == 0, cleared

        timings[path.name] = run_all_cells(page, learner_lab)
        seen = report(page)
        OUT.mkdir(parents=True, exist_ok=True)
        _screenshot(page, OUT / f"{path.stem}.png")
        if path.stem == "01_queue_decoupling":
            _screenshot(page, README_SOURCE, small=True)

        assert seen.executed_cells == seen.code_cells > 0, f"{path.name}: only {seen.executed_cells} of " \
            f"{seen.code_cells} code cells ran"
        assert not seen.error_outputs, f"{path.name}: errors: {seen.error_outputs}"
        assert not seen.stderr_outputs, f"{path.name}: stderr blocks: {seen.stderr_outputs}"
        assert seen.images == _figures(path), f"{path.name}: {seen.images} figures drawn, the committed " \
            f"notebook has {_figures(path)}"
        assert seen.images_drawn == seen.images, f"{path.name}: {seen.images - seen.images_drawn} figures " \
            "did not render"
        assert [k["execution_state"] for k in learner_lab.kernels()] == ["idle"]
    finally:
        page.close()
        learner_lab.shut_down_kernels()


def _screenshot(page, target: Path, small: bool = False) -> None:
    """The notebook scrolled to its first figure (or its top), as the user sees it."""
    first_image = page.query_selector(".jp-Notebook .jp-OutputArea-output img")
    if first_image is not None:
        first_image.scroll_into_view_if_needed()
        page.wait_for_timeout(300)
    page.screenshot(path=str(target))
    if small:  # the README's copy: 256 colours keep it small
        from PIL import Image

        with Image.open(target) as image:
            image.convert("RGB").quantize(colors=256).save(target, optimize=True)


def test_a_learners_copy_opens_clean_without_nbgrader_and_runs_to_its_first_exercise(browser, learner_lab):
    """The README's promise: Run All Cells on a learner's copy runs it from the top and stops at the first
    unfinished exercise with one line; the learner sees no nbgrader."""
    copies = lab_tool.learner_copies(target=learner_lab.root / "my-notebooks")
    copy = copies[-1]  # 05, the quickest to run
    page = browser.new_page(viewport=VIEWPORT)
    try:
        open_notebook(page, learner_lab, f"my-notebooks/{copy.name}")
        assert "Nbgrader" not in menu_labels(page)
        assert _stays_clean(page), f"the learner's copy {copy.name} opens modified"
        assert "raise NotImplementedError()" in page.eval_on_selector(".jp-Notebook", "n => n.textContent")
        run_all_cells(page, learner_lab)
        seen = report(page)
        assert len(seen.stderr_outputs) == 1, seen.stderr_outputs
        message = seen.stderr_outputs[0].strip()
        assert "is not written yet" in message and len(message.splitlines()) == 1, message
        stopped_at = page.evaluate("""() => {
          const cells = Array.from(document.querySelectorAll('.jp-Notebook .jp-CodeCell'));
          const i = cells.findIndex(c => c.querySelector("[data-mime-type='%s']"));
          return i < 0 ? '' : cells[i].querySelector('.jp-InputArea-editor .cm-line').textContent;
        }""" % STDERR_MIME)
        assert stopped_at.startswith("# Graded:"), stopped_at
        assert 0 < seen.executed_cells < seen.code_cells
    finally:
        page.close()
        learner_lab.shut_down_kernels()
    assert "nbgrader" not in learner_lab.read_log().lower()


def test_teacher_sees_nbgrader(browser, tmp_path):
    """The other side of the learner's check: the same JupyterLab as a teacher starts it has nbgrader."""
    shutil.copy(NOTEBOOKS[0], tmp_path / NOTEBOOKS[0].name)
    with JupyterLab(root=tmp_path, role="teacher") as server:
        page = browser.new_page(viewport=VIEWPORT)
        try:
            page.goto(server.page_url(""))
            page.wait_for_selector(".lm-MenuBar-itemLabel")
            page.wait_for_selector(".lm-MenuBar-itemLabel:text-is('Nbgrader')", timeout=60_000)
        finally:
            page.close()
        assert "nbgrader" in server.read_log().lower()


def test_readme_picture_is_the_browser_tests_screenshot():
    """docs/images/jupyterlab.png is a copy of what this test wrote (same size), shown by the README."""
    from PIL import Image

    assert README_IMAGE.is_file(), f"missing {README_IMAGE.relative_to(ROOT)}"
    assert README_IMAGE.stat().st_size < 250_000, "keep the README's picture small"
    assert "docs/images/jupyterlab.png" in (ROOT / "README.md").read_text()
    with Image.open(README_IMAGE) as image:
        assert image.size == (VIEWPORT["width"], VIEWPORT["height"])


def test_a_missing_browser_says_how_to_get_one(monkeypatch, capsys):
    monkeypatch.setenv("CHROMIUM", "/no/such/chromium")
    with pytest.raises(BrowserMissing, match="apt-get install chromium"):
        chromium_executable()
    monkeypatch.delenv("CI", raising=False)
    assert browser_module.ensure_chromium() == 0  # a user's machine: a note, then the test skips
    assert "apt-get install chromium" in capsys.readouterr().out


def test_in_ci_a_missing_browser_is_installed_or_fails(monkeypatch, tmp_path, capsys):
    target = tmp_path / "chromium"
    monkeypatch.setenv("CHROMIUM", str(target))
    monkeypatch.setenv("CI", "true")
    monkeypatch.setattr(browser_module.os, "geteuid", lambda: 1000)
    assert browser_module.ensure_chromium() == 1
    assert "cannot install it" in capsys.readouterr().err

    commands = []

    def apt_get(argv, **kwargs):  # stands in for apt-get: records it, "installs" the binary
        commands.append(argv)
        target.write_text("#!/bin/sh\n")
        target.chmod(0o755)
        return subprocess.CompletedProcess(argv, 0)

    monkeypatch.setattr(browser_module.os, "geteuid", lambda: 0)
    monkeypatch.setattr(browser_module.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(browser_module.subprocess, "run", apt_get)
    assert browser_module.ensure_chromium() == 0
    assert commands == [["apt-get", "install", "-y", "chromium"]]
