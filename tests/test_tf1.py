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


# --------------------------------------------------------------------------- notebook 02: AccumulationGraph


def _keras_mlp(seed=0):
    import keras

    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="tanh"), keras.layers.Dense(1)])


def _regression(n=7, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3)).astype("float32")
    return x, (x @ np.array([[1.0], [-2.0], [0.5]], "float32") + 0.3).astype("float32")


def test_accumulation_graph_is_the_keras_model_and_its_gradients():
    import keras

    model, (x, y) = _keras_mlp(), _regression()
    graph = tf1.AccumulationGraph(model.get_weights(), learning_rate=0.1)
    with tf.GradientTape() as tape:
        loss = keras.losses.MeanSquaredError()(y, model(x))
    expected = tape.gradient(loss, model.trainable_variables)
    with graph.session() as sess:
        got_loss, got = sess.run([graph.loss, graph.gradients], feed_dict={graph.x: x, graph.y: y})
        start = sess.run(graph.variables)
    assert abs(float(got_loss) - float(loss)) < 1e-6
    assert all(np.allclose(g, e.numpy(), atol=1e-6) for g, e in zip(got, expected))
    assert all(np.array_equal(a, w) for a, w in zip(start, model.get_weights()))  # a new session starts there


def test_fed_gradients_replace_the_computed_ones_in_train_op():
    model, (x, y) = _keras_mlp(), _regression()
    graph = tf1.AccumulationGraph(model.get_weights(), learning_rate=0.5)
    fed = [np.full(w.shape, 2.0, np.float32) for w in model.get_weights()]
    with graph.session() as sess:
        sess.run(graph.train_op, feed_dict=dict(zip(graph.gradients, fed)))  # no x, y: nothing computes them
        after = sess.run(graph.variables)
    assert all(np.allclose(a, w - 0.5 * 2.0) for a, w in zip(after, model.get_weights()))


def test_accumulator_ops_built_on_the_graph_equal_the_fed_size_weighted_average():
    model, (x, y) = _keras_mlp(), _regression(7)
    parts = [(x[:3], y[:3]), (x[3:6], y[3:6]), (x[6:], y[6:])]
    graph = tf1.AccumulationGraph(model.get_weights(), learning_rate=0.1)
    with graph.session() as sess:
        fetched = [sess.run(graph.gradients, feed_dict={graph.x: a, graph.y: b}) for a, b in parts]
        average = [np.average(g, axis=0, weights=[3, 3, 1]) for g in zip(*fetched)]
        sess.run(graph.train_op, feed_dict=dict(zip(graph.gradients, average)))
        fed = sess.run(graph.variables)
    with graph.graph.as_default():
        n = tf.cast(tf.shape(graph.x)[0], tf.float32)
        sums = [v1.Variable(tf.zeros(v.shape), trainable=False) for v in graph.variables]
        seen = v1.Variable(0.0, trainable=False)
        add = [s.assign_add(n * g) for s, g in zip(sums, graph.gradients)] + [seen.assign_add(n)]
        apply = graph.optimizer.apply_gradients([(s / seen, v) for s, v in zip(sums, graph.variables)])
        reset = [s.assign(tf.zeros_like(s)) for s in sums] + [seen.assign(0.0)]
    with graph.session() as sess:
        for a, b in parts:
            sess.run(add, feed_dict={graph.x: a, graph.y: b})
        sess.run(apply)
        sess.run(reset)
        accumulated = sess.run(graph.variables)
        assert not any(np.any(v) for v in sess.run(sums + [seen]))  # emptied for the next window
    with graph.session() as sess:  # the whole batch at once: the size-weighted average is its gradient
        sess.run(graph.train_op, feed_dict={graph.x: x, graph.y: y})
        whole = sess.run(graph.variables)
    assert max(float(np.max(np.abs(a - b))) for a, b in zip(fed, accumulated)) < 1e-6
    assert max(float(np.max(np.abs(a - b))) for a, b in zip(fed, whole)) < 1e-6
    equal = [np.mean(g, axis=0) for g in zip(*fetched)]  # the source's equal weights: not the whole batch
    assert max(float(np.max(np.abs(e - a))) for e, a in zip(equal, average)) > 1e-3


@pytest.mark.parametrize("weights, match", [
    ([np.zeros((3, 4)), np.zeros(4), np.zeros((4, 1))], "kernel, bias, kernel, bias"),
    ([np.zeros((3, 4)), np.zeros(5), np.zeros((4, 1)), np.zeros(1)], "chain"),
    ([np.zeros((3, 4)), np.zeros(4), np.zeros((4, 2)), np.zeros(2)], "chain"),
])
def test_accumulation_graph_refuses_weights_of_another_network(weights, match):
    with pytest.raises(ValueError, match=match):
        tf1.AccumulationGraph(weights, learning_rate=0.1)


@pytest.mark.parametrize("learning_rate, error", [(0, ValueError), (-0.1, ValueError), (float("nan"), ValueError),
                                                   (True, TypeError), ("0.1", TypeError), (None, TypeError)])
def test_accumulation_graph_refuses_a_learning_rate_that_is_not_a_positive_number(learning_rate, error):
    with pytest.raises(error, match="learning_rate"):
        tf1.AccumulationGraph(_keras_mlp().get_weights(), learning_rate=learning_rate)
