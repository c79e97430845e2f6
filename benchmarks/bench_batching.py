"""Notebook 03 benchmark: batches per second through the PTB producer, three ways, on the same data.

* TF1 queue pipeline (``helpers.tf1.QueuePipeline``): range queue + strided slices, queue
  runner threads, one ``session.run(step)`` per batch. This is the baseline.
* Python ``for`` over ``tf.data`` with a compiled step (``Checksum.run_python_loop``).
* The loop inside one ``tf.function`` (``Checksum.run_in_graph``).

All three run the same stand-in step (add a checksum of the batch to a variable) on the shipped
corpus, 8 streams x 10 steps, ``repeat=True``, and must agree on the total. The ``tf.data`` options
are fixed in ``helpers.batching`` (deterministic, autotune off, no injected prefetch, explicit
``prefetch(1)``, sequential ``map``). The three methods are timed in interleaved rounds, so that
load changes on a shared machine hit all of them alike; the table shows median times and the target
uses the median of the per-round ratios. Speed is reported, never asserted: exit status is 0.

Batches per measurement: 2,323, one epoch of the real PTB training set (929,589 tokens) at the
tutorial's small configuration (20 streams x 20 steps), i.e. the length of loop a PTB script runs
per iteration of its epoch loop (it was 500 before; see docs/batching.md). Each ``tf.data`` loop pays a one-off
start of about 20 ms on a 2-core CPU: a new iterator, and TensorFlow instantiates the pipeline's
functions (``map``, and the ``scan``/``reduce`` that AutoGraph makes of the ``for`` loop) for it.
The TF1 pipeline's start (graph, session, queue runner threads) happens once, outside the timed
region, so with 500 batches the in-graph loop was charged ~40 us/batch of start-up that TF1 was not.
Both one-off starts are measured separately and printed, so nothing is hidden.
"""

from __future__ import annotations

from helpers import runtime

DEVICE = runtime.setup(seed=0)

import statistics  # noqa: E402
import time  # noqa: E402

from helpers import batching, measure, tf1  # noqa: E402

BATCH_SIZE, NUM_STEPS = 8, 10
NUM_BATCHES = 2323  # per measurement: one real PTB epoch at the small config (~100 epochs of this corpus)
START_REPEATS = 5  # one-off start costs: median of this many
ROUNDS = 9
TARGET = 2.0  # the in-graph tf.data loop reads at least this many times the TF1 batches per second

TF1, LOOP, GRAPH = "TF1 queue + session.run", "Python for + compiled step", "loop inside tf.function"


def main() -> None:
    ids, _ = batching.corpus_ids()
    layout = batching.ptb_layout(len(ids), BATCH_SIZE, NUM_STEPS)
    stream = batching.ptb_batches(ids, BATCH_SIZE, NUM_STEPS, repeat=True)
    counter = batching.Checksum()
    samples: dict[str, list[float]] = {TF1: [], LOOP: [], GRAPH: []}
    with tf1.QueuePipeline(ids, BATCH_SIZE, NUM_STEPS) as pipe:
        totals = {
            TF1: pipe.run_steps(NUM_BATCHES),  # also the warm-up of each method
            LOOP: counter.run_python_loop(stream, NUM_BATCHES),
            GRAPH: counter.run_in_graph(stream, NUM_BATCHES),
        }
        runs = {
            TF1: lambda: pipe.run_steps(NUM_BATCHES),
            LOOP: lambda: counter.run_python_loop(stream, NUM_BATCHES),
            GRAPH: lambda: counter.run_in_graph(stream, NUM_BATCHES),
        }
        for _ in range(ROUNDS):
            for name, run in runs.items():
                samples[name].append(measure.median_seconds(run, repeat=1, warmup=0) / NUM_BATCHES)

    start_costs = one_off_starts(ids, stream, counter)
    per_batch = {name: statistics.median(values) for name, values in samples.items()}
    print(f"bench_batching: PTB producer on {DEVICE}, corpus of {layout.n_tokens} tokens, "
          f"{BATCH_SIZE} streams x {NUM_STEPS} steps ({layout.epoch_size} batches per epoch), "
          f"{NUM_BATCHES} batches per measurement, {ROUNDS} interleaved rounds")
    print(f"same checksum from all three: {len(set(totals.values())) == 1}; "
          f"traces: step {counter.step.experimental_get_tracing_count()}, "
          f"loop {counter.loop.experimental_get_tracing_count()}")
    print(measure.ratio_table(list(per_batch.items()), baseline=TF1, unit="us/batch", scale=1e6))
    for name, seconds in per_batch.items():
        print(f"{name:<28} {1 / seconds:>9,.0f} batches/s")

    round_ratios = sorted(t / g for t, g in zip(samples[TF1], samples[GRAPH]))
    speedup = statistics.median(round_ratios)
    verdict = "met" if speedup >= TARGET else "NOT met"
    print(f"target: in-graph tf.data loop >= {TARGET:.0f}x the TF1 queue's batches/s: {verdict} in this run "
          f"({speedup:.2f}x, median of {ROUNDS} rounds; range {round_ratios[0]:.2f}x-{round_ratios[-1]:.2f}x)")
    loop_speedup = statistics.median(t / p for t, p in zip(samples[TF1], samples[LOOP]))
    print(f"(for reference: Python for + compiled step reads {loop_speedup:.2f}x the TF1 batches/s)")
    print(f"one-off starts (median of {START_REPEATS}): TF1 graph + session + queue runners, started and "
          f"stopped, {start_costs[TF1] * 1e3:.1f} ms (once, not in the times above); in-graph loop's "
          f"iterator + function instantiation {start_costs[GRAPH] * 1e3:.1f} ms (paid by every measurement: "
          f"{start_costs[GRAPH] / NUM_BATCHES * 1e6:.1f} us/batch of the times above)")


def one_off_starts(ids, stream, counter) -> dict[str, float]:
    """Seconds to start each pipeline and read one batch: TF1 builds its graph, session and threads;
    ``run_in_graph`` creates an iterator and instantiates the pipeline's functions on every call."""
    tf1 = []
    for _ in range(START_REPEATS):
        begin = time.perf_counter()
        with tf1.QueuePipeline(ids, BATCH_SIZE, NUM_STEPS) as pipe:
            pipe.run_steps(1)
        tf1.append(time.perf_counter() - begin)
    graph = measure.median_seconds(lambda: counter.run_in_graph(stream, 1), repeat=START_REPEATS)
    return {TF1: statistics.median(tf1), GRAPH: graph}


if __name__ == "__main__":
    main()
