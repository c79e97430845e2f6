"""Checkers for notebook 04's exercises: a validation mean over *examples*, and validation passes at
chosen training steps that leave the training stream alone.

``mean_loss``'s model records which helper module ran it: a loop through ``helpers.validation``
(``validation.evaluate`` computes this mean) fails with a hint. ``validate_at``'s ``val_sums`` returns
losses drawn from a table only the checker knows, so the means can only come from what it returns.

Fixtures for the hidden tests: :func:`generated_batches`, :func:`recording_regressor`,
:func:`helper_hint`, :func:`training_stream`, :class:`Recorder` and :func:`reads_hint`.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import tensorflow as tf
import keras

from helpers.exercises._core import CheckFailed, call_learner, expect, passed
from helpers.exercises._guards import Record, RecordingDense

__all__ = ["check_mean_loss", "check_validate_at", "generated_batches", "recording_regressor", "helper_hint",
           "training_stream", "Recorder", "reads_hint"]

# Ten examples in batches of 4, 4 and 2. The model predicts 0, so an example's squared error is
# y**2: 1 for the first eight examples, 9 for the last two (the smaller last batch).
_TARGETS = np.array([1.0] * 8 + [3.0] * 2, dtype=np.float32)
_BATCH = 4


def generated_batches(values: np.ndarray, counter: dict, batch: int = _BATCH) -> tf.data.Dataset:
    """``(x, y)`` batches of ``batch`` from a generator (size unknown to TensorFlow); x[:, 0] is the
    example's position, y its value; ``counter["passes"]`` counts the passes started."""

    def examples():
        counter["passes"] += 1
        for index, target in enumerate(values):
            yield np.array([index, 0.0], np.float32), np.array([target], np.float32)

    return tf.data.Dataset.from_generator(
        examples, output_signature=(tf.TensorSpec([2], tf.float32), tf.TensorSpec([1], tf.float32)),
    ).batch(batch)



def recording_regressor() -> tuple[keras.Model, Record]:
    """A model that predicts 0 for every example, and its record (rows, and the helpers that ran it)."""
    record = Record(watched=("validation.py", "validation_steps.py"))
    model = keras.Sequential([keras.Input((2,)), RecordingDense(1, record, first=True, kernel_initializer="zeros",
                                                                bias_initializer="zeros")])
    return model, record


def helper_hint(record: Record, name: str) -> str:
    """The rule as a hint if a helper module ran the model, else ``""``."""
    return (f"`{name}` called {record.helpers[0]} to run the model: this exercise is to write that loop "
            "yourself") if record.helpers else ""


def check_mean_loss(mean_loss: Callable) -> None:
    """``mean_loss(model, dataset, loss_fn) -> float`` must return the mean of ``loss_fn`` over every
    example of one pass over ``dataset`` (``(x, y)`` batches, the last one smaller)."""
    model, record = recording_regressor()
    counter = {"passes": 0}
    dataset = generated_batches(_TARGETS, counter)
    value = call_learner(mean_loss, model, dataset, keras.losses.MeanSquaredError(), name="mean_loss")
    expect(not record.helpers, helper_hint(record, "mean_loss"))

    try:
        value = float(value)
    except (TypeError, ValueError):
        expect(False, f"return one number (a Python float), got {type(value).__name__}")
    expect(math.isfinite(value), f"your mean loss is {value}: it should be a finite number")
    expect(counter["passes"] == 1,
           f"your function started {counter['passes']} passes over the dataset: one pass is enough "
           "(and the size is not known before it ends)")

    per_example = _TARGETS.astype(np.float64) ** 2
    sizes = [len(per_example[i:i + _BATCH]) for i in range(0, len(per_example), _BATCH)]
    batch_means = [float(per_example[i:i + _BATCH].mean()) for i in range(0, len(per_example), _BATCH)]
    exact = float(per_example.mean())
    if math.isclose(value, float(np.mean(batch_means)), rel_tol=1e-5) and not math.isclose(value, exact, rel_tol=1e-5):
        expect(False,
               f"your value {value:.4f} is the plain average of the {len(sizes)} batch means (batch sizes "
               f"{', '.join(map(str, sizes))}): the last batch has only {sizes[-1]} examples but counted as "
               f"much as a full batch of {sizes[0]}. Each example should count once, whatever batch it is in.")
    if math.isclose(value, sum(batch_means) / len(per_example), rel_tol=1e-5):
        expect(False,
               f"your value {value:.4f} is the sum of the {len(sizes)} batch means divided by the number of "
               f"examples: a batch mean stands for every example of its batch, so multiply each batch mean by "
               f"its batch's size (here {', '.join(map(str, sizes))}) before adding")
    if math.isclose(value, float(np.mean(batch_means[:-1])), rel_tol=1e-5):
        expect(False, f"your value {value:.4f} leaves out the last, smaller batch: every example counts")
    expect(math.isclose(value, exact, rel_tol=1e-5),
           f"your value {value:.4f} is not the mean loss over the {len(per_example)} examples of the pass "
           f"(batches of sizes {', '.join(map(str, sizes))})")
    passed(f"mean over all {len(per_example)} examples, the smaller last batch weighted by its size")


# --------------------------------------------------------------------------- validate_at

_SCHEDULE = [0, 1, 2, 4, 8]
_VAL_SIZES = (10, 7)  # batches of 4 + 4 + 2, then 4 + 3


class Recorder:
    """The checker's training step and validation sums: they record what the learner's loop read.

    Example ``i``'s validation loss after ``s`` training steps is ``table[i] * (s + 1)``: the table
    is drawn here and never shown, so a mean can only come from the sums ``val_sums`` returns, and a
    mean taken at the wrong time is wrong."""

    def __init__(self, table: np.ndarray):
        self.table = np.asarray(table, dtype=np.float64)
        self.trained: list[int] = []            # first example id of each training batch, in order
        self.read: dict[int, list[int]] = {}    # steps trained so far -> validation ids read then

    def train_step(self, x, y) -> None:
        self.trained.append(int(np.asarray(x)[0, 0]))

    def val_sums(self, x, y):
        """(sum of the losses of the batch, number of examples), as a float32 and an int32 tensor."""
        ids = np.asarray(x)[:, 0].astype(int)
        self.read.setdefault(len(self.trained), []).extend(ids.tolist())
        losses = self.table[ids] * (len(self.trained) + 1.0)
        return tf.constant(float(losses.sum())), tf.constant(len(ids))


def training_stream(batch: int = _BATCH) -> tf.data.Dataset:
    """A long training stream of ``(x, y)`` batches; x[:, 0] is the example's position in the stream."""
    @tf.autograph.experimental.do_not_convert
    def examples(first):
        ids = tf.cast(first + tf.range(batch, dtype=tf.int64), tf.float32)
        return tf.stack([ids, tf.zeros([batch])], axis=1), tf.zeros([batch, 1])

    return tf.data.Dataset.range(0, 10**6, batch).map(examples)


def reads_hint(recorder: Recorder, schedule: list[int], size: int, batch: int = _BATCH) -> str:
    """What the recorded run read wrong, as a hint, or ``""`` when it read every training batch once in
    order and one full validation pass, in order, after each listed step (and after no other)."""
    try:
        _explain(recorder, schedule, size, finished=True, batch=batch)
    except CheckFailed as failure:
        return str(failure)
    return ""


def _explain(recorder: Recorder, schedule: list[int], size: int, *, finished: bool, batch: int = _BATCH) -> None:
    """The first way the recorded run differs from the right one, as a hint (or nothing)."""
    stream = [batch * i for i in range(len(recorder.trained))]
    if recorder.trained != stream:
        at = next(i for i, (a, b) in enumerate(zip(recorder.trained, stream)) if a != b)
        restarted = recorder.trained[at] == 0
        expect(False, f"training step {at + 1} read the batch starting at example {recorder.trained[at]}, not "
               f"{stream[at]}: " + ("the training stream started over. Make the training iterator once, before "
                                    "the loop, and keep taking batches from it" if restarted else
                                    "some training batches were skipped or read twice"))
    done = len(recorder.trained)
    extra = sorted(set(recorder.read) - set(schedule))
    expect(not extra, f"validation passes ran after steps {extra}, which eval_steps {schedule} does not list "
                      "(count a step as done once its training batch is trained on)")
    one_pass = list(range(size))
    for step in (schedule if finished else [s for s in schedule if s <= done]):
        ids = recorder.read.get(step, [])
        expect(len(ids) > 0, f"the evaluation after step {step} read no validation example: a used-up iterator "
                             "stays empty. Start a new pass over val_ds for every evaluation")
        if not finished and step == done:
            return  # the evaluation that raised: the learner's own error says more
        times = len(ids) // size
        expect(not (times > 1 and ids == one_pass * times),
               f"{times} validation passes ran after step {step}: evaluate once per listed step, after its training")
        expect(ids == one_pass,
               f"the evaluation after step {step} read validation examples {ids}, not each of the {size} "
               "once, in order: one evaluation is one full pass, from the first example to the last (its size "
               "is not known in advance)")
    if finished:
        expect(done == max(schedule),
               f"your loop ran {done} training steps; the last evaluation is after step {max(schedule)}")


def check_validate_at(validate_at: Callable) -> None:
    """``validate_at(train_ds, val_ds, train_step, val_sums, eval_steps)`` must train one step per
    batch of one training stream and, after each step listed in ``eval_steps`` (0: before any
    training), read one full pass of ``val_ds``; it returns ``[(step, mean validation loss), ...]``.
    Two validation sets (10 and 7 examples) make sure the pass does not count on a known size."""
    for size in _VAL_SIZES:
        recorder = Recorder(np.random.default_rng(size).uniform(0.5, 2.0, size))
        train_ds = training_stream()
        val_ds = generated_batches(np.zeros(size, np.float32), {"passes": 0})
        try:
            curve = call_learner(validate_at, train_ds, val_ds, recorder.train_step, recorder.val_sums,
                                 list(_SCHEDULE), name="validate_at")
        except CheckFailed as failure:
            if recorder.trained or recorder.read:
                _explain(recorder, _SCHEDULE, size, finished=False)  # a clearer hint from what was recorded
            expect("dtype" not in str(failure),
                   f"{failure}. val_sums returns two scalar tensors, a float32 sum and an int32 count, and "
                   "TensorFlow does not mix dtypes: turn each into a Python number (float(), int()) before adding")
            raise
        _explain(recorder, _SCHEDULE, size, finished=True)
        expect(isinstance(curve, (list, tuple)) and len(curve) == len(_SCHEDULE),
               f"return a list with one (step, mean loss) pair per evaluation ({len(_SCHEDULE)}), "
               f"got {type(curve).__name__}" + (f" of {len(curve)}" if hasattr(curve, "__len__") else ""))
        mean_table_loss = float(np.mean(recorder.table))
        for (step, value), expected_step in zip(curve, _SCHEDULE):
            expect(int(step) == expected_step, f"your pairs' steps are {[int(s) for s, _ in curve]}, not {_SCHEDULE}")
            expect(math.isclose(float(value), mean_table_loss * (expected_step + 1.0), rel_tol=1e-5),
                   f"the mean after step {expected_step} is {float(value):.4f}: divide the summed losses of the "
                   "pass by the number of examples it read")
    passed(f"evaluations after steps {', '.join(map(str, _SCHEDULE))}: each a full pass over the validation set "
           f"in order ({' and '.join(map(str, _VAL_SIZES))} examples), and {max(_SCHEDULE)} training batches read "
           "in order, as without evaluation")
