"""The data of notebook 05's target-network example: points on a ring whose values a network learns.

Each point has a reward, and from each point you move to the next one around the ring. A point's
*value* is its reward plus ``gamma`` times the next point's value; the notebook learns the values with
labels made by a network (``reward + gamma * value(next point)``), with and without a target network,
and scores each run against the exact values, which :func:`ring` solves for.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numpy as np

from helpers.arguments import require_int

__all__ = ["Ring", "ring", "record_run", "no_copy_learner"]


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


def no_copy_learner(value: Any, target: None = None, gamma: float = 0.9) -> Any:
    """The baseline of notebook 05's Picture: a ``keras.Model`` whose ``fit`` trains ``value`` with the step of
    the notebook's ``TargetLearner``, but with the labels from ``value`` itself, ``reward + gamma *
    value(next point)``: no copy, no sync. ``target`` must be None (how :func:`record_run` calls it without
    a copy). The step is TensorFlow's (``tf.GradientTape``)."""
    import keras
    import tensorflow as tf

    if target is not None:
        raise ValueError("no_copy_learner takes no target: its labels come from the trained network itself")

    class NoCopyLearner(keras.Model):
        def __init__(self) -> None:
            super().__init__()
            self.value = value

        def train_step(self, data: Any) -> dict[str, Any]:
            states, next_states, rewards = data
            with tf.GradientTape() as tape:
                labels = rewards + gamma * tf.stop_gradient(self.value(next_states, training=False))
                loss = tf.reduce_mean(tf.square(labels - self.value(states, training=True)))
            grads = tape.gradient(loss, self.value.trainable_variables)
            self.optimizer.apply_gradients(zip(grads, self.value.trainable_variables))
            return {"step_loss": loss}  # not "loss": fit would show its own unused loss tracker, 0.0

    return NoCopyLearner()


def record_run(make_learner: Callable[[Any, Any], Any], make_network: Callable[[], Any], with_copy: bool, *,
               seed: int = 0, steps: int = 200, make_optimizer: Callable[[], Any] | None = None,
               data: Ring | None = None) -> tuple[list[float], list[np.ndarray]]:
    """Notebook 05's run on the ring, recorded before each step: the measurement behind its Picture.

    ``make_network()`` builds the value network, ``make_learner(value, target)`` the ``keras.Model``
    whose ``fit`` trains it (the notebook's ``TargetLearner``). With ``with_copy`` the target is a
    second ``make_network()``; without, the learner is given ``target=None`` (as :func:`no_copy_learner`
    takes it) and the labels come from the trained network itself (recorded as ``value``'s). Both are built by one call before the learner is made (``keras.utils.set_random_seed(seed)``
    first, so a seed gives the same start). The learner is compiled with ``make_optimizer()``
    (default ``SGD(0.02, momentum=0.9)``, as the notebook's run) and fit for ``steps`` steps, each on
    all the points of ``data`` (default :func:`ring`). Before each step a callback records:

    * the RMS error of ``value`` against the exact values (:meth:`Ring.error`);
    * every point's label, ``reward + gamma * target(next point)`` (the label that step trains on).

    Returns ``(errors, labels)``: ``steps`` floats and ``steps`` arrays of one label per point.
    """
    import keras
    import tensorflow as tf

    require_int("steps", steps, minimum=1)
    data = ring() if data is None else data
    keras.utils.set_random_seed(seed)
    value = make_network()
    value(data.states)
    target = make_network() if with_copy else value
    target(data.states[:1])
    learner = make_learner(value, target if with_copy else None)
    learner.compile(optimizer=make_optimizer() if make_optimizer else keras.optimizers.SGD(0.02, momentum=0.9))
    errors: list[float] = []
    labels: list[np.ndarray] = []
    predict = tf.function(lambda: (value(data.states), target(data.next_states)))  # compiled: one call per step

    def record(batch: int, logs: Any) -> None:
        values, next_values = predict()
        errors.append(data.error(values.numpy()))
        labels.append(data.rewards[:, 0] + data.gamma * next_values.numpy()[:, 0])

    batches = tf.data.Dataset.from_tensors((data.states, data.next_states, data.rewards)).repeat(steps)
    learner.fit(batches, shuffle=False, verbose=0,
                callbacks=[keras.callbacks.LambdaCallback(on_train_batch_begin=record)])
    return errors, labels
