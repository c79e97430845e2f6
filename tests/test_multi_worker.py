"""Several workers: the launcher (helpers.workers) and the helpers under MultiWorkerMirroredStrategy.

The launcher tests start plain Python workers (no TensorFlow: about a second each). The helper
tests start one cluster of two TensorFlow workers per topic (several seconds each, more on a busy
machine): one worker function runs every scenario and returns plain numbers, which the tests
check. The reference is always ONE process (no strategy) training on the same global batches.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from helpers import workers
from helpers.workers import WorkerError, WorkersTimedOut, run_workers

# Two TensorFlow workers take 5-9 s on an idle machine and much longer on a shared, busy one.
CLUSTER_TIMEOUT = 600
# float32: the all-reduce adds the replicas' partial sums in another order than one process adds
# its examples (a few ulps per gradient entry); over a few updates with learning rates <= 0.1 the
# weights move < 1e-6 apart (measured 6e-8). A missed or doubled shard moves them by > 1e-2.
WEIGHTS_TOL = 1e-6


# --------------------------------------------------------------------------- worker functions (no TensorFlow)


def _describe(tag: str = "", *, twice: int = 0) -> dict:
    return {"tag": tag, "twice": 2 * twice, "index_count": list(workers.this_worker()),
            "tf_config": json.loads(os.environ["TF_CONFIG"]), "cuda": os.environ.get("CUDA_VISIBLE_DEVICES")}


def _fail_on_worker_1(pid_dir: str) -> str:
    index, _ = workers.this_worker()
    Path(pid_dir, f"worker{index}").write_text(str(os.getpid()))
    if index == 1:
        print("I0000 00:00:1795563476.011861    5398 port.cc:153] oneDNN custom operations are on.")  # a C++ note
        print("about to fail")
        raise ValueError("boom on worker 1")
    time.sleep(600)  # killed by the launcher long before
    return "never"


def _stall(pid_dir: str) -> str:
    """Ignores SIGTERM (as a worker with a strategy does), starts a child in its group, sleeps."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    index, _ = workers.this_worker()
    Path(pid_dir, f"worker{index}").write_text(f"{os.getpid()} {child.pid}")
    time.sleep(600)
    return "never"


def _not_json() -> object:
    return object()


def _port_taken_once(marker: str) -> str:
    if workers.this_worker()[0] == 0 and not os.path.exists(marker):
        Path(marker).write_text("1")
        raise RuntimeError("Could not start gRPC server: Address already in use")
    return "ok"


def _state(pid: int) -> str:
    """'gone', or the process state letter from /proc ('Z': a zombie, dead but not reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "gone"


def _all_ended(workers_and_children: list[int]) -> bool:
    """The workers (even pids) were reaped by the launcher: gone. Their children (odd pids) were
    killed with them; their new parent (init) reaps them in its own time: gone or zombies."""
    deadline = time.monotonic() + 60  # a launcher stopped by Ctrl-C may exit before it reaps: init reaps then
    while (any(_state(pid) not in ("gone", "Z") for pid in workers_and_children[1::2])
           or any(_state(pid) != "gone" for pid in workers_and_children[0::2])):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _pids(pid_dir: Path, count: int) -> list[int]:
    deadline = time.monotonic() + 120
    while len(list(pid_dir.iterdir())) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return [int(p) for f in sorted(pid_dir.iterdir()) for p in f.read_text().split()]


# --------------------------------------------------------------------------- the launcher


def test_each_worker_gets_its_tf_config_and_the_results_come_back_in_order():
    results = run_workers(_describe, 3, args=("hi",), kwargs={"twice": 4}, timeout=120)
    addresses = results[0]["tf_config"]["cluster"]["worker"]
    assert [r["index_count"] for r in results] == [[0, 3], [1, 3], [2, 3]]
    assert [r["tf_config"]["task"] for r in results] == [{"type": "worker", "index": i} for i in range(3)]
    assert all(r["tf_config"]["cluster"]["worker"] == addresses for r in results) and len(set(addresses)) == 3
    assert all(a.startswith("127.0.0.1:") for a in addresses)
    assert {(r["tag"], r["twice"], r["cuda"]) for r in results} == {("hi", 8, "-1")}
    assert run_workers("tests.test_multi_worker:_describe", 1, env={"CUDA_VISIBLE_DEVICES": "0"},
                       timeout=120)[0]["cuda"] == "0"


def test_a_function_defined_in_a_script_is_sent_as_source_and_one_using_outside_names_is_refused(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent("""
        import math
        from helpers.workers import run_workers

        def square_of_index(offset):
            import os, json
            index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
            def helper(v):  # a nested function and a closure inside the body are fine
                return (v + offset) ** 2
            return helper(index)

        def uses_math():
            return math.pi

        print(run_workers(square_of_index, 2, args=(1,), timeout=120))
        try:
            run_workers(uses_math, 2)
        except ValueError as error:
            print(error)
    """))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "[1, 4]"
    assert lines[1].startswith("fn 'uses_math' uses 'math' from outside its body;")


def test_a_failed_worker_is_named_with_its_last_lines_and_the_others_are_killed_at_once(tmp_path):
    with pytest.raises(WorkerError) as caught:
        run_workers(_fail_on_worker_1, 2, args=(str(tmp_path),), timeout=300)  # worker 0 would sleep 600 s
    error = caught.value
    assert not isinstance(error, WorkersTimedOut)
    assert error.worker == 1 and error.returncode == 1
    assert str(error).startswith("worker 1 of 2 failed (exit code 1); worker 0 killed. Its last lines:")
    assert "about to fail" in error.log_tail and "ValueError: boom on worker 1" in error.log_tail
    assert "oneDNN" not in error.log_tail  # TensorFlow's start-up notes are left out
    assert all(_state(pid) == "gone" for pid in _pids(tmp_path, 2))


def test_a_result_that_is_not_json_is_a_worker_error_that_says_so():
    with pytest.raises(WorkerError, match="worker 0 of 1 failed") as caught:
        run_workers(_not_json, 1, timeout=120)
    assert "which is not JSON" in caught.value.log_tail


def test_stalled_workers_that_ignore_sigterm_are_killed_with_their_children_at_the_time_out(tmp_path):
    with pytest.raises(WorkersTimedOut) as caught:
        run_workers(_stall, 2, args=(str(tmp_path),), timeout=5)
    assert str(caught.value).startswith("workers 0, 1 still running after 5 s: all killed.")
    assert "CommunicationOptions(timeout_seconds=...)" in str(caught.value)
    pids = _pids(tmp_path, 2)
    assert len(pids) == 4 and _all_ended(pids)  # two workers and their children


def test_an_interrupted_launcher_leaves_no_worker_behind(tmp_path):
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    launcher = subprocess.Popen(
        [sys.executable, "-c", "import sys; from helpers.workers import run_workers; "
         f"run_workers('tests.test_multi_worker:_stall', 2, args=({str(pid_dir)!r},), timeout=300)"],
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)), stderr=subprocess.PIPE, text=True)
    pids = _pids(pid_dir, 2)
    launcher.send_signal(signal.SIGINT)  # Ctrl-C, or a notebook's interrupt: KeyboardInterrupt
    _, stderr = launcher.communicate(timeout=120)
    assert "KeyboardInterrupt" in stderr
    assert len(pids) == 4 and _all_ended(pids)


def _port_always_taken() -> str:
    raise RuntimeError("UnknownError: Could not start gRPC server")  # what TensorFlow says when a port is taken


def test_a_port_taken_before_tensorflow_binds_it_is_retried_once(tmp_path):
    assert run_workers(_port_taken_once, 2, args=(str(tmp_path / "marker"),), timeout=120) == ["ok", "ok"]
    with pytest.raises(WorkerError, match="could not bind its port twice in a row") as caught:
        run_workers(_port_always_taken, 1, timeout=120)
    assert "Could not start gRPC server" in caught.value.log_tail


def test_bad_arguments_are_refused_before_any_process_starts(monkeypatch):
    def no_process(*args, **kwargs):
        raise AssertionError("a process was started")

    monkeypatch.setattr(workers.subprocess, "Popen", no_process)

    def nested():
        return 1

    cases = [
        (dict(fn=42), TypeError, "fn must be a function or 'module:function', got int"),
        (dict(fn=dict), TypeError, "fn must be a function or 'module:function', got type"),
        (dict(fn=print), TypeError, "fn must be a plain function"),
        (dict(fn=lambda: 1), ValueError, "fn is a lambda"),
        (dict(fn=nested), ValueError, "fn 'nested' is defined inside another function"),
        (dict(fn="helpers.workers"), ValueError, "fn as a string must be 'module:function'"),
        (dict(fn=_describe, workers=0), ValueError, "workers must be >= 1, got 0"),
        (dict(fn=_describe, workers=2.0), TypeError, "workers must be an int, got float"),
        (dict(fn=_describe, workers=True), TypeError, "workers must be an int, got bool"),
        (dict(fn=_describe, timeout=0), ValueError, "timeout must be a positive number of seconds, got 0"),
        (dict(fn=_describe, timeout=-5.0), ValueError, "timeout must be a positive number"),
        (dict(fn=_describe, timeout=float("nan")), ValueError, "timeout must be a positive number"),
        (dict(fn=_describe, timeout="60"), ValueError, "timeout must be a positive number"),
        (dict(fn=_describe, args={"a": 1}), TypeError, "args must be a list or tuple"),
        (dict(fn=_describe, args="ab"), TypeError, "args must be a list or tuple"),
        (dict(fn=_describe, kwargs={1: 2}), TypeError, "kwargs must be a dict with string keys"),
        (dict(fn=_describe, args=(object(),)), TypeError, "args and kwargs must be JSON"),
        (dict(fn=_describe, env={"A": 1}), TypeError, "env must be a dict of strings to strings"),
    ]
    for kwargs, kind, message in cases:
        with pytest.raises(kind, match="^" + __import__("re").escape(message)):
            run_workers(**kwargs)


def test_this_worker_reads_tf_config(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert workers.this_worker() == (0, 1)
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["a:1", "b:2", "c:3"]},
                                                "task": {"type": "worker", "index": 2}}))
    assert workers.this_worker() == (2, 3)


def test_count_collectives_follows_conds_and_nested_functions():
    import tensorflow as tf

    def reduce(x):
        return tf.raw_ops.CollectiveReduceV2(input=x, group_size=2, group_key=1, instance_key=1,
                                             ordering_token=[], merge_op="Add", final_op="Id")

    nested = tf.function(lambda x: reduce(x) + reduce(x))

    @tf.function
    def step(x, flag):
        y = tf.cond(flag, lambda: reduce(x), lambda: x)  # one in a branch
        return nested(y) + tf.raw_ops.CollectiveGatherV2(input=x, group_size=2, group_key=1, instance_key=2,
                                                         ordering_token=[])[:1]

    traced = step.get_concrete_function(tf.TensorSpec([1]), tf.TensorSpec([], tf.bool))  # traced, never run
    assert workers.count_collectives(traced) == {"CollectiveGatherV2": 1, "CollectiveReduceV2": 3}
    assert workers.count_collectives(traced.graph) == {"CollectiveGatherV2": 1, "CollectiveReduceV2": 3}
    with pytest.raises(TypeError, match="function must be a concrete function"):
        workers.count_collectives(step)  # a tf.function has no single graph: pass a concrete function
    with pytest.raises(TypeError, match="function must be a concrete function"):
        workers.count_collectives("step")


def test_one_worker_needs_no_check_and_the_accumulators_share_is_its_result_without_a_strategy():
    import numpy as np
    import tensorflow as tf

    from helpers.gradient_accumulator import GradientAccumulator

    assert workers.cluster_workers(tf.distribute.get_strategy()) == 1 and workers.cluster_workers(None) == 1
    workers.require_same_batch(tf.distribute.get_strategy(), (tf.ones([2, 1]), tf.zeros([2])), "dataset")
    v, unused = tf.Variable([1.0, 2.0]), tf.Variable(0.0)
    accumulator = GradientAccumulator([v, unused])
    accumulator.add([tf.constant([1.0, 3.0]), None], weight=3)
    accumulator.add([tf.constant([5.0, 7.0]), None], weight=1)
    grads, (loss,) = accumulator.gradients_for(None, [tf.constant(2.5)])
    assert np.allclose(grads[0], [2.0, 4.0]) and grads[1] is None and float(loss) == 2.5


# --------------------------------------------------------------------------- accumulation on two workers


def _accumulation_worker() -> dict:
    """Every optimizer and option of train_accumulated on this worker and in one process (no strategy)."""
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()  # before any other TensorFlow op
    import hashlib

    import keras
    import numpy as np

    from helpers import accumulation as acc
    from helpers.gradient_accumulator import GradientAccumulator

    tf.config.experimental.enable_op_determinism()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(33, 4)).astype("float32")
    y = (x @ np.array([[1.0], [-2.0], [0.5], [0.0]]) + 0.1 * rng.normal(size=(33, 1))).astype("float32")
    w = rng.uniform(0.5, 2.0, size=(33,)).astype("float32")
    mse = keras.losses.MeanSquaredError()
    sizes, steps = [8, 5, 8, 8, 3, 1], 4  # windows of 29 and 4 examples; shares 2/3 and 0/1 (an empty shard)
    windows = [(0, 29), (29, 33)] * 2  # two epochs
    out: dict = {"cases": {}}

    def make(l2=False):
        keras.utils.set_random_seed(0)
        reg = keras.regularizers.L2(0.01) if l2 else None
        return keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="tanh", kernel_regularizer=reg),
                                 keras.layers.Dense(1)])

    def one_process(model, optimizer, windows=windows, weighted=False, scaled=False):
        for lo, hi in windows:
            with tf.GradientTape() as tape:
                pred = model(x[lo:hi], training=True)
                loss = mse(y[lo:hi], pred, sample_weight=w[lo:hi] if weighted else None) + sum(model.losses)
                loss = optimizer.scale_loss(loss) if scaled else loss
            optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))

    def traced(functions):
        """Collectives of the graphs that ran (traced in the scope: outside it tf.function retraces)."""
        counts = []
        for fn in functions:
            before = fn.experimental_get_tracing_count()
            with strategy.scope():
                graph = fn.get_concrete_function(*fn.input_signature).graph
            assert fn.experimental_get_tracing_count() == before, "retraced"
            sizes = sorted(op.inputs[0].shape.num_elements() for op in graph.get_operations()
                           if op.type == "CollectiveReduceV2")  # values summed by each top-level all-reduce
            counts.append({"ops": workers.count_collectives(graph), "sizes": sizes})
        return counts

    def digest(model):
        return hashlib.sha256(b"".join(v.tobytes() for v in model.get_weights())).hexdigest()

    def gap(a, b):
        return max(float(np.abs(u - v).max()) for u, v in zip(a.get_weights(), b.get_weights()))

    cases = {
        "sgd": (lambda: keras.optimizers.SGD(0.1), {}),
        "adam": (lambda: keras.optimizers.Adam(0.05), {}),
        "adamw_l2_global_clipnorm": (lambda: keras.optimizers.AdamW(0.05, weight_decay=0.1, global_clipnorm=0.5),
                                     {"l2": True}),
        "sgd_clipvalue": (lambda: keras.optimizers.SGD(0.1, clipvalue=0.05), {}),
        "sgd_sample_weights": (lambda: keras.optimizers.SGD(0.1), {"weighted": True}),
    }
    for name, (optimizer, options) in cases.items():
        reference = make(options.get("l2", False))
        one_process(reference, optimizer(), weighted=options.get("weighted", False))
        with strategy.scope():
            model, opt = make(options.get("l2", False)), optimizer()
        data = acc.micro_batches((x, y, w) if options.get("weighted") else (x, y), sizes)
        history = acc.train_accumulated(model, opt, mse, data, steps, epochs=2, verbose=False)
        loop = acc._LOOPS[model][0]
        out["cases"][name] = {"gap": gap(model, reference), "moved": gap(reference, make()), "digest": digest(model),
                              "examples": history["examples"], "partial": history["partial_updates"],
                              "collectives": {"micro_step": traced(loop._steps.values()),
                                              "update": traced(loop._updates[opt].values())},
                              "parameters": int(sum(np.prod(v.shape) for v in model.trainable_variables))}
    # Mixed precision: a LossScaleOptimizer, windows of finite gradients, then an overflowing one.
    keras.mixed_precision.set_global_policy("mixed_float16")

    def make16():
        keras.utils.set_random_seed(0)  # float32 outputs, as Keras' mixed-precision guide advises
        return keras.Sequential([keras.Input((4,)), keras.layers.Dense(16, activation="tanh"),
                                 keras.layers.Dense(1, dtype="float32")])

    def lso():
        return keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1))

    reference = make16()
    one_process(reference, lso(), scaled=True)
    with strategy.scope():
        model, opt = make16(), lso()
    acc.train_accumulated(model, opt, mse, acc.micro_batches((x, y), sizes), steps, epochs=2, verbose=False)
    out["mixed"] = {"gap": gap(model, reference), "moved": gap(reference, make16()), "digest": digest(model)}
    with strategy.scope():
        model, opt = make16(), lso()
    before, y_big = model.get_weights(), y.copy()
    y_big[:2] = 6e4  # float16 overflow in worker 0's share of the first micro-batch only
    acc.train_accumulated(model, opt, mse, acc.micro_batches((x[:16], y_big[:16]), [8, 8]), 2, verbose=False)
    out["overflow"] = {"unchanged": all((a == b).all() for a, b in zip(before, model.get_weights())),
                       "scale": float(opt.dynamic_scale.numpy()), "iterations": int(opt.iterations.numpy())}
    keras.mixed_precision.set_global_policy("float32")
    # accumulated_gradients: the full batch's gradient on every worker.
    with strategy.scope():
        model = make()
    grads = acc.accumulated_gradients(model, mse, acc.micro_batches((x, y), sizes))
    with tf.GradientTape() as tape:
        loss = mse(y, model(x, training=True))
    full = tape.gradient(loss, model.trainable_variables)
    out["gradients_gap"] = max(float(np.abs(np.asarray(g) - np.asarray(f)).max()) for g, f in zip(grads, full))
    # The accumulator's documented pattern, with the dataset split between workers by tf.distribute.
    with strategy.scope():
        model, opt = make(), keras.optimizers.SGD(0.1)
        accumulator = GradientAccumulator(model.trainable_variables)

    def replica_step(xb, yb):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(yb - model(xb, training=True)))
        accumulator.add(tape.gradient(loss, model.trainable_variables), tf.shape(xb)[0])

    def replica_apply():
        grads, _ = accumulator.gradients_for(opt)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        accumulator.reset()

    micro_step = tf.function(lambda batch: strategy.run(replica_step, args=batch))
    apply = tf.function(lambda: strategy.run(replica_apply))
    for batch in strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices((x, y)).batch(11)):
        micro_step(batch)
    apply()
    reference = make()
    one_process(reference, keras.optimizers.SGD(0.1), windows=[(0, 33)])
    out["pattern"] = {"gap": gap(model, reference), "digest": digest(model),
                      "collectives": workers.count_collectives(apply.get_concrete_function())}
    try:
        with strategy.scope():
            accumulator.gradients_for(opt)
    except RuntimeError as error:
        out["cross_replica"] = str(error)
    # Bad input: each worker reads its own shard of the dataset.
    index, count = workers.this_worker()
    with strategy.scope():
        model, opt = make(), keras.optimizers.SGD(0.1)
    before = model.get_weights()
    try:
        acc.train_accumulated(model, opt, mse, tf.data.Dataset.from_tensor_slices((x, y)).batch(8).shard(count, index),
                              2, verbose=False)
    except ValueError as error:
        unchanged = all((a == b).all() for a, b in zip(before, model.get_weights()))
        out["sharded"] = {"error": str(error), "unchanged": unchanged}
    return out


@pytest.fixture(scope="module")
def accumulation_results():
    return run_workers(_accumulation_worker, 2, timeout=CLUSTER_TIMEOUT)


def test_accumulated_training_on_two_workers_equals_one_process_for_every_optimizer(accumulation_results):
    for name in ("sgd", "adam", "adamw_l2_global_clipnorm", "sgd_clipvalue", "sgd_sample_weights"):
        first, second = (results["cases"][name] for results in accumulation_results)
        assert first["digest"] == second["digest"], f"{name}: the workers' weights differ"
        assert first["moved"] > 1e-3 and first["gap"] < WEIGHTS_TOL, (name, first["gap"])
        assert first["examples"] == [29, 4, 29, 4] and first["partial"] == 2, name


def test_mixed_precision_on_two_workers_equals_one_process_and_both_skip_an_overflowing_window(accumulation_results):
    first, second = accumulation_results
    assert first["mixed"]["digest"] == second["mixed"]["digest"]
    assert first["mixed"]["moved"] > 1e-2 and first["mixed"]["gap"] < 1e-2 * first["mixed"]["moved"]  # float16
    # The overflow is in worker 0's share only: both workers skip, keep their weights, halve the scale
    # (before the fix worker 1 applied the update alone and then hung in the all-reduce).
    assert first["overflow"] == second["overflow"] == {"unchanged": True, "scale": 16384.0, "iterations": 0}


def test_accumulated_gradients_and_the_documented_accumulator_pattern_on_two_workers(accumulation_results):
    for results in accumulation_results:
        assert results["gradients_gap"] < 1e-6
        assert results["pattern"]["gap"] < WEIGHTS_TOL
        assert results["pattern"]["collectives"] == {"CollectiveReduceV2": 2}
        assert results["cross_replica"] == "gradients_for() needs a replica context: call it inside strategy.run"
    assert accumulation_results[0]["pattern"]["digest"] == accumulation_results[1]["pattern"]["digest"]


def test_one_gradient_all_reduce_per_update_and_none_per_micro_batch(accumulation_results):
    for results in accumulation_results:
        for name, case in results["cases"].items():
            assert case["collectives"]["micro_step"] == [{"ops": {}, "sizes": []}], name
            # Keras' all-reduce of the gradients + one of 3 numbers (the accumulator's total weight, the
            # window's loss x weight and its weight, for the history). Keras clips on each replica
            # before its all-reduce, so with clipping replica 0 needs the whole gradient first: the
            # gradients then cross twice, packed with the 3 numbers (still 2 ops).
            size = case["parameters"]
            sizes = [size + 3, size] if "clip" in name else [3, size]
            assert case["collectives"]["update"] == [{"ops": {"CollectiveReduceV2": 2}, "sizes": sorted(sizes)}] * 2, (
                name, case["collectives"])


def test_a_dataset_sharded_per_worker_is_refused_before_any_weight_changes(accumulation_results):
    for results in accumulation_results:
        assert results["sharded"]["unchanged"]
        assert results["sharded"]["error"].startswith(
            "dataset differs between workers (worker 1's first batch is not worker 0's): these helpers take the same "
            "global batches on every worker")


# --------------------------------------------------------------------------- validation on two workers


def _validation_worker() -> dict:
    """train_with_validation and evaluate on this worker and in one process (no strategy)."""
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()  # before any other TensorFlow op
    import keras
    import numpy as np

    from helpers import validation as val

    tf.config.experimental.enable_op_determinism()
    mse = keras.losses.MeanSquaredError()

    def make():
        keras.utils.set_random_seed(0)
        return keras.Sequential([keras.Input((val.FEATURES,)), keras.layers.Dense(8, "tanh", kernel_regularizer="l2"),
                                 keras.layers.Dense(1)])

    train = val.generated_dataset(None, 8, seed=0, with_ids=True)
    val_ds = val.generated_dataset(5, 8, seed=1, with_ids=True)  # 89 examples: 11 batches of 8, then 1
    reference = make()
    expected = val.train_with_validation(reference, keras.optimizers.SGD(0.05), mse, train, val_ds, steps=6, every=3,
                                         metrics=[keras.metrics.MeanAbsoluteError()])
    with strategy.scope():
        model, opt = make(), keras.optimizers.SGD(0.05)
        counted, mae = val.ExampleCount(name="counted"), keras.metrics.MeanAbsoluteError()
    history = val.train_with_validation(model, opt, mse, train, val_ds, steps=6, every=3, metrics=[counted, mae])
    local = strategy.experimental_local_results(counted.count.value)[0]  # this worker's replica only
    ids = val.example_ids(5, seed=1)
    stream = val.ValidationStream(val_ds)
    passes = [val.evaluate(model, stream, mse, return_ids=True) for _ in range(2)]
    steps = next(iter(val._EVAL_STEPS[model].values()))
    out = {
        "eval_step": history.eval_step,
        "examples": [r["examples"] for r in history.val],
        "counted": [r["counted"] for r in history.val],
        "local_count": int(local),
        "ids_in_order": [bool(np.array_equal(i, ids)) for i in history.val_ids] + [
            bool(np.array_equal(p["ids"], ids)) for p in passes],
        "total_ids": len(ids),
        "loss_gap": max(abs(a - b) / b for a, b in zip(history.val_metric("loss"), expected.val_metric("loss"))),
        "mae_gap": max(abs(a - b) / b for a, b in zip(history.val_metric("mean_absolute_error"),
                                                      expected.val_metric("mean_absolute_error"))),
        "stream_loss_same": passes[0]["loss"] == passes[1]["loss"],
        "train_ids_same": all(np.array_equal(a, b) for a, b in zip(history.train_ids, expected.train_ids)),
        "weights_gap": max(float(np.abs(a - b).max()) for a, b in zip(model.get_weights(), reference.get_weights())),
        "eval_collectives": workers.count_collectives(steps.eval_step.get_concrete_function(
            *[tf.TensorSpec([None, val.FEATURES]), tf.TensorSpec([None, 1])])),
    }
    index, count = workers.this_worker()
    try:
        val.evaluate(model, val_ds.shard(count, index), mse)
    except ValueError as error:
        out["sharded"] = str(error)
    return out


@pytest.fixture(scope="module")
def validation_results():
    return run_workers(_validation_worker, 2, timeout=CLUSTER_TIMEOUT)


def test_every_validation_example_is_evaluated_once_across_two_workers_in_order_every_pass(validation_results):
    first, second = validation_results
    for results in validation_results:
        assert results["eval_step"] == [0, 3, 6]
        assert results["examples"] == results["counted"] == [results["total_ids"]] * 3 == [89] * 3
        assert results["ids_in_order"] == [True] * 5 and results["stream_loss_same"]
        assert results["loss_gap"] < 1e-6 and results["mae_gap"] < 1e-6  # float32 sums in another order
        assert results["train_ids_same"] and results["weights_gap"] < WEIGHTS_TOL
    # Each worker evaluated its share only: 11 batches of 8 (4 + 4) and a last batch of 1 (0 + 1).
    assert (first["local_count"], second["local_count"]) == (44, 45)
    assert first["eval_collectives"] == {"CollectiveReduceV2": 1}  # one all-reduce per validation batch


def test_a_validation_set_sharded_per_worker_is_refused(validation_results):
    for results in validation_results:
        assert results["sharded"].startswith(
            "dataset differs between workers (worker 1's first batch is not worker 0's)")


# --------------------------------------------------------------------------- issue 22's losses on two workers


def _loss_terms_worker() -> dict:
    """Issue 22's losses (per output, loss_weights, what each loss divides by, unused heads, ragged
    inputs) under issue 23's multi-worker path, against ONE process on the same global batches:
    Keras' ``fit``/``model.evaluate`` where they apply, else the helper itself without a strategy."""
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()  # before any other TensorFlow op
    import hashlib
    import warnings

    import keras
    import numpy as np

    from helpers import accumulation as acc
    from helpers import molecules
    from helpers import validation as val
    from tests.learner_models import two_outputs

    warnings.simplefilter("ignore")  # a head without a loss gets no gradient: Keras warns
    tf.config.experimental.enable_op_determinism()
    rng = np.random.default_rng(22)
    x = rng.normal(size=(12, 3)).astype("float32")
    y = {"a": rng.normal(size=(12, 1)).astype("float32"), "b": rng.normal(size=(12, 2)).astype("float32")}
    mse, mae = keras.losses.MeanSquaredError(), keras.losses.MeanAbsoluteError()
    sizes = [3, 5, 1, 3]  # windows of 8 and 4 (accumulation_steps 2); replica shares 1/2, 2/3, 0/1, 1/2
    out: dict = {}

    def weights_of(model):
        return [np.asarray(w) for w in model.get_weights()]

    def digest(model):
        return hashlib.sha256(b"".join(w.tobytes() for w in weights_of(model))).hexdigest()

    def gap(a, b):
        return max(float(np.abs(np.asarray(u, np.float64) - np.asarray(v, np.float64)).max()) for u, v in zip(a, b))

    def in_scope(make):
        with strategy.scope():
            return make()

    # Per-output losses with loss_weights; one head without a loss (its variables get no update, not
    # even AdamW's weight decay); an optimizer that clips and scales its loss.
    cases = {
        "sgd": ({"a": mse, "b": mae}, {"a": 2.0, "b": 0.5}, lambda: keras.optimizers.SGD(0.1)),
        "adam_clip_scaled": ({"a": mse, "b": mae}, {"a": 2.0, "b": 0.5},
                             lambda: keras.optimizers.Adam(0.05, global_clipnorm=0.5, loss_scale_factor=8.0)),
        "unused_head_adamw": ({"a": mse, "b": None}, None, lambda: keras.optimizers.AdamW(0.05, weight_decay=0.5)),
    }
    for name, (loss, loss_weights, optimizer) in cases.items():
        fitted = two_outputs("dict", hidden=True)
        fitted.compile(optimizer=optimizer(), loss=loss, loss_weights=loss_weights)
        fitted.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)  # batches of 8 and 4: the windows
        alone = two_outputs("dict", hidden=True)
        alone_history = acc.train_accumulated(alone, optimizer(), loss, acc.micro_batches((x, y), sizes), 2,
                                              loss_weights=loss_weights, verbose=False)
        model = in_scope(lambda: two_outputs("dict", hidden=True))
        start = weights_of(model)
        with strategy.scope():
            opt = optimizer()
        history = acc.train_accumulated(model, opt, loss, acc.micro_batches((x, y), sizes), 2,
                                        loss_weights=loss_weights, verbose=False)
        head_b = [i for i, v in enumerate(model.weights) if v.path.startswith("b/")]
        out[name] = {"gap_fit": gap(weights_of(model), weights_of(fitted)), "moved": gap(weights_of(model), start),
                     "loss_gap": max(abs(a - b) for a, b in zip(history["loss"], alone_history["loss"])),
                     "head_b_moved": max(float(np.abs(weights_of(model)[i] - start[i]).max()) for i in head_b),
                     "digest": digest(model), "examples": history["examples"]}

    # What each loss divides by: unmasked entries (a masked sequence output), the sum of the sample
    # weights (mean_with_sample_weight). Every micro-batch share counts that much.
    def masked():
        keras.utils.set_random_seed(3)
        return keras.Sequential([keras.Input((4,)), keras.layers.Embedding(6, 3, mask_zero=True),
                                 keras.layers.Dense(5)])

    tokens = np.array([[1, 2, 0, 0], [3, 0, 0, 0], [1, 1, 1, 1], [2, 5, 4, 0], [5, 0, 0, 0], [4, 4, 0, 0],
                       [1, 3, 5, 0]])
    labels = rng.integers(0, 5, size=(7, 4))
    sparse = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    weighted = keras.losses.MeanSquaredError(reduction="mean_with_sample_weight")
    sample_weight = np.array([1, 1, 1, 1, 5, 5, 5, 5, 2, 0.5, 3, 1], "float32")
    families = {
        "mask": (masked, sparse, (tokens, labels), [1, 2, 4]),
        "sample_weight": (lambda: two_outputs("dict", seed=4), {"a": weighted, "b": weighted},
                          (x, y, sample_weight), [3, 4, 5]),
    }
    for name, (make, loss, batch, parts) in families.items():
        fitted = make()
        fitted.compile(optimizer=keras.optimizers.SGD(0.5), loss=loss)
        reported = fitted.fit(*batch[:2], sample_weight=batch[2] if len(batch) > 2 else None, batch_size=len(batch[0]),
                              shuffle=False, verbose=0).history["loss"][0]
        model = in_scope(make)
        with strategy.scope():
            opt = keras.optimizers.SGD(0.5)
        history = acc.train_accumulated(model, opt, loss, acc.micro_batches(batch, parts), len(parts), verbose=False)
        out[name] = {"gap_fit": gap(weights_of(model), weights_of(fitted)), "loss_rel": abs(history["loss"][0] / reported - 1),
                     "digest": digest(model)}

    # Ragged inputs of float64 models: the full batch's gradient, and training with a clipping
    # optimizer (float64 sums cross the workers with the float32 weights).
    x_mol, y_mol = next(iter(molecules.molecule_dataset(12, batch_size=12)))
    loss64 = keras.losses.MeanSquaredError(dtype="float64")
    def per_atom():
        keras.utils.set_random_seed(5)
        built = molecules.PerAtomEnergy(hidden=4)
        built(x_mol)
        return built

    model = in_scope(per_atom)
    got = acc.accumulated_gradients(model, loss64, acc.micro_batches((x_mol, y_mol), [5, 5, 2]))
    with tf.GradientTape() as tape:
        full = loss64(y_mol, model(x_mol, training=True))
    out["ragged_gradient_gap"] = gap(got, tape.gradient(full, model.trainable_variables))
    alone = per_atom()
    alone.set_weights(model.get_weights())  # model's weights before training (its gradient changed none)
    with strategy.scope():
        opt = keras.optimizers.SGD(0.01, clipnorm=1.0)
    acc.train_accumulated(model, opt, loss64, acc.micro_batches((x_mol, y_mol), [5, 5, 2]), 3, verbose=False)
    acc.train_accumulated(alone, keras.optimizers.SGD(0.01, clipnorm=1.0), loss64,
                          acc.micro_batches((x_mol, y_mol), [5, 5, 2]), 3, verbose=False)
    out["ragged_training"] = {"gap": gap(weights_of(model), weights_of(alone)), "digest": digest(model)}

    # Mixed precision with per-output losses: a window that overflows in worker 0's share only.
    keras.mixed_precision.set_global_policy("mixed_float16")
    with strategy.scope():
        inputs = keras.Input((3,))
        hidden = keras.layers.Dense(4, activation="tanh")(inputs)
        model = keras.Model(inputs, {"a": keras.layers.Dense(1, name="a", dtype="float32")(hidden),
                                     "b": keras.layers.Dense(2, name="b", dtype="float32")(hidden)})
        opt = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1))
    keras.mixed_precision.set_global_policy("float32")
    before, y_big = weights_of(model), {"a": y["a"][:8].copy(), "b": y["b"][:8]}
    y_big["a"][:2] = 6e4  # float16 overflow in worker 0's share of the first micro-batch only
    acc.train_accumulated(model, opt, {"a": mse, "b": mae}, acc.micro_batches((x[:8], y_big), [4, 4]), 2,
                          loss_weights=[1.0, 0.5], verbose=False)
    out["overflow"] = {"unchanged": all((a == b).all() for a, b in zip(before, weights_of(model))),
                       "scale": float(opt.dynamic_scale.numpy()), "iterations": int(opt.iterations.numpy())}

    # Validation: per-output losses, loss_weights and metrics per output, against model.evaluate
    # (the loss and the metric; Keras' <output>_loss trackers average batch means, not examples, so
    # those are compared with the helper in one process, which Keras matches on one batch).
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(5)  # 5, 5, 2: shares 2/3, 2/3, 1/1
    loss, loss_weights = {"a": mse, "b": mae}, {"a": 2.0, "b": 0.5}
    reference = two_outputs("dict", hidden=True)
    reference.compile(loss=loss, loss_weights=loss_weights, metrics={"a": [keras.metrics.MeanAbsoluteError(name="mae")]})
    expected = reference.evaluate(data, verbose=0, return_dict=True)
    alone = val.evaluate(reference, data, loss, {"a": [keras.metrics.MeanAbsoluteError(name="mae")]},
                         loss_weights=loss_weights)
    model = in_scope(lambda: two_outputs("dict", hidden=True))
    with strategy.scope():
        metric = keras.metrics.MeanAbsoluteError(name="mae")
    result = val.evaluate(model, data, loss, {"a": [metric]}, loss_weights=loss_weights)
    steps = next(iter(val._EVAL_STEPS[model].values()))
    out["evaluate"] = {"keys": sorted(result), "alone_keys": sorted(alone),
                       "keras_rel": max(abs(result[k] / expected[k] - 1) for k in ("loss", "a_mae")),
                       "alone_rel": max(abs(result[k] / alone[k] - 1) for k in alone if k != "examples"),
                       "examples": result["examples"],
                       "collectives": workers.count_collectives(steps.eval_step.get_concrete_function(
                           *tf.nest.map_structure(lambda s: tf.TensorSpec([None, *s.shape[1:]], s.dtype),
                                                  data.element_spec)))}
    fitted = two_outputs("dict", hidden=True)
    alone = val.train_with_validation(fitted, keras.optimizers.SGD(0.05), loss, data.repeat(), data, steps=4,
                                      every=2, loss_weights=loss_weights)
    with strategy.scope():
        opt = keras.optimizers.SGD(0.05)
    history = val.train_with_validation(model, opt, loss, data.repeat(), data, steps=4, every=2,
                                        loss_weights=loss_weights)
    out["train_with_validation"] = {
        "gap": gap(weights_of(model), weights_of(fitted)),
        "val_gap": max(abs(a[k] - b[k]) for a, b in zip(history.val, alone.val) for k in ("loss", "a_loss", "b_loss")),
        "digest": digest(model)}
    return out


@pytest.fixture(scope="module")
def loss_terms_results():
    return run_workers(_loss_terms_worker, 2, timeout=CLUSTER_TIMEOUT)


def test_per_output_losses_with_loss_weights_on_two_workers_equal_one_process(loss_terms_results):
    first, second = loss_terms_results
    for name in ("sgd", "adam_clip_scaled", "unused_head_adamw"):
        assert first[name]["digest"] == second[name]["digest"], f"{name}: the workers' weights differ"
        assert first[name]["moved"] > 1e-3 and first[name]["gap_fit"] < WEIGHTS_TOL, (name, first[name])
        assert first[name]["loss_gap"] < 1e-6 and first[name]["examples"] == [8, 4], (name, first[name])
    # The head without a loss: no gradient in any window on either worker, so no step (not even
    # AdamW's weight decay); the heads with a loss moved.
    assert first["unused_head_adamw"]["head_b_moved"] == second["unused_head_adamw"]["head_b_moved"] == 0.0
    assert first["sgd"]["head_b_moved"] > 1e-3


def test_micro_batch_shares_on_two_workers_count_what_their_loss_divides_by(loss_terms_results):
    first, second = loss_terms_results
    for name in ("mask", "sample_weight"):
        assert first[name]["digest"] == second[name]["digest"], name
        assert first[name]["gap_fit"] < WEIGHTS_TOL and first[name]["loss_rel"] < 1e-5, (name, first[name])


def test_ragged_float64_inputs_on_two_workers_give_the_full_batch(loss_terms_results):
    first, second = loss_terms_results
    assert first["ragged_gradient_gap"] < 1e-9 and second["ragged_gradient_gap"] < 1e-9
    assert first["ragged_training"]["digest"] == second["ragged_training"]["digest"]
    assert first["ragged_training"]["gap"] < 1e-9


def test_an_overflow_in_one_workers_share_of_per_output_losses_is_skipped_by_both(loss_terms_results):
    first, second = loss_terms_results
    assert first["overflow"] == second["overflow"] == {"unchanged": True, "scale": 16384.0, "iterations": 0}


def test_per_output_validation_on_two_workers_reports_what_keras_evaluate_reports(loss_terms_results):
    first, second = loss_terms_results
    for results in loss_terms_results:
        evaluated = results["evaluate"]
        assert evaluated["keys"] == evaluated["alone_keys"] == ["a_loss", "a_mae", "b_loss", "examples", "loss"]
        assert evaluated["keras_rel"] < 1e-5 and evaluated["alone_rel"] < 1e-6, evaluated
        assert evaluated["examples"] == 12
        assert evaluated["collectives"] == {"CollectiveReduceV2": 1}  # sums and counts in one all-reduce
        assert results["train_with_validation"]["gap"] < WEIGHTS_TOL
        assert results["train_with_validation"]["val_gap"] < 1e-6
    assert first["train_with_validation"]["digest"] == second["train_with_validation"]["digest"]
