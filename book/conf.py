"""Sphinx configuration of the workbook's book (``make book``; book/make_book.py runs Sphinx with it).

The sources are assembled by make_book.py in build/book/src; this file stays in book/ (``-c book``).
Nothing is executed (``nb_execution_mode = "off"``): the pages show the committed outputs. MathJax
comes from the site itself (``_static/mathjax``, copied from the sphinx-mathjax-offline wheel), so
the book reads without a network; decisions: docs/decisions.md, "Static book".
"""

import importlib.util
import shutil
import tomllib
from pathlib import Path

_PROJECT = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
REPOSITORY = _PROJECT["urls"]["Repository"].rstrip("/")

project = "TensorFlow input pipelines and training loops"
author = "the workbook's authors"
copyright = "the workbook's authors, Apache-2.0"
version = release = _PROJECT["version"]

extensions = ["myst_nb", "sphinx.ext.githubpages"]  # githubpages: .nojekyll
# MathJax 3.2.2 from the sphinx-mathjax-offline wheel, served from _static/mathjax (setup() copies it):
# the combined TeX-to-HTML component, and what it may load later (TeX extensions such as \boldsymbol,
# its fonts, the menu and the accessibility tools). The wheel's other combined builds are left out (16 MB).
mathjax_path = "mathjax/tex-chtml.js"
MATHJAX_PARTS = ("tex-chtml.js", "input", "output/chtml", "ui", "a11y", "sre", "adaptors")
nb_execution_mode = "off"
myst_enable_extensions = ["dollarmath"]
myst_heading_anchors = 6  # GitHub's heading anchors (docs link to docs/x.md#a-heading)
exclude_patterns = ["**/.ipynb_checkpoints"]

html_theme = "sphinx_book_theme"
html_title = project
html_last_updated_fmt = None
html_copy_source = True  # the theme's download button offers the page's source (.ipynb, .md)
html_sourcelink_suffix = ""
html_theme_options = {
    "repository_url": REPOSITORY,
    "repository_branch": f"v{release}",  # the tag the Colab badges and install cells use
    "path_to_docs": "",
    "use_repository_button": True,
    "use_download_button": True,
    "launch_buttons": {"colab_url": "https://colab.research.google.com"},
    "show_toc_level": 2,
}


def _copy_mathjax(app, exception) -> None:
    if exception is not None:
        return
    wheel = importlib.util.find_spec("sphinx-mathjax-offline").submodule_search_locations[0]
    source = Path(wheel) / "static" / "mathjax"
    target = Path(app.outdir) / "_static" / "mathjax"
    for part in MATHJAX_PARTS:
        if (source / part).is_dir():
            shutil.copytree(source / part, target / part, dirs_exist_ok=True)
        else:
            (target / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / part, target / part)


def setup(app):
    app.connect("build-finished", _copy_mathjax)
