"""Tripwires on upstream behaviour that a notebook teaches as a fact.

Each test checks one behaviour of Keras or TensorFlow that a notebook states (and often shows).
When an upgrade changes it, the test fails with a message naming the notebook and section to
rewrite, so the lesson is updated instead of silently becoming wrong.
"""

from __future__ import annotations


def lesson(notebook: str, section: str, fact: str) -> str:
    """The failure message: which lesson to update, and what it says."""
    return f"upstream changed: {notebook}, section '{section}' teaches that {fact}. Update the lesson."


# --------------------------------------------------------------------------- 01 queue decoupling

NB01 = "01_queue_decoupling"


def test_01_a_keras_loss_computes_in_float32_unless_given_a_dtype():
    import keras
    import tensorflow as tf

    y = tf.constant([1.0, 2.0], tf.float64)
    assert keras.losses.MeanSquaredError()(y, y + 1).dtype == tf.float32, lesson(
        NB01, "Variable-sized molecules", "a Keras loss computes in float32 unless it is given dtype='float64'")
    assert keras.losses.MeanSquaredError(dtype="float64")(y, y + 1).dtype == tf.float64


def test_01_an_eager_fifo_queue_reports_its_size_and_ends_with_out_of_range():
    import pytest
    import tensorflow as tf

    queue = tf.queue.FIFOQueue(capacity=4, dtypes=[tf.int32])
    for length in (1, 3):
        queue.enqueue(tf.ones([length], tf.int32))
    queue.close()
    held = queue.dequeue()
    fact = "an eager tf.queue.FIFOQueue dequeues once per call, reports its size, and raises OutOfRangeError when closed and empty"
    assert int(tf.reduce_sum(held)) == 1 and int(queue.size()) == 1, lesson(NB01, "Now (TF2)", fact)
    assert int(tf.reduce_sum(held)) == 1 and int(queue.size()) == 1, lesson(NB01, "Now (TF2)", fact)
    queue.dequeue()
    with pytest.raises(tf.errors.OutOfRangeError):
        queue.dequeue()


def test_01_retracing_plain_per_shape_reduce_retracing_once_per_changed_dimension_signature_never():
    import tensorflow as tf

    shapes = [5, 7, 7, 9, 4]
    plain = tf.function(lambda x: tf.reduce_sum(x))
    relaxing = tf.function(lambda x: tf.reduce_sum(x), reduce_retracing=True)
    signature = tf.function(lambda x: tf.reduce_sum(x), input_signature=[tf.TensorSpec([None, 8])])
    for n in shapes:
        for fn in (plain, relaxing, signature):
            fn(tf.zeros([n, 8]))
    counts = [fn.experimental_get_tracing_count() for fn in (plain, relaxing, signature)]
    assert counts == [len(set(shapes)), 2, 1], lesson(
        NB01, "Cost", f"a plain tf.function traces once per shape, reduce_retracing=True once more after the "
                      f"first shape change, an open input_signature once (got {counts})")
    ragged = tf.function(lambda x: tf.reduce_sum(x.flat_values))
    for rows in ([[1.0], [2.0, 3.0]], [[1.0, 2.0, 3.0], [4.0]], [[1.0], [2.0], [3.0]]):
        ragged(tf.ragged.constant(rows))
    assert ragged.experimental_get_tracing_count() == 2, lesson(
        NB01, "Cost", "a plain tf.function over a ragged tensor retraces per batch size, not per inner length")


def test_01_dropout_is_random_and_batch_norm_updates_its_moving_mean_only_in_training_mode():
    import keras
    import numpy as np

    keras.utils.set_random_seed(0)
    x = np.random.default_rng(0).normal(size=(16, 4)).astype("float32")
    dropout, norm = keras.layers.Dropout(0.5), keras.layers.BatchNormalization()
    fact = "with training=True Dropout differs between two calls and BatchNorm moves its moving mean; " \
           "with training=False neither happens"
    assert not np.array_equal(dropout(x, training=True), dropout(x, training=True)), lesson(
        NB01, "What a line search needs from the loss", fact)
    assert np.array_equal(dropout(x, training=False), dropout(x, training=False))
    norm(x, training=False)
    start = np.array(norm.moving_mean)
    norm(x, training=False)
    assert np.array_equal(start, np.array(norm.moving_mean)), lesson(NB01, "What a line search needs from the loss", fact)
    norm(x, training=True)
    assert not np.array_equal(start, np.array(norm.moving_mean)), lesson(
        NB01, "What a line search needs from the loss", fact)


def test_01_keras_losses_divide_by_the_replica_count_inside_a_strategy_scope(fresh_python):
    out = fresh_python("""
        from helpers import runtime
        runtime.setup(seed=0, replicas=2)
        import tensorflow as tf, keras
        y = tf.constant([[1.0], [3.0]])  # one loss value per example before the mean
        plain = float(keras.losses.MeanSquaredError()(y, y + 2))
        with tf.distribute.MirroredStrategy().scope():
            scoped = float(keras.losses.MeanSquaredError()(y, y + 2))
        print(plain, scoped)
    """)
    assert out.split() == ["4.0", "2.0"], lesson(
        NB01 + " helpers", "decoupling.LossAndGradient (refuses a strategy scope)",
        f"inside a 2-replica strategy scope a Keras loss is divided by 2 (got {out.split()})")


# --------------------------------------------------------------------------- 02 gradient accumulation


# --------------------------------------------------------------------------- 04 validation queues


# --------------------------------------------------------------------------- 05 network snapshots
