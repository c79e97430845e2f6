"""helpers.batching (notebook 03): corpus, layout, tf.data and TF1 producers, cost helpers, checker."""

import numpy as np
import pytest
import tensorflow as tf

from helpers import batching, tf1
from helpers.exercises import CheckFailed
from helpers.exercises import batching as exercises


def numpy_batches(ids, batch_size, num_steps, count):
    """An independent NumPy reading of the PTB producer: the first ``count`` batches, wrapping epochs."""
    ids = np.asarray(ids)
    batch_len = len(ids) // batch_size
    data = ids[: batch_size * batch_len].reshape(batch_size, batch_len)
    epoch_size = (batch_len - 1) // num_steps
    out = []
    for k in range(count):
        i = k % epoch_size
        out.append((data[:, i * num_steps:(i + 1) * num_steps], data[:, i * num_steps + 1:(i + 1) * num_steps + 1]))
    return out


# --------------------------------------------------------------------------- corpus


def test_corpus_ships_with_the_package_and_has_no_comment_lines():
    text = batching.load_corpus()
    assert len(text.splitlines()) > 100
    assert not any(line.startswith("#") for line in text.splitlines())
    with pytest.raises(ValueError, match="name"):
        batching.load_corpus("no_such_corpus.txt")
    with pytest.raises(TypeError, match="name"):
        batching.load_corpus(3)


def test_tokenize_lowercases_marks_numbers_and_ends_lines_with_eos():
    assert batching.tokenize("The Fox's 2 cubs.\n\nRan!") == ["the", "fox's", "N", "cubs", "<eos>", "ran", "<eos>"]
    with pytest.raises(TypeError, match="text"):
        batching.tokenize(["a", "b"])


def test_vocab_ranks_by_frequency_then_alphabet_and_caps_with_unk():
    tokens = ["c", "b", "a", "b", "c", "d", "b"]
    assert batching.build_vocab(tokens) == {"b": 0, "c": 1, "a": 2, "d": 3}
    capped = batching.build_vocab(tokens, max_size=3)
    assert capped == {"b": 0, "c": 1, "<unk>": 2}
    assert batching.to_ids(tokens, capped).tolist() == [1, 0, 2, 0, 1, 2, 0]


@pytest.mark.parametrize("call, error, name", [
    (lambda: batching.build_vocab([]), ValueError, "tokens"),
    (lambda: batching.build_vocab(["a", 3]), TypeError, "tokens"),
    (lambda: batching.build_vocab(["a"], max_size=1), ValueError, "max_size"),
    (lambda: batching.build_vocab(["a"], max_size=2.0), TypeError, "max_size"),
    (lambda: batching.to_ids(["zebra"], {"a": 0}), ValueError, "tokens"),
    (lambda: batching.to_ids(["a"], ["a"]), TypeError, "vocab"),
])
def test_vocabulary_bad_inputs_name_the_argument(call, error, name):
    with pytest.raises(error, match=name):
        call()


def test_corpus_ids_round_trip_to_the_tokens():
    ids, vocab = batching.corpus_ids()
    words = {i: w for w, i in vocab.items()}
    assert ids.dtype == np.int32 and ids.ndim == 1
    assert [words[i] for i in ids.tolist()] == batching.tokenize(batching.load_corpus())
    assert vocab["the"] == 0 and words[int(ids[-1])] == "<eos>"
    assert len(vocab) == len(set(vocab.values())) == int(ids.max()) + 1
    small_ids, small_vocab = batching.corpus_ids(max_vocab=50)
    assert len(small_vocab) == 50 and small_ids.max() == 49 and len(small_ids) == len(ids)


# --------------------------------------------------------------------------- layout and bad inputs


def test_layout_counts_what_an_epoch_reads_and_leaves_unused():
    layout = batching.ptb_layout(70, batch_size=4, num_steps=5)
    assert (layout.batch_len, layout.epoch_size) == (17, 3)
    assert layout.dropped_by_reshape == 2 and layout.unused_per_stream == 1 and layout.never_read == 6
    assert layout.inputs_per_epoch == 60
    # every token is either read as an input, or is the last target of a stream, or is never read
    assert layout.inputs_per_epoch + layout.batch_size + layout.never_read == layout.n_tokens
    exact = batching.ptb_layout(4 * 16, batch_size=4, num_steps=5)
    assert exact.never_read == 0


@pytest.mark.parametrize("make", [
    lambda ids, b, n: batching.ptb_batches(ids, b, n),
    lambda ids, b, n: tf1.ptb_batches(ids, b, n, num_batches=1),
])
@pytest.mark.parametrize("ids, batch_size, num_steps, error, match", [
    (np.arange(11), 2, 5, ValueError, "too short.*epoch_size == 0.*decrease batch_size or num_steps"),
    (np.arange(5), 5, 1, ValueError, "too short"),
    (np.arange(50), 0, 5, ValueError, "batch_size"),
    (np.arange(50), 2, 0, ValueError, "num_steps"),
    (np.arange(50), 2.0, 5, TypeError, "batch_size"),
    (np.arange(50), 2, True, TypeError, "num_steps"),
    (np.arange(50) + 0.5, 2, 5, TypeError, "raw_ids.*integer"),
    (np.arange(50, dtype=np.float32), 2, 5, TypeError, "raw_ids"),
    (["the", "fox"] * 25, 2, 5, TypeError, "raw_ids"),
    ("the fox ran", 2, 1, TypeError, "raw_ids"),
    (np.ones(50, dtype=bool), 2, 5, TypeError, "raw_ids"),
    (np.arange(50).reshape(5, 10), 2, 5, ValueError, "raw_ids.*1-D"),
    (np.arange(50) - 1, 2, 5, ValueError, "raw_ids"),
    ([], 2, 5, ValueError, "raw_ids is empty"),
])
def test_bad_inputs_raise_clear_errors(make, ids, batch_size, num_steps, error, match):
    with pytest.raises(error, match=match):
        make(ids, batch_size, num_steps)


def test_other_bad_arguments():
    with pytest.raises(ValueError, match="num_batches"):
        tf1.ptb_batches(np.arange(50), 2, 5, num_batches=0)
    with pytest.raises(TypeError, match="repeat"):
        batching.ptb_batches(np.arange(50), 2, 5, repeat=1)
    with pytest.raises(ValueError, match="prefetch"):
        batching.ptb_batches(np.arange(50), 2, 5, prefetch=-1)


def test_shortest_data_that_works_gives_one_batch():
    ds = batching.ptb_batches(np.arange(12), batch_size=2, num_steps=5)  # 2 streams of 6: one window + target
    assert [x.numpy().tolist() for x, _ in ds] == [[[0, 1, 2, 3, 4], [6, 7, 8, 9, 10]]]


# --------------------------------------------------------------------------- tf.data producer


@pytest.mark.parametrize("n_tokens, batch_size, num_steps", [(97, 3, 7), (1000, 13, 11), (31, 1, 29), (64, 8, 1)])
def test_tf_data_matches_numpy_reading(n_tokens, batch_size, num_steps):
    ids = np.random.default_rng(n_tokens).integers(0, 10_000, size=n_tokens)
    layout = batching.ptb_layout(n_tokens, batch_size, num_steps)
    ds = batching.ptb_batches(ids, batch_size, num_steps)
    assert int(ds.cardinality()) == layout.epoch_size
    assert ds.element_spec[0].shape.as_list() == [batch_size, num_steps]
    assert ds.element_spec[0].dtype == tf.int32 and ds.element_spec[1].dtype == tf.int32
    got = [(x.numpy(), y.numpy()) for x, y in ds]
    expected = numpy_batches(ids, batch_size, num_steps, layout.epoch_size)
    assert len(got) == len(expected)
    for (gx, gy), (ex, ey) in zip(got, expected):
        np.testing.assert_array_equal(gx, ex)
        np.testing.assert_array_equal(gy, ey)


def test_repeat_wraps_to_window_zero_and_iterating_again_restarts():
    ids = np.arange(70)
    forever = batching.ptb_batches(ids, 4, 5, repeat=True)
    assert int(forever.cardinality()) == tf.data.INFINITE_CARDINALITY
    firsts = [int(x[0, 0]) for x, _ in forever.take(7)]
    assert firsts == [0, 5, 10, 0, 5, 10, 0]
    once = batching.ptb_batches(ids, 4, 5, prefetch=0)
    assert [int(x[0, 0]) for x, _ in once] == [int(x[0, 0]) for x, _ in once] == [0, 5, 10]


def test_streams_continue_from_one_batch_to_the_next():
    ids = np.random.default_rng(1).integers(0, 50, size=500)
    batches = [(x.numpy(), y.numpy()) for x, y in batching.ptb_batches(ids, 6, 9)]
    for (x0, y0), (x1, _) in zip(batches, batches[1:]):
        np.testing.assert_array_equal(x1[:, 0], y0[:, -1])
        np.testing.assert_array_equal(x0[:, 1:], y0[:, :-1])


def test_accepts_lists_ranges_and_tensors():
    as_list = [x.numpy() for x, _ in batching.ptb_batches(list(range(40)), 3, 4)]
    as_tensor = [x.numpy() for x, _ in batching.ptb_batches(tf.range(40, dtype=tf.int64), 3, 4)]
    assert len(as_list) == len(as_tensor) == 3
    for a, b in zip(as_list, as_tensor):
        np.testing.assert_array_equal(a, b)


# --------------------------------------------------------------------------- TF1 == TF2


@pytest.mark.parametrize("n_tokens, batch_size, num_steps, extra", [(103, 4, 6, 3), (257, 7, 5, 9), (45, 2, 21, 2)])
def test_tf1_and_tf2_batches_identical_across_the_wrap_around(n_tokens, batch_size, num_steps, extra):
    ids = np.random.default_rng(n_tokens).integers(0, 1000, size=n_tokens)
    epoch = batching.ptb_layout(n_tokens, batch_size, num_steps).epoch_size
    count = 2 * epoch + extra  # two wrap-arounds
    v1 = tf1.ptb_batches(ids, batch_size, num_steps, num_batches=count)
    v2 = [(x.numpy(), y.numpy()) for x, y in batching.ptb_batches(ids, batch_size, num_steps, repeat=True).take(count)]
    assert len(v1) == len(v2) == count
    for (ax, ay), (bx, by) in zip(v1, v2):
        assert ax.dtype == bx.dtype == np.int32
        np.testing.assert_array_equal(ax, bx)
        np.testing.assert_array_equal(ay, by)
    np.testing.assert_array_equal(v1[epoch][0], v1[0][0])  # the wrap-around really happened


def test_queue_pipeline_stops_its_threads_and_closes_its_session():
    with tf1.QueuePipeline(np.arange(70), 4, 5) as pipe:
        assert [int(pipe.next_batch()[0][0, 0]) for _ in range(4)] == [0, 5, 10, 0]
        assert any(t.is_alive() for t in pipe.threads)
    assert pipe.closed and not any(t.is_alive() for t in pipe.threads)
    assert pipe.session._closed
    pipe.close()  # a second close is harmless


# --------------------------------------------------------------------------- cost helpers


def test_three_ways_agree_on_the_checksum_and_compile_once():
    ids = np.random.default_rng(3).integers(0, 500, size=300)
    count = 25  # more than one epoch (epoch_size 6)
    expected = sum(int(x.sum()) + 2 * int(y.sum()) for x, y in numpy_batches(ids, 5, 9, count))
    with tf1.QueuePipeline(ids, 5, 9) as pipe:
        assert pipe.run_steps(count) == expected
    counter = batching.Checksum()
    ds = batching.ptb_batches(ids, 5, 9, repeat=True)
    assert counter.run_python_loop(ds, count) == expected
    assert counter.run_in_graph(ds, count) == expected
    # other batch shapes and another dataset with the same element spec: no new trace
    counter.run_python_loop(batching.ptb_batches(ids, 3, 4, repeat=True), 3)
    counter.run_in_graph(batching.ptb_batches(ids[::-1].copy(), 5, 9, repeat=True), 3)
    assert counter.step.experimental_get_tracing_count() == 1
    assert counter.loop.experimental_get_tracing_count() == 1


# --------------------------------------------------------------------------- checker


def reference_solution(k, n_tokens, batch_size, num_steps):
    stream_len = n_tokens // batch_size
    windows = (stream_len - 1) // num_steps
    first = np.arange(batch_size)[:, None] * stream_len + (k % windows) * num_steps
    return first + np.arange(num_steps)


def no_wrap_around(k, n_tokens, batch_size, num_steps):
    stream_len = n_tokens // batch_size
    return np.arange(batch_size)[:, None] * stream_len + k * num_steps + np.arange(num_steps)


def one_window_too_many(k, n_tokens, batch_size, num_steps):
    stream_len = n_tokens // batch_size
    windows = stream_len // num_steps
    return np.arange(batch_size)[:, None] * stream_len + (k % windows) * num_steps + np.arange(num_steps)


def test_checker_accepts_the_reference_solution(capsys):
    exercises.check_batch_positions(reference_solution)
    assert capsys.readouterr().out.startswith("Correct: batch_positions matches the producer")


def test_checker_rejects_the_stub_as_not_written_yet():
    def batch_positions(k, n_tokens, batch_size, num_steps):
        raise NotImplementedError()

    with pytest.raises(CheckFailed, match="not written yet"):
        exercises.check_batch_positions(batch_positions)


@pytest.mark.parametrize("wrong, hint", [
    (no_wrap_around, "what does the producer .* read next"),
    (one_window_too_many, "wrap-around comes at the wrong batch"),
    (lambda k, n, b, s: reference_solution(k, n, b, s)[:1], "shape"),
    (lambda k, n, b, s: reference_solution(k, n, b, s) * 1.5, "whole numbers|go up by 1"),
])
def test_checker_hints_without_revealing_the_solution(wrong, hint):
    with pytest.raises(CheckFailed, match=hint) as info:
        exercises.check_batch_positions(wrong)
    message = str(info.value)
    for giveaway in ("% epoch", "k % ", "(batch_len - 1)", "- 1) //", "n_tokens // batch_size"):
        assert giveaway not in message
