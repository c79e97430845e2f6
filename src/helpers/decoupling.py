"""Dequeue a batch once, evaluate loss and gradients on it many times (notebook 01).

Line-search optimizers such as L-BFGS call their objective many times per step, at different
parameter points, and every call must see the *same* batch. In TF2 the batch is a value you hold:
take it from the iterator once (``next(iterator)``), then hand it to a compiled loss-and-gradient
function as often as the optimizer likes.

* :func:`molecule_dataset`: molecules with different atom counts (ragged), target = Morse energy.
* :class:`PerAtomEnergy`: a per-atom network whose outputs are summed per molecule.
* :class:`LossAndGradient`: compiled ``(x, y) -> (loss, gradients)``, one trace for every batch shape.
* :class:`BatchObjective`: ``params -> (loss, gradient)`` on one fixed batch, for SciPy.
* :func:`minimize_on_batch`: ``scipy.optimize.minimize`` on one batch, model left at the optimum.
* :class:`CountingIterator`: counts how often the input pipeline was advanced.
"""

from __future__ import annotations

import math
import weakref
from typing import Any, Callable, Iterator

import numpy as np
import tensorflow as tf
import keras

from helpers.arguments import require_int

NUM_FEATURES = 8
# Data and model compute in float64 by default. SciPy's L-BFGS works in double precision, and late in
# an optimisation its line search compares losses that differ below float32's resolution: in float32,
# the last-bit differences between CPUs (SIMD widths, oneDNN kernels) or a GPU change the path L-BFGS
# takes (its evaluation count, its final loss); in float64 they do not show in 3-4 printed digits.
# A Keras loss computes in float32 unless it is given `dtype="float64"` too.
DTYPE = "float64"
MORSE_DEPTH, MORSE_WIDTH, MORSE_DISTANCE = 1.0, 1.5, 1.2  # well depth, stiffness, bond length
_MIN_DISTANCE, _DENSITY = 0.8, 0.3  # closest approach and atoms per unit volume of a cluster


# --------------------------------------------------------------------------- data


def morse_energy(positions: np.ndarray) -> float:
    """Total Morse pair-potential energy of one cluster of atoms (``positions``: ``[atoms, 3]``).

    >>> round(morse_energy(np.array([[0.0, 0, 0], [MORSE_DISTANCE, 0, 0]])), 6)  # one bond at rest
    -1.0
    """
    r = _pair_distances(positions)[np.triu_indices(len(positions), k=1)]
    return float(np.sum(MORSE_DEPTH * (1 - np.exp(-MORSE_WIDTH * (r - MORSE_DISTANCE))) ** 2 - MORSE_DEPTH))


def atom_descriptors(positions: np.ndarray, num_features: int = NUM_FEATURES) -> np.ndarray:
    """Radial descriptors ``[atoms, num_features]``: Gaussian-smeared counts of neighbours per distance.

    Feature ``k`` of atom ``i`` is ``sum_j exp(-4 (r_ij - mu_k)^2)`` with ``mu_k`` spread over
    0.8 to 3.5. A per-atom energy is a function of these, so a pair-potential energy is learnable.
    """
    r = _pair_distances(positions)
    np.fill_diagonal(r, np.inf)
    centres = np.linspace(0.8, 3.5, num_features)
    return np.exp(-4.0 * (r[:, :, None] - centres) ** 2).sum(axis=1)


def _pair_distances(positions: np.ndarray) -> np.ndarray:
    diff = positions[:, None, :] - positions[None, :, :]
    return np.sqrt((diff**2).sum(-1))


def random_cluster(num_atoms: int, rng: np.random.Generator) -> np.ndarray:
    """``num_atoms`` random positions at a fixed density, no two atoms closer than 0.8."""
    side = (num_atoms / _DENSITY) ** (1 / 3)
    atoms: list[np.ndarray] = []
    while len(atoms) < num_atoms:
        candidate = rng.uniform(0, side, size=3)
        if all(np.linalg.norm(candidate - a) >= _MIN_DISTANCE for a in atoms):
            atoms.append(candidate)
    return np.stack(atoms)


def molecule_dataset(
    num_molecules: int = 64,
    *,
    batch_size: int = 8,
    min_atoms: int = 3,
    max_atoms: int = 12,
    num_features: int = NUM_FEATURES,
    seed: int = 0,
    dtype: str | tf.DType = DTYPE,
) -> tf.data.Dataset:
    """Batches ``(x, y)`` of generated molecules with different atom counts.

    ``x`` is a ``tf.RaggedTensor`` ``[molecules, (atoms), num_features]`` of per-atom descriptors,
    ``y`` the ``[molecules]`` Morse energies. The last batch is smaller when ``batch_size`` does not
    divide ``num_molecules``. The same arguments always give the same data. ``dtype`` is the float
    type of ``x`` and ``y`` (float64 by default, see ``DTYPE``).

    >>> x, y = next(iter(molecule_dataset(10, batch_size=4, seed=1)))
    >>> x.shape.as_list(), y.shape.as_list()
    ([4, None, 8], [4])
    """
    for name, value, low in (("num_molecules", num_molecules, 1), ("batch_size", batch_size, 1),
                             ("min_atoms", min_atoms, 2), ("num_features", num_features, 1)):
        require_int(name, value, minimum=low)
    if require_int("max_atoms", max_atoms) < min_atoms:
        raise ValueError(f"max_atoms ({max_atoms}) must be >= min_atoms ({min_atoms})")
    dtype = _float_dtype(dtype)
    rng = np.random.default_rng(seed)
    features, energies = [], []
    for _ in range(num_molecules):
        cluster = random_cluster(int(rng.integers(min_atoms, max_atoms + 1)), rng)
        features.append(atom_descriptors(cluster, num_features))
        energies.append(morse_energy(cluster))
    x = tf.ragged.constant(features, ragged_rank=1, dtype=dtype)
    y = tf.constant(energies, dtype=dtype)
    return tf.data.Dataset.from_tensor_slices((x, y)).ragged_batch(batch_size)


def _float_dtype(dtype: Any) -> tf.DType:
    """``dtype`` (a name, a ``tf.DType``, a Keras dtype policy or its config) as a float ``tf.DType``."""
    try:
        name = keras.dtype_policies.get(dtype).compute_dtype if isinstance(dtype, dict) else dtype
        name = getattr(name, "compute_dtype", name)
        dtype = tf.as_dtype(name)
    except (TypeError, ValueError):
        raise TypeError(f"dtype must be a float type such as 'float64' or 'float32', got {dtype!r}") from None
    if not dtype.is_floating:
        raise TypeError(f"dtype must be a float type such as 'float64' or 'float32', got {dtype.name}")
    return dtype


# --------------------------------------------------------------------------- model


@keras.saving.register_keras_serializable(package="helpers")
class PerAtomEnergy(keras.Model):
    """Energy of each molecule = sum over its atoms of a small network's per-atom energy.

    Takes a ``tf.RaggedTensor`` ``[molecules, (atoms), features]``; returns ``[molecules]``.
    Weights and computation are in ``dtype`` (float64 by default, like :func:`molecule_dataset`).

    >>> model = PerAtomEnergy(hidden=4)
    >>> x, _ = next(iter(molecule_dataset(3, batch_size=3)))
    >>> model(x).shape.as_list()
    [3]
    """

    def __init__(self, hidden: int = 16, dtype: Any = DTYPE, **kwargs: Any):
        require_int("hidden", hidden, minimum=1)
        super().__init__(dtype=_float_dtype(dtype).name, **kwargs)
        self.hidden = hidden
        self.atom_hidden = keras.layers.Dense(hidden, activation="tanh", dtype=self.dtype_policy)
        self.atom_energy = keras.layers.Dense(1, dtype=self.dtype_policy)

    def call(self, atoms: tf.RaggedTensor) -> tf.Tensor:
        per_atom = self.atom_energy(self.atom_hidden(tf.cast(atoms.flat_values, self.compute_dtype)))[:, 0]
        return tf.math.unsorted_segment_sum(per_atom, atoms.value_rowids(), atoms.nrows())

    def get_config(self) -> dict:
        return {**super().get_config(), "hidden": self.hidden}


# --------------------------------------------------------------------------- objective


def _relaxed_spec(value: Any) -> tf.TypeSpec:
    """The value's type spec with every dimension but the last unknown (batch sizes, atom counts)."""
    spec = tf.type_spec_from_value(value)
    shape = spec.shape
    relaxed = [None] * (shape.rank - 1) + [shape[-1]] if shape.rank and shape.rank > 1 else [None] * (shape.rank or 0)
    if isinstance(spec, tf.RaggedTensorSpec):
        return tf.RaggedTensorSpec(relaxed, spec.dtype, spec.ragged_rank, spec.row_splits_dtype)
    return tf.TensorSpec(relaxed, spec.dtype)


class LossAndGradient:
    """Compiled ``(x, y) -> (loss, [gradient per trainable variable])`` for ``model`` and ``loss_fn``.

    With ``relaxed=True`` (default) the input signature is taken from the first batch with every
    dimension but the last left open, so batches of any size and atom count share **one** trace.
    With ``relaxed=False`` it is a plain ``tf.function``, which traces again for each new shape.
    The model runs with ``training=False``: the same parameters and batch give the same loss.

    >>> model = PerAtomEnergy(hidden=4)
    >>> compute = LossAndGradient(model, keras.losses.MeanSquaredError(dtype="float64"))
    >>> for batch in molecule_dataset(12, batch_size=5):
    ...     loss, grads = compute(*batch)
    >>> compute.traces
    1
    """

    def __init__(self, model: keras.Model, loss_fn: Callable, *, relaxed: bool = True):
        if not isinstance(model, keras.Model):
            raise TypeError(f"model must be a keras.Model, got {type(model).__name__}")
        if not callable(loss_fn):
            raise TypeError(f"loss_fn must be callable, got {type(loss_fn).__name__}")
        self.model, self.loss_fn, self.relaxed = model, loss_fn, relaxed
        self._fn: Any = None if relaxed else tf.function(self._loss_and_gradients)

    def _loss_and_gradients(self, x, y):
        with tf.GradientTape() as tape:
            loss = self.loss_fn(y, self.model(x, training=False))
        grads = tape.gradient(loss, self.model.trainable_variables)
        return loss, [tf.zeros_like(v) if g is None else g for g, v in zip(grads, self.model.trainable_variables)]

    def __call__(self, x, y) -> tuple[tf.Tensor, list[tf.Tensor]]:
        if self._fn is None:
            if not self.model.built:
                self.model(x)  # create the weights eagerly: creating them inside a trace forces a retrace
            signature = (_relaxed_spec(x), _relaxed_spec(y))
            self._fn = tf.function(self._loss_and_gradients, input_signature=signature)
        return self._fn(x, y)

    @property
    def traces(self) -> int:
        """How many times the compiled function has been traced so far."""
        return 0 if self._fn is None else self._fn.experimental_get_tracing_count()


_shared: "weakref.WeakKeyDictionary[keras.Model, dict[int, LossAndGradient]]" = weakref.WeakKeyDictionary()


def shared_loss_and_gradient(model: keras.Model, loss_fn: Callable) -> LossAndGradient:
    """The one :class:`LossAndGradient` for this model and loss, reused across batches."""
    per_loss = _shared.setdefault(model, {})
    if id(loss_fn) not in per_loss or per_loss[id(loss_fn)].loss_fn is not loss_fn:
        per_loss[id(loss_fn)] = LossAndGradient(model, loss_fn)
    return per_loss[id(loss_fn)]


def _num_examples(y: Any) -> int:
    if isinstance(y, tf.RaggedTensor):
        return int(y.nrows())
    y = tf.convert_to_tensor(y)
    return int(tf.shape(y)[0]) if y.shape.rank else 1


class BatchObjective:
    """``params -> (loss, gradient)`` on one fixed batch: the callable a SciPy optimizer wants.

    ``params`` is a flat float64 vector of all the model's trainable parameters. Each call writes
    it into the model, evaluates loss and gradient on ``batch`` with the compiled function shared
    by every batch (see :func:`shared_loss_and_gradient`), and returns ``(float, float64 array)``.
    The batch is never taken from an iterator here: the caller dequeues it once.

    Attributes: ``evaluations`` (calls so far), ``traces`` (traces of the compiled function so
    far, counted over all batches that share it), ``losses`` (the loss of every call, in order).

    >>> model = PerAtomEnergy(hidden=4)
    >>> batch = next(iter(molecule_dataset(8, batch_size=8)))
    >>> objective = BatchObjective(model, keras.losses.MeanSquaredError(dtype="float64"), batch)
    >>> loss, grad = objective(objective.initial_params())
    >>> grad.shape == (objective.size,), objective.evaluations
    (True, 1)
    """

    def __init__(self, model: keras.Model, loss_fn: Callable, batch: tuple, *,
                 compiled: LossAndGradient | None = None):
        if not isinstance(batch, (tuple, list)) or len(batch) != 2:
            raise TypeError("batch must be an (x, y) pair, as a dataset of (features, targets) yields")
        x, y = batch
        if _num_examples(y) == 0:
            raise ValueError("batch is empty: it holds 0 examples, so there is no loss to minimise")
        self.model, self.loss_fn, self.batch = model, loss_fn, (x, y)
        self.compiled = compiled or shared_loss_and_gradient(model, loss_fn)
        if not model.built:
            model(x)
        self.variables = list(model.trainable_variables)
        if not self.variables:
            raise ValueError("model has no trainable variables to optimise")
        self.shapes = [tuple(v.shape) for v in self.variables]
        self.size = sum(math.prod(s) for s in self.shapes)
        self.evaluations = 0
        self.losses: list[float] = []

    @property
    def traces(self) -> int:
        return self.compiled.traces

    def initial_params(self) -> np.ndarray:
        """The model's current trainable parameters as one flat float64 vector."""
        return np.concatenate([v.numpy().ravel() for v in self.variables]).astype(np.float64)

    def assign(self, params: np.ndarray) -> None:
        """Write the flat vector ``params`` into the model's trainable variables."""
        params = np.asarray(params, dtype=np.float64)
        if params.shape != (self.size,):
            raise ValueError(
                f"params has shape {params.shape}, but the model has {self.size} trainable parameters: "
                f"pass a flat vector of length {self.size}"
            )
        start = 0
        for variable, shape in zip(self.variables, self.shapes):
            count = math.prod(shape)
            variable.assign(params[start:start + count].reshape(shape).astype(variable.dtype))
            start += count

    def __call__(self, params: np.ndarray) -> tuple[float, np.ndarray]:
        self.assign(params)
        loss, grads = self.compiled(*self.batch)
        loss = float(loss)
        if not math.isfinite(loss):
            raise FloatingPointError(
                f"loss is {loss} at these params (evaluation {self.evaluations + 1}): check the batch "
                "for nan/inf values, or the parameters for an overflow"
            )
        self.evaluations += 1
        self.losses.append(loss)
        return loss, np.concatenate([g.numpy().ravel() for g in grads]).astype(np.float64)


def minimize_on_batch(
    model: keras.Model,
    loss_fn: Callable,
    batch: tuple,
    method: str = "L-BFGS-B",
    max_iterations: int = 50,
    *,
    objective: BatchObjective | None = None,
):
    """Minimise ``loss_fn`` on one batch with ``scipy.optimize.minimize``; leave the model at the optimum.

    Returns SciPy's ``OptimizeResult`` with two extra fields: ``objective`` (the
    :class:`BatchObjective`, with its evaluation count and loss history) and ``iterates``
    (the evaluation number at which each accepted iterate was reached).

    >>> model = PerAtomEnergy(hidden=4)
    >>> batch = next(iter(molecule_dataset(8, batch_size=8)))
    >>> result = minimize_on_batch(model, keras.losses.MeanSquaredError(dtype="float64"), batch, max_iterations=5)
    >>> result.objective.evaluations >= result.nit
    True
    """
    from scipy.optimize import minimize

    require_int("max_iterations", max_iterations, minimum=1)
    objective = objective or BatchObjective(model, loss_fn, batch)
    iterates: list[int] = []
    result = minimize(objective, objective.initial_params(), jac=True, method=method,
                      options={"maxiter": max_iterations},
                      callback=lambda *_: iterates.append(objective.evaluations))
    objective.assign(result.x)
    result.objective, result.iterates = objective, iterates
    return result


# --------------------------------------------------------------------------- bookkeeping


class CountingIterator:
    """Wraps an iterator and counts ``advances``: how many batches were taken from the pipeline.

    >>> it = CountingIterator(iter(range(3)))
    >>> next(it), next(it), it.advances
    (0, 1, 2)
    """

    def __init__(self, iterator: Iterator):
        self._iterator = iter(iterator)
        self.advances = 0

    def __iter__(self) -> "CountingIterator":
        return self

    def __next__(self):
        item = next(self._iterator)
        self.advances += 1
        return item
