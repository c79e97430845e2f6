"""Shared helpers for the TensorFlow input-pipelines workbook.

One module per topic (``decoupling``, ``accumulation``, ``batching``, ``validation``, ``snapshots``)
plus ``runtime`` (setup), ``timing`` (cost measurements), ``progress``, ``plots`` and ``exercises``
(checkers for the "Your turn" cells). Importing ``helpers`` is cheap: TensorFlow is imported by the
modules that need it, so ``helpers.runtime.setup()`` can quiet TensorFlow's logs before it loads.
"""

from helpers import runtime as _runtime  # noqa: F401  (sets TensorFlow's environment before it loads)

__version__ = "0.1.0"
