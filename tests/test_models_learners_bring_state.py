"""Issue 22, state: snapshots and syncs of models whose output depends on more than their variable
lists (preprocessing constants, lookup tables, BatchNorm statistics, custom state), what
parameter_distance may report, a validation pass that fails midway, and the helpers under a
MirroredStrategy with the new loss rules. Each compared with a direct call of the model."""

from __future__ import annotations

import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

from helpers import snapshots as S
from helpers import validation as V
from tests.learner_models import Counter

RNG = np.random.default_rng(5)
X = RNG.normal(3.0, 2.0, size=(16, 3)).astype("float32")
WORDS = tf.constant([["the cat sat"], ["a dog ran"], ["the dog sat"], ["zebra"]])


def gap(a: keras.Model, b: keras.Model, x) -> float:
    return float(np.max(np.abs(np.asarray(a(x)) - np.asarray(b(x)))))


def normalised() -> keras.Model:
    keras.utils.set_random_seed(0)
    norm = keras.layers.Normalization()
    norm.adapt(X)
    return keras.Sequential([keras.Input((3,)), norm, keras.layers.Dense(2)])


def text_model(kind: str, texts=WORDS) -> keras.Model:
    keras.utils.set_random_seed(0)
    inputs = keras.Input((1,), dtype="string")
    if kind == "TextVectorization":
        layer = keras.layers.TextVectorization(max_tokens=12, output_sequence_length=3)
        layer.adapt(texts)
        hidden = keras.layers.Flatten()(keras.layers.Embedding(12, 2)(layer(inputs)))
    else:
        layer = keras.layers.StringLookup()
        layer.adapt(tf.strings.split(tf.reshape(texts, [-1])).flat_values)
        hidden = keras.layers.Flatten()(keras.layers.Embedding(12, 2)(layer(inputs)))
    model = keras.Model(inputs, keras.layers.Dense(1)(hidden))
    model(WORDS)
    return model


def test_a_snapshot_of_an_adapted_normalization_answers_like_the_model():
    model = normalised()
    past = S.snapshot(model)
    assert gap(model, past, X) == 0.0  # before: 3.06 away, while parameter_distance said 0.0
    assert S.parameter_distance(model, past) == 0.0


def test_parameter_distance_never_reads_zero_between_models_that_answer_differently():
    model = normalised()
    copied = keras.models.clone_model(model)
    copied.set_weights(model.get_weights())  # the variables, not the constants Normalization divides by
    assert gap(model, copied, X) > 1.0
    with pytest.raises(ValueError, match="normalization.*answer differently"):
        S.parameter_distance(model, copied)  # before: 0.0
    S.sync(model, copied)
    assert gap(model, copied, X) == 0.0 and S.parameter_distance(model, copied) == 0.0

    keras.utils.set_random_seed(0)
    bn = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2), keras.layers.BatchNormalization()])
    twin = S.snapshot(bn)
    bn(X, training=True)  # new moving statistics, same trainable weights
    with pytest.raises(ValueError, match="moving_mean"):
        S.parameter_distance(bn, twin)


@pytest.mark.parametrize("kind", ["StringLookup", "TextVectorization"])
def test_a_snapshot_of_an_adapted_lookup_layer_answers_like_the_model(kind):
    model = text_model(kind)
    past = S.snapshot(model)  # before: "Table not initialized" on the copy's first call
    assert gap(model, past, WORDS) == 0.0


def test_sync_copies_a_vocabulary_eagerly_and_refuses_inside_a_tf_function():
    source = text_model("StringLookup")
    target = text_model("StringLookup", tf.constant([["zebra sat"], ["zebra ran"]]))  # another vocabulary
    target.set_weights(source.get_weights())
    assert gap(source, target, WORDS) > 0

    @tf.function
    def compiled_sync():
        S.sync(source, target)

    with pytest.raises(ValueError, match="vocabulary.*only eagerly"):
        compiled_sync()
    S.sync(source, target)
    assert gap(source, target, WORDS) == 0.0
    compiled_sync()  # the vocabularies agree now: the compiled sync copies the variables


class Offset(keras.layers.Layer):
    """A custom layer holding a constant set outside its variables and its config."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.offset = tf.zeros([3])

    def fit_offset(self, data):
        self.offset = tf.constant(np.mean(data, axis=0))

    def call(self, x):
        return x - self.offset


def test_state_no_helper_can_copy_is_refused_by_name():
    keras.utils.set_random_seed(0)
    layer = Offset()
    model = keras.Sequential([keras.Input((3,)), layer, keras.layers.Dense(1)])
    layer.fit_offset(X)
    with pytest.raises(ValueError, match=r"offset\.offset, state kept outside the layer's variables"):
        S.snapshot(model)


def test_custom_state_updated_in_call_is_copied():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), Counter(), keras.layers.Dense(1)])
    model(X), model(X)
    past = S.snapshot(model)
    assert float(np.max(np.abs(model.predict(X, verbose=0) - past.predict(X, verbose=0)))) == 0.0


# --------------------------------------------------------------------------- a pass that fails midway


class Guard(keras.layers.Layer):
    """Fails on inputs above its limit (a non-trainable weight)."""

    def build(self, shape):
        self.limit = self.add_weight(shape=(), initializer=keras.initializers.Constant(100.0), trainable=False)

    def call(self, x):
        with tf.control_dependencies([tf.debugging.assert_less(tf.reduce_max(x), self.limit)]):
            return tf.identity(x)


def test_a_validation_pass_that_fails_midway_leaves_the_next_pass_whole():
    keras.utils.set_random_seed(0)
    guard = Guard()
    model = keras.Sequential([keras.Input((1,)), guard, keras.layers.Dense(1)])
    x = np.array([[1.0]] * 4 + [[50.0]] * 4 + [[2.0]] * 4, "float32")
    data = tf.data.Dataset.from_tensor_slices((x, np.zeros((12, 1), "float32"))).batch(4)
    stream = V.ValidationStream(data)
    expected = V.evaluate(model, data, keras.losses.MeanSquaredError())
    guard.limit.assign(10.0)
    with pytest.raises(tf.errors.InvalidArgumentError):
        V.evaluate(model, stream, keras.losses.MeanSquaredError())  # fails on the second batch
    guard.limit.assign(100.0)
    again = V.evaluate(model, stream, keras.losses.MeanSquaredError())
    assert again["examples"] == 12 and again["loss"] == pytest.approx(expected["loss"], rel=1e-6)  # before: 4


# --------------------------------------------------------------------------- two replicas


def test_the_new_loss_rules_hold_on_two_replicas(fresh_python):
    out = fresh_python(textwrap.dedent("""
        from helpers import runtime
        runtime.setup(seed=0, replicas=2)
        import numpy as np, tensorflow as tf, keras
        from helpers import accumulation as acc, snapshots as S, validation as V

        rng = np.random.default_rng(0)
        x = rng.normal(size=(9, 3)).astype("float32")
        ya, yb = rng.normal(size=(9, 1)).astype("float32"), rng.normal(size=(9, 2)).astype("float32")
        strategy = tf.distribute.MirroredStrategy()

        def two_heads():
            keras.utils.set_random_seed(1)
            inputs = keras.Input((3,))
            return keras.Model(inputs, [keras.layers.Dense(1, name="a")(inputs), keras.layers.Dense(2, name="b")(inputs)])

        def rank_one():  # outputs and targets of rank 1: Keras' loss returns its own mean, not divided by replicas
            keras.utils.set_random_seed(1)
            return keras.Sequential([keras.Input((3,)), keras.layers.Dense(1), keras.layers.Reshape(())])

        mse, mae = keras.losses.MeanSquaredError(), keras.losses.MeanAbsoluteError()
        data = tf.data.Dataset.from_tensor_slices((x, ya[:, 0])).batch(4)
        one = V.evaluate(rank_one(), data, mse)["loss"]
        with strategy.scope():
            scoped = rank_one()
        print("rank-one evaluate equal", abs(V.evaluate(scoped, data, mse)["loss"] - one) < 1e-6 * one)

        parts = acc.micro_batches((x, (ya, yb)), [4, 5])
        ref = two_heads()
        acc.train_accumulated(ref, keras.optimizers.SGD(0.1), [mse, mae], parts, 2, loss_weights=[1.0, 2.0], verbose=False)
        with strategy.scope():
            ours, opt = two_heads(), keras.optimizers.SGD(0.1)
        acc.train_accumulated(ours, opt, [mse, mae], parts, 2, loss_weights=[1.0, 2.0], verbose=False)
        print("two heads accumulate equal", max(np.abs(a - b).max() for a, b in zip(ours.get_weights(), ref.get_weights())) < 1e-6)

        with strategy.scope():
            norm = keras.layers.Normalization()
            norm.adapt(x)
            model = keras.Sequential([keras.Input((3,)), norm, keras.layers.Dense(1)])
        past = S.snapshot(model)
        print("normalization snapshot equal", float(np.abs(model(x) - past(x)).max()) == 0.0)
    """))
    assert out.splitlines() == ["rank-one evaluate equal True", "two heads accumulate equal True",
                                "normalization snapshot equal True"]
