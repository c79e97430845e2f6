"""Shared helpers for the TensorFlow input-pipelines workbook.

One module per topic (``decoupling``, ``accumulation``, ``batching``, ``validation``, ``snapshots``)
plus ``runtime`` (set-up), ``plumbing`` (shared TensorFlow plumbing), ``tf1`` (the TF1 baselines),
``measure`` (time and memory), ``plots`` (every figure), ``progress`` and ``exercises`` (checkers for
the "Your turn" cells). Importing ``helpers`` is cheap: TensorFlow is imported by the modules that
need it, so ``helpers.runtime.setup()`` can configure devices and quiet logs before it loads.
"""

from importlib import metadata as _metadata

from helpers import runtime as _runtime  # noqa: F401  (sets TensorFlow's environment before it loads)

try:
    __version__ = _metadata.version(_runtime.DISTRIBUTION)
except _metadata.PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "unknown"
