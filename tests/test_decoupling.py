import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from helpers import decoupling as d
from helpers.exercises import CheckFailed
from helpers.exercises.decoupling import check_fit_batches

LOSS = keras.losses.MeanSquaredError(dtype="float64")


@pytest.fixture(scope="module")
def dataset():
    return d.molecule_dataset(30, batch_size=7, min_atoms=3, max_atoms=9, seed=3)


def _model(batch, hidden=6, seed=0):
    keras.utils.set_random_seed(seed)
    model = d.PerAtomEnergy(hidden=hidden)
    model(batch[0])
    return model


# ----------------------------------------------------------------- data and model


def test_morse_energy_of_a_dimer_at_rest_is_minus_the_well_depth_and_zero_far_apart():
    assert d.morse_energy(np.array([[0.0, 0, 0], [d.MORSE_DISTANCE, 0, 0]])) == pytest.approx(-d.MORSE_DEPTH)
    assert d.morse_energy(np.array([[0.0, 0, 0], [50.0, 0, 0]])) == pytest.approx(0.0, abs=1e-12)


def test_dataset_is_ragged_deterministic_with_a_smaller_last_batch(dataset):
    batches = list(dataset)
    assert [int(x.nrows()) for x, _ in batches] == [7, 7, 7, 7, 2]
    counts = np.concatenate([x.row_lengths().numpy() for x, _ in batches])
    assert counts.min() >= 3 and counts.max() <= 9 and len(set(counts)) > 3
    again = list(d.molecule_dataset(30, batch_size=7, min_atoms=3, max_atoms=9, seed=3))
    for (x1, y1), (x2, y2) in zip(batches, again):
        assert np.array_equal(x1.flat_values.numpy(), x2.flat_values.numpy())
        assert np.array_equal(y1.numpy(), y2.numpy())


def test_targets_are_the_morse_energy_of_the_generated_clusters():
    rng = np.random.default_rng(5)
    cluster = d.random_cluster(int(rng.integers(3, 6)), rng)
    _, y = next(iter(d.molecule_dataset(1, batch_size=1, min_atoms=3, max_atoms=5, seed=5)))
    assert float(y[0]) == pytest.approx(d.morse_energy(cluster), rel=1e-6)
    distances = d._pair_distances(cluster)[np.triu_indices(len(cluster), 1)]
    assert distances.min() >= 0.8


@pytest.mark.parametrize("kwargs, error, name", [
    ({"num_molecules": 0}, ValueError, "num_molecules"),
    ({"batch_size": 0}, ValueError, "batch_size"),
    ({"batch_size": 2.0}, TypeError, "batch_size"),
    ({"min_atoms": 5, "max_atoms": 4}, ValueError, "max_atoms"),
    ({"dtype": "int32"}, TypeError, "dtype"),
    ({"dtype": "banana"}, TypeError, "dtype"),
])
def test_dataset_bad_arguments(kwargs, error, name):
    with pytest.raises(error, match=name):
        d.molecule_dataset(**kwargs)


def test_data_and_model_compute_in_float64_by_default_and_float32_on_request(dataset):
    x, y = next(iter(dataset))
    assert x.dtype == y.dtype == tf.float64
    model = _model((x, y))
    assert model(x).dtype == tf.float64 and {v.dtype for v in model.weights} == {"float64"}
    x32, _ = next(iter(d.molecule_dataset(7, batch_size=7, min_atoms=3, max_atoms=9, seed=3, dtype="float32")))
    small = d.PerAtomEnergy(hidden=6, dtype="float32")
    assert x32.dtype == tf.float32 and small(x32).dtype == tf.float32
    assert d.PerAtomEnergy.from_config(model.get_config())(x).dtype == tf.float64


@pytest.mark.parametrize("kwargs, error, name", [
    ({"dtype": "int32"}, TypeError, "dtype"),
    ({"hidden": 0}, ValueError, "hidden"),
])
def test_model_bad_arguments(kwargs, error, name):
    with pytest.raises(error, match=name):
        d.PerAtomEnergy(**kwargs)


def test_per_atom_model_sums_atoms_and_ignores_their_order(dataset):
    x, _ = next(iter(dataset))
    model = _model((x, None))
    whole = model(x).numpy()
    one_by_one = [float(model(x[i:i + 1])[0]) for i in range(int(x.nrows()))]
    np.testing.assert_allclose(whole, one_by_one, rtol=1e-5)
    reversed_atoms = tf.ragged.map_flat_values(tf.identity, tf.reverse(x, axis=[1]))
    np.testing.assert_allclose(model(reversed_atoms).numpy(), whole, rtol=1e-5)


# ----------------------------------------------------------------- compiled objective


def test_relaxed_signature_traces_once_for_every_batch_shape(dataset):
    batches = list(dataset)
    relaxed = d.LossAndGradient(_model(batches[0]), LOSS)
    plain = d.LossAndGradient(_model(batches[0]), LOSS, relaxed=False)
    for batch in batches:
        relaxed(*batch), plain(*batch)
    assert relaxed.traces == 1
    # a plain tf.function's ragged spec already hides the atom count; it retraces per batch size
    assert plain.traces == len({int(x.nrows()) for x, _ in batches}) == 2


def test_loss_and_gradient_match_eager_tape(dataset):
    batch = next(iter(dataset))
    model = _model(batch)
    loss, grads = d.LossAndGradient(model, LOSS)(*batch)
    with tf.GradientTape() as tape:
        eager = LOSS(batch[1], model(batch[0]))
    for g, e in zip(grads, tape.gradient(eager, model.trainable_variables)):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-5, atol=1e-6)
    assert float(loss) == pytest.approx(float(eager), rel=1e-6)


def test_objective_same_point_twice_is_identical_and_counts_evaluations(dataset):
    batch = next(iter(dataset))
    objective = d.BatchObjective(_model(batch), LOSS, batch)
    theta = objective.initial_params()
    loss1, grad1 = objective(theta)
    objective(theta + 0.01)
    loss2, grad2 = objective(theta)
    assert loss1 == loss2 and np.array_equal(grad1, grad2)
    assert objective.evaluations == 3 and objective.losses[0] == objective.losses[2]
    assert grad1.dtype == np.float64 and grad1.shape == (objective.size,)


def test_objective_gradient_matches_a_finite_difference(dataset):
    batch = next(iter(dataset))
    objective = d.BatchObjective(_model(batch), LOSS, batch)
    theta = objective.initial_params()
    _, grad = objective(theta)
    direction = np.random.default_rng(0).normal(size=theta.shape)
    direction /= np.linalg.norm(direction)
    h = 1e-5  # float64: a small step and a tight tolerance
    numeric = (objective(theta + h * direction)[0] - objective(theta - h * direction)[0]) / (2 * h)
    assert numeric == pytest.approx(float(grad @ direction), rel=1e-6)


def test_objective_shares_one_trace_across_batches_of_different_sizes(dataset):
    batches = list(dataset)
    model = _model(batches[0])
    objectives = [d.BatchObjective(model, LOSS, b) for b in batches]
    for objective in objectives:
        objective(objective.initial_params())
    assert len({int(x.flat_values.shape[0]) for x, _ in batches}) > 2
    assert objectives[-1].traces <= 2


def test_wrong_length_params_is_a_clear_error(dataset):
    batch = next(iter(dataset))
    objective = d.BatchObjective(_model(batch), LOSS, batch)
    with pytest.raises(ValueError, match=rf"params .* {objective.size} trainable parameters"):
        objective(np.zeros(objective.size + 1))
    assert objective.evaluations == 0


def test_empty_batch_is_a_clear_error(dataset):
    x, y = next(iter(dataset))
    with pytest.raises(ValueError, match="batch is empty"):
        d.BatchObjective(_model((x, y)), LOSS, (x[:0], y[:0]))


def test_batch_must_be_a_pair(dataset):
    x, _ = next(iter(dataset))
    with pytest.raises(TypeError, match="batch"):
        d.BatchObjective(_model((x, None)), LOSS, x)


def test_non_finite_loss_is_a_clear_error_not_a_silent_nan(dataset):
    x, y = next(iter(dataset))
    bad_y = tf.tensor_scatter_nd_update(y, [[0]], [np.nan])
    objective = d.BatchObjective(_model((x, y)), LOSS, (x, bad_y))
    with pytest.raises(FloatingPointError, match="loss is nan"):
        objective(objective.initial_params())


# ----------------------------------------------------------------- line search on one batch


def test_minimize_on_batch_dequeues_once_and_leaves_the_model_at_the_optimum(dataset):
    iterator = d.CountingIterator(iter(dataset))
    batch = next(iterator)
    model = _model(batch)
    start = float(LOSS(batch[1], model(batch[0])))
    result = d.minimize_on_batch(model, LOSS, batch, max_iterations=15)
    assert iterator.advances == 1
    assert result.objective.evaluations >= result.nit > 1
    assert result.fun < 0.1 * start
    assert float(LOSS(batch[1], model(batch[0]))) == pytest.approx(result.fun, rel=1e-5)
    assert result.iterates == sorted(result.iterates) and len(result.iterates) == result.nit


@pytest.mark.parametrize("bad, error", [(0, ValueError), (2.5, TypeError)])
def test_minimize_on_batch_bad_max_iterations(dataset, bad, error):
    batch = next(iter(dataset))
    with pytest.raises(error, match="max_iterations"):
        d.minimize_on_batch(_model(batch), LOSS, batch, max_iterations=bad)


def test_dequeuing_inside_the_objective_changes_the_loss_at_the_same_point(dataset):
    iterator = iter(dataset)
    model = _model(next(iter(dataset)))
    compute = d.LossAndGradient(model, LOSS)

    def leaky_objective():
        return float(compute(*next(iterator))[0])

    assert leaky_objective() != leaky_objective()


# ----------------------------------------------------------------- exercise checker


def _reference(iterator, model, loss_fn, num_batches, max_iterations):
    losses = []
    for _ in range(num_batches):
        batch = next(iterator)
        losses.append(float(d.minimize_on_batch(model, loss_fn, batch, max_iterations=max_iterations).fun))
    return losses


def test_checker_accepts_the_reference(capsys):
    check_fit_batches(_reference)
    assert capsys.readouterr().out.startswith("Correct:")


def test_checker_rejects_the_stub():
    def stub(iterator, model, loss_fn, num_batches, max_iterations):
        raise NotImplementedError()

    with pytest.raises(CheckFailed, match="not written yet"):
        check_fit_batches(stub)


def test_checker_catches_a_loop_that_dequeues_twice_per_batch():
    def skips(iterator, model, loss_fn, num_batches, max_iterations):
        losses = []
        for _ in range(num_batches):
            next(iterator)
            losses.append(float(d.minimize_on_batch(model, loss_fn, next(iterator), max_iterations=max_iterations).fun))
        return losses

    with pytest.raises(CheckFailed, match="took 6 from the iterator"):
        check_fit_batches(skips)


def test_checker_catches_returning_the_starting_loss():
    def starting(iterator, model, loss_fn, num_batches, max_iterations):
        losses = []
        for _ in range(num_batches):
            result = d.minimize_on_batch(model, loss_fn, next(iterator), max_iterations=max_iterations)
            losses.append(result.objective.losses[0])
        return losses

    with pytest.raises(CheckFailed, match="not the starting loss"):
        check_fit_batches(starting)
