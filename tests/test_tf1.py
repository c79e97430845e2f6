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
