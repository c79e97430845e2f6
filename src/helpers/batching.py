"""Batch iteration for a language model: the PTB producer, the TF1 queue way and the tf.data way (notebook 03).

The Penn Treebank tutorial cuts one long stream of token ids into ``batch_size`` parallel streams
(rows) and reads them ``num_steps`` tokens at a time. Batch ``i`` holds window ``i`` of every row; the
targets are the same window shifted one token to the right, so row ``s`` of batch ``i + 1`` continues
row ``s`` of batch ``i`` (what a stateful RNN needs). In TF1 a queue (``range_input_producer``) handed
out the window index, so one tensor ``x`` gave a new batch at every ``session.run``. In TF2 a
``tf.data.Dataset`` of the windows is iterated with a plain ``for`` loop.

* Corpus: :func:`load_corpus`, :func:`tokenize`, :func:`build_vocab`, :func:`to_ids`, :func:`corpus_ids`.
* Layout: :func:`ptb_layout` (stream length, batches per epoch, tokens left unused), :func:`as_token_ids`.
* Pipeline: :func:`ptb_batches` (tf.data). The TF1 queue version is :class:`helpers.tf1.QueuePipeline`.
* Stateful RNNs: :func:`reset_stateful` (Keras 3 models have no ``reset_states``), :func:`stream_loss`.
* A series with several features and its own targets: :func:`room_series` (a simulated room).
* Cost: :func:`batch_checksum` and :class:`Checksum` (a stand-in for a training step; defined in
  :mod:`helpers.checksum`, importable from here).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from importlib import resources
from typing import Any, Iterable, NamedTuple

import numpy as np
import tensorflow as tf
import keras

from helpers.arguments import require_int
from helpers.checksum import Checksum, batch_checksum  # noqa: F401  (split off; part of this module's API)
from helpers.plumbing import check_dataset, check_finite, check_model

__all__ = [
    "CORPUS", "EOS", "UNK",
    "load_corpus", "tokenize", "build_vocab", "to_ids", "corpus_ids",
    "Layout", "ptb_layout", "as_token_ids",
    "ptb_batches",
    "reset_stateful", "stream_loss",
    "room_series",
    "batch_checksum", "Checksum",
]

CORPUS = "fables.txt"
EOS = "<eos>"
UNK = "<unk>"
_INT32_MAX = np.iinfo(np.int32).max
# A word: letters of any script and digits (not "_"), with apostrophes ("fox's"); curly ones are
# made straight first.
_WORD = re.compile(r"(?:[^\W_]|')+")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u02bc": "'"})


# --------------------------------------------------------------------------- corpus


def load_corpus(name: str = CORPUS) -> str:
    """The text of a corpus shipped in ``helpers/data`` (read through ``importlib.resources``).

    The default, ``fables.txt``, is a set of short fables written for this workbook (public
    domain): one sentence per line, like the Penn Treebank text; lines starting with ``#`` are
    comments and are not part of the text.

    >>> load_corpus().splitlines()[0].startswith("The miller")
    True
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    resource = resources.files("helpers").joinpath("data", name)
    if not name.endswith(".txt") or not resource.is_file():
        raise ValueError(f"name must be a .txt file in helpers/data, got {name!r}")
    lines = resource.read_text(encoding="utf-8").splitlines()
    return "\n".join(line for line in lines if not line.startswith("#")).strip() + "\n"


def tokenize(text: str) -> list[str]:
    """Lower-case words, numbers as ``N``, and an ``<eos>`` token at the end of every non-empty line.

    This is the Penn Treebank convention: the language model also learns where sentences end.
    Words are letters of any script and digits, so accented and non-Latin words stay whole; the
    text is NFC-normalised first, so "Café" typed with a combining accent is the same word.

    >>> tokenize("The fox ran.\\nIt ran 3 miles!")
    ['the', 'fox', 'ran', '<eos>', 'it', 'ran', 'N', 'miles', '<eos>']
    >>> tokenize("Café, naïve Straße; Москва!")
    ['café', 'naïve', 'straße', 'москва', '<eos>']
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    text = unicodedata.normalize("NFC", text).translate(_APOSTROPHES)
    tokens: list[str] = []
    for line in text.splitlines():
        words = ["N" if w.isdigit() else w for w in _WORD.findall(line.lower())]
        if words:
            tokens += words + [EOS]
    return tokens


def build_vocab(tokens: Iterable[str], max_size: int | None = None) -> dict[str, int]:
    """Word-to-id dictionary: the most frequent word gets id 0; ties are broken alphabetically.

    With ``max_size``, only the ``max_size - 1`` most frequent words keep their own id and every
    other word shares the id of ``<unk>`` (the last id).

    >>> build_vocab(["b", "a", "b", "c", "a", "b"])
    {'b': 0, 'a': 1, 'c': 2}
    >>> build_vocab(["b", "a", "b", "c", "a", "b"], max_size=2)
    {'b': 0, '<unk>': 1}
    """
    tokens = list(tokens)
    if not tokens:
        raise ValueError("tokens is empty: a vocabulary needs at least one token")
    bad = next((t for t in tokens if not isinstance(t, str)), None)
    if bad is not None:
        raise TypeError(f"tokens must be strings, found {type(bad).__name__} {bad!r}")
    if max_size is not None:
        if require_int("max_size", max_size, allow_none=True) < 2:
            raise ValueError(f"max_size must be >= 2 (one word and {UNK}), got {max_size}")
    ranked = sorted(Counter(tokens).items(), key=lambda item: (-item[1], item[0]))
    words = [word for word, _ in ranked]
    if max_size is not None and len(words) > max_size:
        words = [w for w in words if w != UNK][: max_size - 1] + [UNK]
    return {word: index for index, word in enumerate(words)}


def to_ids(tokens: Iterable[str], vocab: dict[str, int]) -> np.ndarray:
    """The ids of ``tokens`` as an int32 array; unknown words map to ``<unk>`` if ``vocab`` has it.

    >>> to_ids(["b", "a", "z"], {"b": 0, "a": 1, "<unk>": 2}).tolist()
    [0, 1, 2]
    """
    if not isinstance(vocab, dict):
        raise TypeError(f"vocab must be a dict from word to id (see build_vocab), got {type(vocab).__name__}")
    if not vocab:
        raise ValueError("vocab is empty")
    unk = vocab.get(UNK)
    ids = []
    for token in tokens:
        index = vocab.get(token, unk)
        if index is None:
            raise ValueError(f"tokens contains {token!r}, which is not in vocab (and vocab has no {UNK})")
        ids.append(index)
    return np.asarray(ids, dtype=np.int32)


def corpus_ids(name: str = CORPUS, max_vocab: int | None = None) -> tuple[np.ndarray, dict[str, int]]:
    """The shipped corpus as one stream of int32 token ids, and its vocabulary.

    >>> ids, vocab = corpus_ids()
    >>> ids.dtype.name, int(ids[-1]) == vocab["<eos>"]
    ('int32', True)
    """
    if max_vocab is not None and require_int("max_vocab", max_vocab) < 2:
        raise ValueError(f"max_vocab must be >= 2 (one word and {UNK}), got {max_vocab}")
    tokens = tokenize(load_corpus(name))
    vocab = build_vocab(tokens, max_size=max_vocab)
    return to_ids(tokens, vocab), vocab


# --------------------------------------------------------------------------- layout


class Layout(NamedTuple):
    """How the PTB producer lays ``n_tokens`` out as ``batch_size`` streams read ``num_steps`` at a time."""

    n_tokens: int
    batch_size: int
    num_steps: int
    batch_len: int  # tokens per stream (the reshape drops the remainder)
    epoch_size: int  # batches per epoch: windows that fit, keeping one token for the last target

    @property
    def dropped_by_reshape(self) -> int:
        """Tokens at the end of the data that do not fill a whole row of the reshape."""
        return self.n_tokens - self.batch_size * self.batch_len

    @property
    def unused_per_stream(self) -> int:
        """Tokens at the end of each stream that neither an input nor a target window reaches."""
        return self.batch_len - self.epoch_size * self.num_steps - 1

    @property
    def never_read(self) -> int:
        """Tokens that an epoch never reads, as input or as target."""
        return self.dropped_by_reshape + self.batch_size * self.unused_per_stream

    @property
    def inputs_per_epoch(self) -> int:
        """Tokens an epoch feeds as inputs (``epoch_size * batch_size * num_steps``)."""
        return self.epoch_size * self.batch_size * self.num_steps


def ptb_layout(n_tokens: int, batch_size: int, num_steps: int) -> Layout:
    """Stream length and batches per epoch, exactly as the PTB producer computes them.

    Raises ``ValueError`` when the data is too short for one batch (the producer's
    ``epoch_size == 0`` assertion).

    >>> layout = ptb_layout(70, batch_size=4, num_steps=5)
    >>> layout.batch_len, layout.epoch_size, layout.never_read
    (17, 3, 6)
    """
    n_tokens = require_int("n_tokens", n_tokens, minimum=0)
    batch_size = require_int("batch_size", batch_size, minimum=1)
    num_steps = require_int("num_steps", num_steps, minimum=1)
    batch_len = n_tokens // batch_size
    epoch_size = (batch_len - 1) // num_steps
    if epoch_size <= 0:
        raise ValueError(
            f"raw_ids is too short for one batch: {n_tokens} tokens give {batch_size} streams of "
            f"{batch_len} tokens, and one batch needs num_steps + 1 = {num_steps + 1} per stream "
            "(epoch_size == 0): decrease batch_size or num_steps"
        )
    return Layout(n_tokens, batch_size, num_steps, batch_len, epoch_size)


def as_token_ids(raw_ids: Any) -> np.ndarray:
    """``raw_ids`` (a list, range, NumPy array or tensor of token ids) as a 1-D int32 NumPy array, or
    a clear error naming ``raw_ids``.

    >>> as_token_ids(range(3)).tolist(), as_token_ids(tf.constant([4, 5], tf.int64)).dtype.name
    ([0, 1, 2], 'int32')
    """
    if isinstance(raw_ids, (tf.Tensor, tf.Variable)):
        raw_ids = raw_ids.numpy()
    if isinstance(raw_ids, (str, bytes)):
        raise TypeError("raw_ids must be a sequence of integer token ids, got a string: map words to ids first (to_ids)")
    array = np.asarray(raw_ids)
    if array.ndim != 1:
        raise ValueError(f"raw_ids must be 1-D (one stream of token ids), got shape {array.shape}")
    if array.size == 0:
        raise ValueError("raw_ids is empty: there is nothing to batch")
    if array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"raw_ids must hold integer token ids, got dtype {array.dtype}")
    if array.min() < 0 or array.max() > _INT32_MAX:
        raise ValueError(f"raw_ids must lie in [0, {_INT32_MAX}], got values from {array.min()} to {array.max()}")
    return array.astype(np.int32)


# --------------------------------------------------------------------------- pipelines


def _dataset_options(autotune: bool) -> tf.data.Options:
    """Fixed options, so a pipeline behaves (and times) the same on every run.

    One private thread runs the pipeline's work: it is a slice of a tensor in memory, and a loop
    inside ``tf.function`` then hands each batch from stage to stage on one thread instead of
    hopping between the threads of the shared pool. Autotuning is on only for ``prefetch=AUTOTUNE``.
    """
    options = tf.data.Options()
    options.deterministic = True
    options.autotune.enabled = autotune
    options.experimental_optimization.inject_prefetch = False
    options.threading.private_threadpool_size = 1
    return options


def _windows(ids: np.ndarray, layout: Layout) -> tuple[np.ndarray, np.ndarray]:
    """Every ``x`` and ``y`` of an epoch at once, each ``[epoch_size, batch_size, num_steps]``: two reshapes."""
    b, n, e = layout.batch_size, layout.num_steps, layout.epoch_size
    rows = ids[: b * layout.batch_len].reshape(b, layout.batch_len)
    x = rows[:, : e * n].reshape(b, e, n).transpose(1, 0, 2)
    y = rows[:, 1: e * n + 1].reshape(b, e, n).transpose(1, 0, 2)
    return np.ascontiguousarray(x), np.ascontiguousarray(y)


def ptb_batches(raw_ids: Any, batch_size: int, num_steps: int, repeat: bool = False, *, prefetch: int = 1) -> tf.data.Dataset:
    """The PTB producer as a ``tf.data.Dataset`` of ``(x, y)`` int32 batches of shape ``[batch_size, num_steps]``.

    ``raw_ids`` is one stream of token ids. It is cut into ``batch_size`` rows of ``batch_len``
    tokens; batch ``i`` is window ``i`` of every row, ``x = rows[:, i*num_steps : (i+1)*num_steps]``,
    and ``y`` is the same window one token later. An epoch has ``epoch_size`` batches, in order (never
    shuffled: each row continues from one batch to the next, which a stateful RNN relies on).
    ``repeat=True`` starts again at window 0 forever, as the TF1 queue did.

    All windows are cut up front with two reshapes (about twice the stream's memory), and the
    dataset hands out window ``i`` with ``from_tensor_slices``: no function runs per batch. ``prefetch``
    batches are prepared ahead (0 turns prefetching off; ``tf.data.AUTOTUNE`` lets tf.data size the
    buffer, and turns its autotuner on). The other options are fixed, and the pipeline runs on one
    private thread: add a parallel ``map`` downstream and it runs on that one thread too.

    >>> x, y = next(iter(ptb_batches(range(20), batch_size=2, num_steps=3)))
    >>> x.numpy().tolist(), y.numpy().tolist()
    ([[0, 1, 2], [10, 11, 12]], [[1, 2, 3], [11, 12, 13]])
    """
    ids = as_token_ids(raw_ids)
    layout = ptb_layout(len(ids), batch_size, num_steps)
    if not isinstance(repeat, bool):
        raise TypeError(f"repeat must be a bool, got {type(repeat).__name__}")
    if prefetch != tf.data.AUTOTUNE:
        prefetch = require_int("prefetch", prefetch, minimum=0)
    dataset = tf.data.Dataset.from_tensor_slices(_windows(ids, layout))
    if repeat:
        dataset = dataset.repeat()
    if prefetch:
        dataset = dataset.prefetch(prefetch)
    return dataset.with_options(_dataset_options(autotune=prefetch == tf.data.AUTOTUNE))


# --------------------------------------------------------------------------- stateful RNNs


def _stateful_layers(layer: Any) -> list[Any]:
    """The outermost stateful RNN layers below ``layer`` (an RNN, or a ``Bidirectional`` wrapper of one)."""
    found = []
    for sub in layer._flatten_layers(include_self=False, recursive=False):
        if getattr(sub, "stateful", False) and hasattr(sub, "reset_state"):
            found.append(sub)
        else:
            found += _stateful_layers(sub)
    return found


def reset_stateful(model: keras.Model) -> int:
    """Zero the states of every stateful RNN layer in ``model`` (nested models too); return how many.

    A stateful RNN carries its state from one batch to the next, and Keras never resets it by itself
    (not between epochs of ``fit``, not before ``evaluate``). Call this where the rows of the data do
    not continue: before the first batch of every pass. A model without a stateful layer is a
    ``ValueError``: resetting nothing is almost always a mistake.

    >>> rnn = keras.Sequential([keras.Input(batch_shape=(2, 3, 1)), keras.layers.GRU(4, stateful=True)])
    >>> _ = rnn(np.ones((2, 3, 1), "float32"))
    >>> reset_stateful(rnn), float(np.abs(rnn.layers[0].states[0].numpy()).max())
    (1, 0.0)
    """
    check_model(model)
    layers = _stateful_layers(model)
    if not layers:
        raise ValueError(f"model {model.name!r} has no stateful RNN layer (stateful=True): nothing to reset")
    for layer in layers:
        layer.reset_state()
    return len(layers)


def stream_loss(model: keras.Model, dataset: tf.data.Dataset, *, reset_every_batch: bool = False) -> float:
    """Mean loss of a compiled ``model`` over one pass of ``dataset``, batch after batch, for a stateful RNN.

    The states are reset before the first batch and then carried from batch to batch (what
    ``model.evaluate`` does after a reset), or, with ``reset_every_batch=True``, reset before every
    batch (the model forgets what it read). Every batch must have the model's fixed batch size.
    A model built under a ``MirroredStrategy`` with several replicas is refused: Keras splits a batch
    between the replicas, while a stateful layer keeps one state for the whole batch.

    >>> net = keras.Sequential([keras.Input(batch_shape=(2, 3)), keras.layers.Embedding(20, 4),
    ...                         keras.layers.LSTM(4, return_sequences=True, stateful=True), keras.layers.Dense(20)])
    >>> net.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    >>> round(stream_loss(net, ptb_batches(range(20), 2, 3)), 1)  # untrained: about log(20)
    3.0
    """
    check_model(model)
    check_dataset(dataset)
    check_finite(dataset)
    if not isinstance(reset_every_batch, bool):
        raise TypeError(f"reset_every_batch must be a bool, got {type(reset_every_batch).__name__}")
    if not getattr(model, "compiled", False):
        raise ValueError(f"model {model.name!r} is not compiled: compile it with the loss to report")
    replicas = getattr(getattr(model, "distribute_strategy", None), "num_replicas_in_sync", 1)
    if replicas > 1:
        raise ValueError(f"model {model.name!r} runs under a strategy with {replicas} replicas: Keras would split "
                         "each batch between them, but a stateful layer keeps one state for the whole batch. "
                         "Build and evaluate a stateful model outside the strategy (or with one replica)")
    layers = _stateful_layers(model)
    sizes = {int(v.shape[0]) for layer in layers for v in tf.nest.flatten(getattr(layer, "states", None) or [])}
    batch = tf.nest.flatten(dataset.element_spec)[0].shape
    if sizes and (batch.rank is None or batch[0] is None or {int(batch[0])} != sizes):
        raise ValueError(f"dataset yields batches of shape {batch}, but the stateful layers of {model.name!r} "
                         f"hold a state for batches of exactly {sorted(sizes)} rows: every batch must have that size")
    reset_stateful(model)
    losses = []
    for x, y in dataset:
        if reset_every_batch:
            reset_stateful(model)
        model.reset_metrics()  # Keras 3.13's test_on_batch returns the running mean of every call since
        losses.append(float(model.test_on_batch(x, y, return_dict=True)["loss"]))
    if not losses:
        raise ValueError("dataset is empty: it holds no batch")
    return float(np.mean(losses))


# --------------------------------------------------------------------------- a series of several features


def room_series(n_minutes: int = 4000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A simulated room, one step per minute: ``x`` ``[n_minutes, 3]`` readings and ``y`` ``[n_minutes, 1]``.

    The three readings are the outside temperature (a slow sine plus noise, already scaled), the
    heater (on or off for 40 minutes at a time) and the window (open, one time in five, for 25
    minutes at a time). The target is the room's temperature: each minute it moves a tenth of the
    way towards the outside temperature (three tenths with the window open) and the heater adds 0.05.
    So it depends on a long history of readings, which a stateful RNN carries from batch to batch.
    Both arrays are float32; the same ``seed`` gives the same series.

    >>> x, y = room_series(1000)
    >>> x.shape, y.shape, x.dtype.name
    ((1000, 3), (1000, 1), 'float32')
    """
    n_minutes = require_int("n_minutes", n_minutes, minimum=2)
    seed = require_int("seed", seed, minimum=0)
    rng = np.random.default_rng(seed)
    outside = np.sin(np.arange(n_minutes) * 2 * np.pi / 500) + rng.normal(0, 0.1, n_minutes)
    heater = (rng.random(-(-n_minutes // 40)) < 0.5).repeat(40)[:n_minutes]
    window = (rng.random(-(-n_minutes // 25)) < 0.2).repeat(25)[:n_minutes]
    room = np.zeros(n_minutes)
    for t in range(1, n_minutes):
        leak = 0.3 if window[t] else 0.1
        room[t] = room[t - 1] + leak * (outside[t] - room[t - 1]) + 0.05 * heater[t]
    x = np.stack([outside, heater, window], axis=1).astype("float32")
    return x, room[:, None].astype("float32")
