"""What the workbook's code will do on a GPU, checked on this CPU-only machine (docs/gpu.md).

No GPU is reachable here, so each test checks a GPU fact in one of these ways:

* **The kernel registry of the CUDA wheel.** The Linux ``tensorflow`` wheel is a CUDA build: it
  registers every GPU kernel even where no GPU exists. ``_pywrap_kernel_registry.TryFindKernelClass``
  runs TensorFlow's own kernel lookup (type constraints included) for a node placed on ``GPU:0``; an
  op with no GPU kernel for its dtypes is placed on the CPU.
* **The ops the helpers really build.** An op callback records every op that the helpers' public
  calls create, while their ``tf.function``s trace (nested loop bodies and gradients included) and
  while they run eagerly.
* **TensorFlow's build and source.** The messages of every op that raises ``UnimplementedError``
  under op determinism on a GPU are read from ``libtensorflow_cc.so.2`` (the same set in TF 2.20 and
  2.21); the conditions come from the named TensorFlow source files.
* **Emulation.** Asynchronous execution (``set_synchronous_execution(False)``), TensorFloat-32
  (float32 operands rounded to 10 mantissa bits), fake GPUs handed to TensorFlow's own device
  configuration code, and loss scaling on a float32 model.

Each test can fail: most have a control that shows the check catching the bad case.
"""

from __future__ import annotations

import json
import math
import mmap
import os
import re
import subprocess
import sys
import textwrap
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from helpers import accumulation, batching, decoupling, measure, molecules, plumbing, runtime, snapshots, validation

import keras  # noqa: E402  (after helpers: helpers sets the environment TensorFlow reads at start)
import tensorflow as tf  # noqa: E402
from tensorflow.core.framework import node_def_pb2  # noqa: E402
from tensorflow.python.framework import config as tf_config  # noqa: E402  (no public getter)
from tensorflow.python.framework import op_callbacks, op_def_registry  # noqa: E402
from tensorflow.python.util import _pywrap_kernel_registry  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GPU = "/job:localhost/replica:0/task:0/device:GPU:0"

pytestmark = pytest.mark.skipif(not tf.test.is_built_with_cuda(),
                                reason="needs a CUDA build of TensorFlow (its GPU kernel registry)")

# --------------------------------------------------------------------------- what raises on a GPU

# Every message TensorFlow's GPU kernels raise as UnimplementedError under op determinism, as found
# in libtensorflow_cc.so.2 of TF 2.20.0 and 2.21.0 (identical sets), with the ops it concerns.
# Ops listed here raise whenever they are placed on a GPU; `_CONDITIONS` narrows some.
_DETERMINISM_MESSAGES = {
    "A deterministic GPU implementation of AdjustContrast is not currently available.": {"AdjustContrast"},
    "A deterministic GPU implementation of AdjustContrastv2 is not currently available.": {"AdjustContrastv2"},
    "A deterministic GPU implementation of ResizeNearestNeighborGrad is not currently available.":
        {"ResizeNearestNeighborGrad"},
    "A deterministic GPU implementation of SparseTensorDenseMatmulOp is not currently available.":
        {"SparseTensorDenseMatMul"},
    "A deterministic GPU implementation of fused batch-norm backprop, when training is disabled, is not "
    "currently available.": {"FusedBatchNormGrad", "FusedBatchNormGradV2", "FusedBatchNormGradV3"},
    "Determinism is not yet supported for Dilation2DBackpropFilter.": {"Dilation2DBackpropFilter"},
    "Determinism is not yet supported for Dilation2DBackpropInput.": {"Dilation2DBackpropInput"},
    "Determinism is not yet supported for MaxPoolGradWithArgmax.": {"MaxPoolGradWithArgmax"},
    "Determinism is not yet supported for SVD of matrices with 1 column.": {"Svd"},
    "Determinism is not yet supported for DebugNumericSummaryV2 when tensor_debug_mode is CONCISE_HEALTH.":
        {"DebugNumericSummaryV2"},
    "Determinism is not yet supported for DebugNumericSummaryV2 when tensor_debug_mode is FULL_HEALTH.":
        {"DebugNumericSummaryV2"},
    "Determinism is not yet supported in GPU implementation of Bincount.": {"Bincount"},
    "Determinism is not yet supported in GPU implementation of DenseBincount.": {"DenseBincount"},
    "Determinism is not yet supported in GPU implementation of FakeQuantWithMinMaxVarsGradient.":
        {"FakeQuantWithMinMaxVarsGradient"},
    "Determinism is not yet supported in GPU implementation of FakeQuantWithMinMaxVarsPerChannelGradient.":
        {"FakeQuantWithMinMaxVarsPerChannelGradient"},
    "Determinism is not yet supported in GPU implementation of Scatter ops with ref inputs. Consider using "
    "resource variables instead if you want to run Scatter when op determinism is enabled.":
        {"ScatterUpdate", "ScatterAdd", "ScatterSub", "ScatterMul", "ScatterDiv", "ScatterMin", "ScatterMax"},
    "Deterministic GPU implementation of CropAndResizeBackpropBoxes not available.": {"CropAndResizeGradBoxes"},
    "Deterministic GPU implementation of CropAndResizeBackpropImage not available.": {"CropAndResizeGradImage"},
    "The GPU implementation of SoftmaxCrossEntropyWithLogits that would have been executed is not "
    "deterministic. Note that the Python API uses an alternative, deterministic, GPU-accelerated path when "
    "determinism is enabled.": {"SoftmaxCrossEntropyWithLogits"},
    "The GPU implementation of SparseSoftmaxCrossEntropyWithLogits that would have been executed is not "
    "deterministic. Note that the Python API uses an alternative, deterministic, GPU-accelerated path when "
    "determinsim is enabled.": {"SparseSoftmaxCrossEntropyWithLogits"},
    # Unreachable on Linux: segment_reduction_ops_gpu.cu.h picks its deterministic (sort-based) kernels
    # whenever op determinism is on, except on Windows, where TensorFlow has had no GPU build since 2.10.
    "Deterministic GPU implementation of sorted segment reduction op not available.": set(),
    "Deterministic GPU implementation of unsorted segment reduction op not available.": set(),
    # Only with cuDNN < 7.6.3; the TF 2.20/2.21 wheels use cuDNN 9.
    "A deterministic GPU implementation of DepthwiseConvBackpropFilter is not available with this version "
    "of cuDNN. Please build with cuDNN version 7.6.3 or later.": set(),
    # XLA only: no helper or notebook compiles with XLA, and Keras turns XLA off under op determinism.
    "GPU MaxPool gradient ops do not yet have a deterministic XLA implementation.": set(),
}
RAISES_ON_GPU = set().union(*_DETERMINISM_MESSAGES.values())
_CONDITIONS = {  # op -> does this node raise? (the others in RAISES_ON_GPU always do)
    "FusedBatchNormGrad": lambda node: not node.attr["is_training"].b,
    "FusedBatchNormGradV2": lambda node: not node.attr["is_training"].b,
    "FusedBatchNormGradV3": lambda node: not node.attr["is_training"].b,
}
_MESSAGE_STARTS = (b"A deterministic GPU implementation of", b"Deterministic GPU implementation of",
                   b"Determinism is not yet supported", b"The GPU implementation of",
                   b"GPU MaxPool gradient ops do not yet have a deterministic")


def _gpu_kernel(node: node_def_pb2.NodeDef) -> str:
    """The class of the kernel TensorFlow would run for ``node`` on GPU:0 ('' when there is none,
    and the placer puts the op on the CPU)."""
    placed = node_def_pb2.NodeDef()
    placed.CopyFrom(node)
    placed.device = GPU
    return _pywrap_kernel_registry.TryFindKernelClass(placed.SerializeToString()).decode()


def _raises_on_gpu(node: node_def_pb2.NodeDef) -> bool:
    if node.op not in RAISES_ON_GPU or not _gpu_kernel(node):
        return False
    return _CONDITIONS.get(node.op, lambda _: True)(node)


def _float64(node: node_def_pb2.NodeDef) -> bool:
    for value in node.attr.values():
        types = list(value.list.type) + ([value.type] if value.type else [])
        if tf.float64.as_datatype_enum in types:
            return True
    return False


# --------------------------------------------------------------------------- recording the ops


def _eager_node(op_type: str, attrs: tuple) -> node_def_pb2.NodeDef | None:
    """A NodeDef with the type attributes of an op run eagerly (enough for the kernel lookup)."""
    op_def = op_def_registry.get(op_type)
    if op_def is None:  # a call of a compiled function: its ops were recorded while it traced
        return None
    values = dict(zip(attrs[::2], attrs[1::2]))
    node = node_def_pb2.NodeDef(op=op_type)
    for attr in op_def.attr:
        if attr.name not in values:
            continue
        if attr.type == "type":
            node.attr[attr.name].type = tf.as_dtype(values[attr.name]).as_datatype_enum
        elif attr.type == "list(type)":
            node.attr[attr.name].list.type.extend(tf.as_dtype(t).as_datatype_enum for t in values[attr.name])
        elif attr.type == "bool":
            node.attr[attr.name].b = bool(values[attr.name])
    return node


@contextmanager
def _recording():
    """Record a NodeDef for every op created while tracing and every op run eagerly."""
    nodes: list[node_def_pb2.NodeDef] = []

    def callback(op_type, inputs, attrs, outputs, op_name=None, graph=None):
        if graph is not None:
            try:
                op = outputs[0].op if outputs else graph.get_operation_by_name(op_name)
            except KeyError:  # a placeholder renamed after the callback: holds no computation
                return
            node = node_def_pb2.NodeDef()
            node.CopyFrom(op.node_def)
        else:
            node = _eager_node(op_type, attrs)
        if node is not None:
            nodes.append(node)

    op_callbacks.add_op_callback(callback)
    try:
        yield nodes
    finally:
        op_callbacks.remove_op_callback(callback)


def _mlp(inputs: int, outputs: int, *, norm: bool = True, seed: int = 0) -> keras.Model:
    """Unusual widths (13, 7), so no compiled function cached by an earlier test is reused."""
    keras.utils.set_random_seed(seed)
    layers = [keras.Input((inputs,)), keras.layers.Dense(13, activation="tanh")]
    if norm:
        layers.append(keras.layers.BatchNormalization())
    return keras.Sequential(layers + [keras.layers.Dense(outputs)])


@pytest.fixture(scope="module", autouse=True)
def _set_up():
    """Op determinism on and TF32 off, as every notebook's setup cell leaves them."""
    runtime.setup(seed=0)
    assert tf_config.is_op_determinism_enabled()


@pytest.fixture(scope="module")
def traced():
    """The ops each helper builds and runs, by scenario, as the notebooks use them."""
    scenarios: dict[str, list[node_def_pb2.NodeDef]] = {}

    # 01: the per-atom model in float64, its compiled loss and gradient, L-BFGS on one batch, and the
    # notebook's own eager calls (global norm, a NaN written into the targets, ids -> ragged rows).
    with _recording() as nodes:
        model = molecules.PerAtomEnergy(hidden=7)
        loss_fn = keras.losses.MeanSquaredError(dtype="float64")
        dataset = molecules.molecule_dataset(12, batch_size=6, seed=3)
        x, y = next(iter(dataset))
        loss, grads = decoupling.LossAndGradient(model, loss_fn)(x, y)
        tf.linalg.global_norm(grads)
        decoupling.minimize_on_batch(model, loss_fn, (x, y), max_iterations=3)
        tf.tensor_scatter_nd_update(y, [[0]], [np.nan])
        tf.RaggedTensor.from_value_rowids(x.flat_values, x.value_rowids(), x.nrows())
        x.row_lengths()
    scenarios["decoupling (notebook 01)"] = nodes

    # 02: micro-steps, the fused last step + update, a partial window's update (Adam, BatchNorm).
    with _recording() as nodes:
        net = _mlp(5, 1)
        data = [(tf.random.stateless_normal([4, 5], seed=[i, 1]), tf.random.stateless_normal([4, 1], seed=[i, 2]))
                for i in range(3)]
        accumulation.train_accumulated(net, keras.optimizers.Adam(0.01), keras.losses.MeanSquaredError(),
                                       data, accumulation_steps=2, verbose=False)
        accumulator = accumulation.GradientAccumulator(net.trainable_variables)
        accumulator.add([tf.zeros_like(v) for v in net.trainable_variables], weight=2)
    scenarios["accumulation (notebook 02)"] = nodes

    # 03: the PTB pipeline and the checksum loop, from Python and inside one tf.function.
    with _recording() as nodes:
        counter = batching.Checksum()
        stream = batching.ptb_batches(np.arange(211), batch_size=3, num_steps=7)
        counter.run_python_loop(stream, num_batches=2)
        counter.run_in_graph(stream, num_batches=2)
    scenarios["batching (notebook 03)"] = nodes

    # 04: a training loop with a full validation pass (one compiled while loop over the dataset).
    with _recording() as nodes:
        net = _mlp(validation.FEATURES, 1, norm=False, seed=1)
        validation.train_with_validation(net, keras.optimizers.SGD(0.05), keras.losses.MeanSquaredError(),
                                         validation.generated_dataset(None, 8), validation.generated_dataset(3, 8),
                                         steps=2, every=2)
        validation.evaluate(net, validation.generated_dataset(2, 8, with_ids=False),
                            keras.losses.MeanSquaredError(), [keras.metrics.MeanAbsoluteError()])
    scenarios["validation (notebook 04)"] = nodes

    # 05: a training step with sparse categorical cross-entropy and BatchNorm, snapshot and sync.
    with _recording() as nodes:
        net = _mlp(6, 4, seed=2)
        step = snapshots.make_train_step(net, keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                                         keras.optimizers.Adam(1e-3))
        step(tf.random.stateless_normal([8, 6], seed=[5, 6]), tf.constant([0, 1, 2, 3] * 2))
        past = snapshots.snapshot(net)
        snapshots.sync(net, past)
        snapshots.sync(net, past, tau=0.5)
    scenarios["snapshots (notebook 05)"] = nodes
    return scenarios


# --------------------------------------------------------------------------- op determinism on a GPU


def test_the_list_of_ops_that_raise_matches_this_tensorflow_build():
    library = Path(tf.sysconfig.get_lib()) / "libtensorflow_cc.so.2"
    if not library.is_file():
        pytest.skip(f"{library.name} not found in this TensorFlow build")
    found = set()
    with open(library, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as binary:
        for start in _MESSAGE_STARTS:
            at = binary.find(start)
            while at != -1:
                text = binary[at:binary.find(b"\0", at, at + 400)].decode("ascii", "replace")
                if "determinis" in text.lower():
                    found.add(text)
                at = binary.find(start, at + 1)
    assert found == set(_DETERMINISM_MESSAGES), (
        f"TensorFlow {tf.__version__} raises under op determinism with other messages than TF 2.20/2.21: "
        f"new {sorted(found - set(_DETERMINISM_MESSAGES))}, gone {sorted(set(_DETERMINISM_MESSAGES) - found)}. "
        "Update _DETERMINISM_MESSAGES here and the op table in docs/gpu.md.")


def test_no_helper_uses_an_op_that_raises_under_op_determinism_on_a_gpu(traced):
    for scenario, nodes in traced.items():
        assert len(nodes) > 20, f"{scenario}: recorded only {len(nodes)} ops: the recording is broken"
        raising = sorted({node.op for node in nodes if _raises_on_gpu(node)})
        assert not raising, (f"{scenario} builds {raising}: on a GPU with op determinism on (runtime.setup) "
                             "these raise UnimplementedError. See docs/gpu.md for deterministic replacements.")


def test_the_raise_check_catches_ops_without_a_deterministic_gpu_kernel():
    with _recording() as nodes:
        tf.function(lambda ids: tf.math.bincount(ids)).get_concrete_function(tf.TensorSpec([None], tf.int32))
        tf.function(lambda x, y: tf.raw_ops.SparseSoftmaxCrossEntropyWithLogits(features=x, labels=y)
                    ).get_concrete_function(tf.TensorSpec([None, 3]), tf.TensorSpec([None], tf.int32))
    caught = {node.op for node in nodes if _raises_on_gpu(node)}
    assert caught == {"DenseBincount", "SparseSoftmaxCrossEntropyWithLogits"}


def test_ragged_rows_from_int32_ids_would_raise_on_a_gpu_and_int64_ids_would_not():
    # RaggedTensor.from_value_rowids counts rows with DenseBincount; it has GPU kernels only for int32
    # and float32 counts. Notebook 01 passes value_rowids() (int64): counted on the CPU, no error.
    def rows_from(ids_dtype):
        with _recording() as nodes:
            tf.function(lambda values, ids: tf.RaggedTensor.from_value_rowids(values, ids).row_splits
                        ).get_concrete_function(tf.TensorSpec([None, 2]), tf.TensorSpec([None], ids_dtype))
        return {node.op for node in nodes if _raises_on_gpu(node)}

    assert rows_from(tf.int64) == set()
    assert rows_from(tf.int32) == {"DenseBincount"}


def test_keras_sparse_cross_entropy_avoids_the_raising_kernel_only_under_op_determinism():
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def ops():
        with _recording() as nodes:
            tf.function(lambda y, logits: loss(y, logits)).get_concrete_function(
                tf.TensorSpec([None], tf.int32), tf.TensorSpec([None, 4]))
        return {node.op for node in nodes}

    assert "SparseSoftmaxCrossEntropyWithLogits" not in ops()
    tf_config.disable_op_determinism()
    try:
        assert "SparseSoftmaxCrossEntropyWithLogits" in ops()  # traced before setup(): would raise on a GPU
    finally:
        tf.config.experimental.enable_op_determinism()


def test_keras_batch_normalization_builds_no_fused_kernel_even_when_frozen():
    # Keras 3 normalises with tf.nn.batch_normalization (plain ops), so the one BatchNorm case that raises
    # on a GPU (fused backprop with training disabled) cannot occur, even through a frozen BatchNorm.
    net = _mlp(3, 1, seed=3)
    with _recording() as nodes:
        for training in (True, False):
            @tf.function
            def grads(x, training=training):
                with tf.GradientTape() as tape:
                    out = tf.reduce_sum(net(x, training=training))
                return tape.gradient(out, net.trainable_variables)

            grads(tf.ones([4, 3]))
    ops = {node.op for node in nodes}
    assert {"Rsqrt", "MatMul"} <= ops and not any(op.startswith("FusedBatchNorm") for op in ops)


# --------------------------------------------------------------------------- float64 (notebook 01)


def _pipeline_op(op: str) -> bool:
    """tf.data's own ops (and its ragged element encoding): they run on the host by design (section 4)."""
    return bool(re.search(r"Dataset(V\d)?$", op)) or op in ("RaggedTensorToVariant", "RaggedTensorFromVariant")


def test_every_float64_op_of_notebook_01_has_a_gpu_kernel(traced):
    nodes = [node for node in traced["decoupling (notebook 01)"] if _float64(node) and not _pipeline_op(node.op)]
    ops = {node.op for node in nodes}
    assert {"MatMul", "Tanh", "UnsortedSegmentSum", "AssignVariableOp", "TensorScatterUpdate", "L2Loss"} <= ops
    on_cpu = sorted({node.op for node in nodes if not _gpu_kernel(node)})
    assert not on_cpu, f"notebook 01 computes in float64, but {on_cpu} have no float64 GPU kernel (they run on the CPU)"


def test_the_float64_check_catches_an_op_without_a_float64_gpu_kernel():
    with _recording() as nodes:
        tf.function(lambda x, y: tf.raw_ops.SparseSoftmaxCrossEntropyWithLogits(features=x, labels=y)
                    ).get_concrete_function(tf.TensorSpec([None, 3], tf.float64), tf.TensorSpec([None], tf.int32))
    xent = [node for node in nodes if node.op == "SparseSoftmaxCrossEntropyWithLogits"]
    assert xent and _float64(xent[0]) and not _gpu_kernel(xent[0])


# --------------------------------------------------------------------------- input pipelines


def test_tf_data_work_runs_on_the_host_even_inside_tf_function(traced):
    from tensorflow.python.framework import kernels

    nodes = [node for scenario in traced.values() for node in scenario]
    dataset_ops = {node.op for node in nodes if _pipeline_op(node.op) and node.op.endswith(("Dataset", "V2", "V3"))}
    assert {"RangeDataset", "MapDataset", "PrefetchDataset"} <= dataset_ops
    for op in sorted(dataset_ops):
        gpu = [k for k in kernels.get_registered_kernels_for_op(op).kernel if k.device_type == "GPU"]
        if op in ("PrefetchDataset", "OptionsDataset", "GeneratorDataset"):
            # registered for prefetch_to_device / copy_to_device; the dataset handles stay in host memory
            assert gpu and all({"handle"} <= set(k.host_memory_arg) for k in gpu), op
        else:
            assert not gpu, f"{op} has a GPU kernel: docs/gpu.md says tf.data's work runs on the host"
    # Notebook 03's loop inside a tf.function runs over `iter(dataset)`: AutoGraph makes it a While loop that
    # pulls each batch with IteratorGetNextAsOptional (it has a GPU kernel), so the step stays in the compiled
    # function, not a tf.data reduction whose body would run inside tf.data, on the host.
    notebook_03 = {node.op for node in traced["batching (notebook 03)"]}
    assert {"While", "IteratorGetNextAsOptional"} <= notebook_03 and "ReduceDataset" not in notebook_03
    assert [k for k in kernels.get_registered_kernels_for_op("IteratorGetNextAsOptional").kernel if k.device_type == "GPU"]
    # the control: `for x in dataset` (no iter) inside a tf.function is a ReduceDataset, which has no GPU kernel
    with _recording() as nodes:
        tf.function(_sum_in_a_for_loop).get_concrete_function(tf.data.Dataset.range(3))
    reduce_nodes = [node for node in nodes if node.op == "ReduceDataset"]
    assert reduce_nodes and not [k for k in kernels.get_registered_kernels_for_op("ReduceDataset").kernel
                                 if k.device_type == "GPU"]


def _sum_in_a_for_loop(dataset: tf.data.Dataset) -> tf.Tensor:
    total = tf.constant(0, tf.int64)
    for x in dataset:  # AutoGraph: a tf.data reduction (ScanDataset + ReduceDataset)
        total += x
    return total


# --------------------------------------------------------------------------- asynchronous execution


def test_a_timer_must_wait_for_asynchronous_work():
    import threading
    import time

    started, finished = threading.Event(), []

    def work(value):
        started.wait(timeout=10)  # held until the test lets it go: no race with the checks below
        time.sleep(0.02)
        finished.append(1)
        return value

    @tf.function
    def step():  # returns None, like notebook 02's full_update: nothing to fetch
        tf.numpy_function(work, [tf.constant(1.0)], tf.float32, stateful=True)

    started.set()
    step()
    tf.config.experimental.set_synchronous_execution(False)  # every device asynchronous, as a GPU is
    try:
        started.clear()
        finished.clear()
        step()  # a naive timer would stop the clock here, before the work has even begun
        done_when_it_returned = len(finished)
        started.set()
        plumbing.wait_for_device()
        assert (done_when_it_returned, len(finished)) == (0, 1), "the call waited for its work: not asynchronous"
        finished.clear()
        measure.median_seconds(step, repeat=3, warmup=1)
        assert len(finished) == 4, "median_seconds returned before the work it timed had finished"
        finished.clear()
        measure.interleaved({"a": step, "b": step}, rounds=2, warmup=1)
        assert len(finished) == 6, "interleaved returned before the work it timed had finished"
    finally:
        started.set()
        plumbing.wait_for_device()
        tf.config.experimental.set_synchronous_execution(True)


# --------------------------------------------------------------------------- TensorFloat-32


def _tf32(x: tf.Tensor) -> tf.Tensor:
    """``x`` rounded to TensorFloat-32: 10 explicit mantissa bits, round to nearest even."""
    bits = tf.bitcast(x, tf.int32)
    odd = tf.bitwise.bitwise_and(tf.bitwise.right_shift(bits, 13), 1)
    return tf.bitcast(tf.bitwise.bitwise_and(bits + 0xFFF + odd, ~0x1FFF), tf.float32)


@tf.custom_gradient
def _tf32_matmul(a, b):
    """A float32 matmul as an Ampere GPU runs it with TF32 on: operands rounded, float32 sums."""
    def grad(dy):
        return (tf.matmul(_tf32(dy), _tf32(b), transpose_b=True), tf.matmul(_tf32(a), _tf32(dy), transpose_a=True))
    return tf.matmul(_tf32(a), _tf32(b)), grad


class _Dense(keras.layers.Dense):
    tf32 = False

    def call(self, x):
        kernel = tf.convert_to_tensor(self.kernel)
        return self.activation((_tf32_matmul(x, kernel) if _Dense.tf32 else tf.matmul(x, kernel)) + self.bias)


def _accumulated_minus_full(tf32: bool) -> float:
    _Dense.tf32 = tf32
    rng = np.random.default_rng(0)
    x = rng.normal(size=(48, 8)).astype("float32")
    y = (np.sin(x[:, :1]) + 0.5 * x[:, 1:2]).astype("float32")
    keras.utils.set_random_seed(0)
    net = keras.Sequential([keras.Input((8,)), _Dense(16, activation="tanh"), _Dense(1)])
    mse = keras.losses.MeanSquaredError()
    with tf.GradientTape() as tape:
        loss = mse(y, net(x, training=True))
    full = tape.gradient(loss, net.trainable_variables)
    parts = accumulation.micro_batches((tf.constant(x), tf.constant(y)), [5, 5, 2] * 4)
    accumulated = accumulation.accumulated_gradients(net, mse, parts)
    return max(float(tf.reduce_max(tf.abs(a - b))) for a, b in zip(full, accumulated))


def test_tensor_float_32_would_break_the_accumulation_proof():
    # Notebook 02 proves "accumulated gradient == full-batch gradient" within 1e-5 (its checker too).
    # The helper differentiates n * loss, so TF32 rounds different operands on the two paths.
    assert _accumulated_minus_full(tf32=False) < 1e-6
    assert _accumulated_minus_full(tf32=True) > 1e-5
    assert not tf.config.experimental.tensor_float_32_execution_enabled()


# --------------------------------------------------------------------------- mixed precision


def _weight_change(train) -> float:
    net = _mlp(4, 1, norm=False, seed=4)
    before = [v.numpy() for v in net.trainable_variables]
    train(net)
    return float(sum(np.abs(v.numpy() - b).sum() for v, b in zip(net.trainable_variables, before)))


def _batch():
    return tf.random.stateless_normal([16, 4], seed=[7, 8]), tf.random.stateless_normal([16, 1], seed=[9, 10])


def _train(loop: str, optimizer: keras.optimizers.Optimizer, net: keras.Model) -> None:
    x, y, mse = *_batch(), keras.losses.MeanSquaredError()
    if loop == "snapshots.make_train_step":
        snapshots.make_train_step(net, mse, optimizer)(x, y)
    elif loop == "accumulation.train_accumulated":
        accumulation.train_accumulated(net, optimizer, mse, [(x[:8], y[:8]), (x[8:], y[8:])],
                                       accumulation_steps=2, verbose=False)
    elif loop == "validation.train_with_validation":
        validation.train_with_validation(net, optimizer, mse, tf.data.Dataset.from_tensors((x, y)).repeat(), None,
                                         steps=1, every=1)
    else:  # what Keras' own train_step does (keras/src/backend/tensorflow/trainer.py), and the fix
        with tf.GradientTape() as tape:
            loss = optimizer.scale_loss(mse(y, net(x, training=True)))
        optimizer.apply_gradients(zip(tape.gradient(loss, net.trainable_variables), net.trainable_variables))


_LOOPS = ["snapshots.make_train_step", "accumulation.train_accumulated", "validation.train_with_validation",
          "a loop that calls optimizer.scale_loss"]


def _loss_scaled_step_matches_plain(loop: str) -> None:
    plain = _weight_change(lambda net: _train(loop, keras.optimizers.SGD(0.1), net))
    scaled = _weight_change(
        lambda net: _train(loop, keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1)), net))
    assert math.isclose(scaled, plain, rel_tol=1e-3), (
        f"{loop} with LossScaleOptimizer changed the weights by {scaled:.3g} instead of {plain:.3g}: the loss "
        "was not scaled (optimizer.scale_loss) before the gradient, so apply_gradients divided unscaled "
        "gradients by the loss scale")


def test_a_loop_that_scales_the_loss_steps_the_same_with_a_loss_scale_optimizer():
    _loss_scaled_step_matches_plain("a loop that calls optimizer.scale_loss")


_NOT_YET_SCALED: set[str] = set()


@pytest.mark.parametrize("loop", [pytest.param(loop, marks=pytest.mark.xfail(
    strict=True, reason="does not call optimizer.scale_loss yet (docs/gpu.md, mixed precision)"))
    if loop in _NOT_YET_SCALED else loop for loop in _LOOPS[:3]])
def test_helper_training_loops_scale_the_loss_for_a_loss_scale_optimizer(loop):
    _loss_scaled_step_matches_plain(loop)


# --------------------------------------------------------------------------- devices, in a fresh process

# Fake GPUs added to TensorFlow's own device list; when the runtime starts, the GPUOptions that
# TensorFlow would hand the GPU runtime (context._compute_gpu_options) are recorded, then the fakes
# are removed so the CPU runtime can start.
_DEVICE_SCRIPT = r'''
import importlib, json, pkgutil, sys
import helpers
import tensorflow as tf
from tensorflow.python.eager import context

out = {}
for module in pkgutil.walk_packages(helpers.__path__, "helpers."):
    importlib.import_module(module.name)
out["runtime started by importing helpers"] = bool(context.context()._initialized)

from helpers import runtime
_start = context.Context.ensure_initialized
seen = []

def ensure_initialized(self):
    if self._context_handle is None:
        fakes = [d for d in self._physical_devices or [] if d.device_type == "GPU"]
        if fakes:
            options = self._compute_gpu_options()
            seen.append({"allow_growth": options.allow_growth,
                         "visible": options.visible_device_list,
                         "limits": [list(v.memory_limit_mb) for v in options.experimental.virtual_devices]})
            self._physical_devices = [d for d in self._physical_devices if d not in fakes]
            self._visible_device_list = [d for d in self._visible_device_list if d not in fakes]
            for d in fakes:
                self._memory_growth_map.pop(d, None)
                self._virtual_device_map.pop(d, None)
    return _start(self)

context.Context.ensure_initialized = ensure_initialized
for name, gpus, kwargs in [("1 GPU", 1, {}), ("1 GPU, replicas=2", 1, {"replicas": 2, "replica_memory_mb": 1000}),
                           ("2 GPUs, replicas=2", 2, {"replicas": 2, "replica_memory_mb": 1000}),
                           ("3 GPUs, replicas=2", 3, {"replicas": 2, "replica_memory_mb": 1000}),
                           ("2 GPUs, replicas=3", 2, {"replicas": 3, "replica_memory_mb": 1000})]:
    context._reset_context()
    ctx = context.context()
    ctx._initialize_physical_devices()
    fakes = [tf.config.PhysicalDevice(f"/physical_device:GPU:{i}", "GPU") for i in range(gpus)]
    ctx._physical_devices += fakes
    ctx._visible_device_list += fakes
    ctx._memory_growth_map.update({d: None for d in fakes})
    runtime.setup(seed=0, **kwargs)
    out[name] = seen[-1]

context._reset_context()
print("==gpu-check-cell==")
DEVICE = runtime.setup(seed=0)
exec(compile(sys.stdin.read(), "docs/gpu.md", "exec"))
print("==json==")
print(json.dumps(out))
'''


def _gpu_check_cell() -> str:
    text = (ROOT / "docs" / "gpu.md").read_text(encoding="utf-8")
    section = text.split("\n## GPU check", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.fixture(scope="module")
def fresh_run():
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run([sys.executable, "-c", _DEVICE_SCRIPT], input=_gpu_check_cell(), capture_output=True,
                          text=True, timeout=300, env=env, cwd=ROOT)
    if proc.returncode != 0:
        pytest.fail(f"fresh process failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    cell, result = proc.stdout.split("==gpu-check-cell==\n", 1)[1].split("==json==\n")
    return {"cell": cell.splitlines(), **json.loads(result)}


def test_importing_any_helper_does_not_start_the_runtime(fresh_run):
    # A notebook may import helpers before calling runtime.setup(); device settings still apply then.
    assert fresh_run["runtime started by importing helpers"] is False


def test_setup_hands_tensorflow_memory_growth_for_one_gpu(fresh_run):
    assert fresh_run["1 GPU"] == {"allow_growth": True, "visible": "0", "limits": []}


def test_setup_splits_one_gpu_into_replicas_with_fixed_memory_and_no_growth(fresh_run):
    assert fresh_run["1 GPU, replicas=2"] == {"allow_growth": False, "visible": "0", "limits": [[1000.0, 1000.0]]}


def _logical_gpus(options: dict) -> int:
    # TensorFlow makes one logical GPU of every visible GPU, or one per entry of its memory limits.
    visible = [d for d in options["visible"].split(",") if d]
    limits = options["limits"] or [[] for _ in visible]
    return sum(len(entry) or 1 for entry in limits)


@pytest.mark.parametrize("machine, growth", [("2 GPUs, replicas=2", True), ("3 GPUs, replicas=2", True),
                                             ("2 GPUs, replicas=3", False)])
def test_setup_on_several_gpus_gives_exactly_the_replicas_asked_for(fresh_run, machine, growth):
    options = fresh_run[machine]
    assert _logical_gpus(options) == int(machine[-1])
    assert options["allow_growth"] is growth  # one GPU per replica: growth; a split GPU: fixed limits


def test_the_gpu_check_cell_in_the_docs_runs(fresh_run):
    lines = fresh_run["cell"]
    for start in ("device", "TF32", "memory", "op determinism", "one step", "float32 matmul",
                  "segment sum", "bincount"):
        assert any(line.startswith(start) for line in lines), f"no line starting {start!r} in {lines}"
    assert "repeatable: True" in "\n".join(lines)


# --------------------------------------------------------------------------- the notebooks and the build

_GPU_HOSTILE = {  # API -> why it is not in a notebook (docs/gpu.md)
    r"\btf\.(math\.)?bincount\(|raw_ops\.(Dense)?Bincount": "DenseBincount raises under op determinism on a GPU",
    r"adjust_contrast|crop_and_resize|sparse_dense_matmul|max_pool_with_argmax|dilation2d|fake_quant":
        "raises under op determinism on a GPU",
    r"ResizeMethod\.NEAREST|method=['\"]nearest": "its gradient raises under op determinism on a GPU",
    r"raw_ops\.(Sparse)?SoftmaxCrossEntropyWithLogits|fused_batch_norm": "raises under op determinism on a GPU",
    r"jit_compile\s*=\s*True": "XLA's GPU determinism differs; the workbook runs without XLA",
    r"enable_tensor_float_32_execution\(True": "the exactness checks need TF32 off",
}


def _code_cells(path: Path) -> list[str]:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("[0-9]*.ipynb")), ids=lambda p: p.stem)
def test_notebooks_set_up_devices_first_and_avoid_gpu_hostile_apis(path):
    cells = [c for c in _code_cells(path) if not c.lstrip().startswith("# Colab only")]
    assert "runtime.setup(" in cells[0], f"{path.name}: the first code cell must call runtime.setup()"
    before_setup = cells[0].split("runtime.setup(")[0]
    assert not re.search(r"import tensorflow|import keras|\btf\.", before_setup), (
        f"{path.name}: TensorFlow runs before runtime.setup(): GPU memory growth could not be set")
    for pattern, why in _GPU_HOSTILE.items():
        hits = [k for k, cell in enumerate(cells) if re.search(pattern, cell)]
        assert not hits, f"{path.name}: code cell(s) {hits} use {pattern!r}: {why}"


def test_this_cuda_build_runs_on_colab_gpus():
    # SASS runs on GPUs of the same major compute capability and an equal or higher minor one; PTX is
    # compiled at first use on newer GPUs. Colab: T4 7.5, L4 8.9, A100 8.0, H100 9.0.
    capabilities = tf.sysconfig.get_build_info()["cuda_compute_capabilities"]
    sass = [tuple(map(int, divmod(int(c[3:]), 10))) for c in capabilities if c.startswith("sm_")]
    ptx = [tuple(map(int, divmod(int(c[8:]), 10))) for c in capabilities if c.startswith("compute_")]
    for name, (major, minor) in {"T4": (7, 5), "A100": (8, 0), "L4": (8, 9), "H100": (9, 0)}.items():
        runs = any(m == major and n <= minor for m, n in sass) or any((m, n) <= (major, minor) for m, n in ptx)
        assert runs, f"TensorFlow {tf.__version__} ({capabilities}) has no kernels for the {name} ({major}.{minor})"
