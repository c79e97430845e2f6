"""Set up a notebook, test or benchmark: quiet logs, seeds, determinism, device.

Every notebook's setup cell calls :func:`setup` once, before any other TensorFlow code runs.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings

# Must be set before TensorFlow is imported (or runs its first op). `helpers/__init__.py` imports
# this module, so importing any helper sets them.
# - TF_CPP_MIN_LOG_LEVEL silences TensorFlow's C++ start-up logs.
# - TF_CPU_ALLOCATOR_USE_BFC gives the CPU the same kind of allocator as a GPU, the one that keeps
#   statistics: without it `tf.config.experimental.get_memory_info("CPU:0")` raises "Allocator stats
#   not available" on some machines, and the Cost sections measure peak memory with it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")


def setup(seed: int = 0) -> str:
    """Quiet TensorFlow, seed everything, make ops deterministic; return the compute device name.

    Seeds Python's ``random``, NumPy and TensorFlow (through ``keras.utils.set_random_seed``),
    enables op determinism, and turns on GPU memory growth so a Colab GPU is not reserved whole.

    >>> device = setup(seed=0)
    >>> device in ("/GPU:0", "/CPU:0")
    True

    Returns ``"/GPU:0"`` when a GPU is visible, otherwise ``"/CPU:0"``. Helpers place their work
    with TensorFlow's default placement, which picks that same device.
    """
    from helpers.arguments import require_int

    require_int("seed", seed, minimum=0)

    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    with _native_stderr_silenced():
        import absl.logging
        import tensorflow as tf
        import keras

        absl.logging.set_verbosity(absl.logging.ERROR)
        tf.get_logger().setLevel("ERROR")
        tf.autograph.set_verbosity(0)
        gpus = tf.config.list_physical_devices("GPU")
        tf.constant(0.0).numpy()  # initialise the runtime (and its start-up log lines) here

    for gpu in gpus:
        try:
            tf.config.experimental.set_memory_growth(gpu, True)
        except RuntimeError:
            pass  # the GPU was initialised by an earlier call; growth is already decided

    keras.utils.set_random_seed(seed)
    tf.config.experimental.enable_op_determinism()
    return "/GPU:0" if gpus else "/CPU:0"


@contextlib.contextmanager
def _native_stderr_silenced():
    """Send file descriptor 2 to /dev/null: TensorFlow's C++ start-up lines are written there
    before its logging is initialised, so TF_CPP_MIN_LOG_LEVEL cannot stop them. Python
    exceptions are unaffected (they propagate; they are not printed inside the block)."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real file descriptor 2 (some embedded interpreters)
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def describe_device(device: str) -> str:
    """A one-line description of ``device`` for the setup cell's printout (run-dependent)."""
    import tensorflow as tf

    kind = device.split(":")[0].strip("/")
    details = ""
    if kind == "GPU":
        gpus = tf.config.list_physical_devices("GPU")
        info = tf.config.experimental.get_device_details(gpus[0]) if gpus else {}
        details = f" ({info.get('device_name', 'GPU')})"
    return f"TensorFlow {tf.__version__}, computing on {device}{details}"
