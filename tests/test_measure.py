"""helpers.measure: timers wait for the device, ratios refuse a baseline they cannot divide by."""

import math

import pytest
import tensorflow as tf

from helpers import measure, plumbing


@pytest.fixture
def device_waits(monkeypatch):
    """Count calls of plumbing.wait_for_device (what a GPU timer must call before stopping the clock)."""
    calls = []
    real = plumbing.wait_for_device
    monkeypatch.setattr(plumbing, "wait_for_device", lambda: (calls.append(1), real())[1])
    return calls


def test_median_seconds_waits_for_the_device_even_when_fn_returns_none(device_waits):
    launched = []
    measure.median_seconds(lambda: launched.append(tf.ones([64, 64]) @ tf.ones([64, 64])) and None,
                           repeat=3, warmup=2)
    assert len(device_waits) == 3 + 2  # every warm-up and every timed run ends on an idle device


def test_interleaved_times_each_function_in_turn_and_waits_every_time(device_waits):
    order = []
    times = measure.interleaved({"a": lambda: order.append("a"), "b": lambda: order.append("b")},
                                rounds=3, warmup=1, statistic="min")
    assert order == ["a", "b"] * 4
    assert len(device_waits) == 8
    assert set(times) == {"a", "b"} and all(t >= 0 for t in times.values())


def test_asynchronous_execution_is_counted(fresh_python):
    # With asynchronous execution (what a GPU does), a timer that does not wait sees launches only.
    out = fresh_python("""
        from helpers import measure
        import tensorflow as tf
        tf.config.experimental.set_synchronous_execution(False)
        x = tf.random.normal([600, 600])
        pending = []
        def launch():
            y = x
            for _ in range(20):
                y = tf.matmul(y, x) / 600.0
            pending.append(y)      # returns None: nothing for the timer to fetch
        print(measure.median_seconds(launch, repeat=3) > 0, all(p.numpy() is not None for p in pending))
    """)
    assert out.strip() == "True True"


@pytest.mark.parametrize("base", [0.0, -0.001, float("nan"), float("inf")])
def test_ratio_table_refuses_a_baseline_it_cannot_divide_by(base):
    with pytest.raises(ValueError, match="baseline 'old'.*positive"):
        measure.ratio_table([("old", base), ("new", 0.001)], baseline="old")


def test_ratio_table_names_a_missing_baseline():
    with pytest.raises(ValueError, match="'nope' is not one of the rows"):
        measure.ratio_table([("old", 1.0)], baseline="nope")


@pytest.mark.parametrize("kwargs, match", [
    ({"repeat": 0}, "repeat"), ({"warmup": -1}, "warmup"), ({"number": 0}, "number"),
])
def test_median_seconds_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        measure.median_seconds(lambda: None, **kwargs)


def test_interleaved_bad_arguments():
    with pytest.raises(ValueError, match="at least one"):
        measure.interleaved({})
    with pytest.raises(TypeError, match=r"fns\['a'\]"):
        measure.interleaved({"a": 3})
    with pytest.raises(ValueError, match="statistic"):
        measure.interleaved({"a": lambda: None}, statistic="mean")
    with pytest.raises(TypeError, match="fn must be callable"):
        measure.median_seconds(None)


def test_target_line_is_one_shape_for_every_benchmark():
    assert measure.target_line("a / b", 0.5, 1.0) == "target  a / b: 0.500x <= 1x  met"
    assert measure.target_line("a / b", 2.0, 1.0).endswith("NOT met")
    assert measure.target_line("speed-up", 12.0, 10, at_most=False).endswith(">= 10x  met")


def test_header_names_versions_and_device():
    text = measure.header("demo")
    assert text.startswith("== demo\n") and "TensorFlow" in text and "Keras" in text


def test_peak_memory_grows_with_the_work():
    small = measure.peak_memory_bytes(lambda: tf.ones([64, 64]) @ tf.ones([64, 64]))
    large = measure.peak_memory_bytes(lambda: tf.ones([1024, 1024]) @ tf.ones([1024, 1024]))
    assert 0 < small < large
    assert not math.isnan(small)
