"""Issue 22: the helpers on models a learner brings after the notebooks, each compared with plain
Keras on the same model and data (``fit`` one step from the same weights, ``evaluate``, a full-batch
tape, a direct call). Each case either gives Keras' number or is refused, before any state
changes, with an error that names it. Accumulation here; evaluation and one-batch losses in
tests/test_models_learners_bring_evaluation.py, snapshots and other state in
tests/test_models_learners_bring_state.py."""

from __future__ import annotations

import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from helpers import accumulation as acc
from helpers import molecules
from tests.learner_models import TwoHeads, two_outputs

RNG = np.random.default_rng(22)
X = RNG.normal(size=(8, 3)).astype("float32")
YA = RNG.normal(size=(8, 1)).astype("float32")
YB = RNG.normal(size=(8, 2)).astype("float32")
W = np.array([1, 1, 1, 1, 5, 5, 5, 5], "float32")
MSE, MAE = keras.losses.MeanSquaredError(), keras.losses.MeanAbsoluteError()


def gap(a, b) -> float:
    return max(float(np.max(np.abs(np.asarray(u, np.float64) - np.asarray(v, np.float64)))) for u, v in zip(a, b))


def functional(kind: str) -> keras.Model:
    return two_outputs(kind, hidden=True)


def twins(make):
    """Two models with the same weights."""
    first, second = make(), make()
    first(X), second(X)
    second.set_weights(first.get_weights())
    return first, second


def fit_once(model, loss, y, *, loss_weights=None, sample_weight=None, lr=0.1, **optimizer):
    model.compile(optimizer=keras.optimizers.SGD(lr, **optimizer), loss=loss, loss_weights=loss_weights)
    return model.fit(X, y, sample_weight=sample_weight, batch_size=len(X), epochs=1, shuffle=False,
                     verbose=0).history["loss"][0]


# --------------------------------------------------------------------------- several outputs


CASES = {
    # name: (model factory, loss_fn, loss_weights, y)
    "tuple outputs, one loss": (TwoHeads, MSE, None, (YA, YB)),
    "tuple outputs of one shape": (lambda: TwoHeads(1), MSE, None, (YA, 2 * YA)),  # before: 0.5x, no error
    "list outputs, list of losses, weights": (lambda: functional("list"), [MSE, MAE], [1.0, 0.25], [YA, YB]),
    "dict outputs, dict of losses, weights": (lambda: functional("dict"), {"a": MSE, "b": MAE},
                                              {"a": 2.0, "b": 0.5}, {"a": YA, "b": YB}),
    "dict outputs, one output without loss": (lambda: functional("dict"), {"a": MSE, "b": None}, None,
                                              {"a": YA, "b": YB}),
    "list outputs, y_true as a dict": (lambda: functional("list"), {"a": MSE, "b": MAE}, None, {"a": YA, "b": YB}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_several_outputs_update_and_report_as_fit_does(case):
    make, loss, weights, y = CASES[case]
    ours, theirs = twins(make)
    parts = acc.micro_batches((X, y), [5, 3])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a head without a loss gets no gradient: Keras warns
        reported = fit_once(theirs, loss, y, loss_weights=weights)
        history = acc.train_accumulated(ours, keras.optimizers.SGD(0.1), loss, parts, 2, loss_weights=weights,
                                        verbose=False)
    assert gap(ours.get_weights(), theirs.get_weights()) < 1e-6  # before: 0.5x fit's update (tuple case)
    assert history["loss"][0] == pytest.approx(reported, rel=1e-5)


def test_outputs_and_losses_that_do_not_match_are_named_before_anything_changes():
    model = functional("list")
    model(X)
    before, optimizer = [w.copy() for w in model.get_weights()], keras.optimizers.SGD(0.1)
    wrong = [
        ([MSE, MAE, MSE], (YA, YB), r"loss_fn has 3 entries but the model has 2 output\(s\) \['a', 'b'\]"),
        ({"a": MSE, "c": MAE}, (YA, YB), r"loss_fn has key\(s\) \['c'\] that name no output"),
        (MSE, YA, r"the model has 2 outputs \['a', 'b'\] but y_true is a single"),
        ([MSE, MAE], (YA, YB, YB), "y_true has 3 entries"),
    ]
    for loss, y, match in wrong:
        with pytest.raises(ValueError, match=match):
            acc.train_accumulated(model, optimizer, loss, [(X, y)], 1, verbose=False)
    with pytest.raises(TypeError, match="loss_weights must be a number"):
        acc.accumulated_gradients(model, [MSE, MAE], [(X, (YA, YB))], loss_weights=["1", 2.0])
    assert gap(before, model.get_weights()) == 0.0 and not optimizer.built


# --------------------------------------------------------------------------- what the loss divides by


def test_mean_with_sample_weight_reports_the_full_batch_loss():
    keras.utils.set_random_seed(0)
    make = lambda: keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])  # noqa: E731
    ours, theirs = twins(make)
    loss = keras.losses.MeanSquaredError(reduction="mean_with_sample_weight")
    reported = fit_once(theirs, loss, YA, sample_weight=W)
    history = acc.train_accumulated(ours, keras.optimizers.SGD(0.1), loss, acc.micro_batches((X, YA, W), [4, 4]),
                                    2, verbose=False)
    assert history["loss"][0] == pytest.approx(reported, rel=1e-5)  # before: weighted by examples, not weights
    assert gap(ours.get_weights(), theirs.get_weights()) < 1e-6


def test_a_masked_sequence_output_is_split_by_its_unmasked_entries():
    def make():
        keras.utils.set_random_seed(3)
        return keras.Sequential([keras.Input((4,)), keras.layers.Embedding(6, 3, mask_zero=True),
                                 keras.layers.Dense(5)])

    tokens = np.array([[1, 2, 0, 0], [3, 0, 0, 0], [1, 1, 1, 1], [2, 5, 4, 0], [5, 0, 0, 0], [4, 4, 0, 0]])
    labels = RNG.integers(0, 5, size=(6, 4))
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    ours, theirs = make(), make()
    theirs.compile(optimizer=keras.optimizers.SGD(0.5), loss=loss)
    reported = theirs.fit(tokens, labels, batch_size=6, verbose=0, shuffle=False).history["loss"][0]
    history = acc.train_accumulated(ours, keras.optimizers.SGD(0.5), loss,
                                    acc.micro_batches((tokens, labels), [2, 4]), 2, verbose=False)
    assert history["loss"][0] == pytest.approx(reported, rel=1e-5)  # before: refused ("Keras mask")
    assert gap(ours.get_weights(), theirs.get_weights()) < 1e-6


def test_ignore_class_is_split_by_the_labels_it_keeps():
    def make():
        keras.utils.set_random_seed(4)
        return keras.Sequential([keras.Input((3,)), keras.layers.Dense(4)])

    labels = np.array([0, 1, -1, -1, -1, 2, 3, -1])  # the first micro-batch of 5 keeps 2 labels, the second 2
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=-1)
    ours, theirs = twins(make)
    reported = fit_once(theirs, loss, labels)
    history = acc.train_accumulated(ours, keras.optimizers.SGD(0.1), loss, acc.micro_batches((X, labels), [5, 3]),
                                    2, verbose=False)
    assert history["loss"][0] == pytest.approx(reported, rel=1e-5)  # before: weighted by examples
    assert gap(ours.get_weights(), theirs.get_weights()) < 1e-6


class Penalised(keras.layers.Layer):
    """Adds a mean over examples to model.losses in every forward pass."""

    def call(self, x):
        self.add_loss(0.1 * tf.reduce_mean(tf.square(x)))
        return x


def test_losses_that_do_not_split_are_refused_before_anything_changes():
    model = functional("list")
    model(X)
    before, optimizer = [w.copy() for w in model.get_weights()], keras.optimizers.SGD(0.1)
    weighted = keras.losses.MeanSquaredError(reduction="mean_with_sample_weight")
    rank_one = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1), keras.layers.Reshape(())])
    rank_one(X)
    regularised = keras.Sequential([keras.Input((3,)), Penalised(), keras.layers.Dense(1)])
    regularised(X)
    cases = [
        (model, [weighted, MSE], (X, (YA, YB), W), "outputs divide by different counts"),
        (rank_one, MSE, (X, YA[:, 0], W), "one number per batch"),
        (regularised, weighted, (X, YA, W), "come from the forward pass"),
    ]
    for net, loss, batch, match in cases:
        with pytest.raises(ValueError, match=match):
            acc.train_accumulated(net, optimizer, loss, acc.micro_batches(batch, [4, 4]), 2, verbose=False)
    assert gap(before, model.get_weights()) == 0.0 and not optimizer.built


# --------------------------------------------------------------------------- inputs the workbook uses


def test_ragged_micro_batches_give_the_full_batch_gradient():
    model = molecules.PerAtomEnergy(hidden=4)
    x, y = next(iter(molecules.molecule_dataset(12, batch_size=12)))
    loss = keras.losses.MeanSquaredError(dtype="float64")
    with tf.GradientTape() as tape:
        full = loss(y, model(x, training=True))
    expected = tape.gradient(full, model.trainable_variables)
    got = acc.accumulated_gradients(model, loss, acc.micro_batches((x, y), [5, 5, 2]))  # before: "no len()"
    assert gap(got, expected) < 1e-9
    history = acc.train_accumulated(model, keras.optimizers.SGD(0.01), loss,
                                    molecules.molecule_dataset(12, batch_size=5), 3, verbose=False)
    assert history["examples"] == [12]


@pytest.mark.parametrize("kind", ["list", "dict"])
def test_models_with_several_inputs_train_as_fit_does(kind):
    def make():
        keras.utils.set_random_seed(5)
        left, right = keras.Input((3,), name="left"), keras.Input((2,), name="right")
        out = keras.layers.Dense(1)(keras.layers.Concatenate()([left, right]))
        return keras.Model({"left": left, "right": right} if kind == "dict" else [left, right], out)

    right = RNG.normal(size=(8, 2)).astype("float32")
    x = {"left": X, "right": right} if kind == "dict" else [X, right]
    ours, theirs = make(), make()
    theirs.compile(optimizer=keras.optimizers.SGD(0.1), loss=MSE)
    theirs.fit(x, YA, batch_size=8, verbose=0, shuffle=False)
    acc.train_accumulated(ours, keras.optimizers.SGD(0.1), MSE, acc.micro_batches((x, YA), [3, 5]), 2,
                          verbose=False)  # before: "unhashable type" after the optimizer was built
    assert gap(ours.get_weights(), theirs.get_weights()) < 1e-6


# --------------------------------------------------------------------------- the optimizer's own rules


def test_loss_scale_factor_is_applied_and_undone_as_fit_does():
    keras.utils.set_random_seed(0)
    make = lambda: keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])  # noqa: E731
    ours, theirs = twins(make)
    fit_once(theirs, MSE, YA, loss_scale_factor=64.0)
    acc.train_accumulated(ours, keras.optimizers.SGD(0.1, loss_scale_factor=64.0), MSE,
                          acc.micro_batches((X, YA), [4, 4]), 2, verbose=False)
    assert gap(ours.get_weights(), theirs.get_weights()) < 1e-6  # before: 1/64 of fit's update


def test_constraints_are_applied_after_each_accumulated_update():
    keras.utils.set_random_seed(0)
    make = lambda: keras.Sequential([keras.Input((3,)), keras.layers.Dense(1, kernel_constraint="non_neg")])  # noqa
    ours, theirs = twins(make)
    fit_once(theirs, MSE, YA, lr=1.0)
    acc.train_accumulated(ours, keras.optimizers.SGD(1.0), MSE, acc.micro_batches((X, YA), [4, 4]), 2, verbose=False)
    assert gap(ours.get_weights(), theirs.get_weights()) < 1e-6 and float(np.min(ours.get_weights()[0])) >= 0.0


def test_an_unused_variable_has_no_gradient_in_a_later_window():
    v, spare = tf.Variable([1.0, 2.0]), tf.Variable([3.0])
    accumulator = acc.GradientAccumulator([v, spare])
    accumulator.add([tf.ones(2), tf.ones(1)], 2)
    assert accumulator.result()[1] is not None
    accumulator.reset()
    accumulator.add([tf.ones(2), None], 2)  # the next window does not use `spare`
    assert accumulator.result()[1] is None  # before: zeros, which AdamW's weight decay turns into a step
    optimizer = keras.optimizers.AdamW(0.1, weight_decay=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        optimizer.apply_gradients(zip(accumulator.result(), [v, spare]))
    assert float(spare.numpy()[0]) == 3.0
