"""Generated molecules and a per-atom energy model: the variable-sized data of notebook 01.

* :func:`molecule_dataset`: random clusters of atoms with different atom counts, batched as
  ``tf.RaggedTensor`` ``[molecules, (atoms), features]``; the target is the cluster's Morse energy.
* :class:`PerAtomEnergy`: a small network applied to every atom, summed per molecule, so it takes
  any number of atoms (optionally with Dropout and BatchNorm, to show what a line search needs).
* :func:`morse_energy`, :func:`atom_descriptors`, :func:`random_cluster`: the pieces of the data.

The technique itself (dequeue once, evaluate many times) lives in :mod:`helpers.decoupling`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf
import keras

from helpers.arguments import require_int

__all__ = [
    "DTYPE", "NUM_FEATURES", "MORSE_DEPTH", "MORSE_WIDTH", "MORSE_DISTANCE",
    "morse_energy", "atom_descriptors", "random_cluster", "molecule_dataset", "PerAtomEnergy",
]

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

    >>> atom_descriptors(np.array([[0.0, 0, 0], [1.0, 0, 0], [0, 2.0, 0]])).shape
    (3, 8)
    """
    r = _pair_distances(positions)
    np.fill_diagonal(r, np.inf)
    centres = np.linspace(0.8, 3.5, num_features)
    return np.exp(-4.0 * (r[:, :, None] - centres) ** 2).sum(axis=1)


def _pair_distances(positions: np.ndarray) -> np.ndarray:
    diff = positions[:, None, :] - positions[None, :, :]
    return np.sqrt((diff**2).sum(-1))


def random_cluster(num_atoms: int, rng: np.random.Generator) -> np.ndarray:
    """``num_atoms`` random positions at a fixed density, no two atoms closer than 0.8.

    >>> random_cluster(4, np.random.default_rng(0)).shape
    (4, 3)
    """
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
    ``dropout`` (a rate) and ``batch_norm`` add those layers after the hidden layer: with
    ``training=True`` they make two evaluations at the same weights differ.

    >>> model = PerAtomEnergy(hidden=4)
    >>> x, _ = next(iter(molecule_dataset(3, batch_size=3)))
    >>> model(x).shape.as_list()
    [3]
    """

    def __init__(self, hidden: int = 16, dtype: Any = DTYPE, *, dropout: float = 0.0,
                 batch_norm: bool = False, **kwargs: Any):
        require_int("hidden", hidden, minimum=1)
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
            raise ValueError(f"dropout must be a rate in [0, 1), got {dropout!r}")
        if not isinstance(batch_norm, bool):
            raise TypeError(f"batch_norm must be True or False, got {type(batch_norm).__name__}")
        super().__init__(dtype=_float_dtype(dtype).name, **kwargs)
        self.hidden, self.dropout, self.batch_norm = hidden, float(dropout), batch_norm
        policy = self.dtype_policy
        self.atom_hidden = keras.layers.Dense(hidden, activation="tanh", dtype=policy)
        self.atom_norm = keras.layers.BatchNormalization(dtype=policy) if batch_norm else None
        self.atom_dropout = keras.layers.Dropout(dropout, dtype=policy) if dropout else None
        self.atom_energy = keras.layers.Dense(1, dtype=policy)

    def call(self, atoms: tf.RaggedTensor, training: bool | None = None) -> tf.Tensor:
        hidden = self.atom_hidden(tf.cast(atoms.flat_values, self.compute_dtype))
        if self.atom_norm is not None:
            hidden = self.atom_norm(hidden, training=training)
        if self.atom_dropout is not None:
            hidden = self.atom_dropout(hidden, training=training)
        per_atom = self.atom_energy(hidden)[:, 0]
        return tf.math.unsorted_segment_sum(per_atom, atoms.value_rowids(), atoms.nrows())

    def get_config(self) -> dict:
        return {**super().get_config(), "hidden": self.hidden, "dropout": self.dropout,
                "batch_norm": self.batch_norm}
