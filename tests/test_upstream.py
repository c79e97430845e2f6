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
        NB02, "Proof", "Keras' gradient_accumulation_steps averages the micro-batches with equal weights, "
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
        NB02, "Proof", "Keras' accumulation window counter is global: the 5th micro-batch of epoch 1 "
        "shares a window with the 1st of epoch 2")


def test_keras_activity_regularisers_divide_by_the_batch_size():
    import keras
    import numpy as np
    import tensorflow as tf

    layer = keras.layers.Dense(2, kernel_initializer="ones", activity_regularizer=keras.regularizers.L2(1.0))
    for n in (2, 6):
        layer(tf.ones([n, 1]))
        assert np.isclose(float(layer.losses[0]), 2.0), lesson(
            NB02, "Proof", "Keras divides an activity regulariser by the batch size, so helpers.accumulation's "
            "accumulated_gradients docstring calls it exact (a mean over examples)")


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
        NB02, "Proof (MirroredStrategy row)", "Keras' built-in gradient accumulation fails under MirroredStrategy "
        "(keras-team/keras#20582); it printed: " + out.strip().splitlines()[0])
    assert "loss per replica [2, 1] 0.5" in out.splitlines() and "loss per replica [2] 1.0" in out.splitlines(), lesson(
        NB02, "Proof (MirroredStrategy row)", "a Keras loss object divides by the replica count inside "
        "strategy.run unless its per-example values are one number (helpers.accumulation undoes it by this rule)")


# --------------------------------------------------------------------------- 04 validation queues


# --------------------------------------------------------------------------- 05 network snapshots
