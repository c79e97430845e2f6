import os
import random

import numpy as np
import pytest

from helpers import runtime


def test_setup_returns_the_device_tensorflow_computes_on():
    import tensorflow as tf

    device = runtime.setup(seed=0)
    expected = "/GPU:0" if tf.config.list_physical_devices("GPU") else "/CPU:0"
    assert device == expected
    assert tf.constant(1.0).device.endswith(expected[1:])


def test_setup_enables_op_determinism_and_quiet_logs():
    import tensorflow as tf
    from tensorflow.python.framework import config as tf_config  # no public getter exists

    runtime.setup(seed=1)
    assert tf_config.is_op_determinism_enabled()
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "3"
    assert tf.get_logger().level >= 40


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


@pytest.mark.parametrize("bad, error", [("0", TypeError), (1.5, TypeError), (True, TypeError), (-1, ValueError)])
def test_bad_seed_names_the_argument(bad, error):
    with pytest.raises(error, match="seed"):
        runtime.setup(seed=bad)


def test_describe_device_mentions_version_and_device():
    import tensorflow as tf

    text = runtime.describe_device("/CPU:0")
    assert tf.__version__ in text and "/CPU:0" in text


def test_importing_helpers_first_makes_cpu_memory_statistics_available(fresh_python):
    out = fresh_python(
        """
        import os
        os.environ.pop("TF_CPU_ALLOCATOR_USE_BFC", None)
        import helpers.accumulation as acc
        import tensorflow as tf
        print(acc.peak_memory_bytes(lambda: tf.ones([256, 256]) @ tf.ones([256, 256]), "CPU:0") > 0)
        """
    )
    assert out.strip() == "True"


def test_peak_memory_without_statistics_says_how_to_enable_them(fresh_python):
    out = fresh_python(
        """
        import os
        os.environ["TF_CPU_ALLOCATOR_USE_BFC"] = "false"
        import helpers.accumulation as acc
        import tensorflow as tf
        try:
            acc.peak_memory_bytes(lambda: tf.ones([4]), "CPU:0")
        except RuntimeError as error:
            print("TF_CPU_ALLOCATOR_USE_BFC" in str(error))
        else:
            print("statistics available")
        """
    )
    assert out.strip() in ("True", "statistics available")
