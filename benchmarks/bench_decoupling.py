"""Notebook 01 benchmark: L-BFGS over variable-sized batches (3 epochs), three ways.

* eager: the loss-and-gradient function runs op by op (``tf.config.run_functions_eagerly``);
* compiled, dense atoms: a plain ``tf.function`` over flat atom arrays, retraced per atom total;
* compiled, ragged + relaxed signature: ``helpers.decoupling.LossAndGradient``, one trace.

Every repeat builds a new compiled function, so tracing is part of the measured cost (one trace
costs about as much as a whole eager pass on a 2-core CPU, so it is amortised over epochs).
A second table times one steady-state evaluation. Ratios are against eager, in one run.
"""

from __future__ import annotations

from helpers import runtime

DEVICE = runtime.setup(seed=0)

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from helpers import decoupling, measure, molecules  # noqa: E402

ITERATIONS = 10
EPOCHS = 3


class DenseAtoms:
    """Loss and gradient compiled over flat atom arrays: a new trace for every new atom total."""

    def __init__(self, model, loss_fn):
        self.model, self.loss_fn = model, loss_fn
        self.fn = tf.function(self._loss_and_gradients)

    def _loss_and_gradients(self, atoms, molecule_ids, num_molecules, y):
        x = tf.RaggedTensor.from_value_rowids(atoms, molecule_ids, num_molecules)
        with tf.GradientTape() as tape:
            loss = self.loss_fn(y, self.model(x, training=False))
        return loss, tape.gradient(loss, self.model.trainable_variables)

    def __call__(self, x, y):
        return self.fn(x.flat_values, x.value_rowids(), x.nrows(), y)

    @property
    def traces(self) -> int:
        return self.fn.experimental_get_tracing_count()


def main() -> None:
    batches = list(molecules.molecule_dataset(120, batch_size=8, seed=1))
    loss_fn = keras.losses.MeanSquaredError(dtype="float64")
    template = molecules.PerAtomEnergy(hidden=16)
    template(batches[0][0])
    traces: dict[str, int] = {}

    def one_pass(name, make_compiled, eager=False):
        def run():
            model = molecules.PerAtomEnergy(hidden=16)
            model(batches[0][0])
            model.set_weights(template.get_weights())
            compiled = make_compiled(model)
            tf.config.run_functions_eagerly(eager)
            try:
                for batch in batches * EPOCHS:
                    decoupling.minimize_on_batch(model, loss_fn, batch, max_iterations=ITERATIONS, compiled=compiled)
            finally:
                tf.config.run_functions_eagerly(False)
            traces[name] = 0 if eager else compiled.traces
        return name, measure.median_seconds(run, repeat=3, warmup=0)

    rows = [
        one_pass("eager", lambda m: decoupling.LossAndGradient(m, loss_fn), eager=True),
        one_pass("compiled, dense atoms", lambda m: DenseAtoms(m, loss_fn)),
        one_pass("compiled, ragged relaxed", lambda m: decoupling.LossAndGradient(m, loss_fn)),
    ]
    print(f"Notebook 01: L-BFGS, {EPOCHS} epochs x {len(batches)} batches x {ITERATIONS} iterations, on {DEVICE}")
    print(measure.ratio_table(rows, baseline="eager", unit="s", scale=1.0))
    for name, count in traces.items():
        print(f"traces, {name:<26}: {count}")
    times = dict(rows)
    print(f"relaxed signature faster than retracing per shape: {times['compiled, ragged relaxed'] < times['compiled, dense atoms']}")
    print(f"compiled (relaxed) faster than eager over {EPOCHS} epochs: {times['compiled, ragged relaxed'] < times['eager']}")

    x, y = batches[0]
    compiled = decoupling.LossAndGradient(template, loss_fn)
    eager_fn = compiled._loss_and_gradients
    per_call = [("eager evaluation", measure.median_seconds(lambda: eager_fn(x, y), repeat=30)),
                ("compiled evaluation", measure.median_seconds(lambda: compiled(x, y), repeat=30))]
    print()
    print("one loss+gradient evaluation, steady state:")
    print(measure.ratio_table(per_call, baseline="eager evaluation"))
    print()


if __name__ == "__main__":
    main()
