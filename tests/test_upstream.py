"""Tripwires on upstream behaviour that a notebook teaches as a fact.

Each test checks one behaviour of Keras or TensorFlow that a notebook states (and often shows).
When an upgrade changes it, the test fails with a message naming the notebook and section to
rewrite, so the lesson is updated instead of silently becoming wrong.
"""

from __future__ import annotations


def lesson(notebook: str, section: str, fact: str) -> str:
    """The failure message: which lesson to update, and what it says."""
    return f"upstream changed: {notebook}, section '{section}' teaches that {fact}. Update the lesson."


# --------------------------------------------------------------------------- 02 gradient accumulation


# --------------------------------------------------------------------------- 03 batch iteration

NB03 = "notebooks/03_batch_iteration.ipynb"


def _stateful_lstm(batch_shape, stateful):
    import keras

    return keras.Sequential([keras.Input(batch_shape=batch_shape), keras.layers.LSTM(3, return_sequences=True,
                                                                                     stateful=stateful)])


def test_03_keras_fit_does_not_reset_a_stateful_rnn_between_epochs():
    import keras
    import numpy as np
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    model = _stateful_lstm((2, 4, 1), stateful=True)
    model.compile("sgd", "mse")
    seen = []

    class Spy(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            seen.append(float(np.abs(model.layers[0].states[0].numpy()).max()))

    data = tf.data.Dataset.from_tensors((tf.ones([2, 4, 1]), tf.zeros([2, 4, 3])))
    model.fit(data, epochs=2, shuffle=False, verbose=0, callbacks=[Spy()])
    assert seen[0] == 0.0 and seen[1] > 0, lesson(
        NB03, "A model that needs consecutive batches",
        "Keras' fit keeps a stateful RNN's state from one epoch to the next (the notebook resets it in a callback)")


def test_03_a_stateful_lstm_fed_consecutive_windows_reads_the_whole_rows():
    import keras
    import numpy as np

    keras.utils.set_random_seed(0)
    reader = _stateful_lstm((2, 3, 1), stateful=True)
    whole = _stateful_lstm((2, None, 1), stateful=False)
    whole.set_weights(reader.get_weights())
    rows = np.random.default_rng(0).normal(size=(2, 9, 1)).astype("float32")
    pieces = np.concatenate([reader.predict_on_batch(rows[:, i:i + 3]) for i in (0, 3, 6)], axis=1)
    assert np.abs(pieces - whole.predict_on_batch(rows)).max() < 1e-5, lesson(
        NB03, "A model that needs consecutive batches",
        "a stateful LSTM reading consecutive windows computes what the stateless LSTM computes on the whole rows")


def test_03_a_for_loop_over_a_dataset_in_a_tf_function_runs_in_the_graph():
    import tensorflow as tf

    python_runs = []

    @tf.function
    def loop(dataset):
        total = tf.constant(0, tf.int64)
        for x in dataset:
            python_runs.append(1)
            total += x
        return total

    assert int(loop(tf.data.Dataset.range(100))) == 4950 and len(python_runs) == 1, lesson(
        NB03, "Cost", "AutoGraph turns `for x in dataset` inside a tf.function into a loop in the graph "
        "(Python runs the body once, when tracing)")


# --------------------------------------------------------------------------- 04 validation queues


# --------------------------------------------------------------------------- 05 network snapshots
