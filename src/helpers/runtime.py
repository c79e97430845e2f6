"""Set up a notebook, test or benchmark: devices first, then quiet logs, seeds and determinism.

Every notebook's setup cell calls :func:`setup` once, before any other TensorFlow code runs, and
prints :func:`describe_device`: the versions, the device, and a warning when TensorFlow or Keras
is older than the oldest version the workbook is tested with.

Device settings (GPU memory growth, logical devices for replicas) can only be made before
TensorFlow's runtime starts, that is before its first op. :func:`setup` makes them first; when it
runs again later (a re-run cell) and a requested setting can no longer be applied, it prints one
line saying so instead of failing or ignoring it.
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
import shutil
import subprocess
import sys
import warnings
from importlib import metadata

__all__ = ["setup", "describe_device", "oldest_supported", "version_warning", "DISTRIBUTION"]

# Must be set before TensorFlow is imported (or runs its first op). `helpers/__init__.py` imports
# this module, so importing any helper sets them.
# - TF_CPP_MIN_LOG_LEVEL silences TensorFlow's C++ start-up logs.
# - TF_CPU_ALLOCATOR_USE_BFC gives the CPU the same kind of allocator as a GPU, the one that keeps
#   statistics: without it `tf.config.experimental.get_memory_info("CPU:0")` raises "Allocator stats
#   not available" on some machines, and the Cost sections measure peak memory with it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

DISTRIBUTION = "tf-pipelines-workbook"
# Memory of one logical GPU when `replicas` splits a GPU and nvidia-smi cannot tell the GPU's size.
_FALLBACK_REPLICA_MEMORY_MB = 2048
_last_setup: dict = {}


def setup(seed: int = 0, replicas: int = 1, *, replica_memory_mb: int | None = None) -> str:
    """Configure the devices, quiet TensorFlow, seed everything, make ops deterministic.

    In this order, because device settings are only possible before TensorFlow's first op:

    1. **Devices.** Memory growth on every GPU (TensorFlow then takes GPU memory as it needs it,
       instead of reserving the whole GPU). With ``replicas=N > 1``, ``tf.distribute.MirroredStrategy()``
       gets exactly ``N`` replicas on any machine: on a CPU, ``N`` logical CPUs; with ``N`` or more
       GPUs, the first ``N`` GPUs (the others hidden); with fewer, the first GPU split into ``N``
       logical GPUs of ``replica_memory_mb`` each (default: 80 % of its memory, from ``nvidia-smi``,
       shared equally; a split GPU has fixed limits, so memory growth does not apply to it) and the
       other GPUs hidden.
    2. **TensorFloat-32 off.** Ampere and newer GPUs (A100, L4, H100) otherwise round float32
       matrix products to 10 bits of mantissa, and the notebooks' exactness checks would fail.
    3. Logs quiet, Python/NumPy/TensorFlow seeded with ``seed``, op determinism on.
    4. The runtime started here (its start-up lines are hidden).

    Returns ``"/GPU:0"`` when a GPU is visible, otherwise ``"/CPU:0"``.

    >>> setup(seed=0) in ("/GPU:0", "/CPU:0")
    True

    Running it again is safe: seeds are reset, settings already in place stay. If the runtime has
    started and a *different* device setting is requested (``replicas=2`` after a first run with
    ``replicas=1``), it cannot be applied any more: one line says so and names the fix (restart
    the kernel or Colab runtime, then run the setup cell first).
    """
    from helpers.arguments import require_int

    require_int("seed", seed, minimum=0)
    require_int("replicas", replicas, minimum=1)
    require_int("replica_memory_mb", replica_memory_mb, minimum=1, allow_none=True)

    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    with _native_stderr_silenced():
        import absl.logging
        import tensorflow as tf
        import keras

        absl.logging.set_verbosity(absl.logging.ERROR)
        tf.get_logger().setLevel("ERROR")
        tf.autograph.set_verbosity(0)
        gpus = tf.config.list_physical_devices("GPU")  # lists devices without starting the runtime
        not_applied = _configure_devices(tf, gpus, replicas, replica_memory_mb)
        tf.config.experimental.enable_tensor_float_32_execution(False)
        tf.constant(0.0).numpy()  # start the runtime (and hide its start-up log lines) here
        _first_graph_run(tf)  # TF 2.20's first Session.run logs two lines to stderr: hide them here

    keras.utils.set_random_seed(seed)
    tf.config.experimental.enable_op_determinism()
    _last_setup.update(replicas=replicas, gpus=len(gpus))
    if not_applied:
        print(f"runtime.setup: TensorFlow was already running, so {' and '.join(not_applied)} "
              "could not be applied: restart the kernel (Colab: Runtime > Restart session) and run "
              "the setup cell before any other TensorFlow code.")
    return "/GPU:0" if gpus else "/CPU:0"


def _configure_devices(tf, gpus: list, replicas: int, replica_memory_mb: int | None) -> list[str]:
    """Apply the device settings; return the ones that the running runtime refused."""
    not_applied: list[str] = []
    split = None
    if replicas > 1 and len(gpus) >= replicas:
        # Enough GPUs: one replica per GPU, each with memory growth; the others are hidden.
        not_applied += _set_visible(tf, gpus[:replicas], gpus)
        gpus = gpus[:replicas]
    elif replicas > 1:
        if gpus:
            # Fewer GPUs than replicas: split the first into `replicas` logical GPUs and hide the rest
            # (TensorFlow refuses GPUs that differ in memory growth, and every GPU would add a replica).
            not_applied += _set_visible(tf, gpus[:1], gpus)
            gpus = gpus[:1]
            split = gpus[0]
            memory = replica_memory_mb or _replica_memory_mb(replicas)
            logical = [tf.config.LogicalDeviceConfiguration(memory_limit=memory) for _ in range(replicas)]
        else:
            split = tf.config.list_physical_devices("CPU")[0]
            logical = [tf.config.LogicalDeviceConfiguration() for _ in range(replicas)]
        try:
            tf.config.set_logical_device_configuration(split, logical)
        except RuntimeError:
            have = len(tf.config.list_logical_devices(split.device_type))
            not_applied.append(f"replicas={replicas} (the runtime has {have})")
    elif _split_before(tf, gpus):
        # Only an earlier setup() splits a device, and setup() starts the runtime: it cannot be undone.
        kind = "GPU" if gpus else "CPU"
        not_applied.append(f"replicas=1 (the runtime has {len(tf.config.list_logical_devices(kind))})")
    for gpu in gpus:
        if gpu is split:
            continue
        try:
            tf.config.experimental.set_memory_growth(gpu, True)
        except RuntimeError:
            not_applied.append(f"memory growth on {gpu.name}")
        except ValueError:
            pass  # logical devices were configured on this GPU by other code: limits apply instead
    return not_applied


def _set_visible(tf, visible: list, gpus: list) -> list[str]:
    """Make only ``visible`` of the ``gpus`` visible to TensorFlow; return what could not be applied."""
    if len(visible) == len(gpus):
        return []
    try:
        tf.config.set_visible_devices(visible, "GPU")
    except RuntimeError:
        return [f"using {len(visible)} of the {len(gpus)} GPUs"]
    return []


def _first_graph_run(tf) -> None:
    """Run one tiny TF1 graph, once per process: the first ``Session.run`` of TensorFlow 2.20 writes
    "All log messages before absl::InitializeLog() ..." and an MLIR line to file descriptor 2, which
    would show as a red block under a notebook's first TF1 cell."""
    if _last_setup.get("graph_run"):
        return
    with tf.Graph().as_default():
        value = tf.compat.v1.placeholder(tf.float32, [])
        with tf.compat.v1.Session() as session:
            session.run(value * 2.0, {value: 1.0})
    _last_setup["graph_run"] = True


def _split_before(tf, gpus: list) -> bool:
    """True when an earlier call in this process split the first device into logical devices."""
    device = gpus[0] if gpus else tf.config.list_physical_devices("CPU")[0]
    try:
        configured = tf.config.get_logical_device_configuration(device)
    except (ValueError, RuntimeError):
        return False
    return bool(configured) and len(configured) > 1


def _replica_memory_mb(replicas: int) -> int:
    """80 % of the first GPU's memory shared by ``replicas`` (nvidia-smi), or a safe fallback."""
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "--query-gpu=memory.total", "--format=csv,noheader,nounits", "-i", "0"],
                                 capture_output=True, text=True, timeout=10, check=True).stdout
            return max(256, int(int(out.split()[0]) * 0.8) // replicas)
        except (OSError, ValueError, IndexError, subprocess.SubprocessError):
            pass
    return _FALLBACK_REPLICA_MEMORY_MB


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


# --------------------------------------------------------------------------- the self-check line


def oldest_supported() -> dict[str, str]:
    """The oldest TensorFlow and Keras versions the workbook is tested with, as pyproject.toml states
    them (``tensorflow>=…``, ``keras>=…``), read from the installed package's metadata.

    >>> sorted(oldest_supported())
    ['keras', 'tensorflow']
    """
    try:
        requirements = metadata.requires(DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        requirements = _requirements_from_pyproject()
    found = {}
    for requirement in requirements:
        match = re.match(r"^\s*(tensorflow|keras)\b[^;]*?>=\s*([0-9][0-9.]*)", requirement)
        if match and ";" not in requirement.split(">=")[0]:
            found[match.group(1)] = match.group(2)
    return found


def _requirements_from_pyproject() -> list[str]:
    """Fallback when the package is imported from a source tree without being installed."""
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "pyproject.toml"
    if not path.is_file():
        return []
    text = path.read_text(encoding="utf-8")
    block = re.search(r"^dependencies\s*=\s*\[(.*?)\]", text, re.S | re.M)
    return re.findall(r'"([^"]+)"', block.group(1)) if block else []


_NAMES = {"tensorflow": "TensorFlow", "keras": "Keras"}


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])


def version_warning(installed: dict[str, str] | None = None) -> str | None:
    """One warning line when TensorFlow or Keras is older than :func:`oldest_supported`, else None.

    >>> version_warning({"tensorflow": "2.10.0", "keras": "99.0"}).startswith("WARNING: TensorFlow 2.10.0")
    True
    """
    if installed is None:
        import tensorflow as tf
        import keras

        installed = {"tensorflow": tf.__version__, "keras": keras.__version__}
    oldest = oldest_supported()
    old = [f"{_NAMES[name]} {installed[name]}" for name in _NAMES
           if name in oldest and name in installed and _version_tuple(installed[name]) < _version_tuple(oldest[name])]
    if not old:
        return None
    tested = ", ".join(f"{_NAMES[name]} {oldest[name]}" for name in _NAMES if name in oldest)
    return (f"WARNING: {' and '.join(old)} {'is' if len(old) == 1 else 'are'} older than the oldest tested "
            f"({tested}): some outputs or helpers may differ. In Colab choose the latest runtime version.")


def describe_device(device: str) -> str:
    """The setup cell's self-check: versions, the compute device and its settings (run-dependent).

    One line such as ``Python 3.13.5 · TensorFlow 2.20.0 · Keras 3.13.2 · /GPU:0 (Tesla T4) ·
    TF32 off · memory growth on``, plus a second, warning line when TensorFlow or Keras is older
    than the oldest version the workbook is tested with (:func:`version_warning`).
    """
    import tensorflow as tf
    import keras

    parts = [f"Python {platform.python_version()}", f"TensorFlow {tf.__version__}", f"Keras {keras.__version__}"]
    kind = device.split(":")[0].strip("/")
    gpus = tf.config.list_physical_devices("GPU")
    if kind == "GPU" and gpus:
        info = tf.config.experimental.get_device_details(gpus[0]) or {}
        parts.append(f"{device} ({info.get('device_name', 'GPU')})")
    else:
        parts.append(device)
    replicas = len(tf.config.list_logical_devices(kind)) if kind in ("CPU", "GPU") else 1
    if replicas > 1:
        parts.append(f"{replicas} logical {kind}s")
    if gpus:
        parts.append("TF32 " + ("on" if tf.config.experimental.tensor_float_32_execution_enabled() else "off"))
        if any(_memory_limited(tf, gpu) for gpu in gpus):
            parts.append("fixed memory per logical GPU")
        else:
            parts.append("memory growth " + ("on" if all(_memory_growth(tf, gpu) for gpu in gpus) else "off"))
    line = " · ".join(parts)
    warning = version_warning({"tensorflow": tf.__version__, "keras": keras.__version__})
    return line if warning is None else f"{line}\n{warning}"


def _memory_limited(tf, gpu) -> bool:
    try:
        return bool(tf.config.get_logical_device_configuration(gpu))
    except (ValueError, RuntimeError):
        return False


def _memory_growth(tf, gpu) -> bool:
    try:
        return bool(tf.config.experimental.get_memory_growth(gpu))
    except (ValueError, RuntimeError):
        return False
