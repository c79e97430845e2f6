"""Sphinx configuration of the workbook's book (``make book``; book/make_book.py runs Sphinx with it).

The sources are assembled by make_book.py in build/book/src; this file stays in book/ (``-c book``).
Nothing is executed (``nb_execution_mode = "off"``): the pages show the committed outputs. MathJax
comes from the site itself (sphinx-mathjax-offline copies MathJax 3 into ``_static/mathjax``), so
the book reads without a network; decisions: docs/decisions.md, "Static book".
"""

import tomllib
from pathlib import Path

_PROJECT = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
REPOSITORY = _PROJECT["urls"]["Repository"].rstrip("/")

project = "TensorFlow input pipelines and training loops"
author = "the workbook's authors"
copyright = "the workbook's authors, Apache-2.0"
version = release = _PROJECT["version"]

extensions = ["myst_nb", "sphinx-mathjax-offline", "sphinx.ext.githubpages"]  # githubpages: .nojekyll
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
