#!/usr/bin/env python3
"""Gradient accumulation against the full batch and against Keras' built-in accumulation.

At a fixed effective batch (4 micro-batches of 8192, a 64-256-256-10 MLP) one optimizer update is
made three ways, with the same model, data and optimizer:

* full batch: one GradientTape over all 32768 examples, one ``apply_gradients`` (the baseline);
* ours: ``helpers.accumulation.train_accumulated`` over the 4 micro-batches;
* Keras built-in: an optimizer with ``gradient_accumulation_steps=4``, called on each micro-batch
  from a compiled step;
* A/A control: a second, identical Keras built-in set-up. Its ratio to the first is this run's
  noise: read "ours / Keras built-in" against it.

The methods take turns (``measure.interleaved``, median of the rounds), so a change of machine
load hits them alike. Micro-batches of 8192 keep the 2 cores busy (see docs/accumulation.md);
times depend on the machine and its load. The exit code is 0 whatever the result.
"""

from __future__ import annotations

import sys

from helpers import runtime

runtime.setup(seed=0)

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import keras  # noqa: E402

from helpers import accumulation, measure  # noqa: E402

EFFECTIVE, STEPS, FEATURES, HIDDEN, CLASSES = 32768, 4, 64, 256, 10
MICRO = EFFECTIVE // STEPS
ROUNDS = 9


def make_model() -> keras.Model:
    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(HIDDEN, activation="relu"),
                             keras.layers.Dense(HIDDEN, activation="relu"), keras.layers.Dense(CLASSES)])


def main() -> int:
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(EFFECTIVE, FEATURES)).astype("float32"))
    y = tf.constant(rng.integers(0, CLASSES, size=EFFECTIVE))
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    parts = accumulation.micro_batches((x, y), [MICRO] * STEPS)

    full_model, full_opt = make_model(), keras.optimizers.SGD(0.01)

    @tf.function
    def full_batch():
        with tf.GradientTape() as tape:
            loss = loss_fn(y, full_model(x, training=True))
        full_opt.apply_gradients(zip(tape.gradient(loss, full_model.trainable_variables),
                                     full_model.trainable_variables))
        return loss

    ours_model, ours_opt = make_model(), keras.optimizers.SGD(0.01)

    def ours():
        return accumulation.train_accumulated(ours_model, ours_opt, loss_fn, parts, STEPS, verbose=False)["updates"]

    def keras_builtin():
        model, optimizer = make_model(), keras.optimizers.SGD(0.01, gradient_accumulation_steps=STEPS)

        @tf.function(reduce_retracing=True)
        def micro(xb, yb):
            with tf.GradientTape() as tape:
                loss = loss_fn(yb, model(xb, training=True))
            optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
            return loss

        return lambda: [micro(xb, yb) for xb, yb in parts][-1]

    names = {"full": f"full batch 1 x {EFFECTIVE}", "ours": f"ours {STEPS} x {MICRO}",
             "keras": f"keras built-in {STEPS} x {MICRO}", "control": "keras built-in, A/A copy"}
    methods = {names["full"]: full_batch, names["ours"]: ours, names["keras"]: keras_builtin(),
               names["control"]: keras_builtin()}
    seconds = measure.interleaved(methods, rounds=ROUNDS, warmup=2)
    per_sample = [(name, value / EFFECTIVE) for name, value in seconds.items()]
    memory = {name: measure.peak_memory_bytes(fn) for name, fn in methods.items() if name != names["control"]}

    print(measure.header(f"gradient accumulation: {STEPS} micro-batches of {MICRO} (effective batch {EFFECTIVE}), "
                         f"MLP {FEATURES}-{HIDDEN}-{HIDDEN}-{CLASSES}, SGD, median of {ROUNDS} interleaved rounds"))
    print(measure.ratio_table(per_sample, baseline=names["full"], unit="us/sample", scale=1e6))
    print()
    print(measure.ratio_table(per_sample[1:], baseline=names["keras"], unit="us/sample", scale=1e6))
    print()
    print(f"{'peak memory':<28} {'MiB':>9} {'vs full':>8}")
    for name, value in memory.items():
        print(f"{name:<28} {value / 2**20:>9.1f} {value / memory[names['full']]:>7.2f}x")
    print()
    ratio = {key: seconds[names[key]] for key in names}
    print(measure.target_line("ours / full batch, time per sample", ratio["ours"] / ratio["full"], 1.15))
    print(measure.target_line("ours / Keras built-in, time per sample", ratio["ours"] / ratio["keras"], 1.05))
    print(f"        (A/A control, Keras built-in / its identical copy: {ratio['control'] / ratio['keras']:.3f}x: "
          "the noise of this run)")
    print(measure.target_line("ours / full batch, peak memory", memory[names["ours"]] / memory[names["full"]], 0.5))
    return 0


if __name__ == "__main__":
    sys.exit(main())
