"""Setting up the virtual environment (Makefile + tools/venv.sh): which Pythons, and no broken reuse.

An unsupported Python is refused by make in one line, before any folder is made; a folder left by a
failed or interrupted install is removed, never reused; a complete one is left alone. The installs
themselves, on every Python this machine has, are in tests/test_pythons.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV_SH = ROOT / "tools" / "venv.sh"


def _fake_python(tmp_path: Path, version: str) -> Path:
    """An executable that answers the version question like a Python ``version`` would."""
    fake = tmp_path / f"python{version}"
    fake.write_text(f"#!/bin/sh\necho {version}\n")
    fake.chmod(0o755)
    return fake


def _run(argv, **env) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, **env})


@pytest.mark.parametrize(("target", "version"), [("lab", "3.10"), ("test", "3.9"), ("teach", "3.14")])
def test_make_refuses_an_unsupported_python_in_one_line_before_making_a_venv(tmp_path, target, version):
    venv = tmp_path / "venv"
    proc = _run(["make", "-s", target, f"PYTHON={_fake_python(tmp_path, version)}", f"VENV={venv}"])
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert f"is Python {version}: this workbook needs Python 3.11 to 3.13" in lines[0]
    assert "make lab PYTHON=python3.12" in lines[0]
    assert not venv.exists()


def test_make_refuses_a_python_that_does_not_run(tmp_path):
    venv = tmp_path / "venv"
    proc = _run(["make", "-s", "lab", "PYTHON=no-such-python3", f"VENV={venv}"])
    assert proc.returncode != 0
    assert "no-such-python3 is not a Python that runs: this workbook needs Python 3.11 to 3.13" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not venv.exists()


def test_venv_sh_refuses_an_unsupported_python_too(tmp_path):
    proc = _run([str(VENV_SH), str(tmp_path / "venv"), str(_fake_python(tmp_path, "3.10.13")), "lab"])
    assert proc.returncode == 2
    assert "is Python 3.10.13: this workbook needs Python 3.11 to 3.13" in proc.stderr
    assert not (tmp_path / "venv").exists()


def _bad_constraints(tmp_path: Path) -> Path:
    bad = tmp_path / "bad-constraints.txt"
    bad.write_text("not a requirement\n")  # pip fails at once, after the venv was made
    return bad


def test_a_failed_install_is_removed_and_a_leftover_venv_is_not_reused(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "leftover").write_text("from an install that was interrupted")

    proc = _run([str(VENV_SH), str(venv), sys.executable, "lab", str(_bad_constraints(tmp_path))])

    assert "no .installed (an install that failed or was interrupted): removing it" in proc.stdout
    assert proc.returncode == 1
    assert "pip install failed; removed it, so the next run starts afresh" in proc.stderr
    assert not venv.exists()


def _complete_venv(tmp_path: Path, python: str, extras: str) -> Path:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / ".installed").write_text(f"python={python}\nconstraints=constraints.txt\nextras={extras}\n")
    return venv


def test_a_complete_up_to_date_venv_is_left_alone(tmp_path):
    venv = _complete_venv(tmp_path, "3.11.7", "lab,test")
    proc = _run([str(VENV_SH), str(venv), str(_fake_python(tmp_path, "3.9")), "lab"])
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    assert sorted(p.name for p in venv.iterdir()) == [".installed", "bin"]


def test_a_python_given_on_the_command_line_remakes_a_venv_of_another_version(tmp_path):
    venv = _complete_venv(tmp_path, "3.12.1", "lab")
    proc = _run([str(VENV_SH), str(venv), sys.executable, "lab", str(_bad_constraints(tmp_path))],
                PYTHON_GIVEN="1")
    assert f"{venv} has Python 3.12.1; making it again with {sys.executable}" in proc.stdout
    assert proc.returncode == 1 and not venv.exists()  # the bad pins then failed, as wanted here


def _fake_installer(tmp_path: Path, version: str, venv_works: bool) -> Path:
    """A fake Python ``version`` whose ``-m venv`` works (copying itself in) or fails; its pip fails."""
    fake = tmp_path / "bin" / f"python{version}"
    fake.parent.mkdir(exist_ok=True)
    make_venv = 'mkdir -p "$3/bin" && cp "$0" "$3/bin/python"' if venv_works else "exit 1"
    fake.write_text(f'#!/bin/sh\ncase "$1 $2" in\n  "-c "*) echo {version}.0 ;;\n  "-m venv") {make_venv} ;;\n'
                    "  *) exit 1 ;;\nesac\n")
    fake.chmod(0o755)
    return fake


@pytest.mark.parametrize("version", ["3.11", "3.12", "3.13"])
def test_each_supported_python_installs_the_pins_of_constraints_txt(tmp_path, version):
    venv = tmp_path / "venv"
    proc = _run([str(VENV_SH), str(venv), str(_fake_installer(tmp_path, version, True)), "lab"])
    assert 'installing the workbook (-e ".[lab]", pinned by constraints.txt)' in proc.stdout
    assert f"with Python {version}.0" in proc.stdout
    assert proc.returncode == 1 and not venv.exists()  # the fake's pip fails


def test_a_python_without_venv_support_gets_a_hint(tmp_path):
    venv = tmp_path / "venv"
    proc = _run([str(VENV_SH), str(venv), str(_fake_installer(tmp_path, "3.12", False)), "lab"])
    assert proc.returncode == 1 and not venv.exists()
    assert "-m venv' failed (on Debian or Ubuntu: sudo apt-get install python3.12-venv)" in proc.stderr
