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
