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


# --------------------------------------------------------------------------- notebook 01: session_tensor

SOURCE_OUTPUT = [f"val1 {n}, val2 {n + 1}, queue size {10 - n}" for n in range(1, 11)] + ["Done"]


def test_session_tensor_gives_the_source_documented_output():
    """One dequeue per element into a handle; two ops read the held tensor; the queue shrinks by one."""
    lines = []
    with tf.Graph().as_default() as graph, tf1.session(graph, timeout_ms=3000) as sess:
        queue = v1.FIFOQueue(capacity=20, dtypes=[tf.int32])
        values = v1.placeholder(tf.int32, [None])
        enqueue = queue.enqueue(values)
        dequeue_to_handle = v1.get_session_handle(queue.dequeue())
        feed, held = tf1.session_tensor(sess, tf.int32)
        val1_op, val2_op = tf.reduce_sum(held), tf.reduce_sum(held) + 1
        for length in range(1, 11):
            sess.run(enqueue, {values: [1] * length})
        sess.run(queue.close())
        try:
            while True:
                handle = sess.run(dequeue_to_handle)
                val1, val2 = (sess.run(op, {feed: handle.handle}) for op in (val1_op, val2_op))
                assert int(sess.run(val1_op, {feed: handle.handle})) == val1  # reading again does not dequeue
                lines.append(f"val1 {val1}, val2 {val2}, queue size {sess.run(queue.size())}")
                handle.delete()
        except tf.errors.OutOfRangeError:
            lines.append("Done")
    assert lines == SOURCE_OUTPUT


def test_a_cached_variable_holds_the_batch_while_a_live_dequeue_advances():
    """The source's answer for fixed shapes (moved here from notebook 01): a loss that reads the queue
    dequeues at every run (three losses at one w); a loss on a non-trainable variable that only an
    explicit assign refills gives one loss, and the queue gives up one batch per assign."""
    with tf.Graph().as_default() as graph:
        queue = v1.FIFOQueue(capacity=10, dtypes=[tf.float32], shapes=[[4]])
        fill = queue.enqueue_many([np.arange(1, 13, dtype=np.float32).reshape(3, 4)])  # 3 batches of 4
        w = v1.placeholder(tf.float32, [])
        live_loss = tf.reduce_mean(tf.square(w * queue.dequeue() - 1.0))
        cached = v1.Variable(tf.zeros([4]), trainable=False)
        advance = cached.assign(queue.dequeue())
        cached_loss = tf.reduce_mean(tf.square(w * cached - 1.0))
        size = queue.size()
    with tf1.session(graph) as sess:
        sess.run(fill)
        trap = [f"{sess.run(live_loss, {w: 0.5}):.2f}" for _ in range(3)]
        assert sess.run(size) == 0  # the trap emptied the queue
        sess.run(fill)
        sess.run(advance)
        fixed = [f"{sess.run(cached_loss, {w: 0.5}):.2f}" for _ in range(3)]
        assert sess.run(size) == 2
    assert trap == ["0.38", "5.38", "18.38"] and fixed == ["0.38", "0.38", "0.38"]


def test_session_tensor_reads_float_tensors_of_any_shape():
    with tf.Graph().as_default() as graph, tf1.session(graph) as sess:
        feed, held = tf1.session_tensor(sess, "float32")
        doubled = 2.0 * held
        for value in (np.ones([2, 3], np.float32), np.arange(5, dtype=np.float32)):
            handle = sess.run(v1.get_session_handle(tf.constant(value)))
            assert np.array_equal(sess.run(doubled, {feed: handle.handle}), 2 * value)
            handle.delete()


@pytest.mark.parametrize("args, kwargs, match", [
    (("not a session", tf.int32), {}, "sess must be a tf.compat.v1.Session, got str"),
    ((None, "banana"), {}, "dtype must be a TensorFlow dtype"),
    ((None, tf.int32), {"device": 0}, "device must be a device name"),
])
def test_session_tensor_bad_arguments(args, kwargs, match):
    with tf.Graph().as_default() as graph, tf1.session(graph) as sess:
        args = tuple(sess if a is None else a for a in args)
        before = len(graph.get_operations())  # the session's initialisers
        with pytest.raises(TypeError, match=match):
            tf1.session_tensor(*args, **kwargs)
        assert len(graph.get_operations()) == before  # refused before anything was added to the graph
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
# --------------------------------------------------------------------------- notebook 03: the PTB producer


def test_the_ptb_producers_x_and_y_depend_on_a_dequeue():
    # Why one tensor gives a new batch at every session.run: walking x's inputs back reaches the queue's dequeue.
    # (The notebook printed this graph walk before the answer-first rewrite; it now only says so.)
    with tf1.QueuePipeline(np.arange(70), batch_size=4, num_steps=5) as pipe:
        for tensor in (pipe.x, pipe.y):
            ancestors, todo = set(), [tensor.op]
            while todo:
                op = todo.pop()
                if op not in ancestors:
                    ancestors.add(op)
                    todo += [t.op for t in op.inputs]
            assert any(op.type.startswith("QueueDequeue") for op in ancestors)
        assert [int(pipe.next_batch()[0][0, 0]) for _ in range(4)] == [0, 5, 10, 0]
# --------------------------------------------------------------------------- 04 validation queues


def _tf_data_passes(repeat_first: bool, passes: int, batches_per_pass: int | None = None) -> list:
    """What a tf.data iterator made once reads, pass after pass: 10 ids in batches of 4, either
    repeated before batching (cycling, like a queue) or not repeated at all (spent after one pass)."""
    examples = tf.data.Dataset.range(10)
    iterator = iter(examples.repeat().batch(4) if repeat_first else examples.batch(4))
    if batches_per_pass is None:
        return [[batch.numpy().tolist() for batch in iterator] for _ in range(passes)]
    return [[next(iterator).numpy().tolist() for _ in range(batches_per_pass)] for _ in range(passes)]


def test_a_cycling_validation_queue_runs_across_passes_like_a_repeated_tf_data_stream():
    cycling = tf1.validation_queue_passes([3, 2, 4, 1], batch_size=4, num_epochs=None, passes=3, batches_per_pass=3)
    assert cycling[0] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1]]  # ids 0 and 1 twice in pass 1
    assert cycling[1][0][0] == 2 and cycling[2][0][0] == 4          # each pass starts elsewhere
    assert cycling == _tf_data_passes(repeat_first=True, passes=3, batches_per_pass=3)


def test_a_run_once_validation_queue_closes_for_good():
    once = tf1.validation_queue_passes([3, 2, 4, 1], batch_size=4, num_epochs=1, passes=3)
    assert once == [[[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]], [], []]  # the smaller last batch, then nothing
    assert once == _tf_data_passes(repeat_first=False, passes=3)
    two_epochs = tf1.validation_queue_passes([3, 2], batch_size=4, num_epochs=2, passes=2)
    assert two_epochs == [[[0, 1, 2, 3], [4, 0, 1, 2], [3, 4]], []]  # batches run across the epochs too


def test_a_cycling_queue_pass_that_is_not_bounded_is_refused():
    with pytest.raises(ValueError, match="batches_per_pass"):
        tf1.validation_queue_passes([3], batch_size=2, num_epochs=None, passes=1)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"chunk_sizes": []}, ValueError, "chunk_sizes is empty"),
    ({"chunk_sizes": [3, 0]}, ValueError, r"chunk_sizes\[1\]"),
    ({"chunk_sizes": [3, 1.5]}, TypeError, r"chunk_sizes\[1\]"),
    ({"batch_size": 0}, ValueError, "batch_size"),
    ({"num_epochs": 0}, ValueError, "num_epochs"),
    ({"num_epochs": 1.0}, TypeError, "num_epochs"),
    ({"passes": 0}, ValueError, "passes"),
    ({"batches_per_pass": 0}, ValueError, "batches_per_pass"),
    ({"timeout_ms": 0}, ValueError, "timeout_ms"),
])
def test_validation_queue_passes_bad_arguments(kwargs, error, match):
    args = {"chunk_sizes": [3, 2], "batch_size": 4, "num_epochs": 1, "passes": 1} | kwargs
    with pytest.raises(error, match=match):
        tf1.validation_queue_passes(**args)


def test_read_pass_reads_to_the_end_or_to_max_batches():
    graph = tf.Graph()
    with graph.as_default():
        iterator = v1.data.make_initializable_iterator(tf.data.Dataset.range(7).batch(3))
        batch = iterator.get_next()
    with tf1.session(graph) as sess:
        sess.run(iterator.initializer)
        assert tf1.read_pass(sess, batch, max_batches=2) == [[0, 1, 2], [3, 4, 5]]
        assert tf1.read_pass(sess, batch) == [[6]]
        assert tf1.read_pass(sess, batch) == []
        with pytest.raises(ValueError, match="max_batches"):
            tf1.read_pass(sess, batch, max_batches=0)
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
