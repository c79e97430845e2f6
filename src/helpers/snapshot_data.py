"""The data of notebook 05's target-network example: points on a ring whose values a network learns.

Each point has a reward, and from each point you move to the next one around the ring. A point's
*value* is its reward plus ``gamma`` times the next point's value; the notebook learns the values with
labels made by a network (``reward + gamma * value(next point)``), with and without a target network,
and scores each run against the exact values, which :func:`ring` solves for.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from helpers.arguments import require_int

__all__ = ["Ring", "ring"]


class Ring(NamedTuple):
    """The ring's data as NumPy arrays: one row per point."""

    states: np.ndarray  # (points, 2) float32: the points, on the unit circle
    next_states: np.ndarray  # (points, 2) float32: the point each one moves to
    rewards: np.ndarray  # (points, 1) float32: a random reward per point
    values: np.ndarray  # (points, 1) float64: the exact values, values = rewards + gamma * values[next]
    gamma: float  # how much the next point's value counts

    def error(self, predicted) -> float:
        """Root mean square distance of ``predicted`` values (one per point, any array-like or tensor)
        from the exact values."""
        predicted = np.asarray(predicted, dtype=float).reshape(self.values.shape)
        return float(np.sqrt(np.mean((predicted - self.values) ** 2)))


def ring(points: int = 32, gamma: float = 0.9, seed: int = 0) -> Ring:
    """``points`` points on a ring, their rewards (standard normal, from ``seed``) and exact values.

    The exact values solve the ``points`` equations ``value[i] = reward[i] + gamma * value[i + 1]``
    (around the ring) together, as one linear system.

    >>> data = ring()
    >>> data.states.shape, data.rewards.shape
    ((32, 2), (32, 1))
    >>> bool(np.allclose(data.values, data.rewards + 0.9 * np.roll(data.values, -1, axis=0)))
    True
    """
    require_int("points", points, minimum=2)
    if not 0.0 <= gamma < 1.0:
        raise ValueError(f"gamma must be in [0, 1), got {gamma!r}")
    angles = 2 * np.pi * np.arange(points) / points
    states = np.stack([np.cos(angles), np.sin(angles)], axis=1).astype("float32")
    next_states = np.roll(states, -1, axis=0)
    rewards = np.random.default_rng(seed).normal(size=(points, 1)).astype("float32")
    moves = np.roll(np.eye(points), 1, axis=1)  # row i picks point i + 1
    values = np.linalg.solve(np.eye(points) - gamma * moves, rewards)
    return Ring(states, next_states, rewards, values, float(gamma))
