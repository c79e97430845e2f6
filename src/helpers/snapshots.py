"""A past copy of a network in memory, complete and cheap (notebook 05).

Some training loops need a network's *previous* state next to its current one: a target network
(DQN), a teacher that is a moving average of the student (BYOL, mean teacher), or, as in the source
question, network B's state from step ``t`` evaluated on the same input as its state at ``t + 1``.
TF1 built the network twice under two variable scopes and grouped ``assign`` ops into a sync op.
In TF2 the copy is a second Keras model and the sync is one compiled function:

* :func:`snapshot`: an independent copy of a built model with **all** of its state (trainable
  weights, BatchNorm moving statistics, random-seed state).
* :func:`sync`: copy ``source`` into ``target`` on the device (``tau=1``), or a soft (Polyak) update
  of the trainable weights with a hard copy of the rest (``0 < tau < 1``).
* :func:`state_paths`: every state variable of a model under a structural path; :func:`sync` pairs
  two models' variables through these paths, never by list position.
* :func:`parameter_distance`: how far two models' trainable weights are apart (for the picture).

Calling convention of the workbook: models are Keras 3 models; a batch is an ``(x, y)`` pair.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Real
from typing import Any, Callable

import tensorflow as tf
import keras

from helpers.arguments import require_int

__all__ = [
    "snapshot", "sync", "state_paths", "parameter_distance", "StateEntry",
    "make_train_step", "copy_methods", "measure_copy_costs",
]


# --------------------------------------------------------------------------- structure


@dataclass(frozen=True)
class StateEntry:
    """One state variable of a model, found by walking its layer tree.

    ``path`` is structural (``"layers[1]:BatchNormalization/moving_mean"``): the position among the
    parent's stateful sub-layers, the sub-layer's class and the variable's own name. It does not use
    layer names, so two models of the same architecture have the same paths even when Keras gave
    their layers different names (``dense_3`` vs ``dense_7``). ``label`` is the same place spelled
    with the model's own layer names, for messages. ``trainable`` says whether the layer declared the
    variable trainable (a later ``model.trainable = False`` does not change it).
    """

    path: str
    label: str
    variable: Any
    trainable: bool


def state_paths(model: keras.Model) -> list[StateEntry]:
    """Every state variable of ``model`` (the same set as ``model.variables``), with structural paths.

    >>> net = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2), keras.layers.BatchNormalization()])
    >>> [e.path for e in state_paths(net)][:3]
    ['layers[0]:Dense/kernel', 'layers[0]:Dense/bias', 'layers[1]:BatchNormalization/gamma']

    Raises ``TypeError`` if ``model`` is not a Keras model and ``ValueError`` if it was never built.
    """
    _check_model(model, "model")
    entries: list[StateEntry] = []
    _walk(model, "", model.name, entries, set())
    return entries


def _walk(layer: keras.layers.Layer, path: str, label: str, out: list[StateEntry], seen: set[int]) -> None:
    # Keras 3 keeps a layer's own variables in these two lists (by declared trainability), its
    # random-seed state in ``_seed_generators`` and its sub-layers in ``_layers``: the same fields
    # ``Layer.variables`` walks. Reading them lets a path say *where* a variable lives.
    own = [(v, True) for v in layer._trainable_variables] + [(v, False) for v in layer._non_trainable_variables]
    for variable, trainable in own:
        if id(variable) not in seen:
            seen.add(id(variable))
            out.append(StateEntry(f"{path}{variable.name}", f"{label}/{variable.name}", variable, trainable))
    for k, generator in enumerate(layer._seed_generators):
        if id(generator.state) not in seen:
            seen.add(id(generator.state))
            out.append(StateEntry(f"{path}seed_generators[{k}]", f"{label}/seed_generator[{k}]", generator.state, False))
    stateful = [sub for sub in layer._layers if sub.variables]
    for k, sub in enumerate(stateful):
        _walk(sub, f"{path}layers[{k}]:{type(sub).__name__}/", f"{label}/{sub.name}", out, seen)


def _check_model(model: Any, argument: str) -> None:
    if not isinstance(model, keras.Model):
        raise TypeError(f"{argument} must be a Keras model, got {type(model).__name__}")
    if not model.built:
        raise ValueError(
            f"{argument} ({model.name!r}) was never built: it has no variables yet. "
            "Call it once on a batch (or build it) before copying it."
        )
    if not model.variables:
        raise ValueError(f"{argument} ({model.name!r}) has no state to copy: it holds no variables")


def _pair(source: keras.Model, target: keras.Model) -> list[tuple[StateEntry, StateEntry]]:
    """Pair the two models' state by path; raise ``ValueError`` naming the first mismatch."""
    src, dst = state_paths(source), state_paths(target)
    for k in range(max(len(src), len(dst))):
        if k >= len(src):
            raise ValueError(
                f"source and target differ in structure: target has extra state {dst[k].label!r} "
                f"({dst[k].path}) that source {source.name!r} does not have"
            )
        if k >= len(dst):
            raise ValueError(
                f"source and target differ in structure: source state {src[k].label!r} "
                f"({src[k].path}) has no counterpart in target {target.name!r}"
            )
        s, t = src[k], dst[k]
        if s.path != t.path:
            raise ValueError(
                f"source and target differ in structure: first mismatch is source {s.label!r} ({s.path}) "
                f"vs target {t.label!r} ({t.path})"
            )
        if tuple(s.variable.shape) != tuple(t.variable.shape) or s.variable.dtype != t.variable.dtype:
            raise ValueError(
                f"source and target differ in structure at {s.path}: source {s.label!r} is "
                f"{tuple(s.variable.shape)} {s.variable.dtype}, target {t.label!r} is "
                f"{tuple(t.variable.shape)} {t.variable.dtype}"
            )
    return list(zip(src, dst))


def _check_tau(tau: Any) -> float:
    if isinstance(tau, bool) or not isinstance(tau, Real):
        raise TypeError(f"tau must be a real number in (0, 1], got {type(tau).__name__}")
    tau = float(tau)
    if not (math.isfinite(tau) and 0.0 < tau <= 1.0):
        raise ValueError(f"tau must be in (0, 1] (1 = hard copy, e.g. 0.01 = soft update), got {tau}")
    return tau


# --------------------------------------------------------------------------- copy


@tf.function(autograph=False)
def _assign(targets: list, sources: list, soft: tuple, tau: tf.Tensor) -> None:
    """``target = source`` (hard) or ``target += tau * (source - target)`` (soft), per pair.

    Variables are arguments, not captures, so one trace serves every pair of models with the same
    shapes; ``soft`` is a tuple of Python bools and ``tau`` a tensor, so a new ``tau`` value does
    not retrace.
    """
    for target, source, is_soft in zip(targets, sources, soft):
        if is_soft:
            t = tf.cast(tau, target.dtype)
            target.assign_add(t * (source - target))
        else:
            target.assign(source)


def sync(source: keras.Model, target: keras.Model, tau: float = 1.0) -> None:
    """Copy ``source``'s state into ``target`` on the device, compiled with ``tf.function``.

    * ``tau == 1``: every state variable is copied exactly (weights, BatchNorm moving statistics,
      seed state).
    * ``0 < tau < 1``: a soft (Polyak) update of the weights the layers declared trainable,
      ``target = tau * source + (1 - tau) * target``, and a hard copy of the other state.

    Variables are paired by :func:`state_paths` (structure, not list position). Everything is
    checked before anything is written: on a bad argument neither model changes.

    >>> net = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    >>> past = snapshot(net)
    >>> _ = net.layers[0].kernel.assign_add(tf.ones((3, 2)))
    >>> sync(net, past)                       # hard copy: past catches up
    >>> bool(tf.reduce_all(past.layers[0].kernel == net.layers[0].kernel))
    True
    >>> sync(net, past, tau=0.01)             # soft: past moves 1 % of the way

    Raises ``TypeError`` (not a Keras model, ``tau`` not a number) or ``ValueError`` (a model never
    built, ``tau`` outside (0, 1], ``source is target``, or different structure: the message names
    the first mismatching variable). Under a ``tf.distribute`` strategy, call it between steps
    (cross-replica context), as you would restore a checkpoint.
    """
    _check_model(source, "source")
    _check_model(target, "target")
    tau = _check_tau(tau)
    if source is target:
        raise ValueError("source and target are the same model: sync needs two models")
    pairs = _pair(source, target)
    soft = tuple(s.trainable and tau < 1.0 for s, _ in pairs)
    _assign(
        [_tf_variable(t.variable) for _, t in pairs],
        [_tf_variable(s.variable) for s, _ in pairs],
        soft,
        tf.constant(tau, tf.float32),
    )


def _tf_variable(variable: Any) -> tf.Variable:
    # A Keras 3 variable wraps a tf.Variable (a MirroredVariable under a strategy). Hand the
    # tf.Variable itself to the compiled function: ``variable.value`` may be an autocast copy.
    return getattr(variable, "_value", variable)


def sync_trace_count() -> int:
    """How many times the compiled copy behind :func:`sync` has been traced (for tests)."""
    return _assign.experimental_get_tracing_count()


def snapshot(model: keras.Model) -> keras.Model:
    """An independent copy of a built ``model``: same structure, same values of **all** its state.

    The copy has its own variables (created in ``model``'s distribution strategy, if any): later
    updates of either model never reach the other. Works for Sequential, functional and subclassed
    models (a subclassed model is rebuilt from its ``get_config()``). The copy is not compiled and
    has no optimizer; freeze it (``past.trainable = False``) if no gradient may reach it.

    >>> net = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    >>> past = snapshot(net)
    >>> past is net, len(past.variables) == len(net.variables)
    (False, True)

    Raises ``TypeError`` if ``model`` is not a Keras model or cannot be rebuilt from its config,
    and ``ValueError`` if it was never built.
    """
    _check_model(model, "model")
    strategy = _strategy_of(model)
    with strategy.scope() if strategy is not None else _nullcontext():
        try:
            copy = keras.models.clone_model(model)
        except Exception as error:  # a subclassed model whose constructor arguments Keras cannot rebuild
            raise TypeError(
                f"model {model.name!r} ({type(model).__name__}) cannot be rebuilt from its config: "
                "give the class a get_config() that returns its constructor arguments "
                f"({type(error).__name__}: {_first_line(error)})"
            ) from error
        if not copy.built or not copy.variables:
            copy.build_from_config(model.get_build_config())
    for s, t in _pair(model, copy):
        t.variable.assign(_tf_variable(s.variable))
    return copy


def _strategy_of(model: keras.Model):
    value = _tf_variable(model.variables[0])
    if isinstance(value, tf.distribute.DistributedValues) and not tf.distribute.has_strategy():
        return value.distribute_strategy
    return None


def _first_line(error: Exception) -> str:
    return next((line.strip() for line in str(error).splitlines() if line.strip()), "")


class _nullcontext:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


# --------------------------------------------------------------------------- measuring


def parameter_distance(a: keras.Model, b: keras.Model) -> float:
    """Euclidean distance between the two models' trainable weights, paired by structure.

    >>> net = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    >>> parameter_distance(net, snapshot(net))
    0.0
    """
    _check_model(a, "a")
    _check_model(b, "b")
    squares = [
        tf.reduce_sum(tf.square(tf.cast(s.variable.value, tf.float64) - tf.cast(t.variable.value, tf.float64)))
        for s, t in _pair(a, b)
        if s.trainable
    ]
    return float(tf.sqrt(tf.add_n(squares))) if squares else 0.0


# --------------------------------------------------------------------------- cost of a copy per step


def make_train_step(model: keras.Model, loss_fn: Callable, optimizer: keras.optimizers.Optimizer) -> Callable:
    """A compiled training step ``(x, y) -> loss`` (one gradient step of ``model`` on the batch).

    >>> net = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    >>> step = make_train_step(net, keras.losses.MeanSquaredError(), keras.optimizers.SGD(0.1))
    >>> float(step(tf.ones((4, 3)), tf.zeros((4, 1)))) >= 0
    True
    """
    _check_model(model, "model")
    if not callable(loss_fn):
        raise TypeError(f"loss_fn must be callable, got {type(loss_fn).__name__}")

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return step


def copy_methods(source: keras.Model, target: keras.Model, directory: str) -> dict[str, Callable[[], Any]]:
    """Four ways to refresh a past copy of ``source``, as zero-argument callables, by name.

    * ``"sync (on device)"``: :func:`sync` into ``target``;
    * ``"set_weights(get_weights())"``: a round trip through NumPy on the host;
    * ``"checkpoint write + read"``: ``tf.train.Checkpoint`` written to ``directory`` and read into ``target``;
    * ``"clone_model + copy"``: a new model every time (:func:`snapshot`).
    """
    import os

    prefix = os.path.join(directory, "past")
    write, read = tf.train.Checkpoint(model=source), tf.train.Checkpoint(model=target)

    def checkpoint_round_trip() -> None:
        read.read(write.write(prefix)).assert_consumed()

    return {
        "sync (on device)": lambda: sync(source, target),
        "set_weights(get_weights())": lambda: target.set_weights(source.get_weights()),
        "checkpoint write + read": checkpoint_round_trip,
        "clone_model + copy": lambda: snapshot(source),
    }


def measure_copy_costs(
    step: Callable,
    batch: tuple,
    methods: dict[str, Callable[[], Any]],
    *,
    rounds: int = 5,
    warmup: int = 1,
) -> dict[str, float]:
    """Seconds per training step ``step(*batch)`` alone (key ``"train step alone"``) and right after
    each copy method (key ``"<method> + step"``): totals, never differences, so each is > 0.

    Each copy is timed **together with the step that follows it**: an on-device assign may share the
    source's buffer and pay for the copy only when the step writes the source. The rounds interleave
    the step alone and every copy + step (:func:`helpers.measure.interleaved`), and each keeps its
    fastest run (the least disturbed, as ``timeit`` advises). What a copy adds is its total minus
    the step alone; that difference can be at or below zero within timer noise.

    >>> net = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    >>> step = make_train_step(net, keras.losses.MeanSquaredError(), keras.optimizers.SGD(0.1))
    >>> past = snapshot(net)
    >>> costs = measure_copy_costs(step, (tf.ones((4, 3)), tf.zeros((4, 1))), {"sync": lambda: sync(net, past)})
    >>> sorted(costs)
    ['sync + step', 'train step alone']
    """
    from helpers import measure

    if not methods:
        raise ValueError("methods must name at least one copy method")
    fns: dict[str, Callable[[], Any]] = {"train step alone": lambda: step(*batch)}
    for name, copy in methods.items():
        fns[f"{name} + step"] = lambda copy=copy: (copy(), step(*batch))[1]
    return measure.interleaved(fns, rounds=rounds, warmup=warmup, statistic="min")
