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


# --------------------------------------------------------------------------- 04 validation queues

NB04 = "notebooks/04_validation_queues.ipynb"


def _nb04_keras():
    """Keras and data for notebook 04's tripwires: an endless (x, y) stream and a finite one."""
    import warnings

    from helpers import runtime

    runtime.setup(seed=0)
    import keras
    import tensorflow as tf

    warnings.filterwarnings("ignore", message=".*ran out of data.*")
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    rows = tf.data.Dataset.range(10**6).map(lambda i: (tf.fill([2], tf.cast(i % 7, tf.float32)), tf.ones([1])))
    return keras, tf, model, rows.batch(4), rows.take(10).batch(4)  # 10 validation examples: 4 + 4 + 2


def test_fit_validation_freq_counts_epochs_not_steps():
    keras, tf, model, train, val = _nb04_keras()
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    logs = model.fit(train, steps_per_epoch=2, epochs=4, validation_data=val, validation_freq=2,
                     shuffle=False, verbose=0).history
    assert len(logs["val_loss"]) == 2 and int(model.optimizer.iterations) == 8, lesson(
        NB04, "What most Keras users try first",
        "fit(validation_freq=2) validates every 2 epochs (here 2 validations in 8 steps), not every 2 steps")


def test_fit_steps_per_epoch_validates_a_full_pass_and_keeps_the_training_stream():
    keras, tf, model, train, val = _nb04_keras()
    from helpers.validation import ExampleCount

    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse", metrics=[ExampleCount()])
    logs = model.fit(train, steps_per_epoch=3, epochs=2, validation_data=val, shuffle=False, verbose=0).history
    keras.utils.set_random_seed(0)
    alone = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    alone.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    alone.fit(train, steps_per_epoch=3, epochs=2, shuffle=False, verbose=0)
    same = all((a == b).all() for a, b in zip(model.get_weights(), alone.get_weights()))
    assert logs["val_examples"] == [10, 10] and logs["examples"] == [12, 12] and same, lesson(
        NB04, "What most Keras users try first",
        "fit(steps_per_epoch=K, validation_data=val_ds) reads every validation example once per epoch of K steps "
        "and does not disturb the training stream")


def test_keras_reads_a_third_element_as_sample_weights():
    keras, tf, model, train, val = _nb04_keras()
    model.compile(loss="mse")
    zero_weights = val.map(lambda x, y: (x, y, tf.zeros([tf.shape(x)[0]])))
    assert model.evaluate(zero_weights, verbose=0) == 0.0, lesson(
        NB04, "What most Keras users try first",
        "a third element of a batch is a sample weight to Keras, so example ids ride in dict elements instead")


def test_keras_evaluate_adds_model_losses():
    keras, tf, _, _, val = _nb04_keras()
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, kernel_regularizer=keras.regularizers.L2(1.0))])
    model.compile(loss="mse")
    plain = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    plain.set_weights(model.get_weights())
    plain.compile(loss="mse")
    penalty = float(sum(model.losses))
    gap = model.evaluate(val, verbose=0) - plain.evaluate(val, verbose=0)
    assert penalty > 0.01 and abs(gap - penalty) < 1e-5, lesson(
        NB04, "Proof", "model.evaluate adds model.losses (regularisers) to the loss it reports, as evaluate does")


def test_keras_losses_divide_by_the_replicas_inside_a_strategy_scope(fresh_python):
    out = fresh_python("""
        from helpers import runtime
        runtime.setup(seed=0, replicas=2)
        import tensorflow as tf, keras
        strategy = tf.distribute.MirroredStrategy()
        y, p = tf.zeros([4, 1]), tf.ones([4, 1])
        loss = keras.losses.MeanSquaredError()
        with strategy.scope():
            print(float(loss(y, p)), float(keras.losses.MeanSquaredError(reduction="sum")(y, p)))
    """)
    assert out.split() == ["0.5", "4.0"], lesson(
        NB04, "Now (TF2)", "Keras loss objects with a mean reduction return the batch mean divided by the number of "
        "replicas inside a strategy scope; helpers.validation multiplies it back (update it, or it will be off)")


# --------------------------------------------------------------------------- 05 network snapshots
