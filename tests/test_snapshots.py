import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from helpers import snapshots as S
from helpers.exercises import CheckFailed
from helpers.exercises.snapshots import check_soft_update

X = np.random.default_rng(0).normal(size=(16, 5)).astype("float32")
Y = np.random.default_rng(1).normal(size=(16, 1)).astype("float32")


# ----------------------------------------------------------------- three kinds of model, all with BatchNorm


def sequential(units=6):
    return keras.Sequential([
        keras.Input((5,)), keras.layers.Dense(units, activation="relu"),
        keras.layers.BatchNormalization(), keras.layers.Dropout(0.2), keras.layers.Dense(1),
    ])


def functional(units=6):
    x = keras.Input((5,))
    h = keras.layers.BatchNormalization()(keras.layers.Dense(units, activation="relu")(x))
    return keras.Model(x, keras.layers.Dense(1)(keras.layers.Dropout(0.2)(h)))


class Subclassed(keras.Model):
    def __init__(self, units=6, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.hidden = keras.layers.Dense(units, activation="relu")
        self.norm = keras.layers.BatchNormalization()
        self.drop = keras.layers.Dropout(0.2)
        self.head = keras.layers.Dense(1)

    def call(self, x, training=False):
        return self.head(self.drop(self.norm(self.hidden(x), training=training), training=training))

    def get_config(self):
        return {**super().get_config(), "units": self.units}


def subclassed(units=6):
    model = Subclassed(units)
    model(X)
    return model


BUILDERS = {"sequential": sequential, "functional": functional, "subclassed": subclassed}


def train(model, steps=3, lr=0.1):
    """A few SGD steps in training mode: weights AND BatchNorm moving statistics change."""
    optimizer = keras.optimizers.SGD(lr)
    for _ in range(steps):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(X, training=True) - Y) ** 2)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))


def values(model):
    return {e.path: np.array(e.variable.numpy(), copy=True) for e in S.state_paths(model)}


def same(a, b):
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


@pytest.fixture(params=list(BUILDERS))
def kind(request):
    return request.param


# ----------------------------------------------------------------- snapshot


def test_snapshot_copies_all_state_including_batchnorm_statistics(kind):
    keras.utils.set_random_seed(0)
    model = BUILDERS[kind]()
    train(model)
    moving = [e for e in S.state_paths(model) if e.path.endswith("moving_mean")]
    assert moving and np.abs(moving[0].variable.numpy()).max() > 1e-3  # the statistics really moved

    past = S.snapshot(model)
    assert past is not model and type(past) is type(model)
    assert len(past.variables) == len(model.variables)
    assert same(values(past), values(model))
    assert {e.path for e in S.state_paths(model) if not e.trainable} >= {
        p for p in values(model) if "moving_" in p or "seed_generators" in p
    }
    np.testing.assert_array_equal(past(X, training=False).numpy(), model(X, training=False).numpy())


def test_snapshot_is_independent_both_ways(kind):
    keras.utils.set_random_seed(1)
    model = BUILDERS[kind]()
    past = S.snapshot(model)
    assert not {id(v) for v in past.variables} & {id(v) for v in model.variables}
    frozen = values(past)
    train(model)
    assert same(values(past), frozen)  # training the current network leaves the copy alone
    current = values(model)
    train(past)
    assert same(values(model), current)  # and training the copy leaves the current one alone
    assert not same(values(past), frozen)


def test_trainable_only_copy_is_wrong_for_batchnorm_and_sync_is_right():
    keras.utils.set_random_seed(2)
    model, past = sequential(), sequential()
    train(model)
    for s, t in zip(model.trainable_variables, past.trainable_variables):  # the TF1 answer's collection copy
        t.assign(s)
    assert not np.allclose(past(X).numpy(), model(X).numpy(), atol=1e-4)
    S.sync(model, past)
    np.testing.assert_array_equal(past(X).numpy(), model(X).numpy())


# ----------------------------------------------------------------- sync


def test_hard_sync_copies_everything_after_both_trained(kind):
    keras.utils.set_random_seed(3)
    model = BUILDERS[kind]()
    past = S.snapshot(model)
    train(model, lr=0.1)
    train(past, lr=0.05)
    assert not same(values(past), values(model))
    S.sync(model, past)
    assert same(values(past), values(model))
    np.testing.assert_array_equal(past(X).numpy(), model(X).numpy())


def test_soft_sync_follows_the_polyak_formula_and_hard_copies_the_rest(kind):
    keras.utils.set_random_seed(4)
    model = BUILDERS[kind]()
    past = S.snapshot(model)
    train(model)
    before_src, before_dst = values(model), values(past)
    tau = 0.3
    S.sync(model, past, tau=tau)
    after = values(past)
    assert same(values(model), before_src)
    for entry in S.state_paths(model):
        s, t, new = before_src[entry.path], before_dst[entry.path], after[entry.path]
        if entry.trainable:
            np.testing.assert_allclose(new, tau * s + (1 - tau) * t, rtol=1e-6, atol=1e-7)
            assert np.abs(s - t).max() == 0 or not np.array_equal(new, s)
        else:
            np.testing.assert_array_equal(new, s)


def test_sync_pairs_by_structure_even_when_the_target_is_frozen_and_names_differ():
    keras.utils.set_random_seed(5)
    model = subclassed()
    past = S.snapshot(model)
    assert [v.path for v in past.variables] != [v.path for v in model.variables]  # Keras renamed the layers
    past.trainable = False  # now past.trainable_variables is empty: list-position pairing would break
    assert past.trainable_variables == []
    train(model)
    before = values(past)
    S.sync(model, past, tau=0.5)
    src = values(model)
    for entry in S.state_paths(model):
        expected = 0.5 * src[entry.path] + 0.5 * before[entry.path] if entry.trainable else src[entry.path]
        np.testing.assert_allclose(values(past)[entry.path], expected, rtol=1e-6, atol=1e-7)


def test_sync_traces_once_per_structure_and_mode():
    keras.utils.set_random_seed(6)
    a, b = sequential(), sequential()
    S.sync(a, b)
    S.sync(a, b, tau=0.1)
    start = S.sync_trace_count()
    for tau in (1.0, 1, 0.5, 0.01, 0.999, 1.0):
        S.sync(a, b, tau=tau)
    c, d = sequential(), sequential()  # another pair of the same shapes reuses the traces
    S.sync(c, d)
    S.sync(c, d, tau=0.2)
    assert S.sync_trace_count() == start
    e, f = sequential(units=7), sequential(units=7)
    S.sync(e, f)
    assert S.sync_trace_count() == start + 1


def test_parameter_distance_matches_numpy():
    keras.utils.set_random_seed(7)
    a, b = sequential(), sequential()
    expected = math.sqrt(sum(
        float(np.sum((s.variable.numpy().astype(np.float64) - t.variable.numpy()) ** 2))
        for s, t in zip(S.state_paths(a), S.state_paths(b)) if s.trainable
    ))
    assert S.parameter_distance(a, b) == pytest.approx(expected, rel=1e-9)
    assert S.parameter_distance(a, S.snapshot(a)) == 0.0


# ----------------------------------------------------------------- bad input: clear error, neither model changed


def _unchanged_after(error, match, call, *models):
    before = [values(m) for m in models]
    with pytest.raises(error, match=match):
        call()
    for m, b in zip(models, before):
        assert same(values(m), b)


@pytest.mark.parametrize("other, match", [
    (lambda: sequential(units=7), r"layers\[0\]:Dense/kernel.*\(5, 6\).*\(5, 7\)"),
    (lambda: keras.Sequential([keras.Input((5,)), keras.layers.Dense(6, activation="relu"),
                               keras.layers.LayerNormalization(), keras.layers.Dense(1)]),
     r"first mismatch.*BatchNormalization/gamma.*LayerNormalization/gamma"),
    (lambda: keras.Sequential([keras.Input((5,)), keras.layers.Dense(6, activation="relu"),
                               keras.layers.BatchNormalization(), keras.layers.Dropout(0.2), keras.layers.Dense(1),
                               keras.layers.Dense(1)]),
     r"target has extra state"),
    (lambda: keras.Sequential([keras.Input((5,)), keras.layers.Dense(6, activation="relu")]),
     r"has no counterpart in target"),
])
def test_different_architectures_are_refused_naming_the_first_mismatch(other, match):
    keras.utils.set_random_seed(8)
    model, target = sequential(), other()
    _unchanged_after(ValueError, match, lambda: S.sync(model, target), model, target)
    _unchanged_after(ValueError, "differ in structure", lambda: S.sync(target, model, tau=0.5), model, target)


@pytest.mark.parametrize("tau, error", [
    (0, ValueError), (0.0, ValueError), (-0.1, ValueError), (1.5, ValueError),
    (float("nan"), ValueError), (float("inf"), ValueError), ("0.5", TypeError), (True, TypeError), (None, TypeError),
])
def test_tau_outside_the_unit_interval_is_refused(tau, error):
    keras.utils.set_random_seed(9)
    model, past = sequential(), sequential()
    _unchanged_after(error, "tau", lambda: S.sync(model, past, tau=tau), model, past)


def test_models_never_built_are_refused():
    keras.utils.set_random_seed(10)
    built = sequential()
    unbuilt = keras.Sequential([keras.layers.Dense(6), keras.layers.Dense(1)])
    _unchanged_after(ValueError, r"target .*never built", lambda: S.sync(built, unbuilt), built)
    _unchanged_after(ValueError, r"source .*never built", lambda: S.sync(unbuilt, built), built)
    with pytest.raises(ValueError, match=r"model .*never built"):
        S.snapshot(Subclassed())
    with pytest.raises(ValueError, match=r"model .*never built"):
        S.snapshot(unbuilt)
    assert not unbuilt.built


def test_wrong_types_and_the_same_model_twice_are_refused():
    keras.utils.set_random_seed(11)
    model = sequential()
    with pytest.raises(TypeError, match="model must be a Keras model"):
        S.snapshot(model.layers[0])
    _unchanged_after(TypeError, "source must be a Keras model", lambda: S.sync(model.get_weights(), model), model)
    _unchanged_after(TypeError, "target must be a Keras model", lambda: S.sync(model, "past"), model)
    _unchanged_after(ValueError, "same model", lambda: S.sync(model, model, tau=0.5), model)


def test_a_subclassed_model_that_cannot_be_rebuilt_gets_a_clear_error():
    class NoConfig(keras.Model):
        def __init__(self, make_layer):
            super().__init__()
            self.block = make_layer()

        def call(self, x):
            return self.block(x)

    model = NoConfig(lambda: keras.layers.Dense(3))
    model(X)
    with pytest.raises(TypeError, match="get_config"):
        S.snapshot(model)


# ----------------------------------------------------------------- distribution strategy


def test_snapshot_and_sync_under_mirrored_strategy_on_two_logical_cpus(fresh_python):
    out = fresh_python("""
        import os
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
        import tensorflow as tf
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        import keras, numpy as np
        from helpers import snapshots as S

        keras.utils.set_random_seed(0)
        strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
        with strategy.scope():
            net = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4),
                                    keras.layers.BatchNormalization(), keras.layers.Dense(1)])
            opt = keras.optimizers.SGD(0.1)
        past = S.snapshot(net)  # outside the scope: the copy still lives on both replicas
        kinds = {type(v._value).__name__ for v in past.variables}
        x = np.random.default_rng(0).normal(size=(8, 3)).astype("float32")
        y = np.random.default_rng(1).normal(size=(8, 1)).astype("float32")

        @tf.function
        def step(xb, yb):
            def replica(xb, yb):
                with tf.GradientTape() as tape:
                    loss = tf.reduce_mean((net(xb, training=True) - yb) ** 2) / 2
                grads = tape.gradient(loss, net.trainable_variables)
                opt.apply_gradients(zip(grads, net.trainable_variables))
            strategy.run(replica, (xb, yb))

        ds = strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices((x, y)).batch(8))
        for _ in range(2):
            for xb, yb in ds:
                step(xb, yb)

        def per_replica(model):
            return {e.path: [r.numpy() for r in e.variable._value.values] for e in S.state_paths(model)}

        moved = any(not np.array_equal(a[0], b[0]) for a, b in zip(per_replica(net).values(), per_replica(past).values()))
        old = per_replica(past)
        S.sync(net, past, tau=0.5)
        src, soft = per_replica(net), per_replica(past)
        trainable = {e.path: e.trainable for e in S.state_paths(net)}
        soft_ok = all(
            np.allclose(soft[p][r], 0.5 * src[p][r] + 0.5 * old[p][r], rtol=1e-6, atol=1e-7) if trainable[p]
            else np.array_equal(soft[p][r], src[p][r])
            for p in src for r in range(2))
        n = S.sync_trace_count()
        S.sync(net, past)
        S.sync(net, past)
        hard = per_replica(past)
        hard_ok = all(np.array_equal(hard[p][r], src[p][r]) for p in src for r in range(2))
        print(kinds, moved, soft_ok, hard_ok, S.sync_trace_count() - n)
    """)
    assert out.strip() == "{'MirroredVariable'} True True True 1"


# ----------------------------------------------------------------- the exercise checker


def reference(source_vars, target_vars, tau):
    for s, t in zip(source_vars, target_vars):
        t.assign(tau * s + (1.0 - tau) * t)


def test_checker_accepts_the_reference_solution(capsys):
    check_soft_update(reference)
    assert capsys.readouterr().out.startswith("Correct:")


def test_checker_says_the_stub_is_not_written_yet():
    def stub(source_vars, target_vars, tau):
        raise NotImplementedError()

    with pytest.raises(CheckFailed, match="not written yet"):
        check_soft_update(stub)


def _hint(fn):
    with pytest.raises(CheckFailed) as info:
        check_soft_update(fn)
    message = str(info.value)
    for giveaway in ("1 - tau", "1.0 - tau", "tau * s", "assign(tau", "(1-tau)"):
        assert giveaway not in message
    return message


def test_checker_hints_at_swapped_tau_without_giving_the_answer():
    def swapped(source_vars, target_vars, tau):
        for s, t in zip(source_vars, target_vars):
            t.assign((1.0 - tau) * s + tau * t)

    assert "75% of the way" in _hint(swapped)


def test_checker_catches_other_typical_mistakes():
    def returns_only(source_vars, target_vars, tau):
        return [tau * s + (1 - tau) * t for s, t in zip(source_vars, target_vars)]

    def writes_source(source_vars, target_vars, tau):
        for s, t in zip(source_vars, target_vars):
            s.assign(tau * s + (1 - tau) * t)
            t.assign(s)

    def hard_copy_only(source_vars, target_vars, tau):
        for s, t in zip(source_vars, target_vars):
            t.assign(s)

    assert "did not change" in _hint(returns_only)
    assert "changed the source" in _hint(writes_source)

    def first_layer_only(source_vars, target_vars, tau):
        t = target_vars[0]
        t.assign(t + tau * (source_vars[0] - t))

    assert "moved about 100%" in _hint(hard_copy_only)
    assert "should move 25%" in _hint(first_layer_only)


# ----------------------------------------------------------------- cost measurement (values, not speed)


def test_every_copy_method_really_copies_and_the_costs_are_reported(tmp_path):
    keras.utils.set_random_seed(12)
    model = sequential()
    past = S.snapshot(model)
    step = S.make_train_step(model, keras.losses.MeanSquaredError(), keras.optimizers.SGD(0.1))
    for name, copy in S.copy_methods(model, past, str(tmp_path)).items():
        step(X, Y)
        result = copy()
        copied = result if isinstance(result, keras.Model) else past
        assert copied is not model
        a, b = values(copied), values(model)
        differing = {k for k in a if not np.array_equal(a[k], b[k])}
        if name.startswith(("set_weights", "checkpoint")):  # weights only: Dropout's seed state stays behind
            assert differing <= {"layers[2]:Dropout/seed_generators[0]"}, name
        else:
            assert not differing, name
    costs = S.measure_copy_costs(step, (X, Y), {"sync": lambda: S.sync(model, past)}, rounds=2)
    assert set(costs) == {"train step alone", "sync + step"} and min(costs.values()) > 0
    for bad in ({"rounds": 0}, {"warmup": -1}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            S.measure_copy_costs(step, (X, Y), {"sync": lambda: None}, **bad)
