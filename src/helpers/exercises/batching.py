"""Checkers for notebook 03 (batch iteration).

``check_batch_positions(fn)``: ``fn(k, n_tokens, batch_size, num_steps)`` must return the positions
in ``raw_ids`` of the inputs ``x`` of batch ``k`` (counted from 0 across epochs, as with
``repeat=True``), an integer array of shape ``[batch_size, num_steps]``, computed with arithmetic:
while ``fn`` runs, the pipelines are hidden (``ptb_batches``, iterating any ``tf.data.Dataset``, the
TF1 producer and sessions), and one layout has 10**15 tokens, more than any pipeline can hold.

``check_reset_callback(fn)``: ``fn(windows_per_row)`` must return a Keras callback that resets a model's
stateful RNN layers exactly before the batches where the rows jump back to their start (every
``windows_per_row`` batches of a repeated ``ptb_batches`` stream), whatever ``steps_per_epoch`` ``fit`` uses,
also when the fit resumes a run (``initial_epoch`` > 0, the stream skipped to where the run stopped).

The expected positions come from the real producer run inside the check (and, for the stream no
pipeline can hold, from a predicate on the layout); nothing here returns them for given arguments.
Fixtures for the hidden tests: :func:`positions_of` (the learner's positions, pipelines hidden),
:func:`stateful_model` and :func:`zero_state_batches` (where a fit with the learner's callback
started from a zero state).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import sys
from typing import Any, Callable, Iterator

import numpy as np

from helpers.exercises._core import CheckFailed, call_learner, expect, passed

__all__ = ["check_batch_positions", "check_reset_callback", "positions_of", "stateful_model", "zero_state_batches"]

# (n_tokens, batch_size, num_steps): uneven lengths, one stream, one step, a stream length that is
# a multiple of num_steps (where "one window too many" shows), and the notebook's corpus layout.
_CASES = [(70, 4, 5), (101, 3, 7), (60, 4, 5), (23, 1, 4), (50, 6, 1), (1906, 8, 10)]
# Far too many tokens for any pipeline (or any array of positions) to exist: 10**15 int64 is 7 PiB.
_HUGE = (10**15, 1000, 35)


@functools.lru_cache(maxsize=None)
def _genuine_batching() -> Any:
    """A fresh copy of helpers.batching, loaded from its file: an answer cell cannot have patched it."""
    spec = importlib.util.find_spec("helpers.batching")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _follows_layout(got: np.ndarray, k: int, n_tokens: int, batch_size: int, num_steps: int) -> bool:
    """Whether ``got`` holds batch ``k``'s positions: rows of consecutive positions, one row per
    stream, the streams ``batch_len`` apart, stream 0 at window ``k % epoch_size``."""
    layout = _genuine_batching().ptb_layout(n_tokens, batch_size, num_steps)
    rows_consecutive = bool(np.all(np.diff(got, axis=1) == 1))
    streams_apart = bool(np.all(np.diff(got[:, 0]) == layout.batch_len))
    return rows_consecutive and streams_apart and int(got[0, 0]) == (k % layout.epoch_size) * num_steps


def _epoch_size(n_tokens: int, batch_size: int, num_steps: int) -> int:
    return _genuine_batching().ptb_layout(n_tokens, batch_size, num_steps).epoch_size


_MISSING = object()


@contextlib.contextmanager
def _pipelines_hidden(name: str, used: list[str]) -> Iterator[None]:
    """While the learner's code runs, every way to run the producer fails with a hint (and is noted in
    ``used``, in case the learner's code catches the error)."""
    import tensorflow as tf

    targets = [(tf.data.Dataset, attr, f"iterating a tf.data.Dataset ({attr})")
               for attr in ("__iter__", "reduce", "get_single_element", "as_numpy_iterator")]
    targets += [(tf.compat.v1.Session, "run", "a TF1 session.run"),
                (tf.compat.v1.train, "range_input_producer", "the TF1 range_input_producer")]
    for module_name, attr in (("helpers.batching", "ptb_batches"), ("helpers.tf1", "ptb_batches"),
                              ("helpers.tf1", "QueuePipeline")):
        module = sys.modules.get(module_name)
        if module is not None:
            targets.append((module, attr, f"{module_name.removeprefix('helpers.')}.{attr}"))

    def blocker(label: str) -> Callable[..., Any]:
        def blocked(*args: Any, **kwargs: Any) -> Any:
            used.append(label)
            raise CheckFailed(_ran_pipeline(name, label))
        return blocked

    saved = []
    for owner, attr, label in targets:
        original = owner.__dict__.get(attr, _MISSING) if isinstance(owner, type) else getattr(owner, attr)
        saved.append((owner, attr, original))
        setattr(owner, attr, blocker(label))
    try:
        yield
    finally:
        for owner, attr, original in reversed(saved):
            if original is _MISSING:
                delattr(owner, attr)
            else:
                setattr(owner, attr, original)


def _ran_pipeline(name: str, label: str) -> str:
    return (f"`{name}` ran the pipeline ({label}): the exercise is to predict the positions without it. "
            "Compute them with arithmetic from k, n_tokens, batch_size and num_steps")


def positions_of(fn: Callable[..., Any], k: int, n_tokens: int, batch_size: int, num_steps: int) -> np.ndarray:
    """The learner's ``fn(k, n_tokens, batch_size, num_steps)`` as an int64 array, run with every
    pipeline hidden; a pipeline run, a wrong shape or type, or running out of memory fail with a hint."""
    used: list[str] = []

    def run() -> Any:
        try:
            return fn(k, n_tokens, batch_size, num_steps)
        except MemoryError:
            raise CheckFailed(
                f"`batch_positions` ran out of memory for n_tokens={n_tokens:.0e}: it builds something as long "
                "as the whole stream. Compute the positions of batch k directly; they need only k, the layout "
                "and num_steps") from None

    with _pipelines_hidden("batch_positions", used):
        result = call_learner(run, name="batch_positions")
    expect(not used, _ran_pipeline("batch_positions", used[0]) if used else "")
    return _as_positions(result, (batch_size, num_steps))


def _as_positions(result: Any, expected_shape: tuple[int, int]) -> np.ndarray:
    try:
        got = np.asarray(result)
    except Exception:  # noqa: BLE001 - anything that is not array-like gets the same feedback
        got = np.asarray(None)
    if got.dtype == object or not (np.issubdtype(got.dtype, np.integer) or np.issubdtype(got.dtype, np.floating)):
        raise CheckFailed(f"return an integer array of positions, got {type(result).__name__}")
    expect(
        got.shape == expected_shape,
        f"batch x has shape [batch_size, num_steps] = {list(expected_shape)}; yours has shape {list(got.shape)}",
    )
    expect(
        np.all(np.round(got) == got),
        "positions are whole numbers: use integer division (//), not /",
    )
    return got.astype(np.int64)


def check_batch_positions(fn: Callable[[int, int, int, int], Any]) -> None:
    """Compare ``fn`` with the producer on its own cases: inside one epoch, after wrap-arounds, then
    on a stream far too long for any pipeline; the pipelines are hidden while ``fn`` runs."""
    batching = _genuine_batching()
    first_epoch, after_wrap, produced = [], [], {}
    for n_tokens, batch_size, num_steps in _CASES:
        epoch = _epoch_size(n_tokens, batch_size, num_steps)
        first_epoch += [(k, n_tokens, batch_size, num_steps) for k in sorted({0, 1 % epoch, epoch - 1})]
        after_wrap += [(k, n_tokens, batch_size, num_steps) for k in (epoch, 2 * epoch + 1)]
        stream = batching.ptb_batches(np.arange(n_tokens), batch_size, num_steps, repeat=True, prefetch=0)
        produced[n_tokens, batch_size, num_steps] = np.stack([x.numpy() for x, _ in stream.take(2 * epoch + 2)])

    for k, n_tokens, batch_size, num_steps in first_epoch:
        got = positions_of(fn, k, n_tokens, batch_size, num_steps)
        expected = produced[n_tokens, batch_size, num_steps][k]
        if np.array_equal(got, expected):
            continue
        case = f"k={k}, n_tokens={n_tokens}, batch_size={batch_size}, num_steps={num_steps}"
        expect(
            np.array_equal(got[:, 1:] - got[:, :-1], np.ones((batch_size, num_steps - 1), dtype=np.int64)),
            f"({case}) each row of x is num_steps consecutive tokens of one stream: "
            "positions along a row go up by 1",
        )
        expect(
            got[0, 0] == expected[0, 0],
            f"({case}) stream 0 of batch {k} starts at the wrong position: batch k reads window k, "
            "and every window is num_steps tokens long",
        )
        raise CheckFailed(
            f"({case}) stream 0 is right, but stream s is not: how long is each stream after the data is "
            "cut into batch_size rows (the remainder is dropped)?"
        )

    wrong = []  # (case, the learner's first position) for every wrong batch after a wrap-around
    for k, n_tokens, batch_size, num_steps in after_wrap:
        got = positions_of(fn, k, n_tokens, batch_size, num_steps)
        if not np.array_equal(got, produced[n_tokens, batch_size, num_steps][k]):
            wrong.append(((k, n_tokens, batch_size, num_steps), int(got[0, 0])))
    if wrong:
        (k, n_tokens, batch_size, num_steps), _ = wrong[0]
        case = f"k={k}, n_tokens={n_tokens}, batch_size={batch_size}, num_steps={num_steps}"
        if all(first == case_[0] * case_[3] for case_, first in wrong):
            raise CheckFailed(
                f"({case}) right inside the first epoch, but not after it: when the windows of a stream "
                "run out, what does the producer (with repeat=True) read next?"
            )
        raise CheckFailed(
            f"({case}) right inside the first epoch, but the wrap-around comes at the wrong batch: "
            "count the windows that fit in one stream, remembering that the last window also needs "
            "one more token for its target y"
        )

    n_tokens, batch_size, num_steps = _HUGE
    huge = [(k, *_HUGE) for k in (12_345, 3 * _epoch_size(*_HUGE) + 7)]
    for case in huge:
        got = positions_of(fn, *case)
        expect(_follows_layout(got, *case),
               f"(k={case[0]}, n_tokens=10**15, batch_size={batch_size}, num_steps={num_steps}) wrong positions "
               "on a very long stream: are your intermediate numbers exact integers (no float, no int32 overflow)?")

    passed(
        f"batch_positions matches the producer on {len(first_epoch) + len(after_wrap)} batches of "
        f"{len(_CASES)} layouts, {len(after_wrap)} of them after an epoch wrap-around, and predicts "
        f"{len(huge)} batches of a 10**15-token stream without running any pipeline."
    )


# --------------------------------------------------------------------------- exercise 2: where to reset


# (windows_per_row, steps_per_epoch, epochs, initial_epoch): a fresh fit whose Keras epochs are shorter than a pass,
# then two fits that resume a run (the stream skipped to where it stopped), with shorter and longer Keras epochs.
_FITS = [(5, 3, 5, 0), (5, 3, 4, 2), (4, 6, 2, 1)]
_STREAM = (2, 3)  # batch_size, num_steps of the checker's data


def stateful_model(batch_size: int, num_steps: int) -> Any:
    """A small stateful language model whose LSTM is not where the notebook's is (third layer, not second)."""
    import keras

    keras.utils.set_random_seed(3)
    model = keras.Sequential([
        keras.Input(batch_shape=(batch_size, num_steps), dtype="int32"),
        keras.layers.Embedding(30, 4),
        keras.layers.Dense(4, activation="tanh"),
        keras.layers.LSTM(5, return_sequences=True, stateful=True),
        keras.layers.Dense(30),
    ])
    model.compile(keras.optimizers.SGD(0.01), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def zero_state_batches(model: Any, callback: Any, windows_per_row: int, steps_per_epoch: int, epochs: int,
                       seed: int | None = None, initial_epoch: int = 0) -> list[int]:
    """Train ``model`` (a :func:`stateful_model`) with ``callback`` then a spy on a repeated stream of
    ``windows_per_row`` batches, for ``epochs`` Keras epochs of ``steps_per_epoch`` batches. With
    ``initial_epoch`` > 0 the fit resumes a run: ``fit(stream.skip(initial_epoch * steps_per_epoch),
    initial_epoch=initial_epoch, epochs=initial_epoch + epochs)``. Returns the batches of this fit (counted
    from 0) at whose start the LSTM's state is zero; the state is zero before the fit."""
    import keras

    batching = _genuine_batching()
    batch_size, num_steps = _STREAM
    n_tokens = batch_size * (windows_per_row * num_steps + 1)
    ids = np.random.default_rng(windows_per_row if seed is None else seed).integers(0, 30, size=n_tokens)
    stream = batching.ptb_batches(ids, batch_size, num_steps, repeat=True).skip(initial_epoch * steps_per_epoch)
    lstm = model.layers[2]
    zero: list[int] = []

    class Spy(keras.callbacks.Callback):
        seen = 0

        def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
            if all(float(np.abs(s.numpy()).max()) == 0.0 for s in lstm.states):
                zero.append(Spy.seen)
            Spy.seen += 1

    lstm.reset_state()
    model.fit(stream, steps_per_epoch=steps_per_epoch, initial_epoch=initial_epoch, epochs=initial_epoch + epochs,
              shuffle=False, verbose=0, callbacks=[callback, Spy()])
    return zero


def _wrap_arounds(windows_per_row: int, steps_per_epoch: int, epochs: int, initial_epoch: int = 0) -> list[int]:
    """The batches of a fit (counted from 0) that start from a zero state when reset exactly where the rows
    jump back: its first batch (the state is zero before the fit), then every batch whose place in the
    whole stream is a multiple of ``windows_per_row``."""
    first = initial_epoch * steps_per_epoch
    return [j for j in range(steps_per_epoch * epochs) if j == 0 or (first + j) % windows_per_row == 0]


def check_reset_callback(fn: Callable[[int], Any]) -> None:
    """Train a stateful model with ``fn(windows_per_row)`` and Keras epochs that do not match the data's passes,
    in a fresh fit and in fits that resume a run; the LSTM's state must be zero at the start of exactly the
    batches where the data wraps around."""
    import keras

    model = None
    for windows_per_row, steps_per_epoch, epochs, initial_epoch in _FITS:
        callback = call_learner(fn, windows_per_row, name="reset_callback")
        if isinstance(callback, type):
            raise CheckFailed("`reset_callback` returned a class: return an instance of it (add the parentheses)")
        expect(isinstance(callback, keras.callbacks.Callback),
               f"`reset_callback` must return a keras.callbacks.Callback, got {type(callback).__name__}")
        if model is None:
            model = stateful_model(*_STREAM)
        zero = call_learner(zero_state_batches, model, callback, windows_per_row, steps_per_epoch, epochs, None,
                            initial_epoch, name="your callback")
        total = steps_per_epoch * epochs
        wraps = _wrap_arounds(windows_per_row, steps_per_epoch, epochs, initial_epoch)
        missing = [k for k in wraps if k not in zero]
        extra = [k for k in zero if k not in wraps]
        first = initial_epoch * steps_per_epoch
        setting = f"(windows_per_row={windows_per_row}, fit(steps_per_epoch={steps_per_epoch}, epochs={epochs}))"
        if initial_epoch:
            setting = (f"(windows_per_row={windows_per_row}, fit(stream.skip({first}), "
                       f"steps_per_epoch={steps_per_epoch}, initial_epoch={initial_epoch}, "
                       f"epochs={initial_epoch + epochs}))")
        keras_starts = set(range(steps_per_epoch, total, steps_per_epoch))
        keras_epochs = sorted(keras_starts & set(extra)) if keras_starts <= set(zero) else []
        if extra and len(extra) == total - len(wraps):
            raise CheckFailed(f"{setting} your callback resets the state before every batch: the rows continue "
                              "from one batch to the next, so the model forgets the passage it is reading")
        if keras_epochs:
            raise CheckFailed(
                f"{setting} your callback resets the state where a Keras epoch starts (batch {keras_epochs[0]}), "
                "but with steps_per_epoch a Keras epoch is not a pass through the data, and there the rows "
                "continue. (The `batch` argument also starts again at 0 in every Keras epoch.)")
        if initial_epoch and missing and zero == _wrap_arounds(windows_per_row, steps_per_epoch, epochs):
            raise CheckFailed(
                f"{setting} your callback counts the batches from the start of this fit, but this fit resumes a "
                f"run: its batch 0 is batch {first} of the stream, so the rows jump back before its batch "
                f"{missing[0]}. Keras tells a callback which epoch it is in, from initial_epoch on")
        if missing:
            raise CheckFailed(
                f"{setting} the state was not reset before batch {missing[0]} of this fit: there every row jumps "
                "back to the start of its stream, so the state carried over belongs to another passage")
        if extra:
            raise CheckFailed(f"{setting} your callback resets the state before batch {extra[0]} of this fit, where "
                              "every row continues the previous batch")
    passed(f"your callback reset the state exactly where the data wraps around, in {len(_FITS)} fits: a fresh one "
           "and two that resume a run, with Keras epochs shorter and longer than a pass through the data.")
