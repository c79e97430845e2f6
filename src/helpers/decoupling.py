"""Dequeue a batch once, evaluate loss and gradients on it many times (notebook 01).

Line-search optimizers such as L-BFGS call their objective many times per step, at different
parameter points, and every call must see the *same* batch. In TF2 the batch is a value you hold:
take it from the iterator once (``next(iterator)``), then hand it to a compiled loss-and-gradient
function as often as the optimizer likes.

* :class:`LossAndGradient`: compiled ``(x, y) -> (loss, gradients)``, one trace for every batch shape.
* :class:`BatchObjective`: ``params -> (loss, gradient)`` on one fixed batch, for SciPy.
* :func:`minimize_on_batch`: ``scipy.optimize.minimize`` on one batch, model left at the optimum.
* :class:`CountingIterator`: counts how often the input pipeline was advanced.
* :func:`float64_copy`: your float32 model rebuilt in float64, weights included (SciPy works in float64).

The loss is the one Keras minimises: ``loss_fn``'s batch mean plus ``model.losses`` (kernel
regularisers, ``add_loss``), computed with ``training=False`` so that Dropout and BatchNorm make it
deterministic. Trainable variables are read at every call, so freezing a layer is followed.
The examples use the ragged molecules of :mod:`helpers.molecules`; any Keras model and batch work.
"""

from __future__ import annotations

import math
import weakref
from typing import Any, Callable, Iterator

import numpy as np
import tensorflow as tf
import keras

from helpers.arguments import require_int
from helpers.plumbing import (WeakModel, check_keras_steps, check_loss_fn, check_model, count_examples,
                              original_error, relaxed_signature, total_loss, trainable_key, unpack_batch)

__all__ = [
    "LossAndGradient", "shared_loss_and_gradient", "BatchObjective", "minimize_on_batch", "CountingIterator",
    "float64_copy",
]

# --------------------------------------------------------------------------- objective


def _refuse_strategy(what: str) -> None:
    """One-device helpers refuse to run under a ``tf.distribute`` strategy (before any state changes).

    Inside ``strategy.scope()`` Keras divides a loss's batch mean by the number of replicas, and the
    gradient of a mirrored variable cannot be taken outside a replica context.
    """
    if tf.distribute.has_strategy():
        strategy = tf.distribute.get_strategy()
        raise RuntimeError(
            f"{what} evaluates the whole batch on one device, but it was called inside the scope of a "
            f"{type(strategy).__name__} ({strategy.num_replicas_in_sync} replicas), where Keras divides losses "
            "by the replica count and mirrored variables have no gradient outside a replica: call it outside "
            "`strategy.scope()` (a model built inside the scope works outside it)")


_WRITES = {"AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp", "ResourceScatterUpdate",
           "ResourceScatterAdd", "ResourceScatterNdUpdate", "ResourceScatterNdAdd"}


class LossAndGradient:
    """Compiled ``(x, y[, sample_weight]) -> (loss, [gradient per trainable variable])``.

    The loss is what Keras minimises for ``model`` compiled with ``loss_fn`` (and
    ``loss_weights``): the batch mean of ``loss_fn`` (one loss per output, or a list or dict of
    them, as :mod:`helpers.loss_terms` lays them out) plus ``model.losses`` (regularisers), with
    ``training=False`` so that the same parameters and batch always give the same loss, even with
    Dropout or BatchNorm. A model that overrides ``compute_loss`` is refused (Keras would
    minimise that instead).

    With ``relaxed=True`` (default) the input signature is taken from the first batch with every
    dimension but the last left open, so batches of any size and atom count share **one** trace.
    With ``relaxed=False`` it is a plain ``tf.function``, which traces again for each new shape.

    The model's trainable variables are read at every call: after a layer is frozen or unfrozen,
    the next call traces once for the new set, and the gradients are always one per *current*
    trainable variable. A loss that returns one value per example is refused (``ValueError``
    naming it) when the function is traced, before anything runs; so is a model that writes its
    own variables in inference (a custom layer updating its state in ``call``): the loss at one
    point would change from call to call.

    >>> from helpers.molecules import PerAtomEnergy, molecule_dataset
    >>> model = PerAtomEnergy(hidden=4)
    >>> compute = LossAndGradient(model, keras.losses.MeanSquaredError(dtype="float64"))
    >>> for batch in molecule_dataset(12, batch_size=5):
    ...     loss, grads = compute(*batch)
    >>> compute.traces, len(grads) == len(model.trainable_variables)
    (1, True)
    """

    def __init__(self, model: keras.Model, loss_fn: Callable, *, relaxed: bool = True, loss_weights: Any = None):
        check_model(model)
        check_keras_steps(model, "compute_loss")
        check_loss_fn(loss_fn, loss_weights=loss_weights)
        if not isinstance(relaxed, bool):
            raise TypeError(f"relaxed must be True or False, got {type(relaxed).__name__}")
        self._model_ref = WeakModel(model, "this LossAndGradient")
        self._model: keras.Model | None = model  # None when the shared cache holds it (weakly)
        self.loss_fn, self.relaxed, self.loss_weights = loss_fn, relaxed, loss_weights
        self._functions: dict[tuple, Any] = {}  # (trainable set, weighted?) -> compiled function
        self._signatures: dict[tuple, Any] = {}

    @property
    def model(self) -> keras.Model:
        return self._model_ref()

    def _loss_and_gradients(self, x, y, sample_weight=None):
        model = self.model
        variables = model.trainable_variables
        with tf.GradientTape() as tape:
            loss = total_loss(model, self.loss_fn, y, model(x, training=False), sample_weight,
                              loss_weights=self.loss_weights)
        grads = tape.gradient(loss, variables)
        return loss, [tf.zeros_like(v) if g is None else g for g, v in zip(grads, variables)]

    def _function_for(self, args: tuple) -> Any:
        """The compiled function for the model's current trainable set, traced (and checked) now."""
        model = self.model
        if not model.built:
            model(args[0])  # create the weights eagerly: creating them inside a trace forces a retrace
        key = (trainable_key(model), len(args))
        if key not in self._functions:
            if self.relaxed:
                signature = relaxed_signature(args, keep="last")
                fn = tf.function(self._loss_and_gradients, input_signature=signature)
                self._signatures[key] = signature
            else:
                fn = tf.function(self._loss_and_gradients)
            try:
                concrete = fn.get_concrete_function(*args)  # trace now: a bad loss fails here, before any evaluation
            except (TypeError, ValueError) as error:
                raise original_error(error) from None
            writes = sorted({op.type for op in concrete.graph.get_operations() if op.type in _WRITES})
            if writes:
                raise ValueError(f"model {model.name!r} writes its own variables when it is called with "
                                 f"training=False ({', '.join(writes)}: a layer that updates its state in call), so "
                                 "the loss at the same parameters would change from one evaluation to the next")
            self._functions[key] = fn
        if self.relaxed:
            self._check_compatible(key, args)
        return self._functions[key]

    def _check_compatible(self, key: tuple, args: tuple) -> None:
        for name, spec, value in zip(("x", "y", "sample_weight"), self._signatures[key], args):
            value_spec = relaxed_signature(value, keep="last")
            try:
                compatible = all(tf.nest.flatten(tf.nest.map_structure(
                    lambda s, v: s.is_compatible_with(v), spec, value_spec)))
            except (TypeError, ValueError):  # a different nesting (a dict where a tensor was)
                compatible = False
            if not compatible:
                raise TypeError(f"{name} has type {value_spec}, but this LossAndGradient was compiled for "
                                f"{spec}: feed batches of one structure and dtype (or make another one)")

    def __call__(self, x, y, sample_weight=None) -> tuple[tf.Tensor, list[tf.Tensor]]:
        _refuse_strategy("LossAndGradient")
        args = (x, y) if sample_weight is None else (x, y, sample_weight)
        return self._function_for(args)(*args)

    def prepare(self, x, y, sample_weight=None) -> None:
        """Trace for this batch now (no evaluation): a per-example loss is refused here."""
        _refuse_strategy("LossAndGradient")
        self._function_for((x, y) if sample_weight is None else (x, y, sample_weight))

    @property
    def traces(self) -> int:
        """How many times the compiled functions have been traced so far (one per trainable set)."""
        return sum(fn.experimental_get_tracing_count() for fn in self._functions.values())


_shared: "weakref.WeakKeyDictionary[keras.Model, dict[int, LossAndGradient]]" = weakref.WeakKeyDictionary()


def shared_loss_and_gradient(model: keras.Model, loss_fn: Callable, *, loss_weights: Any = None) -> LossAndGradient:
    """The one :class:`LossAndGradient` for this model and loss, reused across batches.

    :class:`BatchObjective` uses it, so that optimising on batch after batch traces once. The cache
    holds the model weakly: deleting the model frees the entry and its compiled function.

    >>> from helpers.molecules import PerAtomEnergy, molecule_dataset
    >>> model, loss = PerAtomEnergy(hidden=4), keras.losses.MeanSquaredError(dtype="float64")
    >>> shared_loss_and_gradient(model, loss) is shared_loss_and_gradient(model, loss)
    True
    """
    check_model(model)
    check_loss_fn(loss_fn)
    per_loss = _shared.setdefault(model, {})
    key = (id(loss_fn), repr(loss_weights))
    cached = per_loss.get(key)
    if cached is None or cached.loss_fn is not loss_fn:
        cached = per_loss[key] = LossAndGradient(model, loss_fn, loss_weights=loss_weights)
        cached._model = None  # weak only: a value that held its key would keep the model alive forever
    return cached


def _non_finite(batch: tuple) -> str | None:
    """The name of the first part of ``batch`` (x, y, sample_weight) that holds a NaN or inf."""
    for name, part in zip(("x", "y", "sample_weight"), batch):
        for leaf in tf.nest.flatten(part, expand_composites=True):
            leaf = tf.convert_to_tensor(leaf)
            if leaf.dtype.is_floating and not bool(tf.reduce_all(tf.math.is_finite(leaf))):
                count = int(tf.reduce_sum(tf.cast(~tf.math.is_finite(leaf), tf.int32)))
                return f"{name} holds {count} NaN or infinite value(s)"
    return None


class BatchObjective:
    """``params -> (loss, gradient)`` on one fixed batch: the callable a SciPy optimizer wants.

    ``params`` is a flat float64 vector of all the model's trainable parameters. Each call writes
    it into the model, evaluates loss and gradient on ``batch`` (``(x, y)`` or Keras'
    ``(x, y, sample_weight)``) with a compiled function shared by every batch
    (:func:`shared_loss_and_gradient`, or ``compiled``), and returns ``(float, float64 array)``.
    The batch is never taken from an iterator here: the caller dequeues it once.

    Checked when it is made, before the model changes: the batch (empty, NaN, x and y of different
    lengths), the loss (a per-example loss is refused), ``compiled`` (made for this model and loss),
    and the variables: a variable with a ``constraint`` is refused, since a Keras optimizer applies
    it after every step and SciPy, moving the weights itself, would not.
    The parameter vector is fixed when it is made: if a layer is frozen or unfrozen afterwards, a
    call raises ``ValueError`` (make a new objective). A non-finite loss or gradient raises
    ``FloatingPointError`` and puts the model back at the last point that gave a finite loss.

    Attributes: ``evaluations`` (calls so far), ``traces`` (traces of the compiled function so
    far, counted over all batches that share it), ``losses`` (the loss of every call, in order).

    >>> from helpers.molecules import PerAtomEnergy, molecule_dataset
    >>> model = PerAtomEnergy(hidden=4)
    >>> batch = next(iter(molecule_dataset(8, batch_size=8)))
    >>> objective = BatchObjective(model, keras.losses.MeanSquaredError(dtype="float64"), batch)
    >>> loss, grad = objective(objective.initial_params())
    >>> grad.shape == (objective.size,), objective.evaluations
    (True, 1)
    """

    def __init__(self, model: keras.Model, loss_fn: Callable, batch: Any, *,
                 compiled: LossAndGradient | None = None, loss_weights: Any = None):
        check_model(model)
        check_loss_fn(loss_fn)
        _refuse_strategy("BatchObjective")
        x, y, weight = unpack_batch(batch, "batch")
        size = count_examples(y)
        if size == 0:
            raise ValueError("batch is empty: it holds 0 examples, so there is no loss to minimise")
        for name, part in (("x", x), ("sample_weight", weight)):
            if part is not None and count_examples(part) != size:
                raise ValueError(f"batch {name} holds {count_examples(part)} examples but y holds {size}: "
                                 "they must describe the same examples")
        self.batch = (x, y) if weight is None else (x, y, weight)
        problem = _non_finite(self.batch)
        if problem:
            raise ValueError(f"batch {problem}: the loss would be NaN at every point; clean the data")
        if compiled is None:
            compiled = shared_loss_and_gradient(model, loss_fn, loss_weights=loss_weights)
        elif not isinstance(compiled, LossAndGradient):
            raise TypeError(f"compiled must be a LossAndGradient, got {type(compiled).__name__}")
        elif compiled.model is not model or compiled.loss_fn is not loss_fn or compiled.loss_weights != loss_weights:
            raise ValueError("compiled was made for another model, loss_fn or loss_weights: pass "
                             "LossAndGradient(model, loss_fn) for this model and loss")
        compiled.prepare(*self.batch)  # builds the model and traces: a per-example loss is refused here
        self.model, self.loss_fn, self.compiled = model, loss_fn, compiled
        self.variables = list(model.trainable_variables)
        if not self.variables:
            raise ValueError(f"model {model.name!r} has no trainable variables to optimise")
        constrained = [v for v in self.variables if getattr(v, "constraint", None) is not None]
        if constrained:
            raise ValueError(f"variable {constrained[0].path!r} has a constraint, which a Keras optimizer applies "
                             "after every step; SciPy moves the weights itself and would leave the constraint "
                             "behind: remove it, or train this model with a Keras optimizer")
        self._key = trainable_key(model)
        self.shapes = [tuple(v.shape) for v in self.variables]
        self.size = sum(math.prod(s) for s in self.shapes)
        self.evaluations = 0
        self.losses: list[float] = []
        self._last_finite: np.ndarray | None = None

    @property
    def traces(self) -> int:
        return self.compiled.traces

    def _check_trainable(self) -> None:
        if trainable_key(self.model) != self._key:
            now = sum(math.prod(v.shape) for v in self.model.trainable_variables)
            raise ValueError(
                f"the model now has {now} trainable parameters, but this BatchObjective was made for "
                f"{self.size}: a layer was frozen or unfrozen since. Make a new "
                "BatchObjective (minimize_on_batch makes one per call)")

    def initial_params(self) -> np.ndarray:
        """The model's current trainable parameters as one flat float64 vector."""
        self._check_trainable()
        return np.concatenate([np.asarray(v.numpy()).ravel() for v in self.variables]).astype(np.float64)

    def assign(self, params: np.ndarray) -> None:
        """Write the flat vector ``params`` into the model's trainable variables."""
        self._check_trainable()
        params = np.asarray(params, dtype=np.float64)
        if params.shape != (self.size,):
            raise ValueError(
                f"params has shape {params.shape}, but the model has {self.size} trainable parameters: "
                f"pass a flat vector of length {self.size}"
            )
        if not np.all(np.isfinite(params)):
            raise ValueError(f"params holds {int(np.sum(~np.isfinite(params)))} NaN or infinite value(s)")
        start = 0
        for variable, shape in zip(self.variables, self.shapes):
            count = math.prod(shape)
            variable.assign(params[start:start + count].reshape(shape).astype(variable.dtype))
            start += count

    def __call__(self, params: np.ndarray) -> tuple[float, np.ndarray]:
        _refuse_strategy("BatchObjective")
        if self._last_finite is None:
            self._last_finite = self.initial_params()
        self.assign(params)
        loss, grads = self.compiled(*self.batch)
        loss = float(loss)
        grad = np.concatenate([np.asarray(g.numpy()).ravel() for g in grads]).astype(np.float64)
        if not (math.isfinite(loss) and np.all(np.isfinite(grad))):
            self.assign(self._last_finite)
            what = f"loss is {loss}" if not math.isfinite(loss) else "the gradient is not finite"
            raise FloatingPointError(
                f"{what} at these params (evaluation {self.evaluations + 1}); the batch is finite, so the "
                "parameters overflow the model. The model is back at the last point with a finite loss.")
        self._last_finite = np.array(params, dtype=np.float64)
        self.evaluations += 1
        self.losses.append(loss)
        return loss, grad


def minimize_on_batch(
    model: keras.Model,
    loss_fn: Callable,
    batch: Any,
    method: str = "L-BFGS-B",
    max_iterations: int = 50,
    *,
    compiled: LossAndGradient | None = None,
    loss_weights: Any = None,
):
    """Minimise the loss on one batch with ``scipy.optimize.minimize``; leave the model at SciPy's last iterate.

    The loss is ``loss_fn`` plus ``model.losses``, as Keras minimises (see :class:`LossAndGradient`);
    only the model's trainable variables move. Every argument is checked before the model changes
    (see :class:`BatchObjective`: a constrained variable is refused).
    Returns SciPy's ``OptimizeResult`` with two extra fields: ``objective`` (the
    :class:`BatchObjective`, with its evaluation count and loss history) and ``iterates``
    (the evaluation number at which each accepted iterate was reached).

    >>> from helpers.molecules import PerAtomEnergy, molecule_dataset
    >>> model = PerAtomEnergy(hidden=4)
    >>> batch = next(iter(molecule_dataset(8, batch_size=8)))
    >>> result = minimize_on_batch(model, keras.losses.MeanSquaredError(dtype="float64"), batch, max_iterations=5)
    >>> result.objective.evaluations >= result.nit
    True
    """
    from scipy.optimize import minimize

    if not isinstance(method, str):
        raise TypeError(f"method must be the name of a SciPy method such as 'L-BFGS-B', got {type(method).__name__}")
    require_int("max_iterations", max_iterations, minimum=1)
    objective = BatchObjective(model, loss_fn, batch, compiled=compiled, loss_weights=loss_weights)
    iterates: list[int] = []
    result = minimize(objective, objective.initial_params(), jac=True, method=method,
                      options={"maxiter": max_iterations},
                      callback=lambda *_: iterates.append(objective.evaluations))
    objective.assign(result.x)
    result.objective, result.iterates = objective, iterates
    return result


def float64_copy(build: Callable[[], keras.Model], model: keras.Model) -> keras.Model:
    """The model ``build()`` makes, in float64, holding ``model``'s weights.

    SciPy's L-BFGS stops when an iteration lowers the loss by less than about 2e-9 of itself, finer
    than float32 resolves (docs/decoupling.md, "Why float64"). ``keras.config.set_floatx`` alone is
    not enough once a layer was built (Keras caches the dtype policy), so both the default float type
    and the dtype policy are set while ``build`` runs, and restored afterwards, also when it raises.

    >>> def build():
    ...     return keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    >>> copy = float64_copy(build, build())
    >>> copy.weights[0].dtype, keras.config.floatx()
    ('float64', 'float32')
    """
    if not callable(build):
        raise TypeError(f"build must be a function that makes the model, got {type(build).__name__}")
    check_model(model, built=True)
    old_floatx, old_policy = keras.config.floatx(), keras.config.dtype_policy()
    keras.config.set_floatx("float64")  # keras.Input makes float64 inputs
    keras.config.set_dtype_policy("float64")  # layers hold and compute float64
    try:
        copy = build()
    finally:
        keras.config.set_floatx(old_floatx)
        keras.config.set_dtype_policy(old_policy)
    if not isinstance(copy, keras.Model):
        raise TypeError(f"build() must return a Keras model, it returned {type(copy).__name__}")
    try:
        copy.set_weights(model.get_weights())
    except ValueError as error:
        raise ValueError(f"build() made a model of another structure than model: {error}") from None
    return copy


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
