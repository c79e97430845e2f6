"""The repository address, badges, Colab cells, README table and environment files agree."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import sync_workbook  # noqa: E402

PYPROJECT = sync_workbook._project()
# The Pythons make accepts; each installs constraints.txt (tools/venv.sh).
SUPPORTED_PYTHONS = ("3.11", "3.12", "3.13")


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


def test_environment_yml_installs_what_make_lab_installs_and_repeats_no_dependency():
    """Conda cannot run here (conda-forge is out of reach): this checks the file says what make lab does."""
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda_deps = [d for d in env["dependencies"] if isinstance(d, str)]
    assert sorted(re.split(r"[=<>]", d)[0] for d in conda_deps) == ["pip", "python"]
    python = next(d for d in conda_deps if d.startswith("python")).split("=")[1]
    assert python in SUPPORTED_PYTHONS
    pip = next(d for d in env["dependencies"] if isinstance(d, dict))["pip"]
    assert pip == ["-c constraints.txt", "-e .[lab]"]
    assert "tools/lab.py learner" in (ROOT / "environment.yml").read_text()


def _pins(name: str) -> dict[str, str]:
    pins = {}
    for line in (ROOT / name).read_text().splitlines():
        if line and not line.startswith("#"):
            package, version = line.split("==")
            pins[canonicalize_name(package)] = version
    return pins


def _wanted(extras) -> list[Requirement]:
    wanted = list(PYPROJECT["dependencies"])
    for extra in extras:
        wanted += PYPROJECT["optional-dependencies"][extra]
    return [Requirement(spec) for spec in wanted]


@pytest.mark.parametrize(("name", "extras"), [("constraints.txt", ("lab", "teach", "test")),
                                              ("constraints-colab.txt", ("test",))])
def test_each_constraints_file_pins_every_dependency_it_installs(name, extras):
    pins = _pins(name)
    for req in _wanted(extras):
        package = canonicalize_name(req.name)
        assert package in pins, f"{package} is not pinned in {name}"
        assert req.specifier.contains(pins[package]), f"{name}: {package}=={pins[package]} does not satisfy {req}"


def test_the_lower_bounds_of_tensorflow_and_keras_are_the_oldest_pins():
    """What the runtime warns below (pyproject's lower bounds) is the oldest version a stack tests."""
    for req in _wanted(()):
        if req.name not in ("tensorflow", "keras"):
            continue
        lower = next(s.version for s in req.specifier if s.operator == ">=")
        pinned = [Version(_pins(f)[req.name]) for f in ("constraints.txt", "constraints-colab.txt")]
        oldest = min(pinned)
        assert f"{oldest.major}.{oldest.minor}" == lower, f"{req.name}: oldest pin {oldest}, pyproject >={lower}"


def test_make_and_venv_sh_accept_the_same_pythons():
    script = (ROOT / "tools" / "venv.sh").read_text()
    assert f'supported="{" ".join(SUPPORTED_PYTHONS)}"' in script
    assert f"SUPPORTED_PYTHONS := {' '.join(SUPPORTED_PYTHONS)}" in (ROOT / "Makefile").read_text()


def test_requires_python_and_the_pins_of_this_stack_admit_every_python_it_serves():
    """constraints.txt serves Python 3.11 to 3.13 (3.11.2 is Debian 12's): each installed pin's
    Requires-Python must admit all of them from x.y.0 on (tests/test_pythons.py installs each)."""
    from importlib import metadata

    if metadata.version("tensorflow") != _pins("constraints.txt")["tensorflow"]:
        pytest.skip("this environment is not constraints.txt's stack")
    served = [f"{python}.0" for python in SUPPORTED_PYTHONS]
    assert SpecifierSet(PYPROJECT["requires-python"]).contains(served[0])
    assert not SpecifierSet(PYPROJECT["requires-python"]).contains("3.10.99")
    checked = 0
    for name in _pins("constraints.txt"):
        try:
            needs = metadata.metadata(name).get("Requires-Python")
        except metadata.PackageNotFoundError:
            continue
        checked += 1
        if needs:
            refused = [p for p in served if not SpecifierSet(needs).contains(p)]
            assert not refused, f"{name} needs Python {needs}: refuses {refused}"
    assert checked > 50


def test_notebooks_carry_ipykernels_own_kernelspec():
    """JupyterLab writes the kernel's spec into a notebook it opens; ours already has it."""
    from ipykernel.kernelspec import KERNEL_NAME, get_kernel_dict

    spec = get_kernel_dict()
    assert sync_workbook.KERNELSPEC == {"display_name": spec["display_name"], "language": spec["language"],
                                        "name": KERNEL_NAME}
    import nbformat

    for path in sync_workbook.notebook_paths():
        assert nbformat.read(path, as_version=4).metadata["kernelspec"] == sync_workbook.KERNELSPEC, path.name


def test_readme_table_shows_each_notebooks_own_times():
    table = sync_workbook.readme_table()
    import nbformat

    for path in sync_workbook.notebook_paths():
        run, do = sync_workbook._times(nbformat.read(path, as_version=4))
        row = next(line for line in table.splitlines() if f"(notebooks/{path.name})" in line)
        assert f"| {run} | {do} |" in row


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
    assert {"lab", "teach", "test", "run", "student", "classroom", "bench", "sync"} <= named
    for target in named:
        proc = _make("-n", target)
        assert proc.returncode == 0, f"make {target}: {proc.stderr}"


def test_make_test_replays_on_both_stacks_and_ci_runs_it():
    proc = _make("-n", "test")
    assert "--nbval" in proc.stdout and "constraints-colab.txt" in (ROOT / "Makefile").read_text()
    assert ".venv-colab/bin/python -m pytest" in proc.stdout.replace("$(COLAB_VENV)", ".venv-colab")


def test_readme_states_the_oldest_supported_versions_of_pyproject():
    readme = (ROOT / "README.md").read_text()
    from helpers import runtime

    oldest = runtime.oldest_supported()
    assert f"below TensorFlow {oldest['tensorflow']} or Keras {oldest['keras']}" in readme
    assert f"Python {SUPPORTED_PYTHONS[0]} to {SUPPORTED_PYTHONS[-1]}" in readme


def test_an_exercise_text_states_the_points_its_grade_cell_gives():
    """The hidden test sets a grade cell's points; the exercise's text above it is rewritten to match,
    and an exercise whose text names no points leaves the previous exercise's text alone."""
    import nbformat

    new_md, new_code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    nb = nbformat.v4.new_notebook(cells=[
        new_md("### Exercise 1 (5 points)\nWrite it."), new_code("### BEGIN SOLUTION\n### END SOLUTION"),
        new_code("# Graded: 6 points\ncheck()"),
        new_md("### Exercise 2\nNo points named."), new_code("### BEGIN SOLUTION\n### END SOLUTION"),
        new_code("# Graded: 1 point\ncheck()"),
    ])
    sync_workbook._heading_points(nb, 2, 6)
    sync_workbook._heading_points(nb, 5, 1)
    assert nb.cells[0].source == "### Exercise 1 (6 points)\nWrite it."
    assert nb.cells[3].source == "### Exercise 2\nNo points named."
    sync_workbook._heading_points(nb, 2, 1)
    assert nb.cells[0].source.startswith("### Exercise 1 (1 point)")


def test_every_exercise_text_that_names_points_names_its_grade_cells():
    import nbformat

    for path in sync_workbook.notebook_paths():
        cells = nbformat.read(path, as_version=4).cells
        for i, cell in enumerate(cells):
            graded = sync_workbook.GRADED.match(cell.source) if cell.cell_type == "code" else None
            if not graded:
                continue
            for above in reversed(cells[:i - 1]):
                if above.cell_type == "code" and sync_workbook.GRADED.match(above.source):
                    break
                named = sync_workbook.HEADING_POINTS.search(above.source) if above.cell_type == "markdown" else None
                if named:
                    assert named.group(1) == graded.group(1), f"{path.name}: {above.source.splitlines()[0]}"
                    break
