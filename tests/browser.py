"""JupyterLab in a real browser: start a server from this environment, drive headless Chromium.

Shared by the tests that need a browser (``tests/test_browser.py``; a static book's screenshots can
reuse it). Chromium is Debian's ``chromium`` package, driven by Playwright from PyPI, which cannot
download its own browsers here: it is launched with ``executable_path`` set to the real binary (the
``chromium`` wrapper script on the PATH misbehaves under Playwright) and ``--no-sandbox`` as root.

    with JupyterLab(root=folder) as lab, chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        notebook = open_notebook(page, lab, "01_queue_decoupling.ipynb")
        run_all_cells(page, lab)

``make chromium`` installs the browser where it can (root with apt-get); without it the tests say
how to get one (:data:`HOW_TO_GET_CHROMIUM`), and fail instead in CI (``CI=true``).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import lab as lab_tool  # noqa: E402

__all__ = ["HOW_TO_GET_CHROMIUM", "BrowserMissing", "chromium_executable", "in_ci", "ensure_chromium",
           "JupyterLab", "chromium", "chromium_or_skip",
           "NotebookReport", "open_notebook", "is_dirty", "click_menu", "run_all_cells", "report",
           "menu_labels"]

# The real browser binaries (not wrapper scripts), in the order they are tried; CHROMIUM overrides.
CHROMIUM_BINARIES = ("/usr/lib/chromium/chromium", "/usr/lib/chromium-browser/chromium-browser")
HOW_TO_GET_CHROMIUM = ("no Chromium found: install Debian's or Ubuntu's package (`sudo apt-get install "
                       "chromium`; `make chromium` does it as root) or set CHROMIUM=/path/to/the/chromium/binary")
STDERR_MIME = "application/vnd.jupyter.stderr"  # JupyterLab 4 renders tracebacks with it too
ERROR_MIME = "application/vnd.jupyter.error"


class BrowserMissing(RuntimeError):
    """No Chromium binary to drive."""


class PortTaken(RuntimeError):
    """The port chosen for JupyterLab was taken before it could bind it."""


def chromium_executable() -> Path:
    """The Chromium binary Playwright should launch; raises :class:`BrowserMissing` if none.

    >>> chromium_executable().name.startswith("chromium")  # doctest: +SKIP
    True
    """
    candidates = [os.environ["CHROMIUM"]] if os.environ.get("CHROMIUM") else list(CHROMIUM_BINARIES)
    for candidate in candidates:
        path = Path(candidate)
        if path.is_file() and os.access(path, os.X_OK):
            return path
    raise BrowserMissing(HOW_TO_GET_CHROMIUM)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class JupyterLab:
    """A JupyterLab server started as ``make lab`` (``role="learner"``) or ``make teach`` starts it,
    serving ``root``, on a free local port with a random token. Use it as a context manager.

    JupyterLab's user settings and workspaces live in a temporary folder for the server's life, so
    neither the user's own settings nor an earlier run change what the browser sees.
    """

    root: Path
    role: str = "learner"
    start_timeout: float = 120.0
    port: int = 0
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    log: str = ""
    _process: subprocess.Popen | None = None
    _private: tempfile.TemporaryDirectory | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def api(self, path: str, method: str = "GET", timeout: float = 10):
        """``method`` ``/api/<path>``; the answer's JSON (None when it has none)."""
        request = urllib.request.Request(f"{self.url}/api/{path}", method=method,
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read()
        return json.loads(body) if body else None

    def page_url(self, path: str) -> str:
        return f"{self.url}/lab/tree/{path}?token={self.token}&reset"

    def read_log(self) -> str:
        """The server's log so far (its stdout and stderr)."""
        return self._log_path.read_text(errors="replace") if self._private else self.log

    def kernels(self) -> list[dict]:
        """The server's kernels. A listing that races a kernel's start or shutdown can answer 500
        (seen once here): it is asked again, up to five times."""
        for attempt in range(5):
            try:
                return self.api("kernels")
            except urllib.error.HTTPError as error:
                if error.code < 500 or attempt == 4:
                    raise
                time.sleep(1.0)
        raise AssertionError("not reached")

    def shut_down_kernels(self, timeout: float = 60) -> None:
        """Shut down every kernel the server runs (a TensorFlow kernel holds about 1 GB), and wait
        until none is listed."""
        for kernel in self.kernels():
            with contextlib.suppress(OSError):
                self.api(f"kernels/{kernel['id']}", method="DELETE", timeout=30)
        _wait(lambda: not self.kernels(), timeout, "every kernel shut down")

    def __enter__(self) -> "JupyterLab":
        try:
            return self._start()
        except PortTaken:  # another process bound the free port first: once more, on another
            self.port = 0
            return self._start()

    def _start(self) -> "JupyterLab":
        self._private = tempfile.TemporaryDirectory(prefix="jupyterlab-")
        private = Path(self._private.name)
        self.port = self.port or _free_port()
        # port_retries=0: on a taken port JupyterLab stops instead of serving on another one
        options = ["--no-browser", f"--port={self.port}", "--ServerApp.port_retries=0", "--ServerApp.ip=127.0.0.1",
                   f"--IdentityProvider.token={self.token}"]
        if os.geteuid() == 0:
            options.append("--allow-root")
        # No news or update toasts over the notebook (the default asks once whether to fetch news).
        notification = (private / "settings" / "@jupyterlab" / "apputils-extension"
                        / "notification.jupyterlab-settings")
        notification.parent.mkdir(parents=True)
        notification.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
        argv, env = lab_tool.lab_command(self.role, root=Path(self.root), options=options,
                                        config=private / "config")
        env = {**os.environ, **env, "JUPYTERLAB_SETTINGS_DIR": str(private / "settings"),
               "JUPYTERLAB_WORKSPACES_DIR": str(private / "workspaces")}
        self._log_path = private / "server.log"
        self._log_file = open(self._log_path, "w")
        self._process = subprocess.Popen(argv, env=env, stdout=self._log_file, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                self.__exit__(None, None, None)
                if "already in use" in self.log:
                    raise PortTaken(self.port)
                raise RuntimeError(f"JupyterLab exited with {self._process.returncode}:\n{self.log[-3000:]}")
            with contextlib.suppress(OSError):
                self.api("status")
                return self
            time.sleep(0.5)
        self.__exit__(None, None, None)
        raise TimeoutError(f"JupyterLab did not answer within {self.start_timeout:.0f} s:\n{self.log[-3000:]}")

    def __exit__(self, *exc) -> None:
        if self._process is not None and self._process.poll() is None:
            os.killpg(self._process.pid, signal.SIGTERM)  # the server and the kernels it started
            try:
                self._process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self._process.pid, signal.SIGKILL)
                self._process.wait()
        if self._private is not None:
            self._log_file.close()
            self.log = self._log_path.read_text(errors="replace")
            self._private.cleanup()
            self._private = None


@contextlib.contextmanager
def chromium() -> Iterator:
    """A headless Chromium browser (Playwright) on the system's Chromium binary."""
    from playwright.sync_api import sync_playwright

    executable = chromium_executable()
    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(executable), headless=True, args=args)
        try:
            yield browser
        finally:
            browser.close()


@contextlib.contextmanager
def chromium_or_skip(purpose: str) -> Iterator:
    """:func:`chromium` for a test fixture: without a browser, CI fails (naming ``purpose``) and
    elsewhere the test skips with how to get one."""
    import pytest

    try:
        chromium_executable()
    except BrowserMissing as missing:
        if in_ci():
            pytest.fail(f"CI needs {purpose}: {missing}")
        pytest.skip(str(missing))
    with chromium() as instance:
        yield instance


def _kernel_states(lab: JupyterLab) -> list[str]:
    return [kernel["execution_state"] for kernel in lab.kernels()]


def _wait(condition, timeout: float, what: str, interval: float = 0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"{what}: not within {timeout:.0f} s")


def open_notebook(page, lab: JupyterLab, path: str, timeout: float = 120.0) -> None:
    """Open ``path`` (relative to the server's root) and wait until its kernel is idle."""
    page.goto(lab.page_url(path))
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=timeout * 1000)
    _wait(lambda: _kernel_states(lab) == ["idle"], timeout, f"{path}: a kernel, idle")


def is_dirty(page) -> bool:
    """True when JupyterLab marks the current notebook as changed since it was opened or saved."""
    return page.evaluate("() => !!document.querySelector('.lm-TabBar-tab.jp-mod-current.jp-mod-dirty')")


def menu_labels(page) -> list[str]:
    """The labels of JupyterLab's top menu bar (File, Edit, …)."""
    return page.eval_on_selector_all(".lm-MenuBar-itemLabel", "items => items.map(i => i.textContent.trim())")


def click_menu(page, menu: str, item: str) -> None:
    """Choose ``menu`` → ``item`` in JupyterLab's menu bar, as a user would."""
    page.click(f".lm-MenuBar-itemLabel:text-is('{menu}')")
    page.click(f".lm-Menu-itemLabel:text-is('{item}')")


_PROMPTS = """() => Array.from(document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt'))
                    .map(p => p.textContent.trim())"""


def run_all_cells(page, lab: JupyterLab, timeout: float = 900.0) -> float:
    """Run → Run All Cells through the menu; wait until no cell is queued or running and the kernel is
    idle; returns the seconds it took."""
    start = time.monotonic()
    click_menu(page, "Run", "Run All Cells")

    def finished() -> bool:
        prompts = page.evaluate(_PROMPTS)
        return not any("*" in p for p in prompts) and _kernel_states(lab) == ["idle"]

    _wait(lambda: any("*" in p for p in page.evaluate(_PROMPTS)), 60, "Run All Cells started", interval=0.1)
    # Two idle readings a second apart: a cell that is about to start must not be missed.
    _wait(lambda: finished() and (time.sleep(1.0) or finished()), timeout, "Run All Cells finished", interval=1.0)
    return time.monotonic() - start


@dataclass
class NotebookReport:
    """What the browser shows once a notebook has run."""

    code_cells: int
    executed_cells: int
    stderr_outputs: list[str]
    error_outputs: list[str]
    images: int
    images_drawn: int


_REPORT = """() => {
  const text = sel => Array.from(document.querySelectorAll(sel)).map(e => e.textContent.slice(0, 500));
  const prompts = Array.from(document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt'))
                       .map(p => p.textContent.trim());
  const images = Array.from(document.querySelectorAll('.jp-Notebook .jp-OutputArea-output img'));
  return {
    code_cells: prompts.length,
    executed_cells: prompts.filter(p => /\\[\\d+\\]/.test(p)).length,
    stderr_outputs: text(".jp-OutputArea-output[data-mime-type='%s']"),
    error_outputs: text(".jp-OutputArea-output[data-mime-type='%s']"),
    images: images.length,
    images_drawn: images.filter(i => i.complete && i.naturalWidth > 0).length,
  };
}""" % (STDERR_MIME, ERROR_MIME)


def report(page) -> NotebookReport:
    """Count the current notebook's executed cells, stderr and error outputs, and drawn images."""
    return NotebookReport(**page.evaluate(_REPORT))


def in_ci() -> bool:
    """True in CI (``CI=true``), where a missing browser is installed or is a failure."""
    return os.environ.get("CI", "").lower() == "true"


def ensure_chromium() -> int:
    """``make chromium``: 0 when a Chromium binary is there (or was installed now), 1 if CI lacks one.

    In CI, as root with apt-get, it installs Debian's ``chromium`` package; elsewhere it only says
    how to get one (the browser test then reports itself skipped with the same line).
    """
    with contextlib.suppress(BrowserMissing):
        chromium_executable()
        return 0
    if not in_ci():
        print(f"note: {HOW_TO_GET_CHROMIUM}; the browser test will be skipped")
        return 0
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        print(f"CI: {HOW_TO_GET_CHROMIUM} (cannot install it: not root, or no apt-get)", file=sys.stderr)
        return 1
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "chromium"]
    if subprocess.run(install, env=env).returncode != 0:  # the package lists may be missing or stale
        subprocess.run(["apt-get", "update"], env=env, check=False)
        subprocess.run(install, env=env, check=False)
    try:
        print(f"installed {chromium_executable()}")
        return 0
    except BrowserMissing as missing:
        print(f"CI: {missing}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(ensure_chromium())
