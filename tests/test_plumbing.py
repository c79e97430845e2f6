"""helpers.plumbing: the shared TensorFlow plumbing every topic module uses."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from helpers import plumbing as P


def test_relaxed_spec_opens_the_batch_dimension_or_all_but_the_last():
    assert P.relaxed_spec(tf.zeros([8, 3])).shape.as_list() == [None, 3]
    assert P.relaxed_spec(tf.zeros([8, 5, 3]), keep="last").shape.as_list() == [None, None, 3]
    assert P.relaxed_spec(tf.zeros([8])).shape.as_list() == [None]
    assert P.relaxed_spec(tf.constant(1.0)).shape.as_list() == []
    ragged = P.relaxed_spec(tf.ragged.constant([[[1.0, 2.0]], [[3.0, 4.0], [5.0, 6.0]]], ragged_rank=1))
    assert isinstance(ragged, tf.RaggedTensorSpec) and ragged.shape.as_list() == [None, None, 2]
    assert P.relaxed_spec(tf.TensorSpec([4, 2], tf.int32)) == tf.TensorSpec([None, 2], tf.int32)
    assert P.relaxed_spec(np.zeros([3, 2], np.float32)).shape.as_list() == [None, 2]
    with pytest.raises(ValueError, match="keep"):
        P.relaxed_spec(tf.zeros([2]), keep="first")


def test_one_trace_for_every_batch_size_with_a_relaxed_signature():
    fn = tf.function(lambda x: tf.reduce_sum(x), input_signature=[P.relaxed_spec(tf.zeros([4, 3]))])
    for n in (1, 4, 7):
        fn(tf.zeros([n, 3]))
    assert fn.experimental_get_tracing_count() == 1


def test_counting_examples():
    assert P.count_examples(tf.zeros([5, 2])) == 5
    assert P.count_examples({"a": tf.zeros([3]), "b": tf.zeros([3, 4])}) == 3
    assert P.count_examples(tf.ragged.constant([[1], [2, 3], []])) == 3
    assert P.count_examples(np.zeros([6, 1])) == 6

    @tf.function(input_signature=[tf.TensorSpec([None, 2])])
    def inside(x):
        return P.num_examples(x)

    assert int(inside(tf.zeros([9, 2]))) == 9


def test_unpack_batch_follows_keras_and_names_the_argument():
    x, y, w = P.unpack_batch((1, 2, 3), "batch")
    assert (x, y, w) == (1, 2, 3)
    assert P.unpack_batch([1, 2], "batch")[2] is None
    for bad in (tf.zeros([2]), (1,), (1, 2, 3, 4), {"x": 1}):
        with pytest.raises(TypeError, match="dataset element 4 must be an"):
            P.unpack_batch(bad, "dataset element 4")


def test_argument_checks_name_the_argument():
    with pytest.raises(TypeError, match="net must be a Keras model"):
        P.check_model(object(), "net")
    unbuilt = keras.Sequential([keras.layers.Dense(1)])
    with pytest.raises(ValueError, match="was never built"):
        P.check_model(unbuilt, built=True)
    with pytest.raises(TypeError, match="loss_fn must be callable"):
        P.check_loss_fn("mse")
    with pytest.raises(TypeError, match="loss_fn must be callable"):
        P.check_loss_fn(keras.losses.MeanSquaredError)  # the class, not an instance
    with pytest.raises(TypeError, match="optimizer must be a Keras optimizer"):
        P.check_optimizer("sgd")
    with pytest.raises(TypeError, match="val_ds must be a tf.data.Dataset"):
        P.check_dataset([1, 2], "val_ds")


def test_check_finite_refuses_infinite_and_empty_datasets_unless_bounded():
    with pytest.raises(ValueError, match="train_ds is infinite"):
        P.check_finite(tf.data.Dataset.range(4).repeat(), "train_ds")
    P.check_finite(tf.data.Dataset.range(4).repeat(), "train_ds", steps=10)
    with pytest.raises(ValueError, match="val_ds is empty"):
        P.check_finite(tf.data.Dataset.range(0), "val_ds")
    P.check_finite(tf.data.Dataset.range(4).filter(lambda i: i > 1), "val_ds")  # unknown size: allowed
    P.check_finite(iter([1, 2]), "data")  # a Python iterator cannot tell: the caller bounds it


def test_scalar_loss_refuses_a_per_example_loss_and_names_it():
    y, p = tf.zeros([4, 1]), tf.ones([4, 1])
    assert float(P.scalar_loss(keras.losses.MeanSquaredError(), y, p)) == 1.0
    with pytest.raises(ValueError, match="mean_squared_error returned shape \\(4,\\), one value per example"):
        P.scalar_loss(keras.losses.mean_squared_error, y, p)
    with pytest.raises(ValueError, match="MeanSquaredError returned shape"):
        P.scalar_loss(keras.losses.MeanSquaredError(reduction=None), y, p)


def test_scalar_loss_refuses_at_trace_time_before_anything_runs():
    variable = tf.Variable(1.0)

    @tf.function
    def step(y, p):
        variable.assign(5.0)
        return P.scalar_loss(keras.losses.mean_squared_error, y, p)

    with pytest.raises(ValueError, match="one value per example"):
        step(tf.zeros([4, 1]), tf.ones([4, 1]))
    assert float(variable) == 1.0


def test_sample_weights_need_a_loss_object():
    y, p, w = tf.zeros([2, 1]), tf.ones([2, 1]), tf.constant([1.0, 0.0])
    assert float(P.scalar_loss(keras.losses.MeanSquaredError(), y, p, w)) == pytest.approx(0.5)
    with pytest.raises(TypeError, match="sample weights.*plain function"):
        P.scalar_loss(lambda a, b: tf.reduce_mean(a - b), y, p, w)


def test_total_loss_counts_regularisers_and_add_loss_as_keras_does():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((3,))
    hidden = keras.layers.Dense(4, kernel_regularizer=keras.regularizers.L2(0.1))(inputs)
    model = keras.Model(inputs, keras.layers.Dense(1)(hidden))
    model.compile(loss="mse")
    x, y = np.ones([8, 3], np.float32), np.zeros([8, 1], np.float32)
    expected = model.evaluate(x, y, verbose=0)
    ours = float(P.total_loss(model, keras.losses.MeanSquaredError(), y, model(x, training=False)))
    assert ours == pytest.approx(expected, rel=1e-5)
    assert float(P.regularization_loss(model)) > 0
    assert float(P.regularization_loss(keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)]))) == 0.0


def test_trainable_key_follows_freezing():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(3), keras.layers.Dense(1)])
    full = P.trainable_key(model)
    model.layers[0].trainable = False
    assert P.trainable_key(model) != full and len(P.trainable_key(model)) == 2
    model.layers[0].trainable = True
    assert P.trainable_key(model) == full


def test_tf_variable_unwraps_a_keras_variable():
    variable = keras.Variable(1.0)
    assert isinstance(P.tf_variable(variable), tf.Variable)
    plain = tf.Variable(2.0)
    assert P.tf_variable(plain) is plain


def test_wait_for_device_runs_eagerly():
    P.wait_for_device()


def test_weak_model_lets_the_model_go_and_says_so():
    import gc

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    ref = P.WeakModel(model, "this step")
    assert ref() is model
    del model
    gc.collect()
    with pytest.raises(ReferenceError, match="the model of this step has been deleted"):
        ref()


def test_strategy_checks_outside_any_scope():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    assert P.strategy_of(model.variables) is None
    assert P.check_strategy(model, keras.optimizers.SGD(0.1), [keras.metrics.MeanAbsoluteError()]) is None


def test_strategy_checks_name_what_was_created_in_the_wrong_scope(fresh_python):
    out = fresh_python("""
        from helpers import runtime, plumbing
        runtime.setup(seed=0, replicas=2)
        import tensorflow as tf, keras
        strategy = tf.distribute.MirroredStrategy()
        plain = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        with strategy.scope():
            inside = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
            inside_opt = keras.optimizers.SGD(0.1)
            inside_opt.build(inside.trainable_variables)
        outside_opt = keras.optimizers.SGD(0.1)
        outside_opt.build(plain.trainable_variables)
        print(plumbing.strategy_of(inside.variables) is strategy, plumbing.check_strategy(inside, inside_opt) is strategy)
        for call in (lambda: plumbing.check_strategy(inside, outside_opt),
                     lambda: strategy.scope().__enter__() and None or plumbing.check_strategy(plain)):
            try:
                call()
            except ValueError as error:
                print("refused:", str(error).split(":")[0])
    """)
    lines = out.strip().splitlines()
    assert lines[0] == "True True"
    assert lines[1].startswith("refused: optimizer SGD was created outside any strategy's scope, but model")
    assert lines[2].startswith("refused: called inside MirroredStrategy.scope(), but model")


def test_check_mean_loss_refuses_a_summing_reduction_and_passes_means():
    for ok in (keras.losses.MeanSquaredError(), keras.losses.MeanSquaredError(reduction="mean"),
               lambda y, p: tf.reduce_mean(y - p)):
        assert P.check_mean_loss(ok) is ok
    with pytest.raises(ValueError, match="reduction='sum'"):
        P.check_mean_loss(keras.losses.MeanSquaredError(reduction="sum"))
