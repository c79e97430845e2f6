"""Tripwires on upstream behaviour that a notebook teaches as a fact.

Each test checks one behaviour of Keras or TensorFlow that a notebook states (and often shows).
When an upgrade changes it, the test fails with a message naming the notebook and section to
rewrite, so the lesson is updated instead of silently becoming wrong.
"""

from __future__ import annotations


def lesson(where: str, section: str, fact: str) -> str:
    """The failure message: which lesson to update, and what it says.

    ``where`` is a notebook or docs page (``section`` one of its headings, without the #s) or a
    helper's source file (``section`` a line of it); ``test_every_lesson_names_a_section_that_exists``
    keeps the labels true when headings change.
    """
    return f"upstream changed: {where}, section '{section}' teaches that {fact}. Update the lesson."


# --------------------------------------------------------------------------- 01 queue decoupling

NB01 = "notebooks/01_queue_decoupling.ipynb"
DOCS01 = "docs/decoupling.md"


def test_01_a_keras_loss_computes_in_float32_unless_given_a_dtype():
    import keras
    import tensorflow as tf

    y = tf.constant([1.0, 2.0], tf.float64)
    assert keras.losses.MeanSquaredError()(y, y + 1).dtype == tf.float32, lesson(
        NB01, "The question", "a Keras loss computes in float32 unless it is given dtype='float64'")
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
    assert int(tf.reduce_sum(held)) == 1 and int(queue.size()) == 1, lesson(NB01, "Then (TF1), optional: the queue advances at every read", fact)
    assert int(tf.reduce_sum(held)) == 1 and int(queue.size()) == 1, lesson(NB01, "Then (TF1), optional: the queue advances at every read", fact)
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
        DOCS01, "BatchNorm statistics", fact)
    assert np.array_equal(dropout(x, training=False), dropout(x, training=False))
    norm(x, training=False)
    start = np.array(norm.moving_mean)
    norm(x, training=False)
    assert np.array_equal(start, np.array(norm.moving_mean)), lesson(DOCS01, "BatchNorm statistics", fact)
    norm(x, training=True)
    assert not np.array_equal(start, np.array(norm.moving_mean)), lesson(
        DOCS01, "BatchNorm statistics", fact)


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
        "src/helpers/decoupling.py", "def _refuse_strategy",
        f"inside a 2-replica strategy scope a Keras loss is divided by 2 (got {out.split()})")


# --------------------------------------------------------------------------- 02 gradient accumulation

NB02 = "notebooks/02_gradient_accumulation.ipynb"


def _nb02_problem(n=12, seed=0):
    import keras
    import numpy as np

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3)).astype("float32")
    y = (x @ np.array([[1.0], [-2.0], [0.5]]) + 3.0 * (np.arange(n) >= n - 2)[:, None]).astype("float32")
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="tanh"), keras.layers.Dense(1)])
    return model, x, y


def _nb02_gradient(model, x, y):
    import keras
    import tensorflow as tf

    with tf.GradientTape() as tape:
        loss = keras.losses.MeanSquaredError()(y, model(x, training=True))
    return tape.gradient(loss, model.trainable_variables)


def _nb02_max_diff(a, b):
    import numpy as np

    return max(float(np.max(np.abs(np.asarray(u) - np.asarray(v)))) for u, v in zip(a, b))


def test_keras_fit_runs_train_step_with_autograph_off():
    # notebook 02's @tf.function line (its comment quotes the error without it); the table of docs/accumulation.md ("The
    # minimal class without the extra lines", in the notebook in rounds 23-24) links the line of Keras' source that marks
    # fit's step function do_not_convert (calls from it are not converted); the class's own @tf.function converts its loop
    import inspect
    import json
    import re
    from pathlib import Path

    import keras
    from keras.src.backend.tensorflow import trainer

    lines = inspect.getsource(trainer).splitlines()
    marked = [i + 1 for i, line in enumerate(lines[:-1]) if "do_not_convert" in line
              and lines[i + 1].strip().startswith("def one_step_on_data(")]
    assert marked, lesson(NB02, "Keep `fit`: the loop inside `train_step`",
                          "Keras marks fit's one_step_on_data with tf.autograph.experimental.do_not_convert")
    root = Path(__file__).resolve().parents[1]
    cells = json.loads((root / NB02).read_text())["cells"]
    # round 26 (second pass): the class to copy tags the decorator (c); the list after it says what it is for and
    # that compiled fit stops without it, which step 1's run (no decorator) prints; docs/accumulation.md quotes it too
    assert any(re.search(r"\n    @tf\.function +# \(c\)[^\n]*\n", "".join(c["source"])) for c in cells)
    # round 26 (third pass): the bullet says why, the fact this test checks: fit's graph has AutoGraph off
    # since round 27's third pass: the decorator's own comment, and the glossary's AutoGraph line right after
    assert any("    @tf.function  # (c) without it: fit's compiled step cannot loop over a tensor (step 1's error)\n"
               in "".join(c["source"]) for c in cells if c["cell_type"] == "code")
    assert any("*AutoGraph*: TensorFlow's rewriting of Python loops into graph loops; `fit` compiles `train_step`"
               " without it, so (c) asks for it" in " ".join("".join(c["source"]).split())
               for c in cells if c["cell_type"] == "markdown")
    printed = ["".join("".join(o.get("text", "")) for o in c["outputs"]) for c in cells
               if c["cell_type"] == "code" and "MinimalAccumulating(" in "".join(c["source"])]
    assert any("Iterating over a symbolic `tf.Tensor` is not allowed" in text for text in printed)
    text = (root / "docs" / "accumulation.md").read_text(encoding="utf-8")
    text = text.split("\n## The minimal class without the extra lines\n")[1].split("\n## ")[0]
    assert "Iterating over a symbolic `tf.Tensor` is not allowed" in text
    version, line = re.search(r"keras/blob/v([\d.]+)/keras/src/backend/tensorflow/trainer\.py#L(\d+)", text).groups()
    if version == keras.__version__:  # the link points at the marked line of the Keras it names
        assert int(line) in marked, lesson(NB02, "Keep `fit`: the loop inside `train_step`",
                                           f"the do_not_convert line is line {marked} of trainer.py, not {line}")


def test_keras_builtin_accumulation_weights_micro_batches_equally():
    import keras

    model, x, y = _nb02_problem()
    start = model.get_weights()
    sizes = [(0, 5), (5, 10), (10, 12)]
    grads = [_nb02_gradient(model, x[lo:hi], y[lo:hi]) for lo, hi in sizes]
    optimizer = keras.optimizers.SGD(1.0, gradient_accumulation_steps=3)
    for g in grads:
        optimizer.apply_gradients(zip(g, model.trainable_variables))
    step = [w0 - w for w0, w in zip(start, model.get_weights())]
    equal = [sum(gs) / 3 for gs in zip(*grads)]
    model.set_weights(start)
    full = _nb02_gradient(model, x, y)
    assert _nb02_max_diff(step, equal) < 1e-6 and _nb02_max_diff(step, full) > 1e-3, lesson(
        NB02, "Picture: what most Keras users try first, next to `fit`", "Keras' gradient_accumulation_steps averages the micro-batches with equal weights, "
        "so micro-batches of 5, 5 and 2 examples differ from the full batch")


def test_keras_builtin_accumulation_window_counter_carries_across_epochs():
    import keras

    model, x, y = _nb02_problem(10)
    reference, _, _ = _nb02_problem(10)
    model.compile(optimizer=keras.optimizers.SGD(0.1, gradient_accumulation_steps=2), loss="mse")
    model.fit(x, y, batch_size=2, epochs=2, shuffle=False, verbose=0)  # 5 micro-batches per epoch
    batches = [(x[i:i + 2], y[i:i + 2]) for i in range(0, 10, 2)] * 2
    sgd = keras.optimizers.SGD(0.1)
    for first, second in zip(batches[0::2], batches[1::2]):  # windows: (1,2) (3,4) (5,1) (2,3) (4,5)
        g1, g2 = (_nb02_gradient(reference, *b) for b in (first, second))
        sgd.apply_gradients(zip([(a + b) / 2 for a, b in zip(g1, g2)], reference.trainable_variables))
    assert _nb02_max_diff(model.get_weights(), reference.get_weights()) < 1e-6, lesson(
        NB02, "Picture: what most Keras users try first, next to `fit`", "Keras' accumulation window counter is global: the 5th micro-batch of epoch 1 "
        "shares a window with the 1st of epoch 2")


def test_keras_activity_regularisers_divide_by_the_batch_size_from_3_14():
    # keras-team/keras#22021 (January 2026): before it, an activity regulariser summed over the batch.
    import keras
    import numpy as np
    import tensorflow as tf

    divides = tuple(int(p) for p in keras.__version__.split(".")[:2]) >= (3, 14)
    layer = keras.layers.Dense(2, kernel_initializer="ones", activity_regularizer=keras.regularizers.L2(1.0))
    for n in (2, 6):
        layer(tf.ones([n, 1]))
        expected = 2.0 if divides else 2.0 * n
        assert np.isclose(float(layer.losses[0]), expected), lesson(
            NB02, "Keep `fit`: the loop inside `train_step`", f"Keras {keras.__version__} {'divides an activity regulariser by the batch size' if divides else 'sums an activity regulariser over the batch'} "
            "(helpers.accumulation accepts such models only where it divides, see accumulated_gradients)")


def test_keras_builtin_accumulation_fails_under_mirrored_strategy_and_losses_divide_by_replicas(fresh_python):
    out = fresh_python("""
        from helpers import runtime
        runtime.setup(seed=0, replicas=2)
        import numpy as np, tensorflow as tf, keras
        strategy = tf.distribute.MirroredStrategy()
        x = np.ones((16, 3), "float32"); y = np.zeros((16, 1), "float32")
        with strategy.scope():
            model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
            model.compile(optimizer=keras.optimizers.SGD(0.1, gradient_accumulation_steps=2), loss="mse")
        try:
            model.fit(x, y, batch_size=4, verbose=0)
            print("builtin ran")
        except Exception as error:
            print("builtin failed:", type(error).__name__)
        mse = keras.losses.MeanSquaredError()
        for shape in ([2, 1], [2]):  # per-example values of shape [2], then a single number
            loss = strategy.run(tf.function(lambda: mse(tf.ones(shape), tf.zeros(shape))))
            print("loss per replica", shape, float(strategy.experimental_local_results(loss)[0]))
    """)
    assert "builtin failed: RuntimeError" in out.splitlines(), lesson(
        NB02, "Proof", "Keras' built-in gradient accumulation fails under MirroredStrategy "
        "(keras-team/keras#20582); it printed: " + out.strip().splitlines()[0])
    assert "loss per replica [2, 1] 0.5" in out.splitlines() and "loss per replica [2] 1.0" in out.splitlines(), lesson(
        NB02, "Proof", "a Keras loss object divides by the replica count inside "
        "strategy.run unless its per-example values are one number (helpers.accumulation undoes it by this rule)")


# --------------------------------------------------------------------------- 03 batch iteration

NB03 = "notebooks/03_batch_iteration.ipynb"
DOCS03 = "docs/batching.md"


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
        NB03, "Now (TF2): the technique in one cell, then the version to copy",
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
        DOCS03, "Stateful RNNs",
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
        DOCS03, "Cost section and benchmark", "AutoGraph turns `for x in dataset` inside a tf.function into a loop in the graph "
        "(Python runs the body once, when tracing)")


def test_03_stream_loss_is_the_mean_of_each_batchs_own_loss():
    """``batching.stream_loss`` on top of ``test_on_batch``: on Keras 3.13 (Colab's stack)
    ``test_on_batch`` returns the running mean of every call since the metrics were last reset, so the
    helper resets them before every batch. This file runs on both stacks."""
    import keras
    import numpy as np
    import pytest
    import tensorflow as tf

    from helpers import batching

    keras.utils.set_random_seed(0)
    model = _stateful_lstm((2, 3, 1), stateful=True)
    model.compile(loss="mse")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 2, 3, 1)).astype("float32")
    y = (rng.normal(size=(3, 2, 3, 3)) * np.array([1.0, 3.0, 9.0]).reshape(3, 1, 1, 1)).astype("float32")
    batching.reset_stateful(model)
    own = [float(np.mean((model.predict_on_batch(x[k]) - y[k]) ** 2)) for k in range(3)]
    got = batching.stream_loss(model, tf.data.Dataset.from_tensor_slices((x, y)))
    assert got == pytest.approx(float(np.mean(own)), rel=1e-5), lesson(
        DOCS03, "Stateful RNNs",
        f"stream_loss {got:.4f} is the mean of the batches' own losses {np.round(own, 4).tolist()}")


# --------------------------------------------------------------------------- 04 validation queues

NB04 = "notebooks/04_validation_queues.ipynb"
DOCS04 = "docs/validation.md"


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
        DOCS04, "Where the proofs that left the notebook went (issue 20)",
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
        NB04, "Inside `model.fit`: the built-in first",
        "fit(steps_per_epoch=K, validation_data=val_ds) reads every validation example once per epoch of K steps "
        "and does not disturb the training stream")


def test_keras_reads_a_third_element_as_sample_weights():
    keras, tf, model, train, val = _nb04_keras()
    model.compile(loss="mse")
    zero_weights = val.map(lambda x, y: (x, y, tf.zeros([tf.shape(x)[0]])))
    assert model.evaluate(zero_weights, verbose=0) == 0.0, lesson(
        NB04, "KeepBest on a model like yours",
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
        NB04, "Inside `model.fit`: the built-in first", "model.evaluate adds model.losses (regularisers) to the loss it reports, as evaluate does")


def _nb04_writes_val_loss(keras):
    """A callback that writes ``val_loss`` into the logs after every second step, as ValidateEvery does."""

    class Writes(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs):
            if (batch + 1) % 2 == 0:
                logs["val_loss"] = 1.0 / (batch + 1)  # falls at every pass: always "better"

    return Writes()


def test_callbacks_after_see_a_steps_val_loss_and_history_and_early_stopping_do_not():
    import warnings

    keras, tf, model, train, val = _nb04_keras()
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    seen = []
    spy = keras.callbacks.LambdaCallback(on_train_batch_end=lambda batch, logs: seen.append("val_loss" in logs))
    stop = keras.callbacks.EarlyStopping(monitor="val_loss", patience=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # EarlyStopping: "val_loss which is not available"
        history = model.fit(train, steps_per_epoch=6, epochs=2, callbacks=[_nb04_writes_val_loss(keras), spy, stop],
                            shuffle=False, verbose=0).history
    assert seen == [False, True] * 6 and list(history) == ["loss"] and stop.best is None, lesson(
        NB04, "KeepBest on a model like yours",
        "a callback listed after one that writes logs['val_loss'] in on_train_batch_end sees it, while History "
        "and EarlyStopping read the epoch's logs, rebuilt from the compiled metrics, without it")


def test_model_checkpoint_best_only_at_a_step_fails_in_the_first_epoch(tmp_path):
    keras, tf, model, train, val = _nb04_keras()
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    checkpoint = keras.callbacks.ModelCheckpoint(str(tmp_path / "best.keras"), monitor="val_loss",
                                                 save_best_only=True, save_freq=2)
    try:
        model.fit(train, steps_per_epoch=6, epochs=1, callbacks=[_nb04_writes_val_loss(keras), checkpoint],
                  shuffle=False, verbose=0)
        failed = None
    except TypeError as error:  # MonitorCallback picks min or max only in on_epoch_end
        failed = str(error)
    assert failed is not None and "not callable" in failed, lesson(
        DOCS04, "Mid-epoch val_loss and Keras's own callbacks",
        "ModelCheckpoint(save_freq=K, save_best_only=True) raises a TypeError at a save in the first epoch "
        f"(got: {failed!r}); if it saves now, the notebook can say so")


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
        DOCS04, "Strategies", "Keras loss objects with a mean reduction return the batch mean divided by the number of "
        "replicas inside a strategy scope; helpers.validation multiplies it back (update it, or it will be off)")


# --------------------------------------------------------------------------- 05 network snapshots

NB05 = "notebooks/05_network_snapshots.ipynb"
DOCS05 = "docs/snapshots.md"


def _bn_model_05(seed: int = 0):
    import keras

    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(6, activation="relu"),
                             keras.layers.BatchNormalization(), keras.layers.Dense(1)])


def _data_05():
    import numpy as np

    rng = np.random.default_rng(0)
    return rng.normal(1.0, 2.0, size=(16, 4)).astype("float32"), rng.normal(size=(16, 1)).astype("float32")


def test_05_use_ema_averages_the_trainable_variables_only():
    import keras
    import numpy as np
    import tensorflow as tf

    model, (x, y) = _bn_model_05(), _data_05()
    optimizer = keras.optimizers.Adam(0.05, use_ema=True, ema_momentum=0.9)
    for _ in range(3):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(x, training=True) - y) ** 2)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    averages = [v for v in optimizer.variables if v.path.endswith("_average")]
    statistics = [v for v in model.variables if "moving" in v.path]
    before = [v.numpy().copy() for v in statistics]
    optimizer.finalize_variable_values(model.trainable_variables)
    fact = ("an optimizer's use_ema=True keeps one average per trainable variable and none for "
            "BatchNorm's moving statistics (finalize_variable_values leaves them as they are)")
    section = "Keras' `use_ema`"
    assert len(averages) == len(model.trainable_variables) and statistics, lesson(NB05, section, fact)
    assert not any("moving" in v.path for v in averages), lesson(NB05, section, fact)
    assert all(np.array_equal(b, v.numpy()) for b, v in zip(before, statistics)), lesson(NB05, section, fact)


def test_05_use_ema_is_a_soft_update_with_tau_one_minus_momentum_starting_from_a_copy():
    import keras
    import numpy as np
    import tensorflow as tf

    model, (x, y) = _bn_model_05(), _data_05()
    optimizer = keras.optimizers.SGD(0.1, use_ema=True, ema_momentum=0.8)
    expected = None
    for _ in range(4):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(x, training=True) - y) ** 2)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        now = [v.numpy() for v in model.trainable_variables]
        expected = now if expected is None else [0.8 * e + 0.2 * w for e, w in zip(expected, now)]
    averages = [v.numpy() for v in optimizer.variables if v.path.endswith("_average")]
    assert all(np.allclose(a, e, rtol=1e-5, atol=1e-6) for a, e in zip(averages, expected)), lesson(
        NB05, "Keras' `use_ema`",
        "use_ema's average after each step is average = m * average + (1 - m) * weight, a soft update with "
        "tau = 1 - ema_momentum, and the first step copies the weights")


def test_05_fit_reports_what_a_custom_train_step_puts_in_a_listed_metric_and_use_ema_overwrites():
    import keras
    import numpy as np
    import tensorflow as tf

    class RawLoss(keras.Model):  # returns its loss without a metric: what a first attempt writes
        def __init__(self, net, **kwargs):
            super().__init__(**kwargs)
            self.net = net

        def train_step(self, data):
            x, y = data
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((self.net(x, training=True) - y) ** 2)
            self.optimizer.apply_gradients(zip(tape.gradient(loss, self.trainable_variables), self.trainable_variables))
            return {"loss": loss}

    x, y = _data_05()
    raw = RawLoss(_bn_model_05())
    raw.compile(optimizer=keras.optimizers.SGD(0.01))
    reported = raw.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0).history["loss"][0]
    assert reported == 0.0, lesson(
        NB05, "Worked example 2, the source question: past B one update behind",
        "a custom train_step's raw {'loss': loss} is reported as the compiled loss tracker's 0.0, so WithPastB "
        f"returns its loss as 'step_loss' (now fit reports {reported} for 'loss')")
    model = _bn_model_05()
    model.compile(keras.optimizers.Adam(0.01, use_ema=True, ema_momentum=0.9), loss="mse")
    model.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0)
    averages = [v for v in model.optimizer.variables if v.path.endswith("_average")]
    assert all(np.array_equal(a.numpy(), w.numpy()) for a, w in zip(averages, model.trainable_variables)), lesson(
        NB05, "Keras' `use_ema`", "fit with use_ema=True ends by writing the averages into the model")


def test_05_clone_model_does_not_copy_weights():
    import keras
    import numpy as np

    model = _bn_model_05()
    for variable in model.variables:
        variable.assign(np.full(variable.shape, 0.5, "float32"))
    clone = keras.models.clone_model(model)
    copied = [np.array_equal(a.numpy(), b.numpy()) for a, b in zip(model.variables, clone.variables)]
    assert not all(copied) and len(clone.variables) == len(model.variables), lesson(
        NB05, "The question",
        "keras.models.clone_model copies the architecture with fresh values, not the weights")


def test_05_set_weights_cannot_run_inside_a_tf_function():
    import keras
    import tensorflow as tf

    model = _bn_model_05()
    copy = keras.models.clone_model(model)

    @tf.function
    def compiled():
        copy.set_weights(model.get_weights())

    try:
        compiled()
        raised = "nothing"
    except Exception as error:  # noqa: BLE001 - the type is the fact
        raised = type(error).__name__
    assert raised == "NotImplementedError", lesson(
        NB05, "Keras' `use_ema`",
        f"set_weights(get_weights()) fails inside a tf.function with NotImplementedError (now: {raised})")


def test_05_a_stateful_rnns_states_are_neither_variables_nor_weights():
    import keras
    import numpy as np

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input(batch_shape=(2, 5, 3)), keras.layers.LSTM(4, stateful=True)])
    sequence = np.random.default_rng(0).normal(size=(2, 5, 3)).astype("float32")
    model(sequence)
    states = {id(v) for v in model.layers[0].states}
    fact = ("a stateful RNN's states are in layer.states, not in model.variables nor get_weights(), so "
            "set_weights(get_weights()) leaves them behind (helpers.snapshots walks them separately)")
    assert len(states) == 2 and not states & {id(v) for v in model.variables}, lesson(
        DOCS05, "Making the copy complete (`make_complete_sync`) and what it cannot reach", fact)
    copy = keras.models.clone_model(model)
    copy.set_weights(model.get_weights())
    assert not np.array_equal(copy(sequence).numpy(), model(sequence).numpy()), lesson(
        DOCS05, "Making the copy complete (`make_complete_sync`) and what it cannot reach", fact)


def test_05_a_default_tape_watches_a_frozen_models_variables():
    import tensorflow as tf

    model, (x, _) = _bn_model_05(), _data_05()
    model.trainable = False
    with tf.GradientTape() as tape:
        out = tf.reduce_sum(model(x, training=False))
    grads = tape.gradient(out, model.variables)
    assert sum(g is not None for g in grads) == 6 and model.trainable_variables == [], lesson(
        NB05, "Worked example 2, the source question: past B one update behind", "model.trainable = False does not stop a default GradientTape from computing "
        "gradients for the model's weights (6 of 8 variables of a Dense-BatchNorm-Dense net)")


# --------------------------------------------------------------------------- several workers (issue 23)
# One cluster of two local workers (helpers.workers.run_workers) checks every fact at once; the
# facts are taught in docs/multi-worker.md (notebook 02's "Add these lines only if your case is one of these" covers several GPUs).

MULTI = "notebooks/02_gradient_accumulation.ipynb"
MULTI_DOCS = "docs/multi-worker.md"


def _multi_worker_facts(marker: str) -> dict:
    """Runs on each of two workers: what Keras and TensorFlow do under MultiWorkerMirroredStrategy."""
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()  # before any other TensorFlow op
    import os
    import signal
    import time
    from pathlib import Path

    import keras
    import numpy as np

    from helpers.workers import this_worker

    def failure(call) -> str:
        try:
            call()
            return "ran"
        except Exception as error:  # noqa: BLE001 - the type and the message are the facts
            return f"{type(error).__name__}: {error}"

    x, y = np.ones((16, 3), "float32"), np.zeros((16, 1), "float32")
    facts = {}
    with strategy.scope():
        fitted = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
        fitted.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    facts["fit"] = failure(lambda: fitted.fit(x, y, batch_size=8, epochs=1, verbose=0))
    with strategy.scope():
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
        builtin = keras.optimizers.SGD(0.1, gradient_accumulation_steps=2)
        builtin.build(model.trainable_variables)

    def replica_step(xb, yb):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(yb - model(xb, training=True)))
        builtin.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))

    step = tf.function(lambda xb, yb: strategy.run(replica_step, args=(xb, yb)))
    facts["builtin"] = failure(lambda: step(tf.constant(x[:8]), tf.constant(y[:8])))
    facts["shards"] = {}
    for policy in ("AUTO", "OFF"):
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = getattr(tf.data.experimental.AutoShardPolicy, policy)
        batches = strategy.experimental_distribute_dataset(tf.data.Dataset.range(8).batch(4).with_options(options))
        facts["shards"][policy] = [strategy.experimental_local_results(b)[0].numpy().tolist() for b in batches]
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(1.0)
    facts["sigterm"] = "still running"
    if this_worker()[0] == 1:  # stalls: no collective until worker 0 has given up on it
        deadline = time.monotonic() + 300
        while not Path(marker).exists() and time.monotonic() < deadline:
            time.sleep(0.1)
    else:
        options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=5)
        facts["stalled_peer"] = failure(lambda: strategy.run(
            lambda: tf.distribute.get_replica_context().all_reduce("SUM", tf.ones([]), options=options)))
        Path(marker).write_text("done")
    return facts


def test_multi_worker_fit_builtin_accumulation_sharding_sigterm_and_collective_time_out(tmp_path):
    from helpers.workers import run_workers

    first, second = run_workers(_multi_worker_facts, 2, args=(str(tmp_path / "gave_up"),), timeout=600)
    assert first["fit"].startswith("ValueError: Attempt to convert a value (PerReplica"), lesson(
        MULTI_DOCS, "Built-ins that fail here (tripwires in `tests/test_upstream.py`)", "model.fit fails under MultiWorkerMirroredStrategy (keras-team/keras#20585); "
        "it gave: " + first["fit"][:200])
    assert first["builtin"].startswith("RuntimeError") and "merge_call" in first["builtin"], lesson(
        MULTI_DOCS, "Built-ins that fail here (tripwires in `tests/test_upstream.py`)", "Keras' gradient_accumulation_steps fails in a custom step under "
        "MultiWorkerMirroredStrategy ('merge_call called while defining a new graph'); it gave: "
        + first["builtin"][:200])
    assert (first["shards"]["AUTO"], second["shards"]["AUTO"]) == ([[0, 1], [4, 5]], [[2, 3], [6, 7]]), lesson(
        MULTI_DOCS, "Data: what \"every worker reads all of it\" costs", "experimental_distribute_dataset with AUTO sharding gives each worker its part of every "
        f"global batch of in-memory data (got {first['shards']['AUTO']}, {second['shards']['AUTO']})")
    assert first["shards"]["OFF"] == second["shards"]["OFF"] == [[0, 1], [2, 3], [4, 5], [6, 7]], lesson(
        MULTI_DOCS, "Data: what \"every worker reads all of it\" costs", "with AutoShardPolicy.OFF every worker reads all the data (each example twice in the "
        f"cluster; got {first['shards']['OFF']})")
    assert first["sigterm"] == second["sigterm"] == "still running", lesson(
        MULTI_DOCS, "Two workers on this machine: `helpers.workers.run_workers`", "a worker with a MultiWorkerMirroredStrategy survives SIGTERM, "
        "so helpers.workers ends workers with SIGKILL (SIGTERM would do now)")
    assert first["stalled_peer"].startswith("DeadlineExceededError"), lesson(
        MULTI_DOCS, "What a collective time-out buys", "an all-reduce with CommunicationOptions(timeout_seconds=5) "
        "whose peer stalls raises DeadlineExceededError; it gave: " + first["stalled_peer"][:200])


# --------------------------------------------------------------------------- the labels themselves

def _headings(path):
    import json
    import re

    if path.suffix == ".ipynb":
        text = "\n".join("".join(cell["source"]) for cell in json.loads(path.read_text())["cells"]
                         if cell["cell_type"] == "markdown")
    else:
        text = path.read_text()
    return {match.group(1).strip() for match in re.finditer(r"^#+\s+(.*)$", text, re.MULTILINE)}


def test_every_lesson_names_a_section_that_exists():
    """Each tripwire's message names a heading (or source line) that is there today."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    tree = ast.parse(Path(__file__).read_text())
    names = {node.targets[0].id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
             and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Constant)}
    labels, stale = [], []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "lesson":
            where, section = node.args[0], node.args[1]
            where = names[where.id] if isinstance(where, ast.Name) else ast.literal_eval(where)
            if isinstance(section, ast.Name):  # a local variable: its one assignment in the test
                section = next(n.value for n in ast.walk(tree) if isinstance(n, ast.Assign)
                               and getattr(n.targets[0], "id", None) == section.id)
            section = ast.literal_eval(section)
            labels.append((where, section))
            path = root / where
            found = section in path.read_text() if path.suffix == ".py" else section in _headings(path)
            if not found:
                stale.append(f"line {node.lineno}: {where}, '{section}'")
    assert len(labels) > 40 and not stale, "no such section:\n" + "\n".join(stale)
