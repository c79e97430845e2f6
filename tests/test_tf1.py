"""helpers.tf1.session: the one way the TF1 baselines open a session."""

import threading
import time

import numpy as np
import pytest
import tensorflow as tf

from helpers import tf1

v1 = tf.compat.v1


def _queue_graph():
    graph = tf.Graph()
    with graph.as_default():
        queue = v1.FIFOQueue(4, tf.int32, shapes=[[]])
        counter = v1.train.range_input_producer(5, shuffle=False).dequeue()
        total = v1.Variable(7, name="total")
    return graph, queue, counter, total


def test_variables_initialised_and_queue_runners_started_and_stopped():
    graph, _, counter, total = _queue_graph()
    with tf1.session(graph, queue_runners=True) as sess:
        assert int(sess.run(total)) == 7
        assert [int(sess.run(counter)) for _ in range(6)] == [0, 1, 2, 3, 4, 0]
        threads = list(sess.queue_threads)
        assert threads and all(t.is_alive() for t in threads)
    assert sess._closed and not any(t.is_alive() for t in threads)


def test_a_read_nobody_feeds_fails_after_the_timeout_instead_of_hanging():
    graph, queue, _, _ = _queue_graph()
    with graph.as_default():
        take = queue.dequeue()
    with tf1.session(graph, timeout_ms=200) as sess:
        start = time.perf_counter()
        with pytest.raises(tf.errors.DeadlineExceededError):
            sess.run(take)
        assert time.perf_counter() - start < 60


def test_queue_runners_may_idle_longer_than_the_timeout():
    graph, _, counter, _ = _queue_graph()
    with tf1.session(graph, queue_runners=True, timeout_ms=200) as sess:
        sess.run(counter)
        time.sleep(0.8)  # the runner's enqueue waits on a full queue all this time
        assert all(t.is_alive() for t in sess.queue_threads)
        assert [int(sess.run(counter)) for _ in range(4)] == [1, 2, 3, 4]


def test_prepare_runs_before_the_queue_runners_and_errors_still_close():
    graph, _, counter, total = _queue_graph()
    order = []
    with graph.as_default():
        set_total = total.assign(3)

    def prepare(sess):
        order.append(("prepare", threading.active_count()))
        sess.run(set_total)

    with pytest.raises(ZeroDivisionError):
        with tf1.session(graph, queue_runners=True, prepare=prepare) as sess:
            assert int(sess.run(total)) == 3
            threads = list(sess.queue_threads)
            1 / 0
    assert order and sess._closed and not any(t.is_alive() for t in threads)


@pytest.mark.parametrize("kwargs, error", [({"timeout_ms": 0}, ValueError), ({"timeout_ms": 1.5}, TypeError)])
def test_bad_arguments(kwargs, error):
    with pytest.raises(error, match="timeout_ms"):
        with tf1.session(tf.Graph(), **kwargs):
            pass
    with pytest.raises(TypeError, match="graph must be a tf.Graph"):
        with tf1.session(np.zeros(2)):
            pass


# --------------------------------------------------------------------------- notebook 05: network_from_keras


def _dense_batchnorm_net(seed=0):
    import keras

    keras.utils.set_random_seed(seed)
    net = keras.Sequential([keras.Input((4,)), keras.layers.Dense(6, activation="relu", name="hidden"),
                            keras.layers.BatchNormalization(name="norm"), keras.layers.Dense(1, name="head")])
    x = np.random.default_rng(seed).normal(1.0, 2.0, size=(16, 4)).astype("float32")
    net(x, training=True)  # moving statistics away from 0 and 1
    return net, x


@pytest.mark.parametrize("training", [False, True])
def test_network_from_keras_computes_what_the_keras_model_computes(training):
    net, x = _dense_batchnorm_net()
    graph = tf.Graph()
    with graph.as_default():
        x_in = v1.placeholder(tf.float32, [None, 4])
        with v1.variable_scope("copy"):
            out, updates = tf1.network_from_keras(x_in, net, training=training)
        names = [v.op.name for v in v1.global_variables()]
        trainable = [v.op.name for v in v1.trainable_variables()]
        moving_vars = [v for v in v1.global_variables() if "moving" in v.op.name]
    assert names == ["copy/hidden/kernel", "copy/hidden/bias", "copy/norm/gamma", "copy/norm/beta",
                     "copy/norm/moving_mean", "copy/norm/moving_variance", "copy/head/kernel", "copy/head/bias"]
    assert len(trainable) == 6 and not any("moving" in name for name in trainable)
    assert len(updates) == (2 if training else 0)
    with tf1.session(graph) as sess:
        got, _ = sess.run([out, updates], {x_in: x})
        moving = sess.run(moving_vars)
    expected = net(x, training=training).numpy()  # in training mode Keras moves its statistics too
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    if training:
        np.testing.assert_allclose(moving[0], net.get_layer("norm").moving_mean.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(moving[1], net.get_layer("norm").moving_variance.numpy(), rtol=1e-5, atol=1e-6)


def test_a_stop_gradient_getter_keeps_gradients_off_the_copy_but_not_off_its_input():
    # Moved from notebook 05's TF1 section: the source's custom_getter wraps each variable the past
    # network reads in stop_gradient, so no gradient reaches its variables, while A, which feeds it,
    # still receives a gradient through the copy's output.
    net, x = _dense_batchnorm_net(1)
    graph = tf.Graph()
    with graph.as_default():
        x_in = v1.placeholder(tf.float32, [None, 4])
        with v1.variable_scope("A"):
            a = v1.get_variable("w", initializer=np.eye(4, dtype="float32"))
        h = tf.matmul(x_in, a)
        with v1.variable_scope("B_now"):
            now, _ = tf1.network_from_keras(h, net, training=False)
        with v1.variable_scope("B_past", custom_getter=lambda getter, *args, **kw: tf.stop_gradient(getter(*args, **kw))):
            past, _ = tf1.network_from_keras(h, net, training=False)
        past_vars = v1.global_variables("B_past/")
        towards_past = tf.reduce_sum((past - 1.0) ** 2)
        assert len(past_vars) == 8 and all(g is None for g in tf.gradients(towards_past, past_vars))
        through_past = tf.gradients(towards_past, [a])[0]
        cut = tf.gradients(tf.reduce_sum((tf.stop_gradient(past) - 1.0) ** 2) + 0.0 * tf.reduce_sum(a), [a])[0]
    with tf1.session(graph) as sess:
        through, blocked = sess.run([through_past, cut], {x_in: x})
    assert np.abs(through).max() > 1e-3 and np.abs(blocked).max() == 0.0


def test_network_from_keras_refuses_what_it_cannot_recreate_before_creating_variables():
    import keras

    net, _ = _dense_batchnorm_net()
    with pytest.raises(RuntimeError, match="tf.Graph"):
        tf1.network_from_keras(tf.zeros((2, 4)), net, training=False)
    cases = [
        (keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), keras.layers.Dropout(0.5, name="drop")]),
         ValueError, "'drop' is a Dropout"),
        (keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="tanh", name="t")]),
         ValueError, "'t' has activation 'tanh'"),
        (keras.Sequential([keras.layers.Dense(3)]), TypeError, "built keras.Sequential"),
        ("not a model", TypeError, "built keras.Sequential"),
    ]
    for model, error, match in cases:
        graph = tf.Graph()
        with graph.as_default():
            with pytest.raises(error, match=match):
                tf1.network_from_keras(v1.placeholder(tf.float32, [None, 4]), model, training=False)
            assert v1.global_variables() == []
