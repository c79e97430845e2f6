"""Every Python this machine has, as a newcomer would pass it to ``make lab``.

Pythons are looked for on the PATH, in /usr/bin and in pyenv's versions (one per full version).
Each one that make does not support (3.10 and older, 3.14) must be refused in one line, with no
``.venv`` made. For each supported one (3.11 to 3.13) except the one running these tests (``make
unit`` tests that one fully), in a temporary folder holding the files a clone has:

1. ``make lab PYTHON=<it> LAB_ARGS=--version``: ``.venv`` with the learner's extras only (no
   nbgrader), the learner's copies in ``my-notebooks/``, JupyterLab starting (it prints its version
   and exits); the ``.venv`` is smaller than the README says;
2. ``make .venv/.installed``: the developers' extras added, pinned by the same constraints file;
3. :data:`FAST_TESTS` with that ``.venv``'s pytest.

Which supported Pythons: by default (``make test``) the newest of each minor version other than the
running one's, whose wheels differ from the stack ``make unit`` tests; and of those, the steps
above run only where nothing else in ``make test`` installs the workbook. On Colab's Python
(:data:`COLAB_MINOR`, 3.13) ``make replay-colab`` already makes a virtual environment, installs the
workbook with the test extra and runs the replay and the set-up tests: there this file only asks
that Python's own pip to resolve ``constraints.txt`` with every extra (``pip install --dry-run``):
every pin has a wheel for it and accepts it, which is what differs between the two constraints
files (docs/decisions.md, "CI time"). ``PYTHONS=all`` (``make pythons PYTHONS=all``) runs the steps on
every one, such as Debian 12's 3.11.2 beside pyenv's 3.11.7 and 3.13: for a Python of the running
one's minor version only step 1 runs (the same wheels; step 1 shows that pip accepts every pin on it).
``PYTHONS="3.11.2 3.13"`` runs them on those. To save CI time pip does not byte-compile
(``PIP_NO_COMPILE=1``): the installed files are the same. Each step's time goes to
``build/pythons.txt`` (pip installs from its cache when it can).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUPPORTED = ("3.11", "3.12", "3.13")
REFUSED = ("3.8", "3.9", "3.10", "3.14")  # looked for too: make must refuse each
# Quick tests that still import TensorFlow, Keras and the helpers on that Python, plus the set-up's own.
FAST_TESTS = ["tests/test_workbook_sync.py", "tests/test_lab.py", "tests/test_student.py",
              "tests/test_arguments.py", "tests/test_tf1.py"]
VENV_LIMIT_GB = 3.0  # the README: "under 3 GB on disk"
LOG = ROOT / "build" / "pythons.txt"
COLAB_MINOR = "3.13"  # make replay-colab installs the workbook on it (the Makefile's COLAB_PYTHON)
EXTRAS = "lab,teach,test"  # every extra constraints.txt pins


def _version(python: str) -> str | None:
    try:
        proc = subprocess.run([python, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def pythons_here(minors=SUPPORTED) -> dict[str, str]:
    """``{full version: executable}`` of every Python ``minor`` version (``"3.12"``) this machine has."""
    candidates = []
    for minor in minors:
        candidates += [shutil.which(f"python{minor}") or "", f"/usr/bin/python{minor}"]
        candidates += sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{minor}.*/bin/python{minor}")))
    found: dict[str, str] = {}
    for candidate in filter(None, candidates):
        version = _version(candidate)
        if version and version.rsplit(".", 1)[0] in minors:
            found.setdefault(version, candidate)
    return found


def _by_version(found: dict[str, str]) -> list[tuple[str, str]]:
    return sorted(found.items(), key=lambda item: [int(x) for x in item[0].split(".")])


def _selected() -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The Pythons to install on (fresh clone, make lab, fast tests), and those only to resolve on."""
    mine = "%d.%d.%d" % sys.version_info[:3]
    found = [(v, p) for v, p in _by_version(pythons_here()) if v != mine]
    wanted = os.environ.get("PYTHONS", "").split()
    if wanted == ["all"]:
        return found, []
    if wanted:
        return [(v, p) for v, p in found if v in wanted or v.rsplit(".", 1)[0] in wanted], []
    newest = {v.rsplit(".", 1)[0]: (v, p) for v, p in found}  # sorted: the last of each minor wins
    others = [newest[m] for m in sorted(newest, key=lambda m: int(m.split(".")[1])) if m != mine.rsplit(".", 1)[0]]
    return ([(v, p) for v, p in others if v.rsplit(".", 1)[0] != COLAB_MINOR],
            [(v, p) for v, p in others if v.rsplit(".", 1)[0] == COLAB_MINOR])


def _clone(target: Path) -> None:
    """Copy the files a clone of this repository would have (tracked or new, not ignored)."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, files):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def _run(argv: list[str], cwd: Path, timeout: float = 1800) -> tuple[subprocess.CompletedProcess, float]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "MAKEFLAGS")}
    env["PIP_NO_COMPILE"] = "1"
    start = time.monotonic()
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    return proc, time.monotonic() - start


def _log(line: str) -> None:
    LOG.parent.mkdir(parents=True, exist_ok=True)
    with LOG.open("a") as handle:
        handle.write(line + "\n")


def _size_gb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink()) / 1e9


SELECTED, RESOLVED_ONLY = _selected()
UNSUPPORTED = _by_version(pythons_here(REFUSED))


@pytest.mark.skipif(not UNSUPPORTED, reason="no unsupported Python on this machine")
@pytest.mark.parametrize(("version", "python"), UNSUPPORTED, ids=[v for v, _ in UNSUPPORTED])
def test_an_unsupported_python_is_refused_in_one_line(version, python, tmp_path):
    proc, _ = _run(["make", "-s", "lab", f"PYTHON={python}", f"VENV={tmp_path / 'venv'}"], ROOT, timeout=120)
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()], proc.stderr
    minor = version.rsplit(".", 1)[0]
    assert f"is Python {minor}: this workbook needs Python 3.11 to 3.13" in proc.stderr
    assert not (tmp_path / "venv").exists()
    _log(f"Python {version} ({python}): refused: {proc.stderr.strip()}")


@pytest.mark.skipif(not SELECTED, reason="no other supported Python on this machine")
@pytest.mark.parametrize(("version", "python"), SELECTED, ids=[v for v, _ in SELECTED])
def test_a_fresh_clone_installs_and_passes_the_fast_tests(version, python, tmp_path):
    clone = tmp_path / "clone"
    _clone(clone)
    venv = clone / ".venv"
    try:
        lab, lab_time = _run(["make", "-s", "lab", f"PYTHON={python}", "LAB_ARGS=--version"], clone)
        assert lab.returncode == 0, f"make lab with Python {version}:\n{lab.stdout[-3000:]}\n{lab.stderr[-3000:]}"
        assert re.fullmatch(r"\d+\.\d+\.\d+\S*", lab.stdout.strip().splitlines()[-1]), lab.stdout
        assert f"python={version}" in (venv / ".installed").read_text()
        assert "extras=lab\n" in (venv / ".installed").read_text()
        assert len(list((clone / "my-notebooks").glob("[0-9][0-9]_*.ipynb"))) == 5
        nbgrader = subprocess.run([str(venv / "bin" / "python"), "-c", "import nbgrader"], capture_output=True)
        assert nbgrader.returncode != 0, "the learner's environment has nbgrader"
        size = _size_gb(venv)
        assert size < VENV_LIMIT_GB, f"the learner's .venv takes {size:.1f} GB"

        if version.rsplit(".", 1)[0] == "%d.%d" % sys.version_info[:2]:
            _log(f"Python {version} ({python}): make lab {lab_time:.0f} s (.venv {size:.2f} GB); the rest as "
                 "make unit on this minor version")
            return
        dev, dev_time = _run(["make", "-s", ".venv/.installed"], clone)
        assert dev.returncode == 0, dev.stderr[-3000:]
        tests, test_time = _run([str(venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                 *FAST_TESTS], clone)
        _log(f"Python {version} ({python}): make lab {lab_time:.0f} s (.venv {size:.2f} GB), developers' "
             f"extras {dev_time:.0f} s, fast tests {test_time:.0f} s: {tests.stdout.strip().splitlines()[-1]}")
        assert tests.returncode == 0, tests.stdout[-4000:]
    finally:
        shutil.rmtree(clone, ignore_errors=True)


@pytest.mark.skipif(not RESOLVED_ONLY, reason="no Python here that only needs its pins resolved")
@pytest.mark.parametrize(("version", "python"), RESOLVED_ONLY, ids=[v for v, _ in RESOLVED_ONLY])
def test_constraints_resolve_on_the_python_the_colab_stack_installs_on(version, python, tmp_path):
    """That Python's own pip picks exactly constraints.txt's pins, each a wheel it can install."""
    import json

    from packaging.utils import canonicalize_name, parse_wheel_filename

    clone = tmp_path / "clone"
    _clone(clone)
    report = tmp_path / "report.json"
    proc, seconds = _run([python, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                          "--disable-pip-version-check", "--report", str(report), "-c", "constraints.txt",
                          f".[{EXTRAS}]"], clone)
    assert proc.returncode == 0, f"pip on Python {version}:\n{proc.stderr[-3000:]}"
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, pinned = line.split("==")
            pins[canonicalize_name(name)] = pinned
    chosen = {canonicalize_name(item["metadata"]["name"]): item for item in json.loads(report.read_text())["install"]}
    chosen.pop("tf-pipelines-workbook")
    assert {"tensorflow", "keras", "jupyterlab", "nbgrader", "pytest"} <= set(chosen)
    tag = "cp" + version.rsplit(".", 1)[0].replace(".", "")
    for name, item in chosen.items():
        assert name in pins, f"Python {version} installs {name}, which constraints.txt does not pin"
        assert item["metadata"]["version"] == pins[name], (name, item["metadata"]["version"], pins[name])
        wheel = item["download_info"]["url"].rsplit("/", 1)[-1]
        # pip on that Python picks only wheels it can install; an sdist would have to build there
        assert wheel.endswith(".whl"), f"{name}: no wheel for Python {version}, pip would build {wheel}"
    tensorflow = chosen["tensorflow"]["download_info"]["url"].rsplit("/", 1)[-1]
    assert {t.interpreter for t in parse_wheel_filename(tensorflow)[3]} == {tag}, tensorflow
    _log(f"Python {version} ({python}): constraints.txt resolved with [{EXTRAS}] in {seconds:.0f} s "
         f"({len(chosen)} wheels; make replay-colab installs and tests the workbook on this Python)")
