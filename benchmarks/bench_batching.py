"""Notebook 03 benchmark: batches per second through the PTB producer, on the same data, several ways.

* TF1 queue pipeline (``helpers.tf1.QueuePipeline``): range queue + strided slices, queue runner
  threads, one ``session.run(step)`` per batch. This is the baseline.
* Python ``for`` over ``ptb_batches`` with a compiled step (``Checksum.run_python_loop``).
* The loop inside one ``tf.function`` (``Checksum.run_in_graph``, a ``While`` loop over
  ``iter(dataset)``) over ``ptb_batches(..., prefetch=0)``: every window cut up front, handed out by
  ``from_tensor_slices`` on one private thread. No prefetch buffer: a checksum step leaves nothing
  for a buffer to overlap, and handing each batch across threads costs more than the step (the
  prefetch table below; notebook 03's Cost says the same).
* The same batches added up by ``dataset.reduce`` (``Checksum.run_as_reduction``), what a plain
  ``for x, y in dataset`` in a ``tf.function`` compiles to: the step runs as a tf.data function on the
  host, so it is no pattern for a model step on a GPU; it shows what the ``While`` loop's per-batch
  iterator round trip costs.
* For reference, the same in-graph loop over the piece-by-piece translation of the TF1 producer
  (``Dataset.range(epoch_size).map(window)``: a function call per batch) on the shared thread pool,
  which is where the time per batch went before ``ptb_batches`` cut the windows up front.

All run the same stand-in step (add a checksum of the batch to a variable) on the shipped corpus,
8 streams x 10 steps, ``repeat=True``, and must agree on the total. Each measurement reads 2,323
batches: one epoch of the real PTB training set (929,589 tokens) at the tutorial's small
configuration (20 x 20), the loop a PTB script runs per epoch. The methods take turns
(``measure.interleaved``), so a change of load on a shared machine hits them alike; the tables show
medians. A second table compares ``prefetch`` 0, 1 and ``tf.data.AUTOTUNE`` for both TF2 loops (the
notebook's choice of 1). One-off start costs are measured separately. Speed is reported, never
asserted: the exit status is 0.
"""

from __future__ import annotations

from helpers import runtime

DEVICE = runtime.setup(seed=0)

import tensorflow as tf  # noqa: E402

from helpers import batching, measure, tf1  # noqa: E402

BATCH_SIZE, NUM_STEPS = 8, 10
NUM_BATCHES = 2323  # per measurement: one real PTB epoch at the small config (~100 epochs of this corpus)
ROUNDS = 9
TARGET = 2.0  # the in-graph tf.data loop reads at least this many times the TF1 batches per second

TF1, LOOP, GRAPH, MAPPED, REDUCE = ("TF1 queue + session.run", "Python for + compiled step",
                                    "loop inside tf.function", "  same, map per batch",
                                    "dataset.reduce (host side)")


def mapped_batches(ids, batch_size: int, num_steps: int) -> tf.data.Dataset:
    """The piece-by-piece translation of the TF1 producer: a window index, mapped to its slices."""
    layout = batching.ptb_layout(len(ids), batch_size, num_steps)
    rows = tf.constant(ids[: batch_size * layout.batch_len].reshape(batch_size, layout.batch_len))

    def window(i):
        start = tf.cast(i, tf.int32) * num_steps
        return tf.slice(rows, [0, start], [batch_size, num_steps]), tf.slice(rows, [0, start + 1], [batch_size, num_steps])

    options = tf.data.Options()  # as ptb_batches, but on the shared thread pool
    options.autotune.enabled = False
    options.experimental_optimization.inject_prefetch = False
    return tf.data.Dataset.range(layout.epoch_size).repeat().map(window).prefetch(1).with_options(options)


def main() -> None:
    ids, _ = batching.corpus_ids()
    layout = batching.ptb_layout(len(ids), BATCH_SIZE, NUM_STEPS)
    stream = batching.ptb_batches(ids, BATCH_SIZE, NUM_STEPS, repeat=True)
    unbuffered = batching.ptb_batches(ids, BATCH_SIZE, NUM_STEPS, repeat=True, prefetch=0)
    mapped = mapped_batches(ids, BATCH_SIZE, NUM_STEPS)
    counter = batching.Checksum()
    print(measure.header(f"bench_batching: PTB producer, {layout.n_tokens}-token corpus, {BATCH_SIZE} streams x "
                         f"{NUM_STEPS} steps ({layout.epoch_size} batches per epoch), {NUM_BATCHES} batches "
                         f"per measurement, {ROUNDS} interleaved rounds"))
    with tf1.QueuePipeline(ids, BATCH_SIZE, NUM_STEPS) as pipe:
        runs = {
            TF1: lambda: pipe.run_steps(NUM_BATCHES),
            LOOP: lambda: counter.run_python_loop(stream, NUM_BATCHES),
            GRAPH: lambda: counter.run_in_graph(unbuffered, NUM_BATCHES),
            MAPPED: lambda: counter.run_in_graph(mapped, NUM_BATCHES),
            REDUCE: lambda: counter.run_as_reduction(unbuffered, NUM_BATCHES),
        }
        totals = {name: run() for name, run in runs.items()}  # also the warm-up of each method
        seconds = measure.interleaved(runs, rounds=ROUNDS, warmup=0)
    per_batch = {name: s / NUM_BATCHES for name, s in seconds.items()}
    print(f"same checksum from all: {len(set(totals.values())) == 1}; traces: step "
          f"{counter.step.experimental_get_tracing_count()}, loop {counter.loop.experimental_get_tracing_count()}")
    print(measure.ratio_table(list(per_batch.items()), baseline=TF1, unit="us/batch", scale=1e6))
    for name, s in per_batch.items():
        print(f"{name:<28} {1 / s:>9,.0f} batches/s")
    print()
    prefetch_table(ids, counter)
    print()
    start_costs(ids, stream, counter)
    print(measure.target_line("in-graph tf.data loop, batches/s vs the TF1 queue", per_batch[TF1] / per_batch[GRAPH],
                              TARGET, at_most=False))
    print(f"for reference, the host-side reduction vs the TF1 queue: {per_batch[TF1] / per_batch[REDUCE]:.2f}x "
          f"(the step then runs inside tf.data, on the CPU)")


def prefetch_table(ids, counter: batching.Checksum) -> None:
    """prefetch 0, 1 and AUTOTUNE for both TF2 loops (AUTOTUNE also switches tf.data's autotuner on)."""
    runs = {}
    for label, size in (("0", 0), ("1", 1), ("AUTOTUNE", tf.data.AUTOTUNE)):
        ds = batching.ptb_batches(ids, BATCH_SIZE, NUM_STEPS, repeat=True, prefetch=size)
        runs[f"in-graph loop, prefetch {label}"] = lambda ds=ds: counter.run_in_graph(ds, NUM_BATCHES)
        runs[f"Python loop, prefetch {label}"] = lambda ds=ds: counter.run_python_loop(ds, NUM_BATCHES)
    seconds = measure.interleaved(runs, rounds=5)
    graph = [(name, s / NUM_BATCHES) for name, s in seconds.items() if name.startswith("in-graph")]
    python = [(name, s / NUM_BATCHES) for name, s in seconds.items() if name.startswith("Python")]
    print(measure.ratio_table(graph, baseline=graph[1][0], unit="us/batch", scale=1e6))
    print(measure.ratio_table(python, baseline=python[1][0], unit="us/batch", scale=1e6))


def start_costs(ids, stream: tf.data.Dataset, counter: batching.Checksum) -> None:
    """One-off costs, not in the per-batch times above: TF1 builds a graph, a session and threads once;
    ``run_in_graph`` makes a new iterator (and instantiates the pipeline's functions) at every call."""
    def tf1_start():
        with tf1.QueuePipeline(ids, BATCH_SIZE, NUM_STEPS) as pipe:
            pipe.run_steps(1)

    tf1_seconds = measure.median_seconds(tf1_start, repeat=5)
    graph_seconds = measure.median_seconds(lambda: counter.run_in_graph(stream, 1), repeat=5)
    print(f"one-off starts (median of 5): TF1 graph + session + queue runners, started and stopped: "
          f"{tf1_seconds * 1e3:.1f} ms (once); in-graph loop's iterator: {graph_seconds * 1e3:.2f} ms per call "
          f"({graph_seconds / NUM_BATCHES * 1e6:.2f} us/batch of the times above)")


if __name__ == "__main__":
    main()
