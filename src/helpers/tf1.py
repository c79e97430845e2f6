"""The TF1 baselines, re-created under ``tf.compat.v1`` (the notebooks' "Then (TF1)" sections,
the tests and the benchmarks).

* :func:`session`: the one way every baseline opens a TF1 session: on its own graph, variables
  initialised, queue runners started if asked, every op bounded by a time-out (a read from an empty
  queue raises ``DeadlineExceededError`` instead of hanging the kernel), and on exit the threads
  stopped and joined and the session closed.
* :func:`session_tensor` (notebook 01): the placeholder and tensor that read a tensor held in the
  runtime by a session handle, without the dummy handle the API otherwise makes you keep.
* :class:`AccumulationGraph`: notebook 02's network as TF1 ops, its gradient tensors and train op,
  for the two TF1 answers (feed averaged gradients; accumulator variables in the graph).
* :class:`QueuePipeline` and :func:`ptb_batches`: the PTB producer (notebook 03): a range queue
  hands out the window index, strided slices cut the batch.
* :func:`read_pass` and :func:`validation_queue_passes`: notebook 04's validation queue, cycling
  forever or run once, read pass after pass in one session (why neither gives exact passes).
* :class:`ValidationPasses`: a TF1 copy of a Keras MLP with two ways to run a validation pass
  (notebook 04): the source's new session + restore + queue runners, and the TF1 fix, a re-initialised
  ``tf.data`` iterator in one long-lived session.

Nothing here calls ``tf.compat.v1.disable_eager_execution()``: every graph is built inside
``with graph.as_default():`` and the rest of the process stays TF2.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import os
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import tensorflow as tf

from helpers.arguments import require_int
from helpers.batching import as_token_ids, batch_checksum, ptb_layout
from helpers.validation import chunk_examples, collect, generated_dataset

__all__ = ["session", "session_tensor", "QueuePipeline", "ptb_batches", "read_pass", "validation_queue_passes",
           "ValidationPasses", "DEFAULT_TIMEOUT_MS"]

v1 = tf.compat.v1
DEFAULT_TIMEOUT_MS = 10_000


class _BoundedSession(v1.Session):
    """A session whose every ``run`` fails after ``timeout_ms`` instead of blocking forever.

    The bound is a per-call ``RunOptions.timeout_in_ms``, not the session-wide
    ``operation_timeout_in_ms``: that one would also end the queue runners' enqueues, which block for
    as long as nobody reads a full queue (they use ``make_callable``, not ``run``, and stay unbounded).
    """

    def __init__(self, *args: Any, timeout_ms: int, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.timeout_ms = timeout_ms
        self._bounded = v1.RunOptions(timeout_in_ms=timeout_ms)

    def run(self, fetches: Any, feed_dict: Any = None, options: Any = None, run_metadata: Any = None) -> Any:
        if options is None:
            options = self._bounded
        elif not options.timeout_in_ms:
            bounded = v1.RunOptions()
            bounded.CopyFrom(options)
            bounded.timeout_in_ms = self.timeout_ms
            options = bounded
        return super().run(fetches, feed_dict=feed_dict, options=options, run_metadata=run_metadata)


@contextlib.contextmanager
def session(graph: tf.Graph, *, queue_runners: bool = False, initialize: bool = True,
            prepare: Callable[[Any], None] | None = None, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> Iterator[Any]:
    """A ``tf.compat.v1.Session`` on ``graph``, ready to run; everything stopped and closed on exit.

    Global and local variables are initialised (``initialize=False`` to restore them instead),
    then ``prepare(sess)`` runs if given (restore a checkpoint there), then queue runners are started
    under a ``Coordinator`` when ``queue_runners`` is true. Every ``sess.run`` fails with
    ``DeadlineExceededError`` after ``timeout_ms`` milliseconds instead of blocking forever (a dequeue
    from a queue that nobody fills); the queue runners themselves are not bounded, so a pipeline may
    sit idle for as long as it likes. On exit, also after an error: stop the coordinator, join its
    threads, close.
    The session's ``queue_threads`` attribute lists the queue runners' threads.

    >>> graph = tf.Graph()
    >>> with graph.as_default():
    ...     counter = tf.compat.v1.train.range_input_producer(3, shuffle=False).dequeue()
    >>> with session(graph, queue_runners=True) as sess:
    ...     [int(sess.run(counter)) for _ in range(4)]
    [0, 1, 2, 0]
    """
    if not isinstance(graph, tf.Graph):
        raise TypeError(f"graph must be a tf.Graph, got {type(graph).__name__}")
    require_int("timeout_ms", timeout_ms, minimum=1)
    sess = _BoundedSession(graph=graph, timeout_ms=timeout_ms)
    coord, threads = None, []
    try:
        with graph.as_default():
            if initialize:
                sess.run([v1.global_variables_initializer(), v1.local_variables_initializer()])
            if prepare is not None:
                prepare(sess)
            if queue_runners:
                coord = v1.train.Coordinator()
                threads = v1.train.start_queue_runners(sess=sess, coord=coord)
        sess.queue_threads = threads  # for tests and for the curious: the queue runners' threads
        yield sess
    finally:
        if coord is not None:
            coord.request_stop()
            coord.join(threads, stop_grace_period_secs=timeout_ms / 1000)
        sess.close()


# --------------------------------------------------------------------------- notebook 01: a tensor held by a handle


def session_tensor(sess: Any, dtype: Any, *, device: str = "/cpu:0") -> tuple[tf.Tensor, tf.Tensor]:
    """``(feed, tensor)``: feed a session handle's ``.handle`` string to ``feed``, and ``tensor`` is
    the tensor that handle keeps in the runtime. Every op built on ``tensor`` reads that one tensor.

    ``get_session_handle(t)`` (run once) keeps the value of ``t`` in the runtime and returns a handle;
    ``tf.compat.v1.get_session_tensor`` builds the reader, but it takes an existing handle of the same
    dtype only to learn the device to place the reader on. This makes that handle (on ``device``:
    the device of the tensors you will feed; a queue's dequeue lives on the CPU), builds the reader in
    ``sess.graph`` and deletes the handle at once.

    >>> graph = tf.Graph()
    >>> with graph.as_default(), session(graph) as sess:
    ...     held = sess.run(tf.compat.v1.get_session_handle(tf.constant([1, 2, 3])))
    ...     feed, tensor = session_tensor(sess, tf.int32)
    ...     total = sess.run(tf.reduce_sum(tensor), {feed: held.handle})
    ...     held.delete()
    >>> int(total)
    6
    """
    if not isinstance(sess, v1.Session):
        raise TypeError(f"sess must be a tf.compat.v1.Session, got {type(sess).__name__}")
    try:
        dtype = tf.as_dtype(dtype)
    except TypeError:
        raise TypeError(f"dtype must be a TensorFlow dtype such as tf.int32, got {dtype!r}") from None
    if not isinstance(device, str):
        raise TypeError(f"device must be a device name such as '/cpu:0', got {type(device).__name__}")
    with sess.graph.as_default():
        with tf.device(device):
            placement = sess.run(v1.get_session_handle(tf.zeros([0], dtype)))
        feed, tensor = v1.get_session_tensor(placement.handle, dtype)
    placement.delete()
    return feed, tensor
# --------------------------------------------------------------------------- notebook 02: gradient accumulation


class AccumulationGraph:
    """Notebook 02's TF1 graph: a Keras ``n -> h (tanh) -> 1`` network as ``tf.compat.v1`` ops, ready
    for either TF1 answer to "accumulate gradients, apply them once".

    ``weights`` are that model's ``get_weights()`` (kernel, bias, kernel, bias), so the graph starts
    where the Keras model starts. The graph holds placeholders ``x`` and ``y``; ``variables`` (the four
    weights); ``loss`` (mean squared error); ``optimizer`` (``GradientDescentOptimizer(learning_rate)``);
    ``gradients``, one tensor per variable from ``optimizer.compute_gradients(loss)``; and ``train_op``,
    ``optimizer.apply_gradients`` on those tensors. A ``feed_dict`` can replace any tensor, not only a
    placeholder: feed values for ``gradients`` and ``train_op`` applies them (the first TF1 answer).
    Build more ops (accumulator variables, the second answer) inside ``with graph.graph.as_default():``.
    :meth:`session` opens a session on the graph, every variable initialised to ``weights``.

    >>> import keras
    >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, activation="tanh"), keras.layers.Dense(1)])
    >>> graph = AccumulationGraph(model.get_weights(), learning_rate=0.1)
    >>> with graph.session() as sess:
    ...     grads = sess.run(graph.gradients, feed_dict={graph.x: np.ones((4, 3)), graph.y: np.zeros((4, 1))})
    >>> [g.shape for g in grads]
    [(3, 2), (2,), (2, 1), (1,)]
    """

    def __init__(self, weights: Sequence[Any], learning_rate: float):
        arrays = [np.asarray(w, dtype=np.float32) for w in weights]
        shapes = [a.shape for a in arrays]
        if len(arrays) != 4 or [len(s) for s in shapes] != [2, 1, 2, 1]:
            raise ValueError(f"weights must be kernel, bias, kernel, bias of two Dense layers, got shapes {shapes}")
        (n, h), (h_bias,), (h_in, out), (out_bias,) = shapes
        if not h == h_bias == h_in or not out == out_bias == 1:
            raise ValueError(f"weights must chain as (n, h), (h,), (h, 1), (1,), got shapes {shapes}")
        if isinstance(learning_rate, bool) or not isinstance(learning_rate, numbers.Real):
            raise TypeError(f"learning_rate must be a number, got {type(learning_rate).__name__}")
        if not learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0, got {learning_rate!r}")
        self.graph = tf.Graph()
        with self.graph.as_default():
            self.x = v1.placeholder(tf.float32, [None, n], name="x")
            self.y = v1.placeholder(tf.float32, [None, 1], name="y")
            self.variables = [v1.Variable(a, name=name) for a, name in
                              zip(arrays, ["kernel1", "bias1", "kernel2", "bias2"])]
            hidden = tf.tanh(tf.matmul(self.x, self.variables[0]) + self.variables[1])
            prediction = tf.matmul(hidden, self.variables[2]) + self.variables[3]
            self.loss = tf.reduce_mean(tf.square(self.y - prediction))
            self.optimizer = v1.train.GradientDescentOptimizer(float(learning_rate))
            grads_and_vars = self.optimizer.compute_gradients(self.loss, self.variables)
            self.gradients = [g for g, _ in grads_and_vars]
            self.train_op = self.optimizer.apply_gradients(grads_and_vars)

    def session(self, **kwargs: Any) -> Any:
        """:func:`session` on this graph (a context manager): every variable at its start value."""
        return session(self.graph, **kwargs)


__all__ += ["AccumulationGraph"]


# --------------------------------------------------------------------------- notebook 03: the PTB producer


class QueuePipeline:
    """The PTB producer the TF1 way: a graph, a range queue, queue runners and a session.

    ``x`` and ``y`` are defined once and depend on a dequeue, so every ``session.run`` that
    evaluates them takes the next window. Use it as a context manager: on exit the queue runners
    are stopped and joined and the session is closed (see :func:`session`). ``step`` is a stand-in
    training step that adds :func:`helpers.batching.batch_checksum` of the batch to a variable.

    Every read gives up after ``timeout_ms``; the queue runner waits, unbounded, while the queue is
    full, so the pipeline may sit idle for as long as it likes.

    >>> with QueuePipeline(range(20), batch_size=2, num_steps=3) as pipe:
    ...     first, second = pipe.next_batch(), pipe.next_batch()
    >>> second[0].tolist()
    [[3, 4, 5], [13, 14, 15]]
    """

    def __init__(self, raw_ids: Any, batch_size: int, num_steps: int, *, timeout_ms: int = DEFAULT_TIMEOUT_MS):
        ids = as_token_ids(raw_ids)
        self.layout = ptb_layout(len(ids), batch_size, num_steps)
        timeout_ms = require_int("timeout_ms", timeout_ms, minimum=1)
        b, n, length = self.layout.batch_size, self.layout.num_steps, self.layout.batch_len
        self.graph = tf.Graph()
        with self.graph.as_default():
            raw = tf.constant(ids, dtype=tf.int32, name="raw_data")
            data = tf.reshape(raw[: b * length], [b, length])
            self.index = v1.train.range_input_producer(self.layout.epoch_size, shuffle=False).dequeue()
            self.x = tf.strided_slice(data, [0, self.index * n], [b, (self.index + 1) * n])
            self.y = tf.strided_slice(data, [0, self.index * n + 1], [b, (self.index + 1) * n + 1])
            self.x.set_shape([b, n])
            self.y.set_shape([b, n])
            self.total = v1.Variable(0, dtype=tf.int64, trainable=False, name="total")
            self.step = self.total.assign_add(batch_checksum(self.x, self.y))
        self._context = session(self.graph, queue_runners=True, timeout_ms=timeout_ms)
        self.session = self._context.__enter__()
        self.closed = False

    @property
    def threads(self) -> list:
        """The queue runners' threads (alive until :meth:`close`)."""
        return self.session.queue_threads

    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError("this QueuePipeline is closed (its session and threads are gone): make a new one")

    def next_batch(self) -> tuple[np.ndarray, np.ndarray]:
        """Run ``x`` and ``y`` once: one dequeue, one ``(x, y)`` pair of NumPy arrays."""
        self._check_open()
        x, y = self.session.run([self.x, self.y])
        return x, y

    def run_steps(self, num_steps: int) -> int:
        """Run the stand-in training step ``num_steps`` times (one ``session.run`` each); return the total.

        Each ``session.run`` is the plain call a TF1 training loop makes (no per-call options), so
        it can serve as the baseline of a benchmark.
        """
        num_steps = require_int("num_steps", num_steps, minimum=0)
        self._check_open()
        for _ in range(num_steps):
            self.session.run(self.step.op)
        return int(self.session.run(self.total))

    def close(self) -> None:
        """Stop and join the queue runner threads, then close the session (safe to call twice)."""
        if not self.closed:
            self.closed = True
            self._context.__exit__(None, None, None)

    def __enter__(self) -> "QueuePipeline":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def ptb_batches(raw_ids: Any, batch_size: int, num_steps: int, num_batches: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The first ``num_batches`` batches of the TF1 PTB producer (wrapping around epochs like the queue).

    >>> batches = ptb_batches(range(20), batch_size=2, num_steps=3, num_batches=4)
    >>> [int(x[0, 0]) for x, _ in batches]  # 20 tokens give 3 windows per epoch, then window 0 again
    [0, 3, 6, 0]
    """
    num_batches = require_int("num_batches", num_batches, minimum=1)
    with QueuePipeline(raw_ids, batch_size, num_steps) as pipe:
        return [pipe.next_batch() for _ in range(num_batches)]


# --------------------------------------------------------------------------- notebook 04: validation passes


def read_pass(sess: Any, batch: Any, feed_dict: Any = None, *, max_batches: int | None = None) -> list[list]:
    """Run ``batch`` until the input says ``OutOfRangeError`` (or ``max_batches`` were read): one
    validation pass, as a list of batches (``.tolist()`` of each). A pass that ends at once is ``[]``.

    >>> graph = tf.Graph()
    >>> with graph.as_default():
    ...     tf.compat.v1.set_random_seed(0)  # a one-shot iterator draws a seed; op determinism wants it set
    ...     batch = tf.compat.v1.data.make_one_shot_iterator(tf.data.Dataset.range(5).batch(2)).get_next()
    >>> with session(graph) as sess:
    ...     read_pass(sess, batch), read_pass(sess, batch)
    ([[0, 1], [2, 3], [4]], [])
    """
    require_int("max_batches", max_batches, minimum=1, allow_none=True)
    batches: list[list] = []
    try:
        while max_batches is None or len(batches) < max_batches:
            batches.append(sess.run(batch, feed_dict=feed_dict).tolist())
    except tf.errors.OutOfRangeError:
        pass
    return batches


def validation_queue_passes(chunk_sizes: Sequence[int], batch_size: int, *, num_epochs: int | None, passes: int,
                            batches_per_pass: int | None = None,
                            timeout_ms: int = DEFAULT_TIMEOUT_MS) -> list[list[list[int]]]:
    """Read ``passes`` validation passes from the source's TF1 validation queue, in one session.

    The pipeline of notebook 04's source: ``range_input_producer`` hands out raw chunk numbers, a
    generator (``py_func``) makes ``chunk_sizes[c]`` examples from chunk ``c`` (each example is its
    id: chunk 0 makes ids ``0 .. chunk_sizes[0] - 1``, and so on), ``tf.train.batch`` batches them
    (a smaller last batch allowed when the queue ends). ``num_epochs=None``: the queue cycles
    forever, so a pass must stop after ``batches_per_pass`` batches; ``num_epochs=1``: the queue runs
    once, closes, and a pass reads until ``OutOfRangeError``. Returns each pass's batches of ids.

    >>> validation_queue_passes([3, 2], batch_size=2, num_epochs=1, passes=2)
    [[[0, 1], [2, 3], [4]], []]
    >>> validation_queue_passes([3, 2], batch_size=2, num_epochs=None, passes=2, batches_per_pass=3)
    [[[0, 1], [2, 3], [4, 0]], [[1, 2], [3, 4], [0, 1]]]

    Raises ValueError for an empty ``chunk_sizes`` or a size < 1, ``batch_size``, ``passes``,
    ``num_epochs`` or ``batches_per_pass`` < 1, and ``num_epochs=None`` without ``batches_per_pass``
    (a pass over a queue that never ends would never end).
    """
    sizes = [require_int(f"chunk_sizes[{i}]", n, minimum=1) for i, n in enumerate(chunk_sizes)]
    if not sizes:
        raise ValueError("chunk_sizes is empty: give the number of examples of at least one chunk")
    require_int("batch_size", batch_size, minimum=1)
    require_int("num_epochs", num_epochs, minimum=1, allow_none=True)
    require_int("passes", passes, minimum=1)
    require_int("batches_per_pass", batches_per_pass, minimum=1, allow_none=True)
    if num_epochs is None and batches_per_pass is None:
        raise ValueError("num_epochs=None makes a queue that cycles forever: say where a pass ends with "
                         "batches_per_pass=...")
    offsets = np.cumsum([0] + sizes)
    graph = tf.Graph()
    with graph.as_default():
        chunk = v1.train.range_input_producer(len(sizes), num_epochs=num_epochs, shuffle=False).dequeue()
        ids = v1.py_func(lambda c: np.arange(offsets[c], offsets[c + 1], dtype=np.int64), [chunk], tf.int64,
                         stateful=False)
        ids.set_shape([None])
        batch = v1.train.batch([ids], batch_size, enqueue_many=True, num_threads=1,
                               allow_smaller_final_batch=num_epochs is not None)
    with session(graph, queue_runners=True, timeout_ms=timeout_ms) as sess:
        return [read_pass(sess, batch, max_batches=batches_per_pass) for _ in range(passes)]


class ValidationPasses:
    """A TF1 copy of a Keras MLP with two ways to run a validation pass (Cost section, benchmark).

    The graph holds the model as ``tf.compat.v1`` ops (``Dense`` layers: ReLU between, linear last),
    initialised from ``weights`` (``model.get_weights()``) and saved once as a snapshot, plus two
    input pipelines over the same :func:`helpers.validation.generated_dataset` examples, both calling
    :func:`helpers.validation.chunk_examples` once per chunk per pass (``py_func`` into the queue,
    ``tf.numpy_function`` in ``tf.data``), as the TF2 helpers do:

    * :meth:`pass_new_session`: the source's workaround. A validation *queue* (``num_epochs=1``)
      closes after one pass, so every pass opens a new session, restores the snapshot, starts the
      queue runners, reads until ``OutOfRangeError``, stops the threads and closes the session.
    * :meth:`pass_same_session`: the TF1 fix. An initializable ``tf.data`` iterator in the one
      long-lived session is re-initialised for each pass (feed its handle to share the model's
      input with a training iterator).

    With ``in_memory=True`` the examples are generated once, up front, and both pipelines read them
    from memory (``slice_input_producer`` / ``from_tensor_slices``): this isolates the cost of the
    pipelines from the cost of the generator.

    Both return ``{"loss": mean squared error over examples, "examples": n}``. Call :meth:`close`
    (or use ``with``) to close the long-lived session.

    >>> import tempfile, keras
    >>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    >>> with tempfile.TemporaryDirectory() as folder, ValidationPasses(
    ...         model.get_weights(), chunks=3, batch_size=4, seed=1, snapshot_dir=folder) as passes:
    ...     passes.pass_new_session()["examples"] == passes.pass_same_session()["examples"]
    True
    """

    def __init__(self, weights: Sequence[np.ndarray], *, chunks: int, batch_size: int, seed: int,
                 snapshot_dir: str, in_memory: bool = False, timeout_ms: int = DEFAULT_TIMEOUT_MS):
        if len(weights) < 2 or len(weights) % 2:
            raise ValueError(f"weights must be kernel/bias pairs of Dense layers, got {len(weights)} arrays")
        require_int("chunks", chunks, minimum=1)
        require_int("batch_size", batch_size, minimum=1)
        self._timeout_ms = require_int("timeout_ms", timeout_ms, minimum=1)
        features = int(np.shape(weights[0])[0])
        if in_memory:
            x_all, y_all = collect(generated_dataset(chunks, batch_size, seed=seed, features=features))
        self.graph = tf.Graph()
        with self.graph.as_default():
            variables = [v1.Variable(np.asarray(w, np.float32), name=f"layer{i // 2}_{'kb'[i % 2]}")
                         for i, w in enumerate(weights)]

            def sums(x, y):
                h = x
                for i in range(0, len(variables), 2):
                    h = tf.matmul(h, variables[i]) + variables[i + 1]
                    if i + 2 < len(variables):
                        h = tf.nn.relu(h)
                return tf.reduce_sum(tf.square(h - y)), tf.shape(x)[0]

            if in_memory:
                # The examples generated once, up front (to measure the pipelines without the generator).
                x, y = v1.train.slice_input_producer([x_all, y_all], num_epochs=1, shuffle=False)
                qx, qy = v1.train.batch([x, y], batch_size, num_threads=1, allow_smaller_final_batch=True)
                dataset = tf.data.Dataset.from_tensor_slices((x_all, y_all)).batch(batch_size)
            else:
                # The source's pipeline: raw chunks -> generator (a py_func) -> tf.train.batch queue.
                chunk = v1.train.range_input_producer(chunks, num_epochs=1, shuffle=False).dequeue()
                x, y = v1.py_func(lambda c: chunk_examples(int(c), seed=seed, features=features),
                                  [chunk], [tf.float32, tf.float32], stateful=False)
                x.set_shape([None, features])
                y.set_shape([None, 1])
                qx, qy = v1.train.batch([x, y], batch_size, enqueue_many=True, num_threads=1,
                                        allow_smaller_final_batch=True)
                dataset = generated_dataset(chunks, batch_size, seed=seed, features=features)
            self._queue_sums = sums(qx, qy)

            # The TF1 fix: a tf.data iterator over the same examples, re-initialised in place.
            self._iterator = v1.data.make_initializable_iterator(dataset)
            self._iterator_sums = sums(*self._iterator.get_next())
            self._saver = v1.train.Saver(variables)
        self._context = session(self.graph, timeout_ms=timeout_ms)
        self.session = self._context.__enter__()
        os.makedirs(snapshot_dir, exist_ok=True)
        with self.graph.as_default():
            self.snapshot = self._saver.save(self.session, os.path.join(snapshot_dir, "model.ckpt"))

    @staticmethod
    def _drain(sess: Any, fetch: Any) -> dict[str, Any]:
        total, count = 0.0, 0
        try:
            while True:
                batch_sum, n = sess.run(fetch)
                total, count = total + float(batch_sum), count + int(n)
        except tf.errors.OutOfRangeError:
            pass
        return {"loss": total / count if count else math.nan, "examples": count}

    def pass_new_session(self) -> dict[str, Any]:
        """One pass the source's way: new session + restore snapshot + queue runners."""
        def restore(sess: Any) -> None:
            sess.run(v1.local_variables_initializer())  # the epoch counter of num_epochs=1
            self._saver.restore(sess, self.snapshot)

        with session(self.graph, queue_runners=True, initialize=False, prepare=restore,
                     timeout_ms=self._timeout_ms) as sess:
            return self._drain(sess, self._queue_sums)

    def pass_same_session(self) -> dict[str, Any]:
        """One pass the TF1-fix way: re-initialise the iterator in the long-lived session."""
        self.session.run(self._iterator.initializer)
        return self._drain(self.session, self._iterator_sums)

    def close(self) -> None:
        """Close the long-lived session (safe to call twice)."""
        if self._context is not None:
            self._context.__exit__(None, None, None)
            self._context = None

    def __enter__(self) -> "ValidationPasses":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# --------------------------------------------------------------------------- notebook 05: network snapshots

__all__ += ["network_from_keras"]

_V1_ACTIVATIONS = {"linear": tf.identity, "relu": tf.nn.relu}


def network_from_keras(x: Any, model: Any, *, training: bool) -> tuple[Any, list]:
    """``model`` (a built Keras ``Sequential`` of ``Dense`` and ``BatchNormalization`` layers) re-created
    as ``tf.compat.v1`` ops on the graph tensor ``x``: the TF1 way, a network is the code that creates
    its variables.

    Each variable comes from ``tf.compat.v1.get_variable("<layer name>/<variable name>")`` in the
    current variable scope (so a scope's ``custom_getter`` sees every read), initialised from the
    model's current values: call it under two scopes and you get two networks that start equal.
    BatchNorm's moving statistics are ``trainable=False`` variables (in ``GLOBAL_VARIABLES``, not in
    ``TRAINABLE_VARIABLES``). With ``training=True`` BatchNorm normalises with the batch's statistics
    and the returned ops move the moving statistics as Keras does
    (``moving = momentum * moving + (1 - momentum) * batch``); with ``training=False`` it uses the
    moving statistics and no op is returned. Returns ``(outputs, update_ops)``.

    >>> import keras
    >>> net = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, activation="relu", name="dense")])
    >>> with tf.Graph().as_default():
    ...     with tf.compat.v1.variable_scope("copy"):
    ...         out, updates = network_from_keras(tf.compat.v1.placeholder(tf.float32, [None, 3]), net, training=False)
    ...     [v.op.name for v in tf.compat.v1.global_variables()]
    ['copy/dense/kernel', 'copy/dense/bias']

    Raises ``RuntimeError`` outside a graph (eager mode), ``TypeError`` if ``model`` is not a built
    Sequential, and ``ValueError`` naming the first layer or activation it cannot re-create.
    """
    import keras
    from tensorflow.python.eager import context as eager_context  # no public way to read a variable eagerly here

    if tf.executing_eagerly():
        raise RuntimeError("network_from_keras builds TF1 ops: call it inside `with tf.Graph().as_default():`")
    if not isinstance(model, keras.Sequential) or not model.built:
        raise TypeError(f"model must be a built keras.Sequential, got {type(model).__name__}")
    for layer in model.layers:  # refuse before creating any variable
        if type(layer) not in (keras.layers.Dense, keras.layers.BatchNormalization):
            raise ValueError(f"model layer {layer.name!r} is a {type(layer).__name__}: network_from_keras "
                             "re-creates Dense and BatchNormalization layers only")
        activation = layer.get_config().get("activation", "linear")
        if activation not in _V1_ACTIVATIONS:
            raise ValueError(f"model layer {layer.name!r} has activation {activation!r}: network_from_keras "
                             f"knows {sorted(_V1_ACTIVATIONS)}")
        if isinstance(layer, keras.layers.BatchNormalization) and layer.axis not in (-1, len(layer.input.shape) - 1):
            raise ValueError(f"model layer {layer.name!r} normalises axis {layer.axis}: only the last axis is supported")

    def variable(layer: Any, weight: Any, trainable: bool) -> Any:
        with eager_context.eager_mode():  # the Keras variable lives outside this graph: read it eagerly
            value = np.asarray(weight.numpy())
        return v1.get_variable(f"{layer.name}/{weight.name}", shape=value.shape, dtype=tf.as_dtype(value.dtype),
                               initializer=v1.constant_initializer(value), trainable=trainable)

    h, updates = x, []
    for layer in model.layers:
        if isinstance(layer, keras.layers.Dense):
            h = tf.matmul(h, variable(layer, layer.kernel, True))
            if layer.use_bias:
                h = h + variable(layer, layer.bias, True)
            h = _V1_ACTIVATIONS[layer.get_config()["activation"]](h)
            continue
        gamma = variable(layer, layer.gamma, True) if layer.scale else None
        beta = variable(layer, layer.beta, True) if layer.center else None
        moving_mean = variable(layer, layer.moving_mean, False)
        moving_variance = variable(layer, layer.moving_variance, False)
        if training:
            mean, variance = tf.nn.moments(h, axes=list(range(len(h.shape) - 1)))
            updates += [moving_mean.assign(moving_mean * layer.momentum + mean * (1.0 - layer.momentum)),
                        moving_variance.assign(moving_variance * layer.momentum + variance * (1.0 - layer.momentum))]
        else:
            mean, variance = moving_mean, moving_variance
        h = tf.nn.batch_normalization(h, mean, variance, beta, gamma, layer.epsilon)
    return h, updates
