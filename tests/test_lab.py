"""`make lab` and `make teach` (tools/lab.py): the learner's copies and JupyterLab without nbgrader."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import lab  # noqa: E402
import make_student  # noqa: E402
import sync_workbook  # noqa: E402

NOTEBOOKS = sync_workbook.notebook_paths()


def test_learner_copies_have_no_solutions_and_open_as_jupyterlab_writes_them(tmp_path):
    written = lab.learner_copies(target=tmp_path)
    assert [p.name for p in written] == [p.name for p in NOTEBOOKS]
    for copy in written:
        nb = nbformat.read(copy, as_version=4)
        sources = "\n".join(c.source for c in nb.cells)
        assert make_student.BEGIN not in sources and "raise NotImplementedError()" in sources
        assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")
        assert nb.metadata["kernelspec"] == sync_workbook.KERNELSPEC
        assert nb.metadata["language_info"]["version"] == sys.version.split()[0]


def test_a_learners_copy_is_never_overwritten(tmp_path):
    lab.learner_copies(target=tmp_path)
    mine = tmp_path / NOTEBOOKS[0].name
    nb = nbformat.read(mine, as_version=4)
    nb.cells[0].source = "my own notes"
    nbformat.write(nb, mine)
    (tmp_path / NOTEBOOKS[1].name).unlink()

    written = lab.learner_copies(target=tmp_path)

    assert written == [tmp_path / NOTEBOOKS[1].name]  # only the missing one
    assert nbformat.read(mine, as_version=4).cells[0].source == "my own notes"


def test_learner_copies_refuse_bad_folders(tmp_path):
    with pytest.raises(ValueError, match="source: no notebooks"):
        lab.learner_copies(source=tmp_path, target=tmp_path / "copies")
    file = tmp_path / "a-file"
    file.write_text("")
    with pytest.raises(ValueError, match="target: .* is not a folder"):
        lab.learner_copies(target=file)
    assert not (tmp_path / "copies").exists()


def test_learner_config_switches_off_every_nbgrader_extension_this_environment_enables(tmp_path):
    pytest.importorskip("nbgrader")
    enabled = set()
    for folder in lab._jupyter_config_dirs():
        for config in (folder / "jupyter_server_config.d").glob("nbgrader*.json"):
            enabled |= set(json.loads(config.read_text())["ServerApp"]["jpserver_extensions"])
    assert enabled, "nbgrader is installed but enables no server extension: has its layout changed?"

    folder = lab.learner_config(tmp_path)

    server = json.loads((folder / "jupyter_server_config.json").read_text())["ServerApp"]["jpserver_extensions"]
    assert server == {name: False for name in sorted(enabled)}
    page = json.loads((folder / "labconfig" / "page_config.json").read_text())
    assert page == {"disabledExtensions": {"@jupyter/nbgrader": True}}


def test_lab_command_puts_the_learner_config_first_and_keeps_the_users(tmp_path, monkeypatch):
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", "/the/users/own")
    argv, env = lab.lab_command("learner", root=tmp_path, open_path="my-notebooks/01.ipynb",
                                options=["--no-browser"], config=tmp_path / "config")
    assert env["JUPYTER_CONFIG_PATH"] == os.pathsep.join([str(tmp_path / "config"), "/the/users/own"])
    assert argv == [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={tmp_path}",
                    "--LabApp.default_url=/lab/tree/my-notebooks/01.ipynb", "--no-browser"]


def test_lab_command_refuses_an_unknown_role_and_a_teacher_without_nbgrader(monkeypatch):
    with pytest.raises(ValueError, match="role must be one of"):
        lab.lab_command("student")
    monkeypatch.setattr(lab.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(RuntimeError, match="make teach"):
        lab.lab_command("teacher")


def _make_n(*args: str) -> str:
    proc = subprocess.run(["make", "-n", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_make_lab_and_teach_start_the_learners_and_the_teachers_jupyterlab():
    lab_lines = _make_n("lab")
    assert "tools/venv.sh \".venv\"" in lab_lines and '"lab"' in lab_lines
    assert "tools/lab.py learner" in lab_lines
    teach = _make_n("teach")
    assert '"lab,teach"' in teach and "tools/lab.py teacher" in teach
    # JupyterLab refuses to run as root unless told; make lab tells it only then
    assert ("--allow-root" in lab_lines) == (os.geteuid() == 0)


def test_the_learners_extras_hold_no_nbgrader_and_the_teachers_do():
    extras = sync_workbook._project()["optional-dependencies"]
    assert not any("nbgrader" in req for req in extras["lab"])
    assert any(req.startswith("nbgrader") for req in extras["teach"])
