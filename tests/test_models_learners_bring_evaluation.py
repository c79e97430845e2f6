"""Issue 22, evaluation and one-batch losses: validation.evaluate / train_with_validation,
decoupling's objective and snapshots.make_train_step on models a learner brings, each compared
with plain Keras (``model.evaluate``, ``fit`` one step, ``model.compute_loss`` under a tape)."""

from __future__ import annotations

import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from helpers import decoupling, snapshots
from helpers import validation as V
from tests.learner_models import Counter, TwoHeads, two_outputs

RNG = np.random.default_rng(7)
X = RNG.normal(size=(10, 3)).astype("float32")
YA = RNG.normal(size=(10, 1)).astype("float32")
YB = RNG.normal(size=(10, 2)).astype("float32")
LABELS = (X[:, :2] > 0).astype("float32")
MSE, MAE = keras.losses.MeanSquaredError(), keras.losses.MeanAbsoluteError()


def dataset(*parts, batch=4):  # 10 examples: batches of 4, 4, 2
    return tf.data.Dataset.from_tensor_slices(parts).batch(batch)


def keras_evaluate(model, data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model.evaluate(data, verbose=0, return_dict=True)


def two_heads(width_b: int = 2):
    keras.utils.set_random_seed(2)
    model = TwoHeads(width_b)
    model(X)
    return model


def named(kind="list"):
    return two_outputs(kind, seed=3)


# --------------------------------------------------------------------------- several outputs


@pytest.mark.parametrize("width_b", [1, 2])
def test_a_tuple_output_model_is_evaluated_as_keras_does(width_b):
    model = two_heads(width_b)
    y = (YA, YB[:, :width_b])
    ours = V.evaluate(model, dataset(X, y), MSE)
    model.compile(loss=MSE)
    theirs = keras_evaluate(model, dataset(X, y))
    assert ours["loss"] == pytest.approx(theirs["loss"], rel=1e-5)  # before: half of it (1 wide), an error (2)
    assert sorted(ours) == ["examples", "loss", "output_0_loss", "output_1_loss"]
    assert ours["output_0_loss"] + ours["output_1_loss"] == pytest.approx(ours["loss"], rel=1e-5)


@pytest.mark.parametrize("kind", ["list", "dict"])
def test_losses_weights_and_metrics_per_output_match_keras(kind):
    model = named(kind)
    y = {"a": YA, "b": YB} if kind == "dict" else (YA, YB)
    losses, weights = {"a": MSE, "b": MAE}, {"a": 2.0, "b": 0.5}
    metrics = {"a": [keras.metrics.MeanAbsoluteError()], "b": [keras.metrics.MeanSquaredError()]}
    ours = V.evaluate(model, dataset(X, y, batch=10), losses, metrics, loss_weights=weights)
    model.compile(loss=losses, loss_weights=weights, metrics={"a": [keras.metrics.MeanAbsoluteError()],
                                                               "b": [keras.metrics.MeanSquaredError()]})
    theirs = keras_evaluate(model, dataset(X, y, batch=10))  # one batch: Keras' per-output trackers agree
    for key in ("loss", "a_loss", "b_loss", "a_mean_absolute_error", "b_mean_squared_error"):
        assert ours[key] == pytest.approx(theirs[key], rel=1e-5), key


def test_training_a_tuple_output_model_equals_fit():
    ours, theirs = two_heads(), two_heads()
    theirs.compile(optimizer=keras.optimizers.SGD(0.1), loss=[MSE, MAE], loss_weights=[1.0, 3.0])
    theirs.fit(X, (YA, YB), batch_size=4, epochs=1, shuffle=False, verbose=0)
    history = V.train_with_validation(ours, keras.optimizers.SGD(0.1), [MSE, MAE], dataset(X, (YA, YB)),
                                      dataset(X, (YA, YB)), steps=3, every=3, loss_weights=[1.0, 3.0])
    assert max(float(np.abs(a - b).max()) for a, b in zip(ours.get_weights(), theirs.get_weights())) < 1e-6
    assert history.val[-1]["loss"] == pytest.approx(keras_evaluate(theirs, dataset(X, (YA, YB)))["loss"], rel=1e-5)


# --------------------------------------------------------------------------- metrics of any shape, unique keys


def test_metric_keys_are_unique_and_never_hide_the_loss():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    metrics = [lambda t, p: tf.reduce_mean(t - p), lambda t, p: tf.reduce_mean(p),
               keras.metrics.MeanSquaredError(name="loss")]
    ours = V.evaluate(model, dataset(X, LABELS), MSE, metrics)
    assert sorted(ours) == ["examples", "lambda", "lambda_1", "loss", "loss_1"]  # before: one '<lambda>', no loss
    pred = model(X).numpy()
    assert ours["lambda"] == pytest.approx(np.mean(LABELS - pred), rel=1e-5, abs=1e-7)
    assert ours["lambda_1"] == pytest.approx(np.mean(pred), rel=1e-5, abs=1e-7)
    assert ours["loss"] == pytest.approx(np.mean((LABELS - pred) ** 2), rel=1e-5)
    assert ours["loss_1"] == pytest.approx(ours["loss"], rel=1e-5)


def test_metrics_with_a_value_per_example_or_per_class_match_keras():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, activation="sigmoid")])
    ours = V.evaluate(model, dataset(X, LABELS), MSE, [keras.metrics.mean_absolute_error, keras.metrics.F1Score()])
    model.compile(loss=MSE, metrics=[keras.metrics.mean_absolute_error, keras.metrics.F1Score()])
    theirs = keras_evaluate(model, dataset(X, LABELS))  # before: both crashed after the pass
    assert ours["mean_absolute_error"] == pytest.approx(theirs["mean_absolute_error"], rel=1e-5)
    assert isinstance(ours["f1_score"], np.ndarray) and ours["f1_score"].shape == (2,)
    np.testing.assert_allclose(ours["f1_score"], theirs["f1_score"], rtol=1e-5)


def test_a_per_example_metric_on_a_masked_output_counts_the_unmasked_entries_as_keras_does():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Embedding(6, 2, mask_zero=True),
                              keras.layers.Dense(1)])
    tokens = np.array([[1, 2, 0, 0], [3, 0, 0, 0], [1, 1, 1, 1], [2, 5, 4, 0]] * 2 + [[5, 0, 0, 0]] * 2)
    targets = RNG.normal(size=(10, 4, 1)).astype("float32")
    ours = V.evaluate(model, dataset(tokens, targets), MSE, [keras.metrics.mean_absolute_error])
    model.compile(loss=MSE, metrics=[keras.metrics.mean_absolute_error])
    theirs = keras_evaluate(model, dataset(tokens, targets))
    assert ours["loss"] == pytest.approx(theirs["loss"], rel=1e-5)
    assert ours["mean_absolute_error"] == pytest.approx(theirs["mean_absolute_error"], rel=1e-5)


def test_metrics_that_do_not_fit_the_outputs_are_named_before_anything_runs():
    model = named()
    before = [w.copy() for w in model.get_weights()]
    with pytest.raises(ValueError, match=r"the model has 2 outputs \['a', 'b'\]: give metrics as a list"):
        V.evaluate(model, dataset(X, (YA, YB)), MSE, [MAE, MAE, MAE])
    with pytest.raises(ValueError, match=r"metrics has key\(s\) \['c'\]"):
        V.evaluate(model, dataset(X, (YA, YB)), MSE, {"c": MAE})
    with pytest.raises(TypeError, match=r"metrics\['a'\] \('mae'\) is neither"):
        V.evaluate(model, dataset(X, (YA, YB)), MSE, {"a": "mae"})
    assert all(np.array_equal(a, b) for a, b in zip(before, model.get_weights()))


# --------------------------------------------------------------------------- denominators


def test_mean_with_sample_weight_and_ignore_class_are_evaluated_as_keras_does():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4)])
    labels = np.array([0, 1, -1, 2, -1, 3, 3, -1, 0, 1])
    weights = np.linspace(0.5, 3.0, 10).astype("float32")
    for loss, data in [
        (keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=-1), dataset(X, labels)),
        (keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="mean_with_sample_weight"),
         dataset(X, labels.clip(0), weights)),
    ]:
        ours = V.evaluate(model, data, loss)
        model.compile(loss=loss)
        assert ours["loss"] == pytest.approx(keras_evaluate(model, data)["loss"], rel=1e-5)


# --------------------------------------------------------------------------- one batch: decoupling, make_train_step


def test_the_one_batch_objective_of_a_two_output_model_is_kerass_loss():
    model = named()
    model.compile(loss={"a": MSE, "b": MAE}, loss_weights={"a": 1.0, "b": 4.0})
    with tf.GradientTape() as tape:
        expected = model.compute_loss(X, (YA, YB), model(X, training=False))
    expected_grads = tape.gradient(expected, model.trainable_variables)
    compute = decoupling.LossAndGradient(model, {"a": MSE, "b": MAE}, loss_weights={"a": 1.0, "b": 4.0})
    loss, grads = compute(X, (YA, YB))  # before: Keras stacked the heads ("Dimensions must be equal")
    assert float(loss) == pytest.approx(float(expected), rel=1e-6)
    assert max(float(np.abs(g - e).max()) for g, e in zip(grads, expected_grads)) < 1e-6


def test_make_train_step_of_a_tuple_output_model_equals_fit():
    ours, theirs = two_heads(), two_heads()
    theirs.compile(optimizer=keras.optimizers.SGD(0.1), loss=MSE)
    theirs.fit(X, (YA, YB), batch_size=10, epochs=1, shuffle=False, verbose=0)
    snapshots.make_train_step(ours, MSE, keras.optimizers.SGD(0.1))(X, (YA, YB))  # before: 0.5x fit's step
    assert max(float(np.abs(a - b).max()) for a, b in zip(ours.get_weights(), theirs.get_weights())) < 1e-6


def test_minimize_on_batch_refuses_a_constrained_model_before_it_moves():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1, kernel_constraint="non_neg")])
    model(X)
    before = [w.copy() for w in model.get_weights()]
    with pytest.raises(ValueError, match="kernel.*constraint.*SciPy"):  # before: moved past the constraint
        decoupling.minimize_on_batch(model, MSE, (X, -10 * X[:, :1]), max_iterations=5)
    assert all(np.array_equal(a, b) for a, b in zip(before, model.get_weights()))


# --------------------------------------------------------------------------- models that bring their own step


class OwnLoss(keras.Model):
    """fit minimises what compute_loss returns: here twice the compiled loss."""

    def __init__(self):
        super().__init__()
        self.dense = keras.layers.Dense(1)

    def call(self, x):
        return self.dense(x)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        return 2.0 * super().compute_loss(x, y, y_pred, sample_weight, training=training)


def test_a_model_with_its_own_compute_loss_is_refused_by_every_helper_that_claims_fits_loss():
    from helpers import accumulation as acc

    keras.utils.set_random_seed(0)
    model = OwnLoss()
    model(X)
    model.compile(loss=MSE)
    before = [w.copy() for w in model.get_weights()]
    calls = {
        "evaluate": lambda: V.evaluate(model, dataset(X, YA), MSE),  # before: half of model.evaluate's number
        "train_with_validation": lambda: V.train_with_validation(model, keras.optimizers.SGD(0.1), MSE,
                                                                 dataset(X, YA).repeat(), None, steps=1, every=1),
        "train_accumulated": lambda: acc.train_accumulated(model, keras.optimizers.SGD(0.1), MSE, [(X, YA)], 1,
                                                           verbose=False),
        "make_train_step": lambda: snapshots.make_train_step(model, MSE, keras.optimizers.SGD(0.1)),
        "LossAndGradient": lambda: decoupling.LossAndGradient(model, MSE),
    }
    for name, call in calls.items():
        with pytest.raises(ValueError, match="OwnLoss overrides compute_loss"):
            call()
    assert all(np.array_equal(a, b) for a, b in zip(before, model.get_weights()))


def test_a_model_that_writes_its_state_in_inference_is_refused_by_the_one_batch_objective():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), Counter(), keras.layers.Dense(1)])
    model(X)
    before = [w.copy() for w in model.get_weights()]
    with pytest.raises(ValueError, match="writes its own variables when it is called with training=False"):
        decoupling.BatchObjective(model, MSE, (X, YA))  # before: a different loss at every call, same point
    assert all(np.array_equal(a, b) for a, b in zip(before, model.get_weights()))
