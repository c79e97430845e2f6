"""Notebook 01 benchmark: L-BFGS over variable-sized batches (3 epochs), three ways.

* eager: the loss-and-gradient function runs op by op (no ``tf.function``);
* compiled, dense atoms: a plain ``tf.function`` over flat atom arrays, retraced per atom total;
* compiled, ragged + open signature: ``helpers.decoupling.LossAndGradient``, one trace.

Every round builds a new compiled function, so tracing is part of the measured cost (one trace
costs about as much as a whole eager pass on a 2-core CPU, so it is amortised over epochs). The
three take turns (``measure.interleaved``), so a change of machine load hits them alike. A second
table times one steady-state evaluation. Ratios are against eager, in one run.
"""

from __future__ import annotations

from helpers import runtime

DEVICE = runtime.setup(seed=0)

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from helpers import decoupling, measure, molecules  # noqa: E402

ITERATIONS = 10
EPOCHS = 3


class Eager(decoupling.LossAndGradient):
    """The same loss and gradient, run op by op: no tf.function, no trace."""

    def __call__(self, x, y, sample_weight=None):
        return self._loss_and_gradients(x, y)

    def prepare(self, x, y, sample_weight=None) -> None:
        pass

    @property
    def traces(self) -> int:
        return 0


class DenseAtoms(decoupling.LossAndGradient):
    """Loss and gradient compiled over flat atom arrays: a new trace for every new atom total."""

    def __init__(self, model, loss_fn):
        super().__init__(model, loss_fn, relaxed=False)
        self.fn = tf.function(self._flat)

    def _flat(self, atoms, molecule_ids, num_molecules, y):
        return self._loss_and_gradients(tf.RaggedTensor.from_value_rowids(atoms, molecule_ids, num_molecules), y)

    def __call__(self, x, y, sample_weight=None):
        return self.fn(x.flat_values, x.value_rowids(), x.nrows(), y)

    def prepare(self, x, y, sample_weight=None) -> None:
        pass  # a plain tf.function traces at its first call

    @property
    def traces(self) -> int:
        return self.fn.experimental_get_tracing_count()


def main() -> None:
    batches = list(molecules.molecule_dataset(120, batch_size=8, seed=1))
    loss_fn = keras.losses.MeanSquaredError(dtype="float64")
    template = molecules.PerAtomEnergy(hidden=16)
    template(batches[0][0])
    traces: dict[str, int] = {}
    print(measure.header(f"Notebook 01: L-BFGS-B, {EPOCHS} epochs x {len(batches)} variable-sized batches x "
                         f"{ITERATIONS} iterations (tracing included)"))

    def one_pass(name, make_compiled):
        def run():
            model = molecules.PerAtomEnergy(hidden=16)
            model(batches[0][0])
            model.set_weights(template.get_weights())
            compute = make_compiled(model, loss_fn)
            for batch in batches * EPOCHS:
                decoupling.minimize_on_batch(model, loss_fn, batch, max_iterations=ITERATIONS, compiled=compute)
            traces[name] = compute.traces
        return run

    variants = {"eager": Eager, "compiled, dense atoms (retraces)": DenseAtoms,
                "compiled, ragged, one trace": decoupling.LossAndGradient}
    times = measure.interleaved({name: one_pass(name, make) for name, make in variants.items()}, rounds=3, warmup=0)
    print(measure.ratio_table(list(times.items()), baseline="eager", unit="s", scale=1.0))
    print("traces in one run: " + ", ".join(f"{name}: {count}" for name, count in traces.items()))

    x, y = batches[0]
    compute = decoupling.LossAndGradient(template, loss_fn)
    per_call = measure.interleaved({"eager evaluation": lambda: compute._loss_and_gradients(x, y),
                                    "compiled evaluation": lambda: compute(x, y)}, rounds=30)
    print()
    print("one loss+gradient evaluation, steady state:")
    print(measure.ratio_table(list(per_call.items()), baseline="eager evaluation"))
    print()
    one_trace = times["compiled, ragged, one trace"]
    print(measure.target_line("one trace / eager, whole L-BFGS epochs", one_trace / times["eager"], 1.0))
    print(measure.target_line("one trace / retracing per atom total",
                              one_trace / times["compiled, dense atoms (retraces)"], 1.0))
    print(measure.target_line("compiled / eager, one evaluation",
                              per_call["compiled evaluation"] / per_call["eager evaluation"], 0.5))
    print()


if __name__ == "__main__":
    main()
