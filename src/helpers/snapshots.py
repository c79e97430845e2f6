"""A past copy of a network in memory, complete and cheap (notebook 05).

Some training loops need a network's *previous* state next to its current one: a target network
(DQN), a teacher that is a moving average of the student (BYOL, mean teacher), or, as in the source
question, network B's state from step ``t`` evaluated on the same input as its state at ``t + 1``.
TF1 built the network twice under two variable scopes and grouped ``assign`` ops into a sync op.
In TF2 the copy is a second Keras model and the sync is one compiled function:

* :func:`snapshot`: an independent copy of a built model (Sequential, functional or subclassed)
  with **all** of its state: trainable weights, BatchNorm moving statistics, random-seed state and
  a stateful RNN's states (which Keras keeps outside ``model.variables``).
* :func:`sync`: copy ``source`` into ``target`` on the device (``tau=1``), or a soft (Polyak) update
  of the trainable weights with a hard copy of the rest (``0 < tau < 1``).
* :func:`state_paths`: every state variable of a model under a structural path; :func:`sync` pairs
  two models' variables through these paths, never by list position.
* :func:`parameter_distance`: how far two models' trainable weights are apart (for the picture).
* :func:`make_train_step`, :func:`copy_methods`, :func:`measure_copy_costs`: what a copy per
  training step costs (the notebook's Cost section and ``benchmarks/bench_snapshots.py``).

Calling convention of the workbook: models are Keras 3 models; a batch is an ``(x, y)`` pair.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from numbers import Real
from typing import Any, Callable

import tensorflow as tf
import keras

from helpers import measure
from helpers.plumbing import (
    check_keras_steps, check_loss_fn, check_model, check_optimizer, strategy_of, tf_variable, total_loss, trainable_key,
)
from helpers.snapshot_rebuild import fresh_copy
from helpers.snapshot_state import copy_outside_state, outside_differences, outside_state

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
    """Every state variable of ``model``, with structural paths: the variables of
    ``model.variables`` (weights, BatchNorm statistics, seed-generator state) and, for a stateful
    RNN layer, its ``states`` (Keras keeps those outside ``model.variables``).

    >>> net = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2), keras.layers.BatchNormalization()])
    >>> [e.path for e in state_paths(net)][:3]
    ['layers[0]:Dense/kernel', 'layers[0]:Dense/bias', 'layers[1]:BatchNormalization/gamma']

    Raises ``TypeError`` if ``model`` is not a Keras model and ``ValueError`` if it was never built.
    """
    _check_built(model, "model")
    entries: list[StateEntry] = []
    _walk(model, "", model.name, entries, set())
    return entries


_AUTO_NAME = re.compile(r"^variable(_\d+)?$")


def _walk(layer: keras.layers.Layer, path: str, label: str, out: list[StateEntry], seen: set[int]) -> None:
    # Keras 3 keeps a layer's own variables in these two lists (by declared trainability), its
    # random-seed state in ``_seed_generators`` and its sub-layers in ``_layers``: the same fields
    # ``Layer.variables`` walks. Reading them lets a path say *where* a variable lives.
    def add(variable: Any, name: str, text: str, trainable: bool) -> None:
        if id(variable) not in seen:
            seen.add(id(variable))
            out.append(StateEntry(f"{path}{name}", f"{label}/{text}", variable, trainable))

    own = [(v, True) for v in layer._trainable_variables] + [(v, False) for v in layer._non_trainable_variables]
    for k, (variable, trainable) in enumerate(own):
        # An unnamed weight gets a process-wide unique name (variable_7): use its place instead.
        name = f"variables[{k}]" if _AUTO_NAME.match(variable.name) else variable.name
        add(variable, name, variable.name, trainable)
    for k, generator in enumerate(layer._seed_generators):
        add(generator.state, f"seed_generators[{k}]", f"seed_generator[{k}]", False)
    if isinstance(layer, keras.layers.RNN) and layer.stateful and layer.states is not None:
        # A stateful RNN's carried states are untracked variables: not in ``model.variables``,
        # not in ``get_weights()``, not in a checkpoint. They decide the next output.
        for k, state in enumerate(keras.tree.flatten(layer.states)):
            add(state, f"states[{k}]", f"state[{k}]", False)
    k = 0
    for sub in layer._layers:
        before = len(out)
        _walk(sub, f"{path}layers[{k}]:{type(sub).__name__}/", f"{label}/{sub.name}", out, seen)
        k += len(out) > before  # stateless sub-layers (InputLayer, activations) take no index


def _check_built(model: Any, argument: str) -> None:
    check_model(model, argument, built=True)
    if not model.variables:
        raise ValueError(f"{argument} ({model.name!r}) holds no variables yet, so there is no state to copy: "
                         f"call it once on a batch ({argument}(x)) so that its layers create them")


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
      seed state, a stateful RNN's states, and the state outside the variables below), so both
      models give the same next output.
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

    State Keras keeps outside the variables (:mod:`helpers.snapshot_state`: an adapted
    ``Normalization``'s constants, a lookup layer's vocabulary, ``Discretization``'s bins) is
    copied too, eagerly and after the variables; inside a ``tf.function`` it must already agree.

    Raises ``TypeError`` (not a Keras model, ``tau`` not a number) or ``ValueError`` (a model never
    built, ``tau`` outside (0, 1], ``source is target``, different structure: the message names
    the first mismatching variable; state outside the variables that differs and cannot be copied
    here: a custom layer's tensor or table, or any such state inside a ``tf.function``). Under a ``tf.distribute`` strategy, call it between steps
    (cross-replica context), as you would restore a checkpoint: replica k of ``target`` receives
    replica k of ``source``.
    """
    _check_built(source, "source")
    _check_built(target, "target")
    tau = _check_tau(tau)
    if source is target:
        raise ValueError("source and target are the same model: sync needs two models")
    pairs = _pair(source, target)
    outside = outside_state(source, target)
    differing = outside_differences(outside)
    stuck = [s for s in differing if s.kind in ("tensor", "table")]
    if stuck:
        raise ValueError(f"source and target differ in {stuck[0].label}, state kept outside the layer's variables "
                         "that no helper can copy: build the copy so that it holds the same value")
    if differing and not tf.executing_eagerly():
        raise ValueError(f"source and target differ in {differing[0].label}, state Keras keeps outside the "
                         "layer's variables, which sync copies only eagerly: call snapshots.sync(source, target) "
                         "once outside the tf.function first (after adapt)")
    soft = tuple(s.trainable and tau < 1.0 for s, _ in pairs)
    _assign(
        [tf_variable(t.variable) for _, t in pairs],
        [tf_variable(s.variable) for s, _ in pairs],
        soft,
        tf.constant(tau, tf.float32),
    )
    if differing:
        copy_outside_state(outside)  # eagerly, after the variables the constants are computed from


def sync_trace_count() -> int:
    """How many times the compiled copy behind :func:`sync` has been traced (for tests)."""
    return _assign.experimental_get_tracing_count()


def snapshot(model: keras.Model) -> keras.Model:
    """An independent copy of a built ``model``: same structure, same values of **all** its state.

    The copy has its own variables (created in ``model``'s distribution strategy, if any): later
    updates of either model never reach the other. Each layer's ``trainable`` flag is copied too.
    The copy is not compiled and has no optimizer; freeze it (``past.trainable = False``) if no
    optimizer may train it. It is built by :func:`helpers.snapshot_rebuild.fresh_copy`:

    * Sequential and functional models (nested models included): ``keras.models.clone_model``;
    * a subclassed model whose class defines ``get_config()``: rebuilt from its config; one whose
      ``__init__`` takes no arguments (``QNetwork()``, as DQN code often writes it): constructed again;
    * a subclassed model whose ``__init__`` takes arguments but whose class has no ``get_config()``
      is refused (``TypeError``): Keras records only the arguments' *defaults* for a model
      subclass, so a copy rebuilt from them could differ silently (another activation, say).
      Add ``get_config()``, or build the copy yourself and fill it with :func:`sync`.

    >>> net = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    >>> past = snapshot(net)
    >>> past is net, len(past.variables) == len(net.variables)
    (False, True)

    Raises ``TypeError`` if ``model`` is not a Keras model or cannot be rebuilt (the message says
    what to do), and ``ValueError`` if it was never built, its rebuilt copy differs in structure, or
    it keeps state outside its variables that :func:`sync` cannot copy (a custom layer's tensor or
    lookup table set outside its config).
    """
    _check_built(model, "model")
    copy = fresh_copy(model)
    try:
        _pair(model, copy)
    except ValueError as error:
        raise ValueError(
            f"snapshot rebuilt {model.name!r} ({type(model).__name__}) but the copy does not match it ({error}). "
            f"Does get_config() of {type(model).__name__} return every constructor argument? "
            "Otherwise build the copy yourself and fill it with snapshots.sync(model, copy)"
        ) from None
    sync(model, copy)
    return copy


# --------------------------------------------------------------------------- measuring


def parameter_distance(a: keras.Model, b: keras.Model) -> float:
    """Euclidean distance between the two models' trainable weights, paired by structure.

    It never reads 0 for two models that answer differently: when the trainable weights are equal
    but other state that decides the output differs (BatchNorm statistics, a stateful RNN's
    states, other non-trainable weights, preprocessing constants or vocabularies), it raises a
    ``ValueError`` naming that state. Random-seed state is not compared (it changes no inference).

    >>> net = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    >>> parameter_distance(net, snapshot(net))
    0.0
    """
    _check_built(a, "a")
    _check_built(b, "b")
    pairs = _pair(a, b)
    squares = [
        tf.reduce_sum(tf.square(tf.cast(s.variable.value, tf.float64) - tf.cast(t.variable.value, tf.float64)))
        for s, t in pairs
        if s.trainable
    ]
    distance = float(tf.sqrt(tf.add_n(squares))) if squares else 0.0
    if distance == 0.0:
        differing = [s.label for s, t in pairs if not s.trainable and "seed_generator" not in s.path
                     and not bool(tf.reduce_all(s.variable.value == t.variable.value))]
        differing += [s.label for s in outside_differences(outside_state(a, b))]
        if differing:
            raise ValueError(f"a and b have the same trainable weights but differ in {differing[0]!r}, which "
                             "decides their output too: they answer differently, so a distance of 0 would "
                             "mislead. Sync them (snapshots.sync), or compare that state yourself")
    return distance


# --------------------------------------------------------------------------- cost of a copy per step


def make_train_step(model: keras.Model, loss_fn: Callable, optimizer: keras.optimizers.Optimizer, *,
                    loss_weights: Any = None) -> Callable:
    """A compiled training step ``(x, y) -> loss``: one gradient step of ``model`` on the batch.

    The loss is Keras' (``loss_fn`` plus ``model.losses``, e.g. an L2 regulariser; one loss per
    output, or a list or dict of them with ``loss_weights``, as ``compile`` takes them); a
    per-example loss is refused when the step is first traced, before any weight changes. The trainable
    variables are read at every call: freezing a layer later retraces the step, it does not keep
    training the layer. With a ``keras.optimizers.LossScaleOptimizer`` (mixed precision) the loss is
    scaled before the gradient, as Keras' ``fit`` does, and the optimizer unscales. A model that
    overrides ``compute_loss`` or ``train_step`` is refused (``fit`` would run those). It is a
    single-device step (for measuring what a copy costs): a model whose variables live in a
    ``tf.distribute`` strategy is refused; train those with ``fit`` or ``strategy.run``.

    >>> net = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    >>> step = make_train_step(net, keras.losses.MeanSquaredError(), keras.optimizers.SGD(0.1))
    >>> float(step(tf.ones((4, 3)), tf.zeros((4, 1)))) >= 0
    True
    """
    _check_built(model, "model")
    check_keras_steps(model, "compute_loss", "train_step")
    check_loss_fn(loss_fn, loss_weights=loss_weights)
    check_optimizer(optimizer)
    if strategy_of(model.variables, f"model {model.name!r}") is not None:
        raise ValueError(f"model {model.name!r} lives in a tf.distribute strategy: make_train_step builds a "
                         "single-device step; train it with model.fit or your own strategy.run step "
                         "(snapshot and sync work under the strategy)")

    @tf.function
    def compiled(x, y, key):  # ``key`` (the trainable set) is only there to retrace when it changes
        variables = model.trainable_variables
        with tf.GradientTape() as tape:
            loss = total_loss(model, loss_fn, y, model(x, training=True), loss_weights=loss_weights)
            scaled = optimizer.scale_loss(loss)  # a LossScaleOptimizer's scale (mixed precision), else loss
        optimizer.apply_gradients(zip(tape.gradient(scaled, variables), variables))
        return loss

    def step(x, y):
        return compiled(x, y, trainable_key(model))

    return step


def copy_methods(source: keras.Model, target: keras.Model, directory: str) -> dict[str, Callable[[], Any]]:
    """Four ways to refresh a past copy of ``source``, as zero-argument callables, by name.

    * ``"sync (on device)"``: :func:`sync` into ``target``;
    * ``"set_weights(get_weights())"``: a round trip through NumPy on the host;
    * ``"checkpoint write + read"``: ``tf.train.Checkpoint`` written to ``directory`` and read into ``target``;
    * ``"clone_model + copy"``: a new model every time (:func:`snapshot`).

    Raises ``ValueError`` if the models differ in structure or ``directory`` is not a folder.
    """
    _pair(source, target)
    if not isinstance(directory, (str, os.PathLike)) or not os.path.isdir(directory):
        raise ValueError(f"directory must be an existing folder for the checkpoint, got {directory!r}")
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
    if not callable(step):
        raise TypeError(f"step must be callable as step(*batch), got {type(step).__name__}")
    if not isinstance(batch, (tuple, list)):
        raise TypeError(f"batch must be a tuple of step's arguments such as (x, y), got {type(batch).__name__}")
    if not isinstance(methods, dict) or not methods:
        raise ValueError("methods must be a dict naming at least one copy method")
    fns: dict[str, Callable[[], Any]] = {"train step alone": lambda: step(*batch)}
    for name, copy in methods.items():
        if not callable(copy):
            raise TypeError(f"methods[{name!r}] must be callable with no arguments, got {type(copy).__name__}")
        fns[f"{name} + step"] = lambda copy=copy: (copy(), step(*batch))[1]
    return measure.interleaved(fns, rounds=rounds, warmup=warmup, statistic="min")
