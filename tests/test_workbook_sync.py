"""The repository address, badges, Colab cells, README table and environment files agree."""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import sync_workbook  # noqa: E402

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_badges_colab_cells_and_readme_are_in_sync():
    assert sync_workbook.out_of_sync() == [], "run `make sync`"


def test_every_notebook_badge_opens_the_notebook_at_this_versions_tag():
    url = PYPROJECT["urls"]["Repository"]
    owner_repo = url.removeprefix("https://github.com/")
    readme = (ROOT / "README.md").read_text()
    notebooks = sync_workbook.notebook_paths()
    assert notebooks, "no notebooks found"
    for path in notebooks:
        tag = f"v{PYPROJECT['version']}"
        link = f"https://colab.research.google.com/github/{owner_repo}/blob/{tag}/notebooks/{path.name}"
        assert link in path.read_text(), path.name
        assert link in readme, path.name


def test_colab_cell_installs_the_tagged_release_only_in_colab_and_leaves_tensorflow_alone():
    source = sync_workbook.colab_cell_source()
    assert 'if "google.colab" in sys.modules:' in source
    assert "--no-deps" in source
    assert f'"git+{PYPROJECT["urls"]["Repository"]}.git@v{PYPROJECT["version"]}"' in source


def test_environment_yml_installs_this_package_and_repeats_no_dependency():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda_deps = [d for d in env["dependencies"] if isinstance(d, str)]
    assert sorted(re.split(r"[=<>]", d)[0] for d in conda_deps) == ["pip", "python"]
    python = next(d for d in conda_deps if d.startswith("python"))
    # conda's `python=3.11` takes the newest 3.11.x release
    assert SpecifierSet(PYPROJECT["requires-python"]).contains(python.split("=")[1] + ".99")
    pip = next(d for d in env["dependencies"] if isinstance(d, dict))["pip"]
    extras = set(PYPROJECT["optional-dependencies"])
    assert pip == ["-c constraints.txt", f"-e .[{','.join(sorted(extras))}]"]


def _pins(name: str) -> dict[str, str]:
    pins = {}
    for line in (ROOT / name).read_text().splitlines():
        if line and not line.startswith("#"):
            package, version = line.split("==")
            pins[canonicalize_name(package)] = version
    return pins


def test_constraints_pin_every_dependency_in_pyproject():
    pins = _pins("constraints.txt")
    wanted = list(PYPROJECT["dependencies"])
    for extra in PYPROJECT["optional-dependencies"].values():
        wanted += extra
    for spec in wanted:
        req = Requirement(spec)
        name = canonicalize_name(req.name)
        assert name in pins, f"{name} is not pinned in constraints.txt"
        assert req.specifier.contains(pins[name]), f"{name}=={pins[name]} does not satisfy {spec}"


def test_readme_and_ci_use_the_one_test_command():
    assert "make test" in (ROOT / "README.md").read_text()
    ci = [l for l in (ROOT / ".ci/run").read_text().splitlines() if l and not l.startswith(("#", "set ", "cd "))]
    assert ci == ["make test"]


def test_colab_constraints_pin_the_oldest_supported_tensorflow_and_keras():
    """The lower bounds in pyproject (the versions the runtime warns below) are what CI replays."""
    pins = _pins("constraints-colab.txt")
    for spec in PYPROJECT["dependencies"]:
        req = Requirement(spec)
        name = canonicalize_name(req.name)
        assert name in pins, f"{name} is not pinned in constraints-colab.txt"
        assert req.specifier.contains(pins[name]), f"{name}=={pins[name]} does not satisfy {spec}"
        lower = next((s.version for s in req.specifier if s.operator == ">="), None)
        if name in ("tensorflow", "keras"):
            assert pins[name].startswith(lower + "."), f"{name}: Colab pins {pins[name]}, pyproject says >={lower}"


def test_requires_python_admits_every_pinned_package():
    """Each installed pin says which Pythons it supports; the lowest Python we claim must be one."""
    from importlib import metadata

    lowest = next(s.version for s in SpecifierSet(PYPROJECT["requires-python"]) if s.operator == ">=")
    checked = 0
    for name in _pins("constraints.txt"):
        try:
            needs = metadata.metadata(name).get("Requires-Python")
        except metadata.PackageNotFoundError:
            continue
        checked += 1
        if needs:
            assert SpecifierSet(needs).contains(lowest), f"{name} needs Python {needs}"
    assert checked > 50


def _notebook(*sources):
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    return nb


def test_nbgrader_metadata_comes_from_the_cells():
    nb = _notebook("x = 1", "def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION",
                   "# Graded: 3 points\ncheck(f)", "y = 2")
    meta = sync_workbook.nbgrader_metadata(nb)
    assert meta[0] is None and meta[3] is None
    assert meta[1] == {"grade": False, "grade_id": "answer_f", "locked": False, "schema_version": 3,
                       "solution": True, "task": False}
    assert meta[2] == {"grade": True, "grade_id": "check_f", "locked": True, "points": 3,
                       "schema_version": 3, "solution": False, "task": False}


def test_nbgrader_metadata_refuses_an_ungraded_answer_or_a_stray_graded_cell():
    import pytest

    answer = "def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION"
    with pytest.raises(ValueError, match="must start with '# Graded: N points'"):
        sync_workbook.nbgrader_metadata(_notebook(answer, "check(f)"))
    with pytest.raises(ValueError, match="must come right after an answer cell"):
        sync_workbook.nbgrader_metadata(_notebook("x = 1", "# Graded: 2 points\ncheck(f)"))
    with pytest.raises(ValueError, match="two exercises are named 'f'"):
        sync_workbook.nbgrader_metadata(_notebook(answer, "# Graded: 1 point", answer, "# Graded: 1 point"))


def test_every_notebook_has_graded_exercises():
    import nbformat

    for path in sync_workbook.notebook_paths():
        points = sync_workbook.notebook_points(nbformat.read(path, as_version=4))
        assert points, f"{path.name} has no graded exercise"


def _make(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-s", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_every_make_target_the_readme_names_exists():
    readme = (ROOT / "README.md").read_text()
    named = set(re.findall(r"(?:`|^)make (\w+)", readme, re.M))
    assert {"lab", "test", "run", "student", "classroom", "bench", "sync"} <= named
    for target in named:
        proc = _make("-n", target)
        assert proc.returncode == 0, f"make {target}: {proc.stderr}"


def test_make_test_replays_on_both_stacks_and_ci_runs_it():
    proc = _make("-n", "test")
    assert "--nbval" in proc.stdout and "constraints-colab.txt" in (ROOT / "Makefile").read_text()
    assert ".venv-colab/bin/python -m pytest" in proc.stdout.replace("$(COLAB_VENV)", ".venv-colab")


def test_make_lab_opens_jupyterlab_from_the_venv():
    proc = _make("lab", "LAB_ARGS=--version")
    assert proc.returncode == 0, proc.stderr
    assert re.fullmatch(r"\d+\.\d+\.\d+\S*", proc.stdout.strip().splitlines()[-1]), proc.stdout


def test_readme_states_the_oldest_supported_versions_of_pyproject():
    readme = (ROOT / "README.md").read_text()
    from helpers import runtime

    oldest = runtime.oldest_supported()
    assert f"below TensorFlow {oldest['tensorflow']} or Keras {oldest['keras']}" in readme
    assert f"Python {PYPROJECT['requires-python'].removeprefix('>=')} or newer" in readme
