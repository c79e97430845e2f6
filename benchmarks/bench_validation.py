#!/usr/bin/env python3
"""Notebook 04: one validation pass over data generated on the fly, four ways.

Same model (a Keras MLP, copied into a TF1 graph for the TF1 rows) and the same generated
validation data (12 raw chunks, 213 examples, size unknown to TensorFlow, last batch smaller).
Every row calls the same NumPy generator ``chunk_examples`` once per chunk per pass: TF1 through
``py_func`` into a ``tf.train.batch`` queue, the others through ``tf.numpy_function`` in ``tf.data``.

* ``TF1: new session + restore``: the source's workaround (baseline): a new session, restore the
  snapshot, start the validation queue's threads, read to OutOfRangeError, stop, close.
* ``TF1: re-init iterator``: the TF1 fix, re-initialise a tf.data iterator in the one session.
* ``TF2: evaluate, new iterator``: ``validation.evaluate(model, val_ds, ...)``, a new iterator per pass.
* ``TF2: evaluate, stream``: ``validation.evaluate(model, ValidationStream(val_ds), ...)``: one
  long-lived iterator, the dataset re-run from its source every pass (what train_with_validation does).

Target (issue 15, item 6): a pass >= 10x faster than the baseline, each pass still generating its
data afresh (checked and printed). Each row is timed in blocks of back-to-back passes (its
steady state), the rows taking turns so that a change of machine load hits them alike; the median
of the blocks' medians. Exits 0 whatever the result.

    python benchmarks/bench_validation.py
"""

from __future__ import annotations

import statistics
import sys
import tempfile

from helpers import runtime

DEVICE = runtime.setup(seed=0)

import keras  # noqa: E402

from helpers import measure, tf1, validation  # noqa: E402

CHUNKS, BATCH, SEED = 12, 32, 1
TARGET = 10.0
BASELINE = "TF1: new session + restore"
BLOCKS, REPEAT = 3, 7


def main() -> int:
    print(measure.header("bench_validation: one validation pass over generated data (notebook 04)"))
    model = keras.Sequential([
        keras.Input((validation.FEATURES,)),
        keras.layers.Dense(32, activation="relu"),
        keras.layers.Dense(1),
    ])
    loss_fn = keras.losses.MeanSquaredError()
    made: list[int] = []
    val_ds = validation.generated_dataset(CHUNKS, BATCH, seed=SEED, on_chunk=made.append)
    stream = validation.ValidationStream(val_ds)
    with tempfile.TemporaryDirectory() as folder, tf1.ValidationPasses(
            model.get_weights(), chunks=CHUNKS, batch_size=BATCH, seed=SEED, snapshot_dir=folder) as passes_tf1:
        rows = {
            BASELINE: passes_tf1.pass_new_session,
            "TF1: re-init iterator": passes_tf1.pass_same_session,
            "TF2: evaluate, new iterator": lambda: validation.evaluate(model, val_ds, loss_fn),
            "TF2: evaluate, stream": lambda: validation.evaluate(model, stream, loss_fn),
        }
        results = {name: fn() for name, fn in rows.items()}
        before = len(made)
        stream_passes = [validation.evaluate(model, stream, loss_fn) for _ in range(3)]
        fresh = sorted(made[before:]) == sorted(list(range(CHUNKS)) * 3) and all(
            r == results["TF2: evaluate, stream"] for r in stream_passes)
        # Blocks of back-to-back passes of one row (its steady state), the rows taking turns
        # BLOCKS times: closing a TF1 session leaves ~50-100 ms of work running in the background
        # (measured), which a row timed right after it would pay; each block's warm-up absorbs it.
        blocks = {name: [] for name in rows}
        for _ in range(BLOCKS):
            for name, fn in rows.items():
                blocks[name].append(measure.median_seconds(fn, repeat=REPEAT, warmup=2))
        seconds = {name: statistics.median(times) for name, times in blocks.items()}
    losses = [r["loss"] for r in results.values()]
    print(f"{sorted({r['examples'] for r in results.values()})} examples per pass in batches of {BATCH}; "
          f"the four losses agree within {max(losses) - min(losses):.1e}")
    print(f"3 stream passes generated {3 * CHUNKS} chunks afresh, with equal results: {fresh}")
    table = [(name, seconds[name]) for name in rows]
    print(measure.ratio_table(table, baseline=BASELINE))
    base = seconds[BASELINE]
    print(f"for comparison, a new iterator per pass: {base / seconds['TF2: evaluate, new iterator']:.1f}x "
          f"faster than {BASELINE}")
    print(measure.target_line(f"a pass from the stream, times faster than {BASELINE}",
                              base / seconds["TF2: evaluate, stream"], TARGET, at_most=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
