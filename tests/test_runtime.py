"""helpers.runtime: device settings before the runtime starts (GPU simulated), TF32 off, replicas,
re-run cells, the setup cell's self-check line."""

import os
import random
import re
import textwrap
import tomllib
from pathlib import Path

import numpy as np
import pytest

from helpers import runtime

ROOT = Path(__file__).resolve().parents[1]

# A fake GPU handed to `setup` by patching the tf.config functions it calls. The fakes behave like
# TensorFlow's own (tensorflow/python/eager/context.py): a setting that differs from the current one
# raises RuntimeError once the runtime has started. Each record says whether the runtime had started.
FAKE_GPU = """
import json
import tensorflow as tf
from tensorflow.python.eager import context

GPU = tf.config.PhysicalDevice(name="/physical_device:GPU:0", device_type="GPU")
_real_list = tf.config.list_physical_devices
calls, growth, logical = [], {}, {}

def started():
    return bool(context.context()._initialized)

def list_physical_devices(device_type=None):
    if device_type == "GPU":
        return [GPU]
    return _real_list(device_type) + ([GPU] if device_type is None else [])

def set_memory_growth(device, enable):
    calls.append(["set_memory_growth", device.name, enable, started()])
    if growth.get(device.name) != enable and started():
        raise RuntimeError("Physical devices cannot be modified after being initialized")
    growth[device.name] = enable

def get_memory_growth(device):
    return growth.get(device.name, False)

_real_set_logical = tf.config.set_logical_device_configuration
def set_logical_device_configuration(device, configs):
    if device.device_type != "GPU":
        return _real_set_logical(device, configs)
    calls.append(["set_logical_device_configuration", device.name,
                  [c.memory_limit for c in configs or []], started()])
    if logical.get(device.name) != configs and started():
        raise RuntimeError("Virtual devices cannot be modified after being initialized")
    logical[device.name] = configs

_real_get_logical = tf.config.get_logical_device_configuration
def get_logical_device_configuration(device):
    if device.device_type == "GPU":
        return logical.get(device.name)
    return _real_get_logical(device)

tf.config.list_physical_devices = list_physical_devices
tf.config.experimental.set_memory_growth = set_memory_growth
tf.config.experimental.get_memory_growth = get_memory_growth
tf.config.set_logical_device_configuration = set_logical_device_configuration
tf.config.get_logical_device_configuration = get_logical_device_configuration
tf.config.experimental.get_device_details = lambda device: {"device_name": "Tesla T4 (simulated)"}
from helpers import runtime
"""


def with_fake_gpu(snippet: str) -> str:
    return FAKE_GPU + textwrap.dedent(snippet)


def test_setup_returns_the_device_tensorflow_computes_on():
    import tensorflow as tf

    device = runtime.setup(seed=0)
    expected = "/GPU:0" if tf.config.list_physical_devices("GPU") else "/CPU:0"
    assert device == expected
    assert tf.constant(1.0).device.endswith(expected[1:])


def test_setup_turns_tensor_float_32_off_and_op_determinism_on():
    import tensorflow as tf
    from tensorflow.python.framework import config as tf_config  # no public getter exists

    tf.config.experimental.enable_tensor_float_32_execution(True)
    runtime.setup(seed=1)
    assert not tf.config.experimental.tensor_float_32_execution_enabled()
    assert tf_config.is_op_determinism_enabled()
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "3"
    assert tf.get_logger().level >= 40


def test_simulated_gpu_gets_memory_growth_before_the_runtime_starts(fresh_python):
    out = fresh_python(with_fake_gpu("""
        device = runtime.setup(seed=0)
        print(json.dumps({"device": device, "calls": calls, "started": started(),
                          "tf32": tf.config.experimental.tensor_float_32_execution_enabled(),
                          "line": runtime.describe_device(device)}))
    """))
    result = __import__("json").loads(out.strip().splitlines()[-1])
    assert result["device"] == "/GPU:0"
    assert result["calls"] == [["set_memory_growth", "/physical_device:GPU:0", True, False]]
    assert result["started"] and result["tf32"] is False
    assert "/GPU:0 (Tesla T4 (simulated))" in result["line"]
    assert "TF32 off" in result["line"] and "memory growth on" in result["line"]


def test_simulated_gpu_split_into_replicas_with_memory_limits(fresh_python):
    out = fresh_python(with_fake_gpu("""
        runtime.setup(seed=0, replicas=2, replica_memory_mb=1000)
        print(json.dumps(calls))
    """))
    calls = __import__("json").loads(out.strip().splitlines()[-1])
    # a split GPU has fixed limits instead of memory growth (TensorFlow refuses both on one device)
    assert calls == [["set_logical_device_configuration", "/physical_device:GPU:0", [1000, 1000], False]]


def test_an_op_before_setup_is_reported_in_one_line_not_swallowed(fresh_python):
    out = fresh_python(with_fake_gpu("""
        tf.constant(1.0).numpy()          # a learner ran TensorFlow code before the setup cell
        runtime.setup(seed=0)
        print("growth applied:", growth.get(GPU.name, False))
    """))
    lines = out.strip().splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith("runtime.setup: TensorFlow was already running")
    assert "memory growth on /physical_device:GPU:0" in lines[0] and "restart" in lines[0]
    assert lines[1] == "growth applied: False"


def test_replicas_split_the_cpu_for_mirrored_strategy(fresh_python):
    out = fresh_python("""
        from helpers import runtime
        device = runtime.setup(seed=0, replicas=2)
        import tensorflow as tf
        print(len(tf.config.list_logical_devices("CPU")), tf.distribute.MirroredStrategy().num_replicas_in_sync)
        print(runtime.describe_device(device))
    """)
    counts, line = out.strip().splitlines()[-2:]
    assert counts == "2 2"
    assert "2 logical CPUs" in line


def test_rerun_with_the_same_settings_is_silent_and_a_new_setting_says_restart_once(fresh_python):
    out = fresh_python("""
        from helpers import runtime
        runtime.setup(seed=0, replicas=2)
        print("-- same settings again")
        runtime.setup(seed=0, replicas=2)
        print("-- one replica now")
        runtime.setup(seed=0, replicas=1)
        print("-- three replicas now")
        runtime.setup(seed=0, replicas=3)
    """)
    lines = out.strip().splitlines()
    assert lines[:2] == ["-- same settings again", "-- one replica now"]
    assert lines[2].startswith("runtime.setup: TensorFlow was already running, so replicas=1 (the runtime has 2)")
    assert lines[3] == "-- three replicas now"
    assert lines[4].startswith("runtime.setup:") and "replicas=3" in lines[4] and "restart" in lines[4]
    assert len(lines) == 5


def _draws():
    import tensorflow as tf

    return random.random(), float(np.random.rand()), float(tf.random.uniform(()).numpy())


def test_same_seed_same_random_numbers_different_seed_different():
    runtime.setup(seed=7)
    first = _draws()
    runtime.setup(seed=7)
    assert _draws() == first
    runtime.setup(seed=8)
    assert _draws() != first


@pytest.mark.parametrize("argument, bad, error", [
    ("seed", "0", TypeError), ("seed", 1.5, TypeError), ("seed", True, TypeError), ("seed", -1, ValueError),
    ("replicas", 0, ValueError), ("replicas", 2.0, TypeError), ("replica_memory_mb", 0, ValueError),
])
def test_bad_arguments_are_named(argument, bad, error):
    with pytest.raises(error, match=argument):
        runtime.setup(**{argument: bad})


def test_self_check_line_names_python_tensorflow_keras_and_device():
    import platform

    import keras
    import tensorflow as tf

    line = runtime.describe_device("/CPU:0")
    assert line.splitlines()[0] == (f"Python {platform.python_version()} · TensorFlow {tf.__version__} · "
                                    f"Keras {keras.__version__} · /CPU:0")


def test_oldest_supported_versions_come_from_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    stated = {m.group(1): m.group(2) for d in project["dependencies"]
              if (m := re.match(r"(tensorflow|keras)\b.*>=\s*([0-9.]+)", d))}
    assert runtime.oldest_supported() == stated
    assert set(stated) == {"tensorflow", "keras"}


def test_version_warning_only_below_the_oldest_supported():
    import keras
    import tensorflow as tf

    assert runtime.version_warning({"tensorflow": tf.__version__, "keras": keras.__version__}) is None
    oldest = runtime.oldest_supported()
    assert runtime.version_warning(dict(oldest)) is None
    line = runtime.version_warning({"tensorflow": "2.18.0", "keras": "3.8.0"})
    assert line.startswith("WARNING: TensorFlow 2.18.0 and Keras 3.8.0 are older than the oldest tested")
    assert f"TensorFlow {oldest['tensorflow']}" in line and "\n" not in line
    only_keras = runtime.version_warning({"tensorflow": "2.99.0", "keras": "3.8.0"})
    assert only_keras.startswith("WARNING: Keras 3.8.0 is older")


def test_importing_helpers_first_makes_cpu_memory_statistics_available(fresh_python):
    out = fresh_python(
        """
        import os
        os.environ.pop("TF_CPU_ALLOCATOR_USE_BFC", None)
        import helpers.measure as measure
        import tensorflow as tf
        print(measure.peak_memory_bytes(lambda: tf.ones([256, 256]) @ tf.ones([256, 256]), "CPU:0") > 0)
        """
    )
    assert out.strip() == "True"


def test_peak_memory_without_statistics_says_how_to_enable_them(fresh_python):
    out = fresh_python(
        """
        import os
        os.environ["TF_CPU_ALLOCATOR_USE_BFC"] = "false"
        import helpers.measure as measure
        import tensorflow as tf
        try:
            measure.peak_memory_bytes(lambda: tf.ones([4]), "CPU:0")
        except RuntimeError as error:
            print("TF_CPU_ALLOCATOR_USE_BFC" in str(error))
        else:
            print("statistics available")
        """
    )
    assert out.strip() in ("True", "statistics available")


def test_a_notebooks_first_tf1_session_writes_nothing_to_stderr():
    # TF 2.20 logs two lines at the first Session.run of a process; setup() hides them.
    import subprocess
    import sys

    code = textwrap.dedent("""
        from helpers import runtime
        runtime.setup(seed=0)
        import tensorflow as tf
        with tf.Graph().as_default():
            x = tf.compat.v1.placeholder(tf.float32, [None])
            with tf.compat.v1.Session() as session:
                session.run(x * 2, {x: [1.0]})
        print("ran")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "ran", proc.stderr
    assert proc.stderr.strip() == "", proc.stderr
