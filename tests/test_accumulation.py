import keras
import numpy as np
import pytest
import tensorflow as tf

from helpers import accumulation as acc
from helpers import measure
from helpers.exercises import CheckFailed
from helpers.exercises.accumulation import check_accumulate

MSE = keras.losses.MeanSquaredError()


def _data(n=24, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 4)).astype("float32")
    y = (x @ np.array([[1.0], [-2.0], [0.5], [0.0]]) + rng.normal(0, 0.1, size=(n, 1))).astype("float32")
    return x, y


def _model(seed=0, batchnorm=False):
    keras.utils.set_random_seed(seed)
    layers = [keras.Input((4,)), keras.layers.Dense(8, activation="tanh")]
    if batchnorm:
        layers.append(keras.layers.BatchNormalization())
    return keras.Sequential(layers + [keras.layers.Dense(1)])


def _full_gradient(model, x, y, loss_fn=MSE):
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    return tape.gradient(loss, model.trainable_variables)


def _max_diff(a, b):
    return max(float(np.max(np.abs(np.asarray(u) - np.asarray(v)))) for u, v in zip(a, b))


# ----------------------------------------------------------------- equality with the full batch


def test_equal_micro_batches_give_the_full_batch_gradient():
    x, y = _data(24)
    model = _model()
    got = acc.accumulated_gradients(model, MSE, acc.micro_batches((x, y), [6, 6, 6, 6]))
    assert len(got) == len(model.trainable_variables)
    assert _max_diff(got, _full_gradient(model, x, y)) < 1e-6


def test_unequal_micro_batches_are_weighted_by_size_and_naive_averaging_is_wrong():
    x, y = _data(12)
    y[-2:] += 3.0
    model = _model()
    parts = acc.micro_batches((x, y), [5, 5, 2])
    full = _full_gradient(model, x, y)
    assert _max_diff(acc.accumulated_gradients(model, MSE, parts), full) < 1e-6
    naive = [np.mean(gs, axis=0) for gs in zip(*(_full_gradient(model, px, py) for px, py in parts))]
    assert _max_diff(naive, full) > 1e-2


def test_one_accumulated_update_equals_one_full_batch_update():
    x, y = _data(16)
    full_model, acc_model = _model(), _model()
    keras.optimizers.SGD(0.1).apply_gradients(zip(_full_gradient(full_model, x, y), full_model.trainable_variables))
    history = acc.train_accumulated(acc_model, keras.optimizers.SGD(0.1), MSE,
                                    acc.micro_batches((x, y), [4, 4, 4, 4]), 4, verbose=False)
    assert history["updates"] == 1 and history["partial_updates"] == 0 and history["examples"] == [16]
    assert _max_diff(full_model.get_weights(), acc_model.get_weights()) < 1e-6


def test_training_matches_keras_builtin_gradient_accumulation_steps():
    x, y = _data(32)
    ours, theirs = _model(), _model()
    theirs.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9, gradient_accumulation_steps=4), loss=MSE)
    theirs.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(4)
    history = acc.train_accumulated(ours, keras.optimizers.SGD(0.05, momentum=0.9), MSE, dataset, 4,
                                    epochs=2, verbose=False)
    assert history["updates"] == 4
    assert _max_diff(ours.get_weights(), theirs.get_weights()) < 1e-6


def test_leftover_window_is_applied_weighted_and_not_carried_into_the_next_call():
    x, y = _data(18)
    parts = acc.micro_batches((x, y), [4, 4, 4, 4, 2])  # two windows of 8, then a partial window of 2
    ours, ref = _model(), _model()
    history = acc.train_accumulated(ours, keras.optimizers.SGD(0.1), MSE, parts, 2, verbose=False)
    assert history["examples"] == [8, 8, 2] and history["partial_updates"] == 1
    opt = keras.optimizers.SGD(0.1)
    for lo, hi in [(0, 8), (8, 16), (16, 18)]:
        opt.apply_gradients(zip(_full_gradient(ref, x[lo:hi], y[lo:hi]), ref.trainable_variables))
    assert _max_diff(ours.get_weights(), ref.get_weights()) < 1e-6
    # A second call starts from an empty window: its first update sees only its own micro-batches.
    again = acc.train_accumulated(ours, keras.optimizers.SGD(0.1), MSE, parts[:3], 2, verbose=False)
    assert again["examples"] == [8, 4]


def test_history_loss_is_the_mean_loss_over_each_window_before_its_update():
    x, y = _data(12)
    model = _model()
    expected = float(MSE(y, model(x)))
    history = acc.train_accumulated(model, keras.optimizers.SGD(0.1), MSE,
                                    acc.micro_batches((x, y), [5, 5, 2]), 3, verbose=False)
    assert history["loss"][0] == pytest.approx(expected, rel=1e-5)


# ----------------------------------------------------------------- the accumulator


def test_accumulator_weighted_mean_count_reset_and_one_trace():
    v = tf.Variable([[1.0, 2.0]])
    a = acc.GradientAccumulator([v])
    assert [g.numpy().tolist() for g in a.result()] == [[[0.0, 0.0]]]  # empty: zeros, not NaN
    a.add([tf.constant([[1.0, 1.0]])], weight=3)
    a.add([tf.constant([[5.0, 9.0]])], weight=1.0)
    a.add([tf.constant([[2.0, 3.0]])], weight=tf.constant(4.0))
    np.testing.assert_allclose(a.result()[0].numpy(), [[(3 + 5 + 8) / 8, (3 + 9 + 12) / 8]])
    assert int(a.count) == 3 and float(a.total_weight) == 8.0
    a.reset()
    assert int(a.count) == 0 and float(a.total_weight) == 0.0
    np.testing.assert_array_equal(a.result()[0].numpy(), [[0.0, 0.0]])
    assert a.tracing_count() == 1
    assert all(not s.trainable for s in a._sums)


def test_none_gradient_counts_as_zero_and_does_not_crash():
    used, unused = tf.Variable([1.0, 2.0]), tf.Variable(3.0)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(used**2)
    grads = tape.gradient(loss, [used, unused])
    assert grads[1] is None
    a = acc.GradientAccumulator([used, unused])
    a.add(grads, weight=2)
    result = a.result()
    np.testing.assert_allclose(result[0].numpy(), [2.0, 4.0])
    assert float(result[1]) == 0.0


def test_model_with_an_unused_variable_is_handled():
    class WithUnused(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(1)
            self.spare = self.add_weight(shape=(3,), initializer="ones", name="spare")

        def call(self, x):
            return self.dense(x)

    x, y = _data(8)
    model = WithUnused()
    model(x)
    grads = acc.accumulated_gradients(model, MSE, acc.micro_batches((x, y), [4, 4]))
    spare = [g for g, v in zip(grads, model.trainable_variables) if "spare" in v.path]
    assert spare and float(tf.reduce_max(tf.abs(spare[0]))) == 0.0


def test_micro_step_traces_once_for_every_micro_batch_size():
    x, y = _data(24)
    model = _model()
    acc.accumulated_gradients(model, MSE, acc.micro_batches((x[:12], y[:12]), [5, 5, 2]))
    acc.accumulated_gradients(model, MSE, acc.micro_batches((x, y), [3, 9, 12]))
    optimizer = keras.optimizers.SGD(0.1)
    acc.train_accumulated(model, optimizer, MSE, acc.micro_batches((x, y), [7, 7, 7, 3]), 2, verbose=False)
    step = acc._micro_step(model, MSE)
    assert step.tracing_count() == 1
    fused = acc._fused_fn(optimizer, step)  # the last micro-step of a window + the update
    assert fused.experimental_get_tracing_count() == 1


def test_four_micro_batches_need_less_peak_memory_than_the_full_batch():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1024, 32)).astype("float32")
    y = rng.normal(size=(1024, 1)).astype("float32")
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(256, activation="relu"), keras.layers.Dense(1)])
    full = measure.peak_memory_bytes(lambda: acc.accumulated_gradients(model, MSE, [(x, y)]))
    parts = acc.micro_batches((x, y), [256] * 4)
    micro = measure.peak_memory_bytes(lambda: acc.accumulated_gradients(model, MSE, parts))
    assert micro < full


# ----------------------------------------------------------------- non-additive loss, BatchNorm


def _chi_square(y_true, y_pred, bins=tf.linspace(-3.0, 3.0, 7)):
    def soft_hist(v):
        h = tf.reduce_mean(tf.exp(-4.0 * (tf.reshape(v, [-1, 1]) - bins) ** 2), axis=0)
        return h / tf.reduce_sum(h)

    p, q = soft_hist(y_pred), soft_hist(y_true)
    return tf.reduce_sum((p - q) ** 2 / (p + q + 1e-6))


def test_non_additive_loss_is_not_recovered_by_accumulation_but_mse_is():
    x, y = _data(16)
    model = _model()
    parts = acc.micro_batches((x, y), [4, 4, 4, 4])
    full = _full_gradient(model, x, y, _chi_square)
    got = acc.accumulated_gradients(model, _chi_square, parts)
    scale = max(float(np.max(np.abs(g))) for g in full)
    assert _max_diff(got, full) > 0.1 * scale


def test_batchnorm_statistics_make_accumulation_differ_from_the_full_batch():
    x, y = _data(16)
    model = _model(batchnorm=True)
    full = _full_gradient(model, x, y)
    got = acc.accumulated_gradients(model, MSE, acc.micro_batches((x, y), [4, 4, 4, 4]))
    assert _max_diff(got, full) > 1e-3


# ----------------------------------------------------------------- bad input


def test_accumulation_steps_below_one_or_not_an_int():
    x, y = _data(8)
    parts = acc.micro_batches((x, y), [4, 4])
    for bad, error in [(0, ValueError), (-2, ValueError), (1.5, TypeError), (True, TypeError)]:
        with pytest.raises(error, match="accumulation_steps"):
            acc.train_accumulated(_model(), keras.optimizers.SGD(0.1), MSE, parts, bad, verbose=False)


def test_empty_micro_batches_and_empty_dataset():
    model = _model()
    with pytest.raises(ValueError, match="micro_batches is empty"):
        acc.accumulated_gradients(model, MSE, [])
    with pytest.raises(ValueError, match="dataset is empty"):
        acc.train_accumulated(model, keras.optimizers.SGD(0.1), MSE, [], 2, verbose=False)


def test_micro_batch_of_zero_examples_is_named():
    x, y = _data(8)
    model = _model()
    parts = [(x[:4], y[:4]), (x[4:4], y[4:4]), (x[4:], y[4:])]
    with pytest.raises(ValueError, match=r"micro_batches\[1\] has zero examples"):
        acc.accumulated_gradients(model, MSE, parts)
    with pytest.raises(ValueError, match="dataset element 1 has zero examples"):
        acc.train_accumulated(model, keras.optimizers.SGD(0.1), MSE, parts, 2, verbose=False)
    a = acc.GradientAccumulator(model.trainable_variables)
    with pytest.raises(ValueError, match="weight"):
        a.add(_full_gradient(model, x, y), weight=0)


def test_gradients_that_do_not_match_the_variables():
    a = acc.GradientAccumulator([tf.Variable([1.0, 2.0]), tf.Variable(0.0)])
    with pytest.raises(ValueError, match="gradients has 1 entries"):
        a.add([tf.ones([2])], weight=1)
    with pytest.raises(ValueError, match=r"gradients\[0\] has shape"):
        a.add([tf.ones([3]), tf.ones([])], weight=1)
    with pytest.raises(TypeError, match="gradients must be a list"):
        a.add(tf.ones([2]), weight=1)


def test_other_bad_arguments():
    model = _model()
    with pytest.raises(ValueError, match="variables is empty"):
        acc.GradientAccumulator([])
    with pytest.raises(TypeError, match="variables"):
        acc.GradientAccumulator(tf.Variable(1.0))
    with pytest.raises(TypeError, match="model"):
        acc.accumulated_gradients("model", MSE, [])
    with pytest.raises(TypeError, match="loss_fn"):
        acc.accumulated_gradients(model, "mse", [])
    with pytest.raises(TypeError, match="optimizer"):
        acc.train_accumulated(model, "sgd", MSE, [], 2)
    with pytest.raises(ValueError, match="gradient_accumulation_steps"):
        acc.train_accumulated(model, keras.optimizers.SGD(gradient_accumulation_steps=2), MSE, [], 2)
    with pytest.raises(ValueError, match="sizes add up"):
        acc.micro_batches(_data(8), [4, 3])


# ----------------------------------------------------------------- MirroredStrategy (own process)


def test_accumulator_under_mirrored_strategy_on_two_cpus_matches_the_full_batch(fresh_python):
    out = fresh_python("""
        import tensorflow as tf
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        from helpers import runtime
        runtime.setup(seed=0)
        import numpy as np, keras
        from helpers.accumulation import GradientAccumulator

        strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
        rng = np.random.default_rng(0)
        x = rng.normal(size=(32, 4)).astype("float32")
        y = (x @ np.array([[1.0], [-2.0], [0.5], [0.0]])).astype("float32")
        # A plain mean: Keras loss objects divide by the replica count under a strategy.
        mse = lambda yt, yp: tf.reduce_mean(tf.square(yt - yp))

        def make():
            keras.utils.set_random_seed(0)
            return keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="tanh"),
                                     keras.layers.Dense(1)])

        ref = make()
        with tf.GradientTape() as tape:
            loss = mse(y, ref(x))
        keras.optimizers.SGD(0.1).apply_gradients(zip(tape.gradient(loss, ref.trainable_variables),
                                                      ref.trainable_variables))

        with strategy.scope():
            model = make()
            optimizer = keras.optimizers.SGD(0.1)
            optimizer.build(model.trainable_variables)
            accumulator = GradientAccumulator(model.trainable_variables)

        def replica_step(xb, yb):
            with tf.GradientTape() as tape:
                loss = mse(yb, model(xb, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            accumulator.add(grads, tf.cast(tf.shape(xb)[0], tf.float32))
            return accumulator.total_weight  # replica context: summed over replicas

        @tf.function
        def micro_step(batch):
            return strategy.run(replica_step, args=batch)

        @tf.function
        def apply():
            optimizer.apply_gradients(zip(accumulator.result(), model.trainable_variables))
            accumulator.reset()

        batches = tf.data.Dataset.from_tensor_slices((x, y)).batch(8)  # 4 micro-batches, 4 + 4 per replica
        seen = [micro_step(b) for b in strategy.experimental_distribute_dataset(batches)]
        print("replica totals", [float(t) for t in strategy.experimental_local_results(seen[-1])])
        print("count", int(accumulator.count), "weight", float(accumulator.total_weight))
        apply()
        diff = max(np.abs(a - b).max() for a, b in zip(ref.get_weights(), model.get_weights()))
        print("equal", bool(diff < 1e-6), "count after apply", int(accumulator.count))
        print("add traces", accumulator.tracing_count())

        try:
            with strategy.scope():
                builtin = make()
                builtin.compile(optimizer=keras.optimizers.SGD(0.1, gradient_accumulation_steps=4), loss="mse")
            builtin.fit(x, y, batch_size=8, shuffle=False, verbose=0)
            print("keras builtin: ran")
        except Exception as error:
            print("keras builtin: failed with", type(error).__name__)
    """)
    lines = out.splitlines()
    assert "replica totals [32.0, 32.0]" in lines
    assert "count 4 weight 32.0" in lines
    assert "equal True count after apply 0" in lines
    assert "add traces 2" in lines  # traced once per replica, then reused
    # keras-team/keras#20582. If this starts to pass, Keras fixed it: update notebook 02's text.
    assert "keras builtin: failed with RuntimeError" in lines


# ----------------------------------------------------------------- the exercise checker


def test_checker_accepts_the_reference_solution(capsys):
    check_accumulate(acc.accumulated_gradients)
    assert capsys.readouterr().out.startswith("Correct: ")


def test_checker_rejects_the_stub():
    def accumulate(model, loss_fn, micro_batches):
        raise NotImplementedError()

    with pytest.raises(CheckFailed, match="not written yet"):
        check_accumulate(accumulate)


def _per_batch(model, loss_fn, micro_batches):
    out = []
    for x, y in micro_batches:
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        out.append(tape.gradient(loss, model.trainable_variables))
    return out


def test_checker_catches_equal_weighting_without_giving_the_answer():
    def equal_weights(model, loss_fn, micro_batches):
        return [tf.add_n(list(gs)) / len(gs) for gs in zip(*_per_batch(model, loss_fn, micro_batches))]

    with pytest.raises(CheckFailed, match="equally") as info:
        check_accumulate(equal_weights)
    hint = str(info.value)
    assert "5, 5, 2" in hint
    for giveaway in ("* n", "weight them by", "tf.shape", "multiply", "divide by"):
        assert giveaway not in hint


def test_checker_catches_a_sum_and_a_wrong_length():
    def summed(model, loss_fn, micro_batches):
        return [tf.add_n(list(gs)) for gs in zip(*_per_batch(model, loss_fn, micro_batches))]

    with pytest.raises(CheckFailed, match="sum"):
        check_accumulate(summed)
    with pytest.raises(CheckFailed, match="trainable variables"):
        check_accumulate(lambda model, loss_fn, micro_batches: [tf.zeros([1])])
