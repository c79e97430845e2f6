"""Run one function on N local workers: ``tf.distribute.MultiWorkerMirroredStrategy`` on one machine.

A multi-worker job is N processes, each told by its own ``TF_CONFIG`` environment variable where
every worker listens and which one it is. :func:`run_workers` does that on this machine: it picks
N free ports on 127.0.0.1, starts N Python processes (each in its own process group), gives each
its ``TF_CONFIG``, calls the same function in every one of them, and returns what each returned
(plain JSON data), in worker order. The workers' output goes to log files; a worker that fails
raises :class:`WorkerError` with its last lines, a run that takes longer than ``timeout`` raises
:class:`WorkersTimedOut`, and every worker is killed with SIGKILL on the way out whatever
happened (a worker that created a strategy ignores SIGTERM), so no process outlives the call.

* :func:`run_workers`: the launcher, usable from a notebook cell, a test or a script.
* :func:`this_worker`: inside a worker, ``(index, count)`` read from ``TF_CONFIG``.
* :func:`cluster_workers`, :func:`require_same_batch`: what the training and validation helpers
  check under a strategy of several workers (every worker must feed the same global batches).
* :func:`count_collectives`: the collective ops (all-reduce, gather ...) a traced function runs.

The function must be importable by a fresh process: a function of a module (the workers import it
by name), or a function defined in a notebook or script (its source is sent and run again in the
worker, so it must import what it uses inside its body). Arguments and results are JSON. Details
and the path from here to a real cluster: ``docs/multi-worker.md``.
"""

from __future__ import annotations

import builtins
import collections
import dis
import importlib
import inspect
import json
import math
import numbers
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import types
from pathlib import Path
from typing import Any, Callable, Sequence

from helpers.arguments import require_int

__all__ = ["run_workers", "this_worker", "cluster_workers", "require_same_batch", "count_collectives", "WorkerError",
           "WorkersTimedOut", "COLLECTIVE_OPS"]

# Op types that exchange data between replicas or workers (TensorFlow 2.x, CPU and GPU).
COLLECTIVE_OPS = frozenset({
    "CollectiveReduce", "CollectiveReduceV2", "CollectiveReduceV3", "CollectiveReduceScatterV2",
    "CollectiveGather", "CollectiveGatherV2", "CollectiveAllToAllV2", "CollectiveAllToAllV3",
    "CollectiveBcastSend", "CollectiveBcastRecv", "CollectiveBcastSendV2", "CollectiveBcastRecvV2",
    "NcclAllReduce", "NcclReduce", "NcclBroadcast",
})
_TAIL_LINES = 25  # lines of a failed worker's log shown in the error
_BIND_ERRORS = ("Address already in use", "Failed to add port", "Could not start gRPC server",
                "Unable to bind", "bind failed")
_NATIVE_NOTE = re.compile(r"^[IW]\d{4} [\d:.]+\s+\d+ \S+:\d+\] ")  # absl INFO/WARNING lines of the C++ runtime
_BOOT = "import sys; from helpers.workers import _worker_main; _worker_main(sys.argv[1])"


class WorkerError(RuntimeError):
    """A worker failed: ``worker`` is its index, ``returncode`` its exit code (None: still running
    when killed), ``log_tail`` its last output lines."""

    def __init__(self, message: str, worker: int, returncode: int | None, log_tail: str):
        super().__init__(message)
        self.worker, self.returncode, self.log_tail = worker, returncode, log_tail

    def _render_traceback_(self) -> list[str]:  # IPython: the message, not a traceback into the launcher
        return [f"{type(self).__name__}: {self}"]


class WorkersTimedOut(WorkerError, TimeoutError):
    """The workers did not all finish within ``timeout`` seconds; they were killed."""


# --------------------------------------------------------------------------- inside a worker


def this_worker() -> tuple[int, int]:
    """``(index, count)`` of the worker running this code, from ``TF_CONFIG``; ``(0, 1)`` outside a
    cluster (no ``TF_CONFIG``).

    >>> this_worker()  # here, outside a cluster
    (0, 1)
    """
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        return 0, 1
    config = json.loads(raw)
    return int(config["task"]["index"]), len(config["cluster"]["worker"])


def cluster_workers(strategy: Any) -> int:
    """How many worker processes ``strategy`` spans: 1 for ``MirroredStrategy`` or none.

    >>> import tensorflow as tf
    >>> cluster_workers(tf.distribute.get_strategy())
    1
    """
    resolver = getattr(strategy, "cluster_resolver", None)
    spec = resolver.cluster_spec().as_dict() if resolver is not None else {}
    return max(1, sum(len(tasks) for job, tasks in spec.items() if job in ("chief", "worker")))


def require_same_batch(strategy: Any, batch: Any, name: str) -> None:
    """Under a strategy of several workers, a ``ValueError`` naming ``name`` unless every worker
    holds the same ``batch`` (compared by a hash of its bytes, gathered in one collective op).

    The helpers that train and evaluate take the *global* batches on every worker and give each
    replica its share of each batch, as on one machine. A dataset sharded per worker
    (``.shard(workers, index)``, a file list split by hand, a shuffle with a seed per worker) would
    make each replica take its share of a *different* batch: a wrong result with no error. Call it
    on every worker at the same point (it is a collective); with one worker it does nothing.

    >>> import tensorflow as tf
    >>> require_same_batch(tf.distribute.get_strategy(), (tf.ones([2, 1]), tf.zeros([2])), "dataset")
    """
    if cluster_workers(strategy) <= 1:
        return
    import tensorflow as tf

    leaves = [tf.convert_to_tensor(t) for t in tf.nest.flatten(batch, expand_composites=True)]
    digest = tf.stack([tf.strings.to_hash_bucket_fast(tf.io.serialize_tensor(t), 2**62) for t in leaves])
    local = strategy.experimental_distribute_values_from_function(lambda _: digest)
    every = strategy.gather(local, axis=0).numpy().reshape(strategy.num_replicas_in_sync, -1)
    different = [r for r in range(len(every)) if not (every[r] == every[0]).all()]
    if different:
        worker = different[0] * cluster_workers(strategy) // len(every)  # replicas are numbered worker by worker
        raise ValueError(f"{name} differs between workers (worker {worker}'s first batch is not worker 0's): "
                         "these helpers take the same global batches on every worker, in the same order, and give "
                         "each replica its share of every batch. Give every worker the whole dataset (no .shard() "
                         "per worker, one shuffle seed for all); see docs/multi-worker.md")


def count_collectives(function: Any) -> dict[str, int]:
    """How many collective ops of each type one call of a traced function runs (statically: a
    collective inside a loop body counts once, one inside both branches of a ``cond`` counts twice).

    ``function``: a concrete function (``fn.get_concrete_function(*args)``) or a ``tf.Graph``. The
    walk follows the functions it calls (``tf.cond`` branches, ``while`` bodies, nested
    ``tf.function`` calls), so collectives inside them count where they are called.

    >>> import tensorflow as tf
    >>> count_collectives(tf.function(lambda x: x * 2).get_concrete_function(tf.TensorSpec([])))
    {}
    """
    graph = getattr(function, "graph", function)
    if not hasattr(graph, "as_graph_def"):
        raise TypeError(f"function must be a concrete function (fn.get_concrete_function(...)) or a tf.Graph, "
                        f"got {type(function).__name__}")
    graph_def = graph.as_graph_def()
    library = {f.signature.name: f for f in graph_def.library.function}
    counts: collections.Counter = collections.Counter()

    def walk(nodes: Any, stack: tuple[str, ...]) -> None:
        for node in nodes:
            if node.op in COLLECTIVE_OPS:
                counts[node.op] += 1
            called = [node.op] if node.op in library else []
            for value in node.attr.values():
                if value.HasField("func"):
                    called.append(value.func.name)
                called += [f.name for f in value.list.func]
            for name in called:
                if name in library and name not in stack:  # a recursive function is walked once
                    walk(library[name].node_def, stack + (name,))

    walk(graph_def.node, ())
    return dict(sorted(counts.items()))


# --------------------------------------------------------------------------- the launcher


def run_workers(fn: Callable[..., Any] | str, workers: int = 2, *, args: Sequence[Any] = (),
                kwargs: dict[str, Any] | None = None, timeout: float = 300.0,
                env: dict[str, str] | None = None) -> list[Any]:
    """Call ``fn(*args, **kwargs)`` in ``workers`` new processes, a cluster on 127.0.0.1; return
    the ``workers`` results, worker 0 first.

    Each worker gets ``TF_CONFIG`` for its place in the cluster, so a
    ``tf.distribute.MultiWorkerMirroredStrategy()`` created in ``fn`` (before any other TensorFlow
    op) joins the others. ``fn`` is a function of an importable module, ``"module:function"``, or
    a function defined in a notebook or script (sent as source: it must import what it uses inside
    its body and use no other global name). ``args``, ``kwargs`` and what ``fn`` returns must be
    JSON (numbers, strings, lists, dicts). Workers run on the CPU unless ``env`` says otherwise
    (``CUDA_VISIBLE_DEVICES`` is set to -1: N processes on one GPU would each reserve its memory);
    ``env`` adds or replaces environment variables of every worker.

    Raises ``TypeError``/``ValueError`` for bad arguments (before any process starts);
    :class:`WorkerError` naming the first worker that failed, with its last lines of output (the
    others are killed at once instead of waiting for a peer that is gone); :class:`WorkersTimedOut`
    after ``timeout`` seconds (a stalled worker blocks its peers' collectives forever). A port
    that TensorFlow could not bind (another program took it) is retried once with new ports.

    >>> run_workers("helpers.workers:this_worker", workers=2, timeout=60)
    [[0, 2], [1, 2]]
    """
    target = _target(fn)
    require_int("workers", workers, minimum=1)
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real) or not math.isfinite(timeout) or timeout <= 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if isinstance(args, (str, bytes, dict)) or not isinstance(args, Sequence):
        raise TypeError(f"args must be a list or tuple of positional arguments, got {type(args).__name__}")
    kwargs = {} if kwargs is None else kwargs
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
        raise TypeError(f"kwargs must be a dict with string keys, got {type(kwargs).__name__}")
    env = {} if env is None else env
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise TypeError("env must be a dict of strings to strings (environment variables)")
    try:
        call = json.dumps({"target": target, "args": list(args), "kwargs": kwargs})
    except (TypeError, ValueError) as error:
        raise TypeError(f"args and kwargs must be JSON (numbers, strings, lists, dicts): {error}") from None
    try:
        return _launch(call, workers, float(timeout), env)
    except _PortTaken:
        pass  # taken between choosing it and TensorFlow binding it: once more, with new ports
    try:
        return _launch(call, workers, float(timeout), env)
    except _PortTaken as taken:
        raise WorkerError(f"worker {taken.worker} could not bind its port twice in a row (another program takes "
                          f"free ports on this machine). Its last lines:\n{taken.tail}", taken.worker, 1,
                          taken.tail) from None


class _PortTaken(Exception):
    """A worker could not bind its port (taken between choosing it and TensorFlow binding it)."""

    def __init__(self, worker: int, tail: str):
        super().__init__(worker)
        self.worker, self.tail = worker, tail


def _target(fn: Any) -> dict[str, str]:
    """How a worker finds ``fn``: by module and name, or from its source text."""
    if isinstance(fn, str):
        module, _, name = fn.partition(":")
        if not module or not name or not all(part.isidentifier() for part in (module.split(".") + name.split("."))):
            raise ValueError(f"fn as a string must be 'module:function' (such as "
                             f"'helpers.workers:this_worker'), got {fn!r}")
        return {"module": module, "name": name}
    if not callable(fn) or isinstance(fn, type):
        raise TypeError(f"fn must be a function or 'module:function', got {type(fn).__name__}")
    if not isinstance(fn, types.FunctionType):
        raise TypeError(f"fn must be a plain function (def ...), got {type(fn).__name__}")
    if fn.__name__ == "<lambda>":
        raise ValueError("fn is a lambda, which a worker process cannot import: define it with def")
    if "<locals>" in fn.__qualname__ or fn.__closure__:
        raise ValueError(f"fn {fn.__name__!r} is defined inside another function: a worker process cannot "
                         "import it; define it at the top level of a module, notebook cell or script")
    module = sys.modules.get(fn.__module__)
    if fn.__module__ != "__main__" and module is not None and getattr(module, fn.__qualname__, None) is fn:
        return {"module": fn.__module__, "name": fn.__qualname__}
    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        raise ValueError(f"fn {fn.__name__!r} has no source to send to the workers: define it in a module, "
                         "a notebook cell or a script file") from None
    outside = sorted(_global_names(fn.__code__) - set(dir(builtins)) - {fn.__name__})
    if outside:
        raise ValueError(f"fn {fn.__name__!r} uses {', '.join(map(repr, outside))} from outside its body; "
                         "each worker is a fresh Python process that runs only the function's source: "
                         "import or define them inside the function, or pass values through args")
    return {"source": source, "name": fn.__name__}


def _global_names(code: types.CodeType) -> set[str]:
    """Names a function's code (and the functions defined in it) reads from module globals."""
    names = {ins.argval for ins in dis.get_instructions(code) if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def _free_ports(count: int) -> list[int]:
    """``count`` distinct ports free on 127.0.0.1 right now (they may be taken before they are used)."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _launch(call: str, count: int, timeout: float, extra_env: dict[str, str]) -> list[Any]:
    addresses = [f"127.0.0.1:{port}" for port in _free_ports(count)]
    with tempfile.TemporaryDirectory(prefix="workers-") as folder:
        folder_path = Path(folder)
        spec = folder_path / "call.json"
        spec.write_text(call, encoding="utf-8")
        logs = [folder_path / f"worker{i}.log" for i in range(count)]
        results = [folder_path / f"worker{i}.json" for i in range(count)]
        processes: list[subprocess.Popen] = []
        try:
            for i in range(count):
                env = dict(os.environ, CUDA_VISIBLE_DEVICES="-1", PYTHONUNBUFFERED="1", PYTHONPATH=_python_path(),
                           TF_CONFIG=json.dumps({"cluster": {"worker": addresses},
                                                 "task": {"type": "worker", "index": i}}),
                           WORKBOOK_WORKER_RESULT=str(results[i]))
                env.update(extra_env)
                with open(logs[i], "wb") as log:
                    processes.append(subprocess.Popen(
                        [sys.executable, "-c", _BOOT, str(spec)], stdin=subprocess.DEVNULL, stdout=log,
                        stderr=subprocess.STDOUT, env=env, start_new_session=True))
            _wait(processes, results, logs, timeout)
            return [json.loads(path.read_text(encoding="utf-8")) for path in results]
        finally:
            _kill(processes)


def _python_path() -> str:
    """The parent's import path, so that a worker imports what the caller can (tests, notebooks)."""
    paths = [os.path.abspath(p or os.curdir) for p in sys.path]
    return os.pathsep.join(dict.fromkeys(p for p in paths if os.path.isdir(p)))


def _wait(processes: list[subprocess.Popen], results: list[Path], logs: list[Path], timeout: float) -> None:
    """Until every worker has written its result, one fails, or time is up. Workers that wrote their
    result are not waited for: TensorFlow's own shutdown takes seconds (4 s measured) and can hang on a
    peer that is gone; the caller kills them."""
    deadline = time.monotonic() + timeout
    while True:
        codes = [p.poll() for p in processes]
        written = [path.exists() for path in results]
        for i, code in enumerate(codes):
            if code is not None and (code != 0 or not written[i]):
                _kill(processes)  # the others would wait for this one's collectives
                tail = _tail(logs[i])
                if any(marker in tail for marker in _BIND_ERRORS):
                    raise _PortTaken(i, tail)
                others = [j for j, c in enumerate(codes) if c is None and j != i]
                killed = f"; worker{'s' if len(others) > 1 else ''} {_list(others)} killed" if others else ""
                raise WorkerError(f"worker {i} of {len(processes)} failed (exit code {code}){killed}. "
                                  f"Its last lines:\n{tail}", i, code, tail)
        if all(written):
            return
        if time.monotonic() > deadline:
            running = [i for i, c in enumerate(codes) if c is None and not written[i]]
            _kill(processes)
            first = running[0] if running else 0
            tail = _tail(logs[first])
            raise WorkersTimedOut(
                f"worker{'s' if len(running) > 1 else ''} {_list(running)} still running after {timeout:g} s: all "
                "killed. A worker that stalls blocks its peers' collectives forever; give the strategy "
                "tf.distribute.experimental.CommunicationOptions(timeout_seconds=...) to turn that into an "
                f"error, or raise timeout if the machine is busy. Worker {first}'s last lines:\n{tail}",
                first, None, tail)
        time.sleep(0.05)


def _list(indices: list[int]) -> str:
    return ", ".join(map(str, indices))


def _tail(log: Path) -> str:
    """A worker's last lines of output, without TensorFlow's start-up notes (``I0000 00:00:... port.cc:153]``)."""
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return "(no output)"
    lines = [line for line in lines if not _NATIVE_NOTE.match(line)]
    return "\n".join(lines[-_TAIL_LINES:]) or "(no output)"


def _kill(processes: list[subprocess.Popen]) -> None:
    """SIGKILL each worker's whole process group and reap it: no zombie, no orphan."""
    for p in processes:
        if p.returncode is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)  # start_new_session: the group id is the worker's pid
            except (ProcessLookupError, PermissionError):
                pass
    for p in processes:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be ignored
            pass
        try:
            os.killpg(p.pid, signal.SIGKILL)  # children the worker left in its group
        except (ProcessLookupError, PermissionError):
            pass


# --------------------------------------------------------------------------- the worker side


def _worker_main(spec_path: str) -> None:
    """Entry point of a worker process: call the function, write its JSON result, exit."""
    call = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    result_path = Path(os.environ["WORKBOOK_WORKER_RESULT"])
    try:
        result = _resolve(call["target"])(*call["args"], **call["kwargs"])
        try:
            text = json.dumps(result)
        except (TypeError, ValueError) as error:
            raise TypeError(f"the function returned {type(result).__name__}, which is not JSON ({error}): "
                            "return numbers, strings, lists and dicts (float(...), .tolist())") from None
    except BaseException:  # noqa: BLE001 - reported through the log and the exit code
        import traceback

        traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)  # skip TensorFlow's exit handlers, which can wait for peers that are gone
    partial = result_path.with_suffix(".partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, result_path)  # the launcher sees a result only once it is complete
    sys.stdout.flush()
    sys.stderr.flush()


def _resolve(target: dict[str, str]) -> Callable[..., Any]:
    if "source" in target:
        namespace: dict[str, Any] = {"__name__": "__worker__"}
        exec(compile(target["source"], f"<worker function {target['name']}>", "exec"), namespace)  # noqa: S102
        return namespace[target["name"]]
    obj: Any = importlib.import_module(target["module"])
    for part in target["name"].split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"{target['module']}:{target['name']} is not callable")
    return obj
