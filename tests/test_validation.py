"""helpers.validation: exactly once, same order, undisturbed training, evaluate == Keras == NumPy,
bad inputs (state left as it was), trace counts; and notebook 04's checker."""

from __future__ import annotations

import io
import contextlib
import warnings

import numpy as np
import pytest

from helpers import runtime

runtime.setup(seed=0)

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from helpers import tf1  # noqa: E402
from helpers import validation as V  # noqa: E402
from helpers.exercises import CheckFailed  # noqa: E402
from helpers.exercises.validation import check_mean_loss  # noqa: E402

BATCH = 8
VAL_CHUNKS, VAL_SEED = 3, 1  # 54 examples: 6 batches of 8 and one of 6 (checked below)


def make_model(seed: int = 0) -> keras.Model:
    keras.utils.set_random_seed(seed)
    return keras.Sequential([
        keras.Input((V.FEATURES,)),
        keras.layers.Dense(8, activation="relu"),
        keras.layers.Dense(1),
    ])


def val_ds(**kwargs) -> tf.data.Dataset:
    return V.generated_dataset(VAL_CHUNKS, BATCH, seed=VAL_SEED, **kwargs)


def train_ds() -> tf.data.Dataset:
    return V.generated_dataset(None, BATCH, seed=7)


def snapshot(model: keras.Model, optimizer: keras.optimizers.Optimizer | None = None) -> list[np.ndarray]:
    state = [v.numpy().copy() for v in model.weights]
    if optimizer is not None:
        state += [np.asarray(v.numpy()).copy() for v in optimizer.variables]
    return state


def same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


MSE = keras.losses.MeanSquaredError()


# --------------------------------------------------------------------------- data


def test_generated_dataset_size_is_unknown_and_not_a_multiple_of_the_batch():
    ds = val_ds()
    assert int(ds.cardinality()) == tf.data.UNKNOWN_CARDINALITY
    assert int(train_ds().cardinality()) == tf.data.INFINITE_CARDINALITY
    sizes = [len(ids) for _, _, ids in ds]
    n = sum(sizes)
    assert n % BATCH != 0
    assert sizes[:-1] == [BATCH] * (len(sizes) - 1) and 0 < sizes[-1] < BATCH


def test_generated_dataset_repeats_the_same_examples_each_pass():
    first, second = V.collect(val_ds()), V.collect(val_ds())
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(first[2], np.arange(len(first[2])))
    x, y = V.collect(val_ds(with_ids=False))
    np.testing.assert_array_equal(x, first[0])


@pytest.mark.parametrize("kwargs, error, match", [
    ({"chunks": -1}, ValueError, "chunks"),
    ({"chunks": 2.0}, TypeError, "chunks"),
    ({"batch_size": 0}, ValueError, "batch_size"),
    ({"batch_size": "8"}, TypeError, "batch_size"),
    ({"max_per_chunk": 0}, ValueError, "max_per_chunk"),
])
def test_generated_dataset_bad_arguments(kwargs, error, match):
    args = {"chunks": 3, "batch_size": 4} | kwargs
    with pytest.raises(error, match=match):
        V.generated_dataset(**args)


# --------------------------------------------------------------------------- evaluate


def test_evaluate_sees_every_example_once_in_the_same_order_every_pass():
    model, ds = make_model(), val_ds()
    n = len(V.collect(ds)[2])
    for _ in range(3):
        result = V.evaluate(model, ds, MSE, return_ids=True)
        assert result["examples"] == n
        np.testing.assert_array_equal(result["ids"], np.arange(n))
    assert V.eval_trace_count(model, MSE) == 1  # batches of 8 and the last one of 6: one trace


def test_evaluate_equals_keras_evaluate_and_numpy_mean():
    model, ds = make_model(), val_ds()
    mae = keras.metrics.MeanAbsoluteError()

    def abs_error(y_true, y_pred):  # a function metric, weighted like the loss
        return tf.reduce_mean(tf.abs(y_true - y_pred))

    ours = V.evaluate(model, ds, MSE, metrics=[mae, abs_error])

    x, y, _ = V.collect(ds)
    errors = model(x).numpy().astype(np.float64) - y
    assert ours["loss"] == pytest.approx(np.mean(errors**2), rel=1e-5)
    assert ours["mean_absolute_error"] == pytest.approx(np.mean(np.abs(errors)), rel=1e-5)
    assert ours["abs_error"] == pytest.approx(np.mean(np.abs(errors)), rel=1e-5)

    model.compile(loss=MSE, metrics=[keras.metrics.MeanAbsoluteError()])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "input ran out of data": how a pass of unknown size ends
        theirs = model.evaluate(ds.map(V.drop_ids), verbose=0, return_dict=True)
    assert ours["loss"] == pytest.approx(theirs["loss"], rel=1e-5)
    assert ours["mean_absolute_error"] == pytest.approx(theirs["mean_absolute_error"], rel=1e-5)

    # The data make the weighting matter: the plain average of batch means is 10x the tolerance away.
    batch_means = [np.mean(errors[i:i + BATCH] ** 2) for i in range(0, len(errors), BATCH)]
    assert abs(np.mean(batch_means) - ours["loss"]) > 1e-4 * ours["loss"]


def test_evaluate_refuses_an_infinite_dataset():
    model = make_model()
    with pytest.raises(ValueError, match="dataset is infinite"):
        V.evaluate(model, train_ds(), MSE)
    with pytest.raises(ValueError, match="infinite"):
        V.evaluate(model, val_ds().repeat(), MSE)


def test_evaluate_refuses_an_empty_dataset():
    model = make_model()
    with pytest.raises(ValueError, match="empty"):
        V.evaluate(model, V.generated_dataset(0, BATCH), MSE)  # size unknown: found out by the pass
    with pytest.raises(ValueError, match="empty"):
        V.evaluate(model, val_ds().take(0), MSE)  # size known to be 0


def test_evaluate_refuses_elements_that_do_not_fit_the_model():
    model = make_model()
    before = snapshot(model)
    with pytest.raises(ValueError, match="do not fit the model"):
        V.evaluate(model, V.generated_dataset(2, BATCH, features=3), MSE)
    with pytest.raises(ValueError, match=r"\(x, y\) pair"):
        V.evaluate(model, val_ds().map(lambda x, y, ids: x), MSE)
    assert same(before, snapshot(model))


def test_evaluate_bad_types():
    model = make_model()
    with pytest.raises(TypeError, match="model"):
        V.evaluate("model", val_ds(), MSE)
    with pytest.raises(TypeError, match="dataset"):
        V.evaluate(model, [1, 2], MSE)
    with pytest.raises(TypeError, match="loss_fn"):
        V.evaluate(model, val_ds(), "mse")
    with pytest.raises(TypeError, match="metrics"):
        V.evaluate(model, val_ds(), MSE, metrics=[3])


# --------------------------------------------------------------------------- train_with_validation


def test_training_with_validation_every_k_steps():
    model, ds = make_model(), val_ds()
    n = len(V.collect(ds)[2])
    history = V.train_with_validation(model, keras.optimizers.SGD(0.05), MSE, train_ds(), ds, steps=10, every=4)
    assert history.step == list(range(1, 11)) and len(history.train_loss) == 10
    assert history.eval_step == [0, 4, 8]
    assert [r["examples"] for r in history.val] == [n, n, n]
    for ids in history.val_ids:
        np.testing.assert_array_equal(ids, np.arange(n))  # every example once, same order, each pass
    assert history.traces == {"train": 1, "eval": 1}  # last validation batch smaller: no retrace
    assert history.val[0]["loss"] == pytest.approx(V.evaluate(make_model(), ds, MSE)["loss"], rel=1e-6)
    assert history.val_metric("loss")[-1] < history.val_metric("loss")[0]  # it learned something


def test_evaluation_does_not_disturb_the_training_stream():
    steps = 12
    with_eval, alone = make_model(), make_model()
    h1 = V.train_with_validation(with_eval, keras.optimizers.Adam(0.01), MSE, train_ds(), val_ds(), steps, every=3)
    h2 = V.train_with_validation(alone, keras.optimizers.Adam(0.01), MSE, train_ds(), None, steps, every=3)
    assert len(h1.val) == 5 and h2.val == []
    reference = np.concatenate([ids.numpy() for _, _, ids in train_ds().take(steps)])
    np.testing.assert_array_equal(np.concatenate(h1.train_ids), reference)
    np.testing.assert_array_equal(np.concatenate(h2.train_ids), reference)
    assert h1.train_loss == h2.train_loss
    assert same(snapshot(with_eval), snapshot(alone))


def test_training_continues_from_an_iterator():
    iterator = iter(train_ds())
    model = make_model()
    V.train_with_validation(model, keras.optimizers.SGD(0.01), MSE, iterator, val_ds(), steps=2, every=1)
    h = V.train_with_validation(model, keras.optimizers.SGD(0.01), MSE, iterator, None, steps=2, every=1)
    np.testing.assert_array_equal(h.train_ids[0], np.arange(2 * BATCH, 3 * BATCH))


@pytest.mark.parametrize("change, error, match", [
    ({"every": 0}, ValueError, "every must be >= 1"),
    ({"every": 1.5}, TypeError, "every"),
    ({"steps": 0}, ValueError, "steps must be >= 1"),
    ({"val_ds": "infinite"}, ValueError, "val_ds is infinite"),
    ({"val_ds": "empty"}, ValueError, "val_ds is empty"),
    ({"val_ds": "misfit"}, ValueError, "val_ds: .* do not fit the model"),
    ({"train_ds": "misfit"}, ValueError, "train_ds: .* do not fit the model"),
    ({"train_ds": "short"}, ValueError, "train_ds has 2 batches"),
    ({"train_ds": [1, 2]}, TypeError, "train_ds"),
    ({"optimizer": "sgd"}, TypeError, "optimizer"),
])
def test_bad_input_is_refused_before_any_training(change, error, match):
    model = make_model()
    optimizer = keras.optimizers.Adam(0.01)
    variables = model.trainable_variables  # one eager update: a trained state (slots, iterations)
    optimizer.apply_gradients([(tf.ones_like(v), v) for v in variables])
    before = snapshot(model, optimizer)
    iterations = int(optimizer.iterations)
    named = {
        "infinite": train_ds(),
        "empty": V.generated_dataset(0, BATCH),
        "misfit": V.generated_dataset(None if "train_ds" in change else 2, BATCH, features=3),
        "short": tf.data.Dataset.from_tensor_slices(V.collect(val_ds())).batch(BATCH).take(2),
    }
    args = {"optimizer": optimizer, "train_ds": train_ds(), "val_ds": val_ds(), "steps": 5, "every": 2}
    args |= {k: named.get(v, v) if isinstance(v, str) and k != "optimizer" else v for k, v in change.items()}
    with pytest.raises(error, match=match):
        V.train_with_validation(model, args["optimizer"], MSE, args["train_ds"], args["val_ds"],
                                steps=args["steps"], every=args["every"], at_start=False)
    assert same(before, snapshot(model, optimizer))
    assert int(optimizer.iterations) == iterations


def test_progress_display_when_verbose():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        V.train_with_validation(make_model(), keras.optimizers.SGD(0.01), MSE, train_ds(), val_ds(),
                                steps=2, every=1, verbose=True)
    assert "val_loss" in out.getvalue()


def test_history_plots(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    history = V.train_with_validation(make_model(), keras.optimizers.SGD(0.05), MSE, train_ds(), val_ds(),
                                      steps=6, every=3)
    ax = history.plot(smooth=2)
    assert len(ax.lines) == 2
    np.testing.assert_array_equal(ax.lines[1].get_xdata(), [0, 3, 6])


# --------------------------------------------------------------------------- TF1 baseline


@pytest.mark.parametrize("in_memory", [False, True])
def test_tf1_passes_agree_with_evaluate_and_restart_each_time(tmp_path, in_memory):
    model, ds = make_model(), val_ds(with_ids=False)
    ours = V.evaluate(model, ds, MSE)
    with tf1.ValidationPasses(model.get_weights(), chunks=VAL_CHUNKS, batch_size=BATCH, seed=VAL_SEED,
                         snapshot_dir=str(tmp_path), in_memory=in_memory) as passes:
        results = [passes.pass_new_session(), passes.pass_new_session(), passes.pass_same_session(), passes.pass_same_session()]
    for result in results:
        assert result["examples"] == ours["examples"]
        assert result["loss"] == pytest.approx(ours["loss"], rel=1e-5)


# --------------------------------------------------------------------------- checker


def reference_mean_loss(model, dataset, loss_fn):
    total, count = 0.0, 0
    for x, y in dataset:
        n = int(tf.shape(x)[0])
        total += float(loss_fn(y, model(x, training=False))) * n
        count += n
    return total / count


def test_checker_accepts_the_reference(capsys):
    check_mean_loss(reference_mean_loss)
    assert capsys.readouterr().out.startswith("Correct:")


def test_checker_rejects_the_stub():
    def stub(model, dataset, loss_fn):
        raise NotImplementedError()

    with pytest.raises(CheckFailed, match="not written yet"):
        check_mean_loss(stub)


def test_checker_explains_averaging_batch_means_without_the_answer():
    def batch_means(model, dataset, loss_fn):
        return float(np.mean([float(loss_fn(y, model(x))) for x, y in dataset]))

    with pytest.raises(CheckFailed) as failure:
        check_mean_loss(batch_means)
    hint = str(failure.value)
    assert "batch means" in hint and "4, 4, 2" in hint
    assert "2.6" not in hint and "* n" not in hint and "total" not in hint  # no expected value, no code


@pytest.mark.parametrize("wrong, match", [
    (lambda m, d, l: float(np.mean([float(l(y, m(x))) for x, y in list(d)[:-1]])), "leaves out the last"),
    (lambda m, d, l: reference_mean_loss(m, d, l) + 0 * len(list(d)), "2 passes"),
    (lambda m, d, l: None, "a Python float"),
    (lambda m, d, l: 2 * reference_mean_loss(m, d, l), "not the mean loss"),
])
def test_checker_rejects_other_wrong_answers(wrong, match):
    with pytest.raises(CheckFailed, match=match):
        check_mean_loss(wrong)
