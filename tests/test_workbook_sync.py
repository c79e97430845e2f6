"""The repository address, badges, Colab cells, README table and environment files agree."""

import re
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


def test_every_notebook_badge_points_at_the_repository_in_pyproject():
    url = PYPROJECT["urls"]["Repository"]
    owner_repo = url.removeprefix("https://github.com/")
    readme = (ROOT / "README.md").read_text()
    notebooks = sync_workbook.notebook_paths()
    assert notebooks, "no notebooks found"
    for path in notebooks:
        link = f"https://colab.research.google.com/github/{owner_repo}/blob/main/notebooks/{path.name}"
        assert link in path.read_text(), path.name
        assert link in readme, path.name


def test_colab_cell_installs_only_in_colab_and_leaves_tensorflow_alone():
    source = sync_workbook.colab_cell_source()
    assert 'if "google.colab" in sys.modules:' in source
    assert "--no-deps" in source
    assert PYPROJECT["urls"]["Repository"] in source


def test_environment_yml_installs_this_package_and_repeats_no_dependency():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda_deps = [d for d in env["dependencies"] if isinstance(d, str)]
    assert sorted(re.split(r"[=<>]", d)[0] for d in conda_deps) == ["pip", "python"]
    python = next(d for d in conda_deps if d.startswith("python"))
    assert SpecifierSet(PYPROJECT["requires-python"]).contains(python.split("=")[1] + ".0")
    pip = next(d for d in env["dependencies"] if isinstance(d, dict))["pip"]
    extras = set(PYPROJECT["optional-dependencies"])
    assert pip == ["-c constraints.txt", f"-e .[{','.join(sorted(extras))}]"]


def test_constraints_pin_every_dependency_in_pyproject():
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            pins[canonicalize_name(name)] = version
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
