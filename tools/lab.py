#!/usr/bin/env python3
"""Start JupyterLab the way a learner (``make lab``) or a teacher (``make teach``) needs it.

* **learner**: JupyterLab opens the learner's own copies in ``my-notebooks/``: the notebooks with
  every exercise solution replaced by ``raise NotImplementedError()`` and outputs cleared (the cells
  of ``make student`` and nbgrader's release). A copy is written only when it does not exist yet, so
  a learner's work is never overwritten. nbgrader's menu, sidebars and server extensions are switched
  off for this launch (a developer's ``.venv`` has nbgrader from the ``test`` extra; a learner's has
  not): the switch is a Jupyter configuration folder put first on ``JUPYTER_CONFIG_PATH``, written
  under ``build/``, which changes nothing in the environment or in the user's own settings.
* **teacher**: JupyterLab opens the committed notebooks in ``notebooks/`` (solutions in place), with
  nbgrader's menu and sidebars.

The server's root is the repository in both cases, so links from a notebook to ``../docs/`` work.

    python tools/lab.py learner [jupyter lab options]     # make lab
    python tools/lab.py teacher [jupyter lab options]     # make teach

``tests/test_browser.py`` starts JupyterLab with :func:`lab_command`, as these two commands do.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
LEARNER_COPIES = ROOT / "my-notebooks"
LEARNER_CONFIG = ROOT / "build" / "jupyter-learner"
ROLES = ("learner", "teacher")
NBGRADER = "nbgrader"

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_student  # noqa: E402
import sync_workbook  # noqa: E402

__all__ = ["ROLES", "learner_copies", "learner_config", "lab_command", "main"]


def learner_copies(source: Path = NOTEBOOKS, target: Path = LEARNER_COPIES) -> list[Path]:
    """Write the learner's copy of each notebook in ``source`` that ``target`` does not have yet.

    Returns the copies written now; an existing copy is left as it is, whatever it holds. A copy
    carries the kernelspec and Python version JupyterLab would write, so it opens unmodified.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     first = learner_copies(target=Path(folder))
    ...     again = learner_copies(target=Path(folder))
    >>> len(first) == len(sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))) > 0, again
    (True, [])
    """
    import nbformat

    notebooks = sorted(Path(source).glob("[0-9][0-9]_*.ipynb"))
    if not notebooks:
        raise ValueError(f"source: no notebooks (NN_name.ipynb) in {source}")
    target = Path(target)
    if target.exists() and not target.is_dir():
        raise ValueError(f"target: {target} exists and is not a folder")
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for path in notebooks:
        copy = target / path.name
        if copy.exists():
            continue
        nb = make_student.student_notebook(path)
        # What JupyterLab writes on opening, so the copy opens unmodified: the kernelspec, and the
        # Python version of this environment's kernel (ipykernel reports sys.version's first word).
        nb.metadata["kernelspec"] = dict(sync_workbook.KERNELSPEC)
        nb.metadata.setdefault("language_info", {})["version"] = sys.version.split()[0]
        with open(copy, "x", encoding="utf-8") as handle:  # "x": never overwrite
            nbformat.write(nb, handle)
        written.append(copy)
    return written


def _nbgrader_server_extensions() -> list[str]:
    """Names of the nbgrader server extensions this environment enables (from its config files)."""
    names = set()
    for folder in _jupyter_config_dirs():
        for config in sorted((folder / "jupyter_server_config.d").glob("*.json")):
            try:
                extensions = json.loads(config.read_text())["ServerApp"]["jpserver_extensions"]
            except (KeyError, TypeError, ValueError):
                continue
            names.update(name for name in extensions if name.split(".")[0] == NBGRADER)
    return sorted(names)


def _jupyter_config_dirs() -> list[Path]:
    from jupyter_core.paths import jupyter_config_path

    return [Path(p) for p in jupyter_config_path()]


def learner_config(folder: Path = LEARNER_CONFIG) -> Path:
    """Write (again) the Jupyter configuration that hides nbgrader from a learner; returns ``folder``.

    nbgrader's server extensions are set to disabled and its JupyterLab extension is listed as
    disabled; put ``folder`` first on ``JUPYTER_CONFIG_PATH`` to apply it to one launch.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     page = json.loads((learner_config(Path(tmp)) / "labconfig" / "page_config.json").read_text())
    >>> page["disabledExtensions"]
    {'@jupyter/nbgrader': True}
    """
    folder = Path(folder)
    (folder / "labconfig").mkdir(parents=True, exist_ok=True)
    server = {"ServerApp": {"jpserver_extensions": {name: False for name in _nbgrader_server_extensions()}}}
    (folder / "jupyter_server_config.json").write_text(json.dumps(server, indent=2) + "\n")
    page = {"disabledExtensions": {"@jupyter/nbgrader": True}}
    (folder / "labconfig" / "page_config.json").write_text(json.dumps(page, indent=2) + "\n")
    return folder


def lab_command(role: str, root: Path = ROOT, open_path: str = "", options: list[str] | None = None,
                config: Path = LEARNER_CONFIG) -> tuple[list[str], dict[str, str]]:
    """The ``jupyter lab`` command line and environment for ``role`` (``"learner"`` or ``"teacher"``).

    ``root`` is the server's root folder; ``open_path`` (relative to it) is what JupyterLab shows
    first; ``options`` go to ``jupyter lab`` as they are.

    >>> argv, env = lab_command("teacher", open_path="notebooks")
    >>> argv[1:3], argv[3] == f"--ServerApp.root_dir={ROOT}", argv[4], "JUPYTER_CONFIG_PATH" in env
    (['-m', 'jupyterlab'], True, '--LabApp.default_url=/lab/tree/notebooks', False)
    """
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, got {role!r}")
    env = {}
    if role == "learner":
        existing = os.environ.get("JUPYTER_CONFIG_PATH", "")
        env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(p for p in (str(learner_config(config)), existing) if p)
    elif importlib.util.find_spec(NBGRADER) is None:
        raise RuntimeError("nbgrader is not installed in this environment: start the teacher's "
                           "JupyterLab with `make teach` (it installs it)")
    argv = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={root}"]
    if open_path:
        argv.append(f"--LabApp.default_url=/lab/tree/{open_path}")
    return argv + list(options or []), env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("role", choices=ROLES)
    args, options = parser.parse_known_args(argv)
    if args.role == "learner":
        written = learner_copies()
        kept = len(sorted(LEARNER_COPIES.glob("[0-9][0-9]_*.ipynb"))) - len(written)
        print(f"Your copies are in {LEARNER_COPIES.relative_to(ROOT)}/ ({len(written)} new, {kept} kept as "
              "you left them): exercises to solve, solutions removed. The originals, solutions "
              "included, are in notebooks/.", flush=True)
        first = sorted(LEARNER_COPIES.glob("[0-9][0-9]_*.ipynb"))[0]
        open_path = first.relative_to(ROOT).as_posix()
    else:
        open_path = NOTEBOOKS.relative_to(ROOT).as_posix()
    command, env = lab_command(args.role, open_path=open_path, options=options)
    os.execve(command[0], command, {**os.environ, **env})
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
