"""helpers.batching (notebook 03): corpus, layout, tf.data and TF1 producers, stateful RNNs, cost helpers, checkers."""

import functools
import re
import time

import keras
import numpy as np
import pytest
import tensorflow as tf

from helpers import batching, plots, tf1
from helpers.exercises import CheckFailed
from helpers.exercises import batching as exercises
from tests.notebook_answers import answer, stub


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


@pytest.mark.parametrize("text, tokens", [
    ("Café au lait", ["café", "au", "lait", "<eos>"]),
    ("Cafe\u0301 au lait", ["café", "au", "lait", "<eos>"]),  # combining accent: the same word
    ("Naïve Straße, Ærø!", ["naïve", "straße", "ærø", "<eos>"]),
    ("Москва и Київ", ["москва", "и", "київ", "<eos>"]),
    ("東京 ١٢٣ km", ["東京", "N", "km", "<eos>"]),  # other scripts' digits are numbers too
    ("the fox\u2019s den", ["the", "fox's", "den", "<eos>"]),  # a curly apostrophe is straightened
    ("snake_case", ["snake", "case", "<eos>"]),
])
def test_tokenize_keeps_words_of_every_script_whole(text, tokens):
    assert batching.tokenize(text) == tokens


def test_tokenize_is_unchanged_on_the_ascii_corpus():
    import re

    text = batching.load_corpus()
    assert text.isascii()
    ascii_words = re.compile(r"[a-z0-9']+")
    expected = []
    for line in text.splitlines():
        words = ["N" if w.isdigit() else w for w in ascii_words.findall(line.lower())]
        expected += words + ["<eos>"] if words else []
    assert batching.tokenize(text) == expected


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


@pytest.mark.parametrize("call, error, name", [
    (lambda: batching.corpus_ids(max_vocab=1), ValueError, "max_vocab"),
    (lambda: batching.corpus_ids(max_vocab=50.0), TypeError, "max_vocab"),
    (lambda: batching.corpus_ids(name=3), TypeError, "name"),
    (lambda: batching.ptb_layout(-1, 2, 3), ValueError, "n_tokens"),
    (lambda: batching.ptb_layout(10, "2", 3), TypeError, "batch_size"),
    (lambda: batching.ptb_layout(10, 2, 0), ValueError, "num_steps"),
    (lambda: batching.as_token_ids(b"abc"), TypeError, "raw_ids"),
    (lambda: batching.as_token_ids([2**31]), ValueError, "raw_ids"),
])
def test_corpus_and_layout_bad_inputs_name_the_argument(call, error, name):
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
        batching.ptb_batches(np.arange(50), 2, 5, prefetch=-2)
    with pytest.raises(TypeError, match="prefetch"):
        batching.ptb_batches(np.arange(50), 2, 5, prefetch=1.0)


@pytest.mark.parametrize("prefetch, autotune", [(0, False), (1, False), (3, False), (tf.data.AUTOTUNE, True)])
def test_prefetch_choices_give_the_same_batches_and_fixed_options(prefetch, autotune):
    ds = batching.ptb_batches(np.arange(97), 3, 7, prefetch=prefetch)
    expected = numpy_batches(np.arange(97), 3, 7, batching.ptb_layout(97, 3, 7).epoch_size)
    assert [x.numpy().tolist() for x, _ in ds] == [x.tolist() for x, _ in expected]
    options = ds.options()
    assert options.autotune.enabled is autotune
    assert options.deterministic is True and options.threading.private_threadpool_size == 1


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
    with pytest.raises(RuntimeError, match="closed"):
        pipe.next_batch()
    with pytest.raises(RuntimeError, match="closed"):
        pipe.run_steps(1)


def test_queue_pipeline_survives_idling_longer_than_its_read_timeout():
    # The queue runner blocks on a full queue while nobody reads: that wait must not time out.
    with tf1.QueuePipeline(np.arange(70), 4, 5, timeout_ms=300) as pipe:
        pipe.next_batch()
        time.sleep(1.0)
        assert all(t.is_alive() for t in pipe.threads)
        assert [int(pipe.next_batch()[0][0, 0]) for _ in range(40)][:3] == [5, 10, 0]


def test_queue_pipeline_bad_timeout_is_refused_before_building_anything():
    with pytest.raises(ValueError, match="timeout_ms"):
        tf1.QueuePipeline(np.arange(70), 4, 5, timeout_ms=0)


# --------------------------------------------------------------------------- cost helpers


def test_four_ways_agree_on_the_checksum_and_compile_once():
    ids = np.random.default_rng(3).integers(0, 500, size=300)
    count = 25  # more than one epoch (epoch_size 6)
    expected = sum(int(x.sum()) + 2 * int(y.sum()) for x, y in numpy_batches(ids, 5, 9, count))
    with tf1.QueuePipeline(ids, 5, 9) as pipe:
        assert pipe.run_steps(count) == expected
    counter = batching.Checksum()
    ds = batching.ptb_batches(ids, 5, 9, repeat=True)
    assert counter.run_python_loop(ds, count) == expected
    assert counter.run_in_graph(ds, count) == expected
    assert counter.run_as_reduction(ds, count) == expected
    # other batch shapes and another dataset with the same element spec: no new trace
    counter.run_python_loop(batching.ptb_batches(ids, 3, 4, repeat=True), 3)
    counter.run_in_graph(batching.ptb_batches(ids[::-1].copy(), 5, 9, repeat=True), 3)
    assert counter.step.experimental_get_tracing_count() == 1
    assert counter.loop.experimental_get_tracing_count() == 1


@pytest.mark.parametrize("dataset, error, match", [
    ([np.zeros((2, 3), np.int32)] * 2, TypeError, "dataset must be a tf.data.Dataset"),
    (tf.data.Dataset.range(5), TypeError, r"\(x, y\) pairs of int32"),
    (tf.data.Dataset.from_tensors((tf.zeros([2, 3]), tf.zeros([2, 3]))), TypeError, "int32"),
])
def test_checksum_refuses_bad_datasets_before_touching_its_total(dataset, error, match):
    counter = batching.Checksum()
    counter.total.assign(7)
    for run in (counter.run_python_loop, counter.run_in_graph, counter.run_as_reduction):
        with pytest.raises(error, match=match):
            run(dataset, 3)
        with pytest.raises(ValueError, match="num_batches"):
            run(batching.ptb_batches(np.arange(50), 2, 5), 0)
    assert counter.value == 7


# --------------------------------------------------------------------------- stateful RNNs


def stateful_lm(batch_size=2, num_steps=3, vocab=20, seed=0, regularizer=None):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([
        keras.Input(batch_shape=(batch_size, num_steps), dtype="int32"),
        keras.layers.Embedding(vocab, 4),
        keras.layers.LSTM(5, return_sequences=True, stateful=True),
        keras.layers.Dense(vocab, kernel_regularizer=regularizer),
    ])
    model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


class Wrapped(keras.layers.Layer):
    def __init__(self):
        super().__init__()
        self.rnn = keras.layers.GRU(3, stateful=True, return_sequences=True)

    def call(self, x):
        return self.rnn(x)


class Subclassed(keras.Model):
    def __init__(self):
        super().__init__()
        self.wrapped = Wrapped()
        self.both = keras.layers.Bidirectional(keras.layers.LSTM(2, stateful=True, return_sequences=True))
        self.norm = keras.layers.BatchNormalization()

    def call(self, x, training=False):
        return self.norm(self.both(self.wrapped(x)), training=training)


def state_norms(model):
    return [float(np.abs(s.numpy()).max()) for layer in model._flatten_layers()
            if getattr(layer, "stateful", False) and getattr(layer, "states", None) for s in layer.states]


def test_reset_stateful_finds_nested_and_wrapped_layers():
    model = Subclassed()
    model(np.ones((2, 4, 1), np.float32))
    assert max(state_norms(model)) > 0
    assert batching.reset_stateful(model) == 2  # the GRU inside a layer, and the Bidirectional wrapper
    assert max(state_norms(model)) == 0.0


def test_stream_loss_on_a_subclassed_model_with_batchnorm_and_a_frozen_rnn():
    model = Subclassed()
    model.wrapped.trainable = False  # frozen: its state is still carried and reset
    model.compile(loss="mse")
    x = np.random.default_rng(0).normal(size=(6, 4, 1)).astype(np.float32)
    ds = tf.data.Dataset.from_tensor_slices((x, np.zeros((6, 4, 4), np.float32))).batch(2, drop_remainder=True)
    carried = batching.stream_loss(model, ds)
    assert np.isfinite(carried) and carried == pytest.approx(batching.stream_loss(model, ds), rel=1e-6)
    assert abs(batching.stream_loss(model, ds, reset_every_batch=True) - carried) > 1e-7
    with pytest.raises(ValueError, match="exactly"):
        batching.stream_loss(model, ds.unbatch().batch(3, drop_remainder=True))


def test_reset_stateful_refuses_models_without_stateful_layers():
    plain = keras.Sequential([keras.Input((3, 1)), keras.layers.LSTM(2)])
    with pytest.raises(ValueError, match="no stateful RNN layer"):
        batching.reset_stateful(plain)
    with pytest.raises(TypeError, match="model must be a Keras model"):
        batching.reset_stateful(plain.layers[0])


def test_stream_loss_carries_the_state_unless_told_to_reset():
    ids = np.random.default_rng(0).integers(0, 20, size=120)
    model = stateful_lm()
    ds = batching.ptb_batches(ids, 2, 3)
    carried = batching.stream_loss(model, ds)
    # the same numbers by hand: reset once, then the model's own loss batch after batch
    batching.reset_stateful(model)
    by_hand = np.mean([float(model.test_on_batch(x, y)) for x, y in ds])
    assert carried == pytest.approx(by_hand, rel=1e-6)
    assert batching.stream_loss(model, ds) == pytest.approx(carried, rel=1e-6)  # it resets first: repeatable
    reset = batching.stream_loss(model, ds, reset_every_batch=True)
    assert abs(reset - carried) > 1e-4


def test_stream_loss_equals_evaluate_after_a_reset_with_a_regularised_model():
    ids = np.random.default_rng(1).integers(0, 20, size=120)
    model = stateful_lm(regularizer=keras.regularizers.L2(0.5))
    ds = batching.ptb_batches(ids, 2, 3)
    ours = batching.stream_loss(model, ds)
    batching.reset_stateful(model)
    assert ours == pytest.approx(model.evaluate(ds, verbose=0), rel=1e-5)
    assert ours > batching.stream_loss(stateful_lm(), ds) + 0.1  # the L2 term is in both


@pytest.mark.parametrize("call, error, match", [
    (lambda m, ds: batching.stream_loss(m, ds.repeat()), ValueError, "infinite"),
    (lambda m, ds: batching.stream_loss(m, ds.take(0)), ValueError, "empty"),
    (lambda m, ds: batching.stream_loss(m, [1, 2]), TypeError, "dataset"),
    (lambda m, ds: batching.stream_loss("model", ds), TypeError, "model"),
    (lambda m, ds: batching.stream_loss(m, ds, reset_every_batch=1), TypeError, "reset_every_batch"),
    (lambda m, ds: batching.stream_loss(m, batching.ptb_batches(np.arange(120), 3, 3)), ValueError, "exactly"),
    (lambda m, ds: batching.stream_loss(m, ds.unbatch().batch(2)), ValueError, "exactly"),
])
def test_stream_loss_bad_inputs_fail_before_the_state_changes(call, error, match):
    model = stateful_lm()
    ds = batching.ptb_batches(np.random.default_rng(2).integers(0, 20, size=60), 2, 3)
    model.test_on_batch(*next(iter(ds)))  # a state to keep
    before = state_norms(model)
    with pytest.raises(error, match=match):
        call(model, ds)
    assert state_norms(model) == before and before[0] > 0


def test_stream_loss_needs_a_compiled_model():
    model = stateful_lm()
    fresh = keras.Sequential(model.layers[:])
    with pytest.raises(ValueError, match="not compiled"):
        batching.stream_loss(fresh, batching.ptb_batches(np.arange(60), 2, 3))


def test_stream_loss_refuses_a_stateful_model_under_a_two_replica_strategy(fresh_python):
    out = fresh_python("""
        from helpers import runtime
        runtime.setup(seed=0, replicas=2)
        import keras, numpy as np, tensorflow as tf
        from helpers import batching
        strategy = tf.distribute.MirroredStrategy()
        with strategy.scope():
            model = keras.Sequential([keras.Input(batch_shape=(4, 3)), keras.layers.Embedding(20, 4),
                                      keras.layers.LSTM(4, return_sequences=True, stateful=True)])
            model.compile(loss="mse")
            try:
                batching.stream_loss(model, batching.ptb_batches(np.arange(60), 4, 3))
            except ValueError as error:
                print("refused:", "2 replicas" in str(error))
            print("reset in scope:", batching.reset_stateful(model))
    """)
    assert "refused: True" in out and "reset in scope: 1" in out


# --------------------------------------------------------------------------- checker: batch_positions

NOTEBOOK = "03_batch_iteration"


@functools.lru_cache(maxsize=None)
def reference_positions():
    return answer(NOTEBOOK, "batch_positions")


def no_wrap_around(k, n_tokens, batch_size, num_steps):
    stream_len = n_tokens // batch_size
    return np.arange(batch_size)[:, None] * stream_len + k * num_steps + np.arange(num_steps)


def one_window_too_many(k, n_tokens, batch_size, num_steps):
    stream_len = n_tokens // batch_size
    windows = stream_len // num_steps
    return np.arange(batch_size)[:, None] * stream_len + (k % windows) * num_steps + np.arange(num_steps)


def test_checker_accepts_the_notebooks_answer(capsys):
    exercises.check_batch_positions(reference_positions())
    assert capsys.readouterr().out.startswith("Correct: batch_positions matches the producer")


def test_checker_rejects_the_student_stub_as_not_written_yet():
    with pytest.raises(CheckFailed, match="not written yet"):
        exercises.check_batch_positions(stub(NOTEBOOK, "batch_positions"))


@pytest.mark.parametrize("wrong, hint", [
    (no_wrap_around, "what does the producer .* read next"),
    (one_window_too_many, "wrap-around comes at the wrong batch"),
    (lambda k, n, b, s: reference_positions()(k, n, b, s)[:1], "shape"),
    (lambda k, n, b, s: reference_positions()(k, n, b, s) * 1.5, "whole numbers|go up by 1"),
    (lambda k, n, b, s: reference_positions()(k, n, b, s).astype(np.float32), "exact integers"),
])
def test_checker_hints_without_revealing_the_solution(wrong, hint):
    with pytest.raises(CheckFailed, match=hint) as info:
        exercises.check_batch_positions(wrong)
    message = str(info.value)
    for giveaway in ("% epoch", "k % ", "(batch_len - 1)", "- 1) //", "n_tokens // batch_size"):
        assert giveaway not in message


def via_ptb_batches(k, n, b, s):
    return next(iter(batching.ptb_batches(np.arange(n), b, s, repeat=True).skip(k)))[0].numpy()


def via_imported_name(k, n, b, s, _ptb=batching.ptb_batches):  # a reference taken before the check
    return list(_ptb(np.arange(n), b, s, repeat=True).skip(k).take(1))[0][0].numpy()


def via_reduce(k, n, b, s, _ptb=batching.ptb_batches):
    ds = _ptb(np.arange(n), b, s, repeat=True).skip(k).take(1)
    return ds.reduce(tf.zeros([b, s], tf.int32), lambda acc, xy: xy[0]).numpy()


def via_tf1(k, n, b, s):
    return tf1.ptb_batches(np.arange(n), b, s, num_batches=k + 1)[k][0]


def via_tf1_graph(k, n, b, s):
    with tf.Graph().as_default():
        i = tf.compat.v1.train.range_input_producer(10, shuffle=False).dequeue()
        with tf.compat.v1.Session() as sess:
            sess.run(i)


def swallowing_the_error(k, n, b, s):
    try:
        return via_ptb_batches(k, n, b, s)
    except Exception:  # noqa: BLE001 - a learner hiding that the pipeline was refused
        return reference_positions()(k, n, b, s)


@pytest.mark.parametrize("runs_the_pipeline, what", [
    (via_ptb_batches, "batching.ptb_batches"),
    (via_imported_name, "iterating a tf.data.Dataset"),
    (via_reduce, "reduce"),
    (via_tf1, "tf1.ptb_batches"),
    (via_tf1_graph, "range_input_producer"),
    (swallowing_the_error, "batching.ptb_batches"),
])
def test_checker_rejects_answers_that_run_a_pipeline(runs_the_pipeline, what):
    with pytest.raises(CheckFailed, match=f"ran the pipeline.*{what}.*arithmetic") as info:
        exercises.check_batch_positions(runs_the_pipeline)
    assert "\n" not in str(info.value)
    # everything the checker hid works again afterwards
    assert len(list(batching.ptb_batches(np.arange(20), 2, 3))) == 3
    assert tf1.ptb_batches(np.arange(20), 2, 3, num_batches=1)[0][0].shape == (2, 3)
    assert "run" not in tf.compat.v1.Session.__dict__


def test_checker_rejects_an_answer_that_materialises_the_stream():
    def materialise(k, n_tokens, batch_size, num_steps):
        length = n_tokens // batch_size
        rows = np.arange(n_tokens)[: batch_size * length].reshape(batch_size, length)
        i = k % ((length - 1) // num_steps)
        return rows[:, i * num_steps:(i + 1) * num_steps]

    with pytest.raises(CheckFailed, match="ran out of memory for n_tokens=1e\\+15.*directly"):
        exercises.check_batch_positions(materialise)


@pytest.mark.parametrize("n_tokens, batch_size, num_steps", [
    (70, 4, 5), (101, 3, 7), (60, 4, 5), (23, 1, 4), (50, 6, 1), (1906, 8, 10), (997, 13, 6), (12, 2, 5)])
def test_checker_layout_predicate_for_huge_streams_accepts_exactly_the_pipelines_batches(n_tokens, batch_size,
                                                                                        num_steps):
    epoch = batching.ptb_layout(n_tokens, batch_size, num_steps).epoch_size
    stream = batching.ptb_batches(np.arange(n_tokens), batch_size, num_steps, repeat=True)
    for k, (x, _) in enumerate(stream.take(3 * epoch + 1)):
        produced = x.numpy().astype(np.int64)
        assert exercises._follows_layout(produced, k, n_tokens, batch_size, num_steps)
        assert not exercises._follows_layout(produced + 1, k, n_tokens, batch_size, num_steps)
        assert not exercises._follows_layout(produced[::-1], k, n_tokens, batch_size, num_steps) or batch_size == 1


def test_checker_reference_ignores_a_patched_ptb_batches(monkeypatch):
    # an answer cell that replaces the helper cannot change the checker's reference
    monkeypatch.setattr(batching, "ptb_batches", lambda *a, **k: tf.data.Dataset.from_tensors(
        (tf.zeros([4, 5], tf.int32), tf.zeros([4, 5], tf.int32))).repeat())
    with pytest.raises(CheckFailed):
        exercises.check_batch_positions(lambda k, n, b, s: np.zeros((b, s), np.int64))


# --------------------------------------------------------------------------- checker: reset_callback


def counting_callback(reset_when):
    """A callback that resets before the fit's batch ``g`` (Keras epoch batch ``b``, epoch ``e``, steps per epoch
    ``s``) when ``reset_when(g, b, e, s)``."""

    class Resetting(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.seen, self.epoch = 0, 0

        def on_epoch_begin(self, epoch, logs=None):
            self.epoch = epoch

        def on_train_batch_begin(self, batch, logs=None):
            if reset_when(self.seen, batch, self.epoch, self.params["steps"]):
                batching.reset_stateful(self.model)
            self.seen += 1

    return Resetting()


def reset_at_batch_end(epoch_size):
    # another right answer: reset after the batch that ends a pass, where the stream's next batch is a wrap-around
    class AtEnd(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.epoch = epoch

        def on_train_batch_end(self, batch, logs=None):
            if (self.epoch * self.params["steps"] + batch + 1) % epoch_size == 0:
                batching.reset_stateful(self.model)

    return AtEnd()


def reset_each_keras_epoch(epoch_size):
    class EachEpoch(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            batching.reset_stateful(self.model)

    return EachEpoch()


def hard_coded_layer(epoch_size):
    class LayerOne(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.epoch = epoch

        def on_train_batch_begin(self, batch, logs=None):
            if (self.epoch * self.params["steps"] + batch) % epoch_size == 0:
                self.model.layers[1].reset_state()

    return LayerOne()


def the_notebooks_stateful_resets(epoch_size):
    # the notebook's StatefulResets (its reset after on_train_begin): right in a fresh fit, wrong when one resumes
    StatefulResets = notebook_function("StatefulResets", *_STATEFUL_HELPERS)
    return StatefulResets(epoch_size)


def test_reset_checker_accepts_the_notebooks_answer_and_a_reset_at_batch_end(capsys):
    exercises.check_reset_callback(answer(NOTEBOOK, "reset_callback", {"reset_stateful": batching.reset_stateful}))
    exercises.check_reset_callback(reset_at_batch_end)
    assert capsys.readouterr().out.count("Correct: your callback reset the state exactly") == 2


def test_reset_checker_rejects_the_student_stub():
    with pytest.raises(CheckFailed, match="not written yet"):
        exercises.check_reset_callback(stub(NOTEBOOK, "reset_callback", {"batching": batching}))


@pytest.mark.parametrize("wrong, hint", [
    (lambda e: keras.callbacks.Callback(), "not reset before batch 5 of this fit: there every row jumps back"),
    (reset_each_keras_epoch, "where a Keras epoch starts \\(batch 3\\)"),
    (lambda e: counting_callback(lambda seen, batch, epoch, steps: batch % e == 0),
     "where a Keras epoch starts.*`batch` argument"),
    (lambda e: counting_callback(lambda seen, batch, epoch, steps: True), "before every batch"),
    (lambda e: counting_callback(lambda seen, batch, epoch, steps: seen % e in (0, 1)),
     "before batch 1 of this fit, where every row continues"),
    (the_notebooks_stateful_resets, "skip\\(6\\).*counts the batches from the start of this fit.*before its batch 4"),
    (lambda e: counting_callback(lambda seen, batch, epoch, steps: (epoch * steps + batch) % 5 == 0),
     "windows_per_row=4.*not reset before batch 2 of this fit"),
    (lambda e: counting_callback(lambda seen, batch, epoch, steps: (epoch * steps + batch + 1) % e == 0),
     "not reset before batch 5"),
    (hard_coded_layer, "raised AttributeError"),
    (lambda e: keras.callbacks.Callback, "returned a class"),
    (lambda e: "reset", "must return a keras.callbacks.Callback"),
])
def test_reset_checker_hints_in_one_line(wrong, hint):
    with pytest.raises(CheckFailed, match=hint) as info:
        exercises.check_reset_callback(wrong)
    assert "\n" not in str(info.value) and "% windows_per_row" not in str(info.value)
    assert "params" not in str(info.value) and "* steps" not in str(info.value)  # the rule is not given away


# --------------------------------------------------------------------------- the notebook's own code; proofs moved here
# The notebook's Now section defines `ptb_dataset` inline (the code a learner copies). These tests run
# that very cell, and hold the checks the notebook used to print before the answer-first rewrite.


def notebook_function(name, *needs):
    """The function or class ``name`` exactly as a code cell of the notebook defines it (run with np, tf
    and keras only): the lines from ``def name(`` (or ``class name(``) to the first line that is not indented.
    ``needs`` names the notebook's functions it calls (defined first, in the same scope)."""
    import nbformat

    from tests.notebook_answers import ROOT

    path = ROOT / "notebooks" / f"{NOTEBOOK}.ipynb"
    sources = [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    import ast

    scope = {"np": np, "tf": tf, "keras": keras}
    for wanted in (*needs, name):
        heads = (f"def {wanted}(", f"class {wanted}(")
        cells = [source for source in sources if any(head in source for head in heads)]
        assert cells, f"{path.name}: no cell defines {wanted}"
        definitions = []
        for cell in cells:
            head = next(head for head in heads if head in cell)
            lines = cell[cell.index(head):].splitlines()
            end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() and not line[0].isspace()), len(lines))
            definitions.append("\n".join(lines[:end]))
        # the final "copy this into your project" cell repeats some definitions: the same code (comments aside)
        assert len({ast.dump(ast.parse(d)) for d in definitions}) == 1, f"{path.name}: {wanted} defined differently"
        exec(compile(definitions[0], f"{NOTEBOOK}:{wanted}", "exec"), scope)  # noqa: S102 - our own notebook
    return scope[name]


def notebook_series_dataset():
    """series_dataset(x, y, batch_size, num_steps) as the tests called it until round 15: the notebook's one
    builder, stateful_dataset, given its own targets y (then y is not x one step later)."""
    build = notebook_function("stateful_dataset")
    return lambda x, y, batch_size, num_steps: build(x, batch_size, num_steps, y=y)


# the notebook's functions StatefulResets calls, defined in the cell before it
_STATEFUL_HELPERS = ("stateful_layers", "reset_stateful", "state_variables")


@pytest.mark.parametrize("n_tokens, batch_size, num_steps", [
    (70, 4, 5), (1906, 8, 10), (97, 3, 7), (1000, 13, 11), (31, 1, 29), (64, 8, 1), (12, 2, 5)])
def test_the_notebooks_ptb_dataset_equals_the_helper_across_wrap_arounds(n_tokens, batch_size, num_steps):
    ptb_dataset = notebook_function("stateful_dataset")
    ids = np.random.default_rng(n_tokens).integers(0, 10_000, size=n_tokens)
    epoch = batching.ptb_layout(n_tokens, batch_size, num_steps).epoch_size
    count = 2 * epoch + 3
    repeated, windows_per_row = ptb_dataset(ids, batch_size, num_steps, repeat=True)
    assert windows_per_row == epoch  # the count it returns: the batches in one pass
    ours = [(x.numpy(), y.numpy()) for x, y in repeated.take(count)]
    helper = [(x.numpy(), y.numpy())
              for x, y in batching.ptb_batches(ids, batch_size, num_steps, repeat=True).take(count)]
    assert len(ours) == len(helper) == count
    for (ax, ay), (bx, by) in zip(ours, helper):
        np.testing.assert_array_equal(ax, bx)
        np.testing.assert_array_equal(ay, by)
    one_pass, windows_per_row = ptb_dataset(ids, batch_size, num_steps)
    assert len(list(one_pass)) == windows_per_row == epoch  # one pass without repeat


@pytest.mark.parametrize("n_tokens, batch_size, num_steps", [(1013, 7, 9), (250, 3, 41), (97, 5, 2)])
def test_the_notebooks_ptb_dataset_equals_the_tf1_producer_across_wrap_arounds(n_tokens, batch_size, num_steps):
    # The streams the notebook's TF1 cell compared before issue 20's third round (it keeps the toy and the fables):
    # sizes that do not divide evenly, two wrap-arounds and three batches more, the TF1 producer run in its graph.
    ptb_dataset = notebook_function("stateful_dataset")
    ids = np.random.default_rng(n_tokens).integers(0, 10_000, size=n_tokens)
    count = 2 * batching.ptb_layout(n_tokens, batch_size, num_steps).epoch_size + 3
    v1 = tf1.ptb_batches(ids, batch_size, num_steps, num_batches=count)
    repeated, _ = ptb_dataset(ids, batch_size, num_steps, repeat=True)
    ours = [(x.numpy(), y.numpy()) for x, y in repeated.take(count)]
    assert len(v1) == len(ours) == count
    for (ax, ay), (bx, by) in zip(v1, ours):
        np.testing.assert_array_equal(ax, bx)
        np.testing.assert_array_equal(ay, by)


@pytest.mark.parametrize("n_tokens, batch_size, num_steps", [(70, 4, 5), (1906, 8, 10), (97, 3, 7), (31, 1, 29)])
def test_the_docs_map_dataset_gives_ptb_datasets_batches_across_wrap_arounds(n_tokens, batch_size, num_steps):
    # The Cost cell's memory-lean variant (a slice per batch), in docs/batching.md since round 25 (the notebook's
    # Cost links to it and says stateful_dataset stores the stream twice: measured here too).
    map_dataset = _docs_map_dataset()
    stored = sum(bx.nbytes + by.nbytes for bx, by in notebook_function("stateful_dataset")(
        np.arange(n_tokens, dtype=np.int32), batch_size, num_steps)[0].as_numpy_iterator())
    layout = batching.ptb_layout(n_tokens, batch_size, num_steps)
    assert stored == 2 * 4 * batch_size * num_steps * layout.epoch_size  # x and y: the stream (as read) twice
    ids = np.random.default_rng(n_tokens).integers(0, 10_000, size=n_tokens).astype(np.int32)
    count = 2 * batching.ptb_layout(n_tokens, batch_size, num_steps).epoch_size + 3
    repeated, windows_per_row = map_dataset(ids, batch_size, num_steps, repeat=True)
    assert windows_per_row == batching.ptb_layout(n_tokens, batch_size, num_steps).epoch_size
    ours = list(repeated.take(count))
    expected = numpy_batches(ids, batch_size, num_steps, count)
    assert len(ours) == count
    for (x, y), (ex, ey) in zip(ours, expected):
        np.testing.assert_array_equal(x.numpy(), ex)
        np.testing.assert_array_equal(y.numpy(), ey)
    assert len(list(map_dataset(ids, batch_size, num_steps)[0])) == windows_per_row  # one pass without repeat


def _docs_map_dataset():
    """docs/batching.md's map_dataset (the notebook's Cost cell until round 25)."""
    scope = {"np": np, "tf": tf}
    exec(compile(_docs_block("### A stream held once: `map_dataset`"), "map_dataset", "exec"), scope)  # noqa: S102
    return scope["map_dataset"]


def _named_lstm_model(batch_size=2, num_steps=3):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input(batch_shape=(batch_size, num_steps), dtype="int32"),
                              keras.layers.Embedding(20, 4),
                              keras.layers.LSTM(6, return_sequences=True, stateful=True, name="lstm"),
                              keras.layers.Dense(20)])
    model.compile(keras.optimizers.Adam(0.01), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def test_fits_validation_starts_from_the_training_state_unless_the_notebooks_callback_resets_it():
    # The notebook's StatefulResets resets in on_test_begin: Keras' validation inside fit reads and writes the
    # same state as training, so without that reset it starts from the state the last training batch left.
    StatefulResets = notebook_function("StatefulResets", *_STATEFUL_HELPERS)
    ids = np.random.default_rng(0).integers(0, 20, size=80)
    train, valid = batching.ptb_batches(ids[:60], 2, 3), batching.ptb_batches(ids[60:], 2, 3)

    class ResetAtEpochOnly(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.model.get_layer("lstm").reset_state()

    val_loss = {}
    windows = batching.ptb_layout(60, 2, 3).epoch_size  # one Keras epoch = one pass of the training batches
    for name, callback in [("reset before validation", StatefulResets(windows)), ("no reset", ResetAtEpochOnly())]:
        model = _named_lstm_model()
        history = model.fit(train, validation_data=valid, epochs=2, shuffle=False, verbose=0, callbacks=[callback])
        model.get_layer("lstm").reset_state()
        val_loss[name] = (history.history["val_loss"][-1], model.evaluate(valid, verbose=0))
    fitted, after_reset = val_loss["reset before validation"]
    assert abs(fitted - after_reset) < 1e-5, val_loss
    fitted, after_reset = val_loss["no reset"]
    assert abs(fitted - after_reset) > 1e-4, val_loss


def test_the_notebooks_reset_finds_a_stateful_lstm_wherever_it_sits_in_a_sequential_model():
    # Exercise 2 tells the learner to reset with the notebook's reset_stateful; the checker's LSTM is the
    # third layer, not the second. Layers that are not stateful are left alone.
    reset_stateful = notebook_function("reset_stateful", "stateful_layers")
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input(batch_shape=(2, 3), dtype="int32"), keras.layers.Embedding(20, 4),
                              keras.layers.Dense(4, activation="tanh"),
                              keras.layers.LSTM(5, return_sequences=True, stateful=True), keras.layers.Dense(20)])
    model.predict_on_batch(np.ones((2, 3), "int32"))
    lstm = model.layers[2]
    assert max(np.abs(state.numpy()).max() for state in lstm.states) > 0
    reset_stateful(model)
    assert all(np.abs(state.numpy()).max() == 0 for state in lstm.states)


def test_the_notebooks_reset_walks_into_nested_models_and_a_top_level_walk_does_not():
    # A reader's functional model had its LSTM inside nested models: the notebook's reset_stateful
    # recurses over `.layers`; the version before round 5 looked at the top-level layers only.
    reset_stateful = notebook_function("reset_stateful", "stateful_layers")

    def top_level_only(model):
        for layer in model.layers:
            if getattr(layer, "stateful", False):
                layer.reset_state()

    for reset, zeroed in [(reset_stateful, True), (top_level_only, False)]:
        keras.utils.set_random_seed(0)
        lstm = keras.layers.LSTM(5, return_sequences=True, stateful=True)
        inner = keras.Sequential([keras.layers.Embedding(20, 4), keras.Sequential([lstm])])
        inputs = keras.Input(batch_shape=(2, 3), dtype="int32")
        model = keras.Model(inputs, keras.layers.Dense(20)(inner(inputs)))
        model.predict_on_batch(np.ones((2, 3), "int32"))
        assert max(np.abs(state.numpy()).max() for state in lstm.states) > 0
        reset(model)
        assert all(not state.numpy().any() for state in lstm.states) == zeroed, reset


def test_a_stateful_lstm_fed_batches_out_of_order_does_not_compute_the_whole_rows():
    # The notebook's Proof 2 printed this wrong version until issue 20's fourth round (it now compares with each
    # batch read from a zero state): fed 2, 0, 1, each batch's outputs differ from the whole rows'; fed 0, 1, 2 they
    # are equal.
    keras.utils.set_random_seed(0)
    layers = [keras.layers.Embedding(20, 4), keras.layers.LSTM(6, return_sequences=True, stateful=True)]
    stateful = keras.Sequential([keras.Input(batch_shape=(2, 3), dtype="int32"), *layers])
    stateless = keras.Sequential([keras.Input(shape=(None,), dtype="int32"), keras.layers.Embedding(20, 4),
                                  keras.layers.LSTM(6, return_sequences=True)])
    stateless.set_weights(stateful.get_weights())
    three = [np.random.default_rng(k).integers(0, 20, size=(2, 3)) for k in range(3)]
    whole_rows = stateless.predict_on_batch(np.concatenate(three, axis=1))
    for order, same, reset_each in [([0, 1, 2], True, False), ([2, 0, 1], False, False), ([0, 1, 2], False, True)]:
        layers[1].reset_state()
        outputs = {}
        for k in order:  # reset_each: each batch read alone, from a zero state (the notebook's Proof printed it)
            if reset_each:
                layers[1].reset_state()
            outputs[k] = stateful.predict_on_batch(three[k])
        gap = np.abs(np.concatenate([outputs[k] for k in range(3)], axis=1) - whole_rows).max()
        assert (gap < 1e-5) == same, (order, reset_each, gap)


class _ResetWhereRowsJump(keras.callbacks.Callback):
    def __init__(self, windows_per_row):
        super().__init__()
        self.windows_per_row, self.seen = windows_per_row, 0

    def on_train_batch_begin(self, batch, logs=None):
        if self.seen % self.windows_per_row == 0:
            self.model.get_layer("lstm").reset_state()
        self.seen += 1


def test_validation_in_the_middle_of_a_pass_keeps_the_training_state_only_when_told():
    # Keras epochs of 4 batches over passes of 10 windows, validated after every Keras epoch: with the state kept
    # (the notebook's StatefulResets), training ends with the weights of the same training without validation;
    # with a reset where the rows jump and nothing else, validation's state leaks into the next training batch.
    StatefulResets = notebook_function("StatefulResets", *_STATEFUL_HELPERS)
    ids = np.random.default_rng(1).integers(0, 20, size=100)
    train = batching.ptb_batches(ids[:64], 2, 3, repeat=True)   # 32 tokens per row: 10 windows per row
    valid = batching.ptb_batches(ids[64:], 2, 3)
    windows = batching.ptb_layout(64, 2, 3).epoch_size

    def trained(callback, validate):
        model = _named_lstm_model()
        model.fit(train, steps_per_epoch=4, epochs=5, shuffle=False, verbose=0,
                  validation_data=valid if validate else None, callbacks=[callback])
        return model.get_weights()

    alone = trained(_ResetWhereRowsJump(windows), validate=False)
    kept = trained(StatefulResets(windows), validate=True)
    leaked = trained(_ResetWhereRowsJump(windows), validate=True)
    assert windows == 10
    assert all(np.allclose(a, b, atol=1e-6) for a, b in zip(alone, kept))
    assert not all(np.allclose(a, b, atol=1e-6) for a, b in zip(alone, leaked))


def test_the_notebooks_ptb_dataset_refuses_data_too_short_for_one_batch():
    ptb_dataset = notebook_function("stateful_dataset")
    with pytest.raises(ValueError, match="x: 11 steps are too few"):
        ptb_dataset(np.arange(11), 2, 5)


@pytest.mark.parametrize("n_tokens, batch_size, num_steps", [(1906, 8, 10), (70, 4, 5), (97, 5, 2), (250, 3, 41)])
def test_tokens_never_read_counted_on_positions_equal_the_layout_arithmetic(n_tokens, batch_size, num_steps):
    # (the notebook printed this for the fables: 58 of 1,906 tokens never read)
    seen = set()
    for x, y in batching.ptb_batches(np.arange(n_tokens), batch_size, num_steps):
        seen.update(x.numpy().ravel().tolist())
        seen.update(y.numpy().ravel().tolist())
    assert n_tokens - len(seen) == batching.ptb_layout(n_tokens, batch_size, num_steps).never_read


def _text_loss(model, batches, reset_every_batch=False):
    """The notebook's loss_on_text: predict + loss (Keras 3.13's test_on_batch returns a running mean)."""
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    batching.reset_stateful(model)
    losses = []
    for x, y in batches:
        if reset_every_batch:
            batching.reset_stateful(model)
        losses.append(float(loss_fn(y, model.predict_on_batch(x))))
    return float(np.mean(losses))


def test_memory_is_worth_more_to_a_stateful_lm_trained_on_batches_in_order():
    # The notebook's word-level model and training until round 6 (fables, 8 x 10, Embedding 32, LSTM 64, Adam 0.01,
    # 20 epochs, a reset at each pass; the notebook now reads characters), once on the batches in order and once
    # shuffled anew every epoch. Resetting the state before
    # every batch costs the model trained in order much more (0.91 vs 0.03 on TF 2.21 / Keras 3.15).
    ids, vocab = batching.corpus_ids()
    one_pass = batching.ptb_batches(ids, 8, 10)

    class ResetAtEachPass(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            batching.reset_stateful(self.model)

    worth = {}
    for name, batches in [("in order", one_pass), ("shuffled", one_pass.shuffle(100, seed=1))]:
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input(batch_shape=(8, 10), dtype="int32"),
                                  keras.layers.Embedding(len(vocab), 32),
                                  keras.layers.LSTM(64, return_sequences=True, stateful=True),
                                  keras.layers.Dense(len(vocab))])
        model.compile(keras.optimizers.Adam(0.01), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.fit(batches, epochs=20, shuffle=False, verbose=0, callbacks=[ResetAtEachPass()])
        worth[name] = _text_loss(model, one_pass, reset_every_batch=True) - _text_loss(model, one_pass)
    assert worth["in order"] > 0 and worth["in order"] > worth["shuffled"] + 0.3, worth


def test_the_notebooks_stateful_resets_keeps_every_stateful_layer_gru_and_nested_models_too():
    # A reader: the callback used get_layer("lstm"), so it would not work on their model. It now walks the
    # model as reset_stateful does: here a GRU inside a nested model and an LSTM not named "lstm".
    StatefulResets = notebook_function("StatefulResets", *_STATEFUL_HELPERS)
    inner = keras.Sequential([keras.Input(batch_shape=(2, 3, 4)),
                              keras.layers.GRU(5, return_sequences=True, stateful=True)])
    model = keras.Sequential([keras.Input(batch_shape=(2, 3, 4)), inner,
                              keras.layers.LSTM(6, return_sequences=True, stateful=True, name="decoder")])
    layers = [inner.layers[0], model.get_layer("decoder")]
    x = np.random.default_rng(0).random((2, 3, 4)).astype("float32")

    def values():
        return [state.numpy() for layer in layers for state in layer.states]

    model.predict_on_batch(x)                              # training's state: not zero
    training = values()
    keep = StatefulResets(batches_per_pass=3)
    keep.set_model(model)
    keep.on_test_begin()
    assert len(training) == 3 and all(not np.any(v) for v in values())   # GRU h; LSTM h, c: all zeroed for validation
    model.predict_on_batch(2 * x)                          # validation moves the state
    assert not all(np.array_equal(a, b) for a, b in zip(training, values()))
    keep.on_test_end()
    assert all(np.array_equal(a, b) for a, b in zip(training, values()))   # every layer's state put back


@pytest.mark.parametrize("epoch_size, steps_per_epoch, epochs", [(5, 3, 5), (4, 6, 2), (4, 4, 3), (3, 1, 7)])
def test_the_notebooks_stateful_resets_resets_exactly_where_the_rows_jump_in_a_fresh_fit(epoch_size, steps_per_epoch,
                                                                                         epochs):
    # The notebook's callback counts the batches of a fit across Keras epochs: right whether a Keras epoch is shorter
    # than a pass, longer, or exactly one pass (then it resets as each epoch starts).
    StatefulResets = notebook_function("StatefulResets", *_STATEFUL_HELPERS)
    model = exercises.stateful_model(2, 3)
    zero = exercises.zero_state_batches(model, StatefulResets(epoch_size), epoch_size, steps_per_epoch, epochs)
    assert zero == list(range(0, steps_per_epoch * epochs, epoch_size))


def test_the_notebooks_stateful_resets_is_wrong_when_a_fit_resumes_which_is_exercise_2():
    # Exercise 2 (a fit that resumes a run on the stream skipped to where it stopped) exists because the notebook's
    # callback counts from the start of the fit: it resets 6 batches late here, and exercise 2's answer does not.
    StatefulResets = notebook_function("StatefulResets", *_STATEFUL_HELPERS)
    reset_callback = answer(NOTEBOOK, "reset_callback", {"reset_stateful": batching.reset_stateful})
    model = exercises.stateful_model(2, 3)
    resumed = {"windows_per_row": 5, "steps_per_epoch": 3, "epochs": 4, "initial_epoch": 2}  # its batch 0 is batch 6
    ours = exercises.zero_state_batches(model, StatefulResets(5), **resumed)
    right = exercises.zero_state_batches(model, reset_callback(5), **resumed)
    assert right == [0, 4, 9] and ours == [0, 5, 10]


def _generate(stateful_model, vocab_size, embedding, units, prompt, length, one_row_at_a_time=True, seed=0):
    """docs/batching.md's sampling loop: the stateful model's layers built for one row of any length, given its
    weights, read the prompt once, then only each sampled id. With ``one_row_at_a_time=False``, the loop the page
    held until round 10: a stateless copy re-reads the whole text at every step."""
    stateful = one_row_at_a_time
    copy = keras.Sequential([keras.Input(batch_shape=(1, None), dtype="int32"),
                             keras.layers.Embedding(vocab_size, embedding),
                             keras.layers.LSTM(units, return_sequences=True, stateful=stateful),
                             keras.layers.Dense(vocab_size)])
    copy.set_weights(stateful_model.get_weights())
    if stateful:
        batching.reset_stateful(copy)
    rng = np.random.default_rng(seed)
    text = list(prompt)
    logits = copy.predict_on_batch(np.array([text]))[0, -1]
    for _ in range(length):
        p = np.exp(logits.astype("float64") - logits.max())
        text.append(int(rng.choice(len(p), p=p / p.sum())))
        logits = copy.predict_on_batch(np.array([text[-1:] if stateful else text]))[0, -1]
    return text


def test_the_docs_generation_loop_reads_a_prompt_once_then_one_character_at_a_time():
    # Text generation left the notebook (round 10) for docs/batching.md: a stateful model built for [2, 5] batches
    # takes no batch of one; its layers built for one row, fed the prompt once and then each sampled id, sample
    # exactly what a stateless copy re-reading the whole text at every step samples.
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input(batch_shape=(2, 5), dtype="int32"), keras.layers.Embedding(12, 4),
                              keras.layers.LSTM(6, return_sequences=True, stateful=True), keras.layers.Dense(12)])
    with pytest.raises(Exception):
        model.predict_on_batch(np.zeros((1, 7), "int32"))
    text = _generate(model, 12, 4, 6, prompt=[1, 2, 3], length=12)
    assert len(text) == 15 and text[:3] == [1, 2, 3] and all(0 <= t < 12 for t in text)
    assert text == _generate(model, 12, 4, 6, prompt=[1, 2, 3], length=12, one_row_at_a_time=False)


# --------------------------------------------------------------------------- round 11: your own series, one row at a time


@pytest.mark.parametrize("n, features, batch_size, num_steps", [(4000, 3, 8, 20), (103, 2, 4, 5), (50, 1, 1, 7),
                                                                (64, 3, 8, 8)])
def test_the_notebooks_series_dataset_cuts_x_and_its_own_y_into_rows_that_continue(n, features, batch_size,
                                                                                    num_steps):
    # The notebook's series_dataset: ptb_dataset's layout for x [N, features] with its own targets y [N, 1] (not x
    # shifted). Each feature of step t holds t (times 1, 2, ...) and y holds -t, so a value says where it sits.
    series_dataset = notebook_series_dataset()
    t = np.arange(n, dtype="float32")
    x = t[:, None] * np.arange(1, features + 1, dtype="float32")
    y = -t[:, None]
    dataset, windows_per_row = series_dataset(x, y, batch_size, num_steps)
    batches = [(bx.numpy(), by.numpy()) for bx, by in dataset]
    row_len = n // batch_size
    assert len(batches) == windows_per_row == row_len // num_steps  # y is its own array: no extra step
    for k, (bx, by) in enumerate(batches):
        assert bx.shape == (batch_size, num_steps, features) and by.shape == (batch_size, num_steps, 1)
        expected = np.arange(batch_size)[:, None] * row_len + k * num_steps + np.arange(num_steps)  # row s, window k
        np.testing.assert_array_equal(bx[..., 0], expected)
        np.testing.assert_array_equal(bx[..., -1], expected * features)  # every feature of the same steps
        np.testing.assert_array_equal(by[..., 0], -expected)  # y: the same steps as x, not one later
    one_feature = [bx.numpy() for bx, _ in series_dataset(t, -t, batch_size, num_steps)[0]]  # [N] works too
    np.testing.assert_array_equal(np.stack(one_feature), np.stack([bx[..., 0] for bx, _ in batches]))


def test_the_notebooks_one_row_copy_fed_step_by_step_computes_what_the_stateful_model_computes_on_its_batches():
    # The notebook's prediction cell: room_model's layers built for one row of any length, given the weights of the
    # model trained on [batch_size, num_steps] batches, reset, fed one step at a time. Row 1 of two consecutive
    # batches read by the batched model, the whole row at once and the row step by step all give the same outputs
    # (the check Proof 1 printed until round 10); reset before every step, they do not.
    room_model = notebook_function("room_model")
    reset_stateful = notebook_function("reset_stateful", "stateful_layers")
    keras.utils.set_random_seed(0)
    batched = room_model((2, 4, 3))
    online = room_model((1, None, 3))
    online.set_weights(batched.get_weights())
    rows = np.random.default_rng(0).normal(size=(2, 8, 3)).astype("float32")
    reset_stateful(batched)
    by_batches = np.concatenate([batched.predict_on_batch(rows[:, :4]), batched.predict_on_batch(rows[:, 4:])], 1)
    reset_stateful(online)
    at_once = online.predict_on_batch(rows[1:2])
    steps, reset_each = [], []
    for reset_every_step, outputs in [(False, steps), (True, reset_each)]:
        reset_stateful(online)
        for t in range(8):
            if reset_every_step:
                reset_stateful(online)
            outputs.append(online.predict_on_batch(rows[1:2, t:t + 1])[0, 0])
    assert np.abs(by_batches[1] - at_once[0]).max() < 1e-5
    assert np.abs(np.array(steps) - at_once[0]).max() < 1e-5
    assert np.abs(np.array(reset_each) - at_once[0]).max() > 1e-3


def test_the_notebooks_callback_puts_the_state_back_after_evaluate_and_after_fits_validation():
    # Proof 2 (in the notebook until round 12) called evaluate with the callback, because fit validates that way (with
    # its callbacks). Here both: after evaluate, and inside fit (a probe listed first reads the state as validation starts and when the epoch ends,
    # after validation), the state equals training's; the notebook's ForgetsTrainingState leaves validation's state.
    StatefulResets = notebook_function("StatefulResets", *_STATEFUL_HELPERS)
    state_variables = notebook_function("state_variables", "stateful_layers")

    class ForgetsTrainingState(StatefulResets):
        def on_test_end(self, logs=None):
            pass

    class Probe(keras.callbacks.Callback):
        def on_test_begin(self, logs=None):
            self.before = [state.numpy() for state in state_variables(self.model)]

        def on_epoch_end(self, epoch, logs=None):
            self.after = [state.numpy() for state in state_variables(self.model)]

    def same(first, second):
        return all(np.array_equal(a, b) for a, b in zip(first, second))

    ids = np.random.default_rng(2).integers(0, 20, size=100)
    train = batching.ptb_batches(ids[:64], 2, 3, repeat=True)
    valid = batching.ptb_batches(ids[64:], 2, 3)
    for callback_class, kept in [(StatefulResets, True), (ForgetsTrainingState, False)]:
        model = _named_lstm_model()
        model.predict_on_batch(np.ones((2, 3), "int32"))  # a training state that is not zero
        before = [state.numpy() for state in state_variables(model)]
        model.evaluate(valid, callbacks=[callback_class(10)], verbose=0)
        assert same(before, [state.numpy() for state in state_variables(model)]) == kept
        probe = Probe()
        model.fit(train, steps_per_epoch=4, epochs=1, validation_data=valid, shuffle=False, verbose=0,
                  callbacks=[probe, callback_class(10)])
        assert any(np.abs(v).max() > 0 for v in probe.before)
        assert same(probe.before, probe.after) == kept


# --------------------------------------------------------------------------- round 12: windows_per_row, the room helper


def _notebook_code_lines(prefix):
    """The lines of the notebook's code cells that start (unindented) with ``prefix``, comments removed."""
    import nbformat

    from tests.notebook_answers import ROOT

    path = ROOT / "notebooks" / f"{NOTEBOOK}.ipynb"
    cells = [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    found = [line.split("#")[0].strip() for cell in cells for line in cell.splitlines() if line.startswith(prefix)]
    return found, cells


def test_the_notebooks_builders_return_the_batches_in_one_pass_and_no_cell_counts_them_by_hand():
    # A reader (round 11): the notebook gave StatefulResets len(train_batches) and then advised repeat=True with
    # steps_per_epoch=K, where len() raises TypeError ("The dataset is infinite"). Round 12 counted windows_per_row by
    # hand, one line per builder, with two formulas a learner could mix up (a reader, round 14: resets would land in
    # the wrong places silently). Since round 14 the builders return (dataset, windows_per_row): the code that cuts
    # the rows counts them, repeated or not, and every top-level windows_per_row comes from a builder call.
    ptb_dataset = notebook_function("stateful_dataset")
    series_dataset = notebook_series_dataset()
    map_dataset = _docs_map_dataset()
    for n, batch_size, num_steps in [(70, 4, 5), (1000, 8, 10), (97, 3, 7), (31, 1, 29), (3200, 8, 10), (60, 4, 5)]:
        ids = np.arange(n)
        for build in (ptb_dataset, map_dataset):
            dataset, windows_per_row = build(ids, batch_size, num_steps)
            assert windows_per_row == len(list(dataset)) == batching.ptb_layout(n, batch_size, num_steps).epoch_size
            repeated, same = build(ids, batch_size, num_steps, repeat=True)
            assert same == windows_per_row
            with pytest.raises(TypeError, match="infinite"):
                len(repeated)  # the trap the old len() line met
        x, y = np.zeros((n, 3), "float32"), np.zeros((n, 1), "float32")
        dataset, windows_per_row = series_dataset(x, y, batch_size, num_steps)
        assert windows_per_row == len(list(dataset)) == n // batch_size // num_steps
    _, cells = _notebook_code_lines("")
    top_level = [line.split("#")[0].strip() for cell in cells for line in cell.splitlines() if line[:1].strip()]
    counted = [line for line in top_level if re.match(r"[\w, ]*windows_per_row\s*=", line)]
    assert counted and all(re.search(r"= (stateful|map)_dataset\(", line) for line in counted), counted
    assert not any("StatefulResets(len(" in cell or "ForgetsTrainingState(len(" in cell for cell in cells)


def _notebook_rows_follow():
    """Copy 4's check, rows_follow(dataset, x, batch_size): its three lines (``stretch = ...``, ``read = ...``,
    ``in_order = ...``) run on any dataset. Until round 25's third edit a function, rows_follow, in a check cell of its
    own (two readers: "a cell that checks things I can't use"); then folded into copy 4; since round 25's fourth edit
    (two readers: "copy 4 should be a short template") in the cell after copy 4, which says what copy 4 built."""
    check = _docs_block("### What copy 4 built (the notebook's check cell until round 26)")  # round 26: to the docs
    lines = [line for line in check.splitlines() if line.startswith(("stretch = ", "read = np.concatenate(", "in_order = all("))]
    assert len(lines) == 3, lines
    code = compile("\n".join(lines), "copy 4's check", "exec")

    def rows_follow(dataset, x, batch_size):
        scope = {"np": np, "train": dataset, "x": x, "BATCH_SIZE": batch_size}
        exec(code, scope)  # noqa: S102 - our own notebook
        return scope["in_order"]
    return rows_follow


def test_the_notebooks_rows_follow_is_true_for_the_builders_and_false_when_the_rows_break():
    # The cell after copy 4 prints "row s of the batches reads x from minute s * 400 on, in order": row s of the
    # batches, read in order, is the s-th stretch of x. True for the builder on several layouts (text and a series with features); False for the obvious
    # cut, for shuffled batches, and for rows in another order.
    ptb_dataset = notebook_function("stateful_dataset")
    series_dataset = notebook_series_dataset()
    rows_follow = _notebook_rows_follow()
    for n, batch_size, num_steps in [(70, 4, 5), (97, 3, 7), (1000, 8, 10), (31, 1, 29)]:
        ids = np.random.default_rng(n).integers(0, 50, size=n)
        assert rows_follow(ptb_dataset(ids, batch_size, num_steps)[0], ids, batch_size)
        x = np.random.default_rng(n).normal(size=(n, 3)).astype("float32")
        assert rows_follow(series_dataset(x, x[:, :1], batch_size, num_steps)[0], x, batch_size)
    positions = np.arange(70)
    obvious = tf.data.Dataset.from_tensor_slices(positions).batch(5, drop_remainder=True).batch(4, drop_remainder=True)
    assert not rows_follow(obvious.map(lambda x: (x, x)), positions, 4)
    dataset, _ = ptb_dataset(positions, 4, 5)
    assert not rows_follow(dataset.skip(1).concatenate(dataset.take(1)), positions, 4)  # batches 1, 2, 0
    assert not rows_follow(dataset.map(lambda x, y: (tf.reverse(x, [0]), y)), positions, 4)
    # the rest of the old check cell (round 25's third edit took it out): copy 1 on the grid's 70 tokens gives the
    # three NumPy lines' batches and targets (its equality with batching.ptb_batches: the test above this one's)
    xs, ys = [np.stack(part) for part in zip(*dataset.as_numpy_iterator())]
    assert np.array_equal(xs, positions[:68].reshape(4, 17)[:, :15].reshape(4, 3, 5).swapaxes(0, 1))
    assert np.array_equal(ys, positions[:68].reshape(4, 17)[:, 1:16].reshape(4, 3, 5).swapaxes(0, 1))


def test_the_docs_gradienttape_block_after_copy_4_resets_and_validates_where_fit_does(capsys):
    # Round 25, third edit (a reader: "where does the reset go in a custom loop?"): a markdown block after copy 4
    # showed the loop's resets. Round 26, second pass (a reader: "many of my models use custom loops; that is where
    # I'd reset in the wrong place"): a runnable cell instead, with its own train_step, the reset at each pass's
    # start and the save/restore around validation. Run after copy 4 (8 rows of 40 minutes), it prints that its
    # loss, val_loss and weights equal fit's (with StatefulResets); without the reset at a pass's start, other
    # weights and losses, and it says so. Round 27, third pass: the cell moved to docs/batching.md (paying for the
    # guards cell below), run here as it ran in the notebook; the notebook links it in one sentence.
    loop = _docs_block("### Copy 4 without fit")
    assert loop.startswith("# copy 4 without fit")
    assert "tf.GradientTape()" in loop and "state.assign(value)" in loop and "fit(" not in loop
    pass_start = "    reset_stateful(looped)                                 # a pass starts: every row at its beginning"
    assert pass_start in loop
    scope = _room_recipe_scope()
    capsys.readouterr()

    def run(code):
        cell_scope = dict(scope)
        exec(compile(code, "the notebook's loop", "exec"), cell_scope)  # noqa: S102 - our own notebook
        return cell_scope, capsys.readouterr().out

    ran, printed = run(loop)
    assert printed == "this loop == copy 4's fit: loss per pass True, val_loss per pass True, weights True\n"
    assert len(ran["loop_history"]["val_loss"]) == 3
    _, printed = run(loop.replace(pass_start, "    pass"))
    assert printed == "this loop == copy 4's fit: loss per pass False, val_loss per pass False, weights False\n"


def test_the_docs_guards_block_after_copy_4_shows_both_silent_errors_copy_3_prevents(capsys):
    # Round 27 (a reader: "show copy 3's two silent errors instead of only naming them"): the cell after copy 4 fits
    # copy 4's model with Keras epochs of half a pass, validating mid-pass, with copy 3 and with copy 3 less its
    # save/restore: only copy 3 gives training its own state back after validation (the next half pass then differs).
    # With steps_per_execution=4, Keras calls on_train_batch_begin before batches 0, 4, 8 only, and copy 3 refuses it.
    # Round 27, second pass (two readers: "reads like a test suite"): the cell moved to docs/batching.md, run here as
    # it ran in the notebook. Round 27, third pass: a shorter, probe-free version is back in the notebook (next test).
    guards = _docs_block("### Copy 3's guards at work")
    assert "# copy 3's two guards at work" in guards
    assert "class NoRestore(StatefulResets)" in guards and "steps_per_execution=4" in guards
    scope = _room_recipe_scope()  # 8 rows of 40 minutes: 10 batches per pass
    capsys.readouterr()
    exec(compile(guards, "docs/batching.md", "exec"), scope)  # noqa: S102 - our own notebook
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 4, printed
    assert printed[0].startswith("StatefulResets: training's state back after validation True, next loss ")
    assert printed[1].startswith("NoRestore: training's state back after validation False, next loss ")
    assert printed[0].split("next loss ")[1] != printed[1].split("next loss ")[1]
    assert printed[2] == "steps_per_execution=4, one pass of 10 batches: on_train_batch_begin before batches [0, 4, 8]... only"
    assert printed[3] == "copy 3 refuses it: StatefulResets needs compile(steps_per_execution=1), got 4"


def test_the_notebooks_guards_cell_after_copy_4_shows_both_guards_of_copy_3_at_work(capsys):
    # Round 27, third pass (both readers of the second pass: "show copy 3's two guards at work inside the notebook",
    # short and plain): the cell after copy 4 fits copy 4's model with Keras epochs of half a pass (validation
    # mid-pass), with copy 3 and with copy 3 less guard 2 (its on_test_begin/on_test_end do nothing), and prints the
    # loss of the half pass after validation for each; then copy 3 refuses steps_per_execution=4.
    guards = _notebook_cell("# copy 3's guards at work")
    assert "class WithoutGuard2(StatefulResets)" in guards and "steps_per_execution=4" in guards
    assert "lambda" not in guards and len(guards.strip().splitlines()) <= 20
    scope = _room_recipe_scope()  # 8 rows of 40 minutes: 10 batches per pass, epochs of 5 batches
    capsys.readouterr()

    def run(code):
        exec(compile(code, "the notebook's guards cell", "exec"), dict(scope))  # noqa: S102 - our own notebook
        return capsys.readouterr().out.splitlines()

    printed = run(guards)
    assert len(printed) == 3, printed
    assert printed[0].startswith("copy 3:          loss of the half pass after validation ")
    assert printed[1].startswith("without guard 2: loss of the half pass after validation ")
    guarded, unguarded = (float(line.rsplit(" ", 1)[1]) for line in printed[:2])
    assert unguarded > guarded  # the note: from validation's state, the next half pass's loss rises
    assert printed[2] == "guard 1, copy 3 refuses: StatefulResets needs compile(steps_per_execution=1), got 4"
    # copy 3's loss is the loss with no validation at all: guard 2 leaves training as if validation never ran
    unvalidated = run(guards.replace("validation_data=val,", "validation_data=None,"))
    assert [float(line.rsplit(" ", 1)[1]) for line in unvalidated[:2]] == [guarded, guarded], unvalidated


def _notebook_markdown_block(marker):
    """The ```python block of the notebook's one markdown cell that holds ``marker``."""
    import nbformat

    from tests.notebook_answers import ROOT

    path = ROOT / "notebooks" / f"{NOTEBOOK}.ipynb"
    cells = [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown" and marker in c.source]
    assert len(cells) == 1, f"{path.name}: {len(cells)} markdown cells hold {marker!r}"
    start = cells[0].index("```python\n") + 10
    return cells[0][start:cells[0].index("\n```", start)]


def test_the_notebooks_short_gradienttape_loop_trains_exactly_as_fit_with_the_bare_callback():
    # Round 27, fourth pass (both readers of the third pass: "a SHORT GradientTape loop inline, next to the bare
    # technique"): the markdown block after the bare-technique cell, run on that cell's model and batches, gives the
    # weights that cell's fit with ResetEachPass gives (same seed, same passes); without its reset line it does not.
    loop = _notebook_markdown_block("Without `fit`, your own loop")
    assert "tf.GradientTape()" in loop and "lstm.reset_state()" in loop and len(loop.splitlines()) <= 10
    assert "toy.repeat(30)" in loop
    bare = _notebook_cell("# the technique, bare")
    assert "epochs=30" in bare and "class ResetEachPass" in bare
    scope = {"np": np, "tf": tf, "keras": keras}
    exec(compile(_notebook_cell("positions = np.arange(70)"), "the toy stream", "exec"), scope)  # noqa: S102
    layout = _notebook_cell("batches = windows.swapaxes(0, 1)")
    exec(compile(layout.split("plots.ptb_grid")[0], "the layout", "exec"), scope)  # noqa: S102 - our own notebook
    passes = 4  # the notebook's 30 passes, shortened

    def weights(code):
        run = dict(scope)
        exec(compile(code, "the notebook", "exec"), run)  # noqa: S102 - our own notebook
        return run["model"].get_weights()

    fitted = weights(bare.replace("epochs=30", f"epochs={passes}").split("\nprint(")[0])
    model_only = bare.split("class ResetEachPass")[0]  # the same seed, model and compile, no fit
    looped = weights(model_only + loop.replace("toy.repeat(30)", f"toy.repeat({passes})"))
    assert max(np.abs(a - b).max() for a, b in zip(fitted, looped)) < 1e-6
    no_reset = weights(model_only + loop.replace("toy.repeat(30)", f"toy.repeat({passes})")
                       .replace("lstm.reset_state()", "pass"))
    assert max(np.abs(a - b).max() for a, b in zip(fitted, no_reset)) > 1e-3


@pytest.mark.parametrize("steps_per_epoch", [2, 3, 5])
def test_the_notebooks_callback_on_a_repeated_dataset_with_steps_per_epoch_resets_only_where_the_rows_jump(
        steps_per_epoch):
    # The notebook's recipe, variant 2: fit(dataset.repeat(), steps_per_epoch=K, validation_data=...) with
    # StatefulResets(windows_per_row), windows_per_row from the notebook's ptb_dataset. The state is zero exactly before the
    # batches that start a row again (read from the data: x[:, 0] is each row's first token), and between any other
    # two batches nothing changes it, validation included (here after every K batches, mid-pass when K < 3).
    ptb_dataset = notebook_function("stateful_dataset")
    StatefulResets = notebook_function("StatefulResets", *_STATEFUL_HELPERS)
    state_variables = notebook_function("state_variables", "stateful_layers")
    repeated, windows_per_row = ptb_dataset(np.arange(70), 4, 5, repeat=True)  # the count from the builder
    assert windows_per_row == 3
    epochs = 4
    total = steps_per_epoch * epochs
    row_starts = [g for g, (x, _) in enumerate(repeated.take(total)) if np.array_equal(x[:, 0], np.arange(4) * 17)]
    assert row_starts == list(range(0, total, windows_per_row))
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input(batch_shape=(4, 5), dtype="int32"), keras.layers.Embedding(80, 4),
                              keras.layers.LSTM(6, return_sequences=True, stateful=True), keras.layers.Dense(80)])
    model.compile(keras.optimizers.Adam(0.01), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.predict_on_batch(np.ones((4, 5), "int32"))  # a state that is not zero before the fit

    class Probe(keras.callbacks.Callback):  # listed after StatefulResets: sees the state each batch starts from
        seen, zero, changed, last = 0, [], [], None

        def on_train_batch_begin(self, batch, logs=None):
            now = [state.numpy() for state in state_variables(self.model)]
            if all(not np.any(v) for v in now):
                self.zero.append(self.seen)
            elif self.last is not None and not all(np.array_equal(a, b) for a, b in zip(now, self.last)):
                self.changed.append(self.seen)
            self.seen += 1

        def on_train_batch_end(self, batch, logs=None):
            self.last = [state.numpy() for state in state_variables(self.model)]

    probe = Probe()
    valid, _ = ptb_dataset(np.arange(70, 150) % 80, 4, 5)
    history = model.fit(repeated, steps_per_epoch=steps_per_epoch, epochs=epochs, validation_data=valid,
                        callbacks=[StatefulResets(windows_per_row), probe], shuffle=False, verbose=0)
    assert len(history.history["val_loss"]) == epochs  # validated after every Keras epoch of K batches
    assert probe.zero == row_starts and probe.changed == []


def test_room_series_is_a_first_order_lag_of_its_readings_and_the_same_for_the_same_seed():
    # The notebook's simulated room left the notebook for this helper (round 12): the same series as before.
    x, y = batching.room_series()
    assert x.shape == (4000, 3) and y.shape == (4000, 1) and x.dtype == y.dtype == np.float32
    outside, heater, window = x[:, 0].astype("float64"), x[:, 1], x[:, 2]
    assert set(np.unique(heater)) == {0.0, 1.0} and set(np.unique(window)) == {0.0, 1.0}
    assert np.all(heater.reshape(-1, 40) == heater.reshape(-1, 40)[:, :1])  # on or off for 40 minutes at a time
    assert np.all(window.reshape(-1, 25) == window.reshape(-1, 25)[:, :1])  # open or shut for 25 minutes
    room = y[:, 0].astype("float64")
    leak = np.where(window[1:] == 1, 0.3, 0.1)
    step = leak * (outside[1:] - room[:-1]) + 0.05 * heater[1:]
    assert y[0, 0] == 0 and np.abs(room[1:] - room[:-1] - step).max() < 1e-5  # float32 rounding only
    assert round(float(y[3200:3300].var()), 3) == 0.094  # the variance the notebook quotes
    again, same = batching.room_series()
    assert np.array_equal(again, x) and np.array_equal(same, y)
    other, _ = batching.room_series(seed=1)
    assert not np.array_equal(other, x)
    short_x, short_y = batching.room_series(57)  # any length: the last on/off run cut short
    assert short_x.shape == (57, 3) and short_y.shape == (57, 1)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"n_minutes": 1}, ValueError, "n_minutes must be >= 2"),
    ({"n_minutes": 100.0}, TypeError, "n_minutes must be an int"),
    ({"seed": -1}, ValueError, "seed must be >= 0"),
    ({"seed": "0"}, TypeError, "seed must be an int"),
])
def test_room_series_bad_inputs_name_the_argument(kwargs, error, match):
    with pytest.raises(error, match=match):
        batching.room_series(**kwargs)


def _docs_block(heading):
    """The first ```python block under ``heading`` in docs/batching.md."""
    from tests.notebook_answers import ROOT

    text = (ROOT / "docs" / "batching.md").read_text(encoding="utf-8")
    section = text[text.index(heading):]
    return section[section.index("```python\n") + 10:section.index("\n```", section.index("```python\n"))]


def test_the_docs_gradienttape_loop_validates_mid_pass_without_changing_training(capsys):
    # The GradientTape copy left the notebook in round 12 for docs/batching.md. Run on a small room series with the
    # notebook's functions: it prints loss and val_loss after every 20 batches, and its weights equal those of the
    # same loop without validation (training goes on from its own state); without the restore, they differ.
    code = _docs_block("## A GradientTape loop")
    assert "if k % 20 == 19:" in code and "state.assign(value)" in code
    series_dataset = notebook_series_dataset()
    room_model = notebook_function("room_model")
    features, temperature = batching.room_series(400)
    needs = {"np": np, "tf": tf, "keras": keras, "room_model": room_model, "BATCH_SIZE": 2, "NUM_STEPS": 5,
             "reset_stateful": notebook_function("reset_stateful", "stateful_layers"),
             "state_variables": notebook_function("state_variables", "stateful_layers"),
             "train": series_dataset(features[:320], temperature[:320], 2, 5)[0],
             "val": series_dataset(features[320:], temperature[320:], 2, 5)[0], "windows_per_row": 32}

    def weights_after(source):
        scope = dict(needs)
        exec(compile(source, "docs/batching.md", "exec"), scope)  # noqa: S102 - our own docs
        return [w.copy() for w in scope["looped"].get_weights()]

    validated = weights_after(code)
    printed = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in printed] == ["after batch 19", "after batch 39", "after batch 59"]
    assert all("val_loss" in line for line in printed)
    unvalidated = weights_after(code.replace("if k % 20 == 19:", "if False:"))
    forgetting = weights_after(code.replace("state.assign(value)", "pass"))
    assert all(np.array_equal(a, b) for a, b in zip(validated, unvalidated))
    assert not all(np.array_equal(a, b) for a, b in zip(validated, forgetting))


# --------------------------------------------------------------------------- round 13: steps_per_execution, the loop by hand


def _notebook_cell(marker):
    """The source of the notebook's one code cell that holds ``marker``."""
    import nbformat

    from tests.notebook_answers import ROOT

    path = ROOT / "notebooks" / f"{NOTEBOOK}.ipynb"
    cells = [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code" and marker in c.source]
    assert len(cells) == 1, f"{path.name}: {len(cells)} code cells hold {marker!r}"
    return cells[0]


def test_keras_calls_on_train_batch_begin_once_per_execution_which_is_why_the_callback_refuses_it():
    # The notebook says so: with compile(steps_per_execution=N), fit calls on_train_batch_begin once per N batches
    # (with the first batch's index), so a callback that counts calls cannot reset before a batch inside an execution.
    calls = []

    class Spy(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            calls.append(batch)

    model = _named_lstm_model()
    model.compile(keras.optimizers.Adam(0.01), keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  steps_per_execution=3)
    model.fit(batching.ptb_batches(np.arange(100) % 20, 2, 3, repeat=True), steps_per_epoch=9, epochs=1,
              callbacks=[Spy()], shuffle=False, verbose=0)
    assert calls == [0, 3, 6]


@pytest.mark.parametrize("steps_per_execution", [2, 5])
def test_the_notebooks_stateful_resets_refuses_steps_per_execution_before_training_changes_anything(
        steps_per_execution):
    # A reader (round 12): with steps_per_execution > 1 the callback would reset in the wrong places, silently.
    # It now raises in on_train_begin, naming the setting, before the first batch: weights, state, optimizer unchanged.
    StatefulResets = notebook_function("StatefulResets", *_STATEFUL_HELPERS)
    state_variables = notebook_function("state_variables", "stateful_layers")
    model = _named_lstm_model()
    model.compile(keras.optimizers.Adam(0.01), keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  steps_per_execution=steps_per_execution)
    model.predict_on_batch(np.ones((2, 3), "int32"))  # a state that is not zero
    weights = [w.copy() for w in model.get_weights()]
    state = [v.numpy() for v in state_variables(model)]
    data = batching.ptb_batches(np.arange(100) % 20, 2, 3, repeat=True)
    with pytest.raises(ValueError, match=f"steps_per_execution=1\\), got {steps_per_execution}"):
        model.fit(data, steps_per_epoch=10, epochs=1, callbacks=[StatefulResets(5)], shuffle=False, verbose=0)
    assert all(np.array_equal(a, b) for a, b in zip(weights, model.get_weights()))
    assert all(np.array_equal(a, v.numpy()) for a, v in zip(state, state_variables(model)))
    assert int(model.optimizer.iterations.numpy()) == 0
    model.compile(keras.optimizers.Adam(0.01), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(data, steps_per_epoch=10, epochs=1, callbacks=[StatefulResets(5)], shuffle=False, verbose=0)  # 1: trains


def _room_recipe_scope():
    """The notebook's recipe (copies 1 to 4), run on the room series with 8 rows of 40 minutes
    (10 batches per pass, so the test is quick); returns the cell's names."""
    scope = {"np": np, "tf": tf, "keras": keras, "BATCH_SIZE": 8, "NUM_STEPS": 40,
             "StatefulResets": notebook_function("StatefulResets", *_STATEFUL_HELPERS),
             "reset_stateful": notebook_function("reset_stateful", "stateful_layers"),
             "state_variables": notebook_function("state_variables", "stateful_layers"),
             "stateful_dataset": notebook_function("stateful_dataset")}
    scope["features"], scope["temperature"] = batching.room_series()
    recipe = _notebook_cell("def room_model(")  # copy 4 of 4; it sets NUM_STEPS = 10 (40 batches per pass)
    assert "\nNUM_STEPS = 10 " in recipe and "\nBATCH_SIZE = 8 " in recipe
    exec(compile(recipe.replace("\nNUM_STEPS = 10 ", "\nNUM_STEPS = 40 "), "recipe", "exec"), scope)  # noqa: S102
    assert scope["windows_per_row"] == 10 and len(scope["room_history"].history["val_loss"]) == 3
    return scope


def test_the_docs_one_pass_gradienttape_loop_reaches_the_weights_of_fit_with_stateful_resets(capsys):
    # The loop under the recipe does the callback's work by hand (a reset before each pass and before validation):
    # it ends with the recipe's weights and prints the recipe's val_loss; without the reset at a pass's start, not.
    # In the notebook until round 25 (it left to pay for the three-line layout cell), now in docs/batching.md.
    scope = _room_recipe_scope()
    code = _docs_block("### One pass per Keras epoch, as the recipe")
    capsys.readouterr()
    exec(compile(code, "gradienttape loop", "exec"), dict(scope))  # noqa: S102
    printed = capsys.readouterr().out.splitlines()
    recipe = [f"{v:.3f}" for v in scope["room_history"].history["val_loss"]]
    assert [line.split("val_loss ")[1] for line in printed[:3]] == recipe
    assert printed[3] == "the same weights as the recipe's fit: True"
    pass_start = "    reset_stateful(looped)                                 # a pass starts"
    assert pass_start in code
    exec(compile(code.replace(pass_start, "    pass  # "), "no reset", "exec"), dict(scope))  # noqa: S102
    assert capsys.readouterr().out.splitlines()[3] == "the same weights as the recipe's fit: False"


def test_the_docs_k_batch_run_validates_mid_pass_and_after_each_pass_matches_the_recipe():
    # The steps_per_epoch=K cell (in the notebook until round 23, now docs/batching.md): K = half a pass, val_loss
    # twice per pass; every second value (after a whole pass) is the recipe's, and the weights end equal: validating
    # in the middle of a pass left training unchanged.
    scope = _room_recipe_scope()
    code = _docs_block("## Validate every K batches")
    assert "steps_per_epoch=K" in code and "StatefulResets(windows_per_row)" in code
    exec(compile(code, "K batches", "exec"), scope)  # noqa: S102 - our own docs
    assert scope["K"] == 5
    stepped = scope["stepped_history"].history["val_loss"]
    assert len(stepped) == 6 and stepped[1::2] == scope["room_history"].history["val_loss"]
    assert stepped[0::2] != stepped[1::2]  # mid-pass values: another point of training
    assert all(np.array_equal(a, b) for a, b in zip(scope["stepped"].get_weights(), scope["trained"].get_weights()))


def test_the_notebooks_recipe_is_four_copy_cells_in_order_that_run_alone_without_the_workbook(capsys):
    # Round 21 (two readers in a row): the recipe said "collect four earlier cells". Now "copy 1 of 4" to "copy 4 of 4"
    # are code cells in order, each at most 25 lines, with no helper call, defining the builder, the reset
    # functions, the callback and the model + fit; run in order with numpy, tensorflow and keras only (and the
    # learner's series), they train the stateful model. Exercise 2 stays unanswered: no copy cell reads the epoch.
    # Round 23: a short markdown note may follow each copy (what to watch for), but no other code cell comes between.
    import nbformat

    from tests.notebook_answers import ROOT

    cells = [c for c in nbformat.read(ROOT / "notebooks" / f"{NOTEBOOK}.ipynb", as_version=4).cells]
    marked = [i for i, c in enumerate(cells) if c.cell_type == "code" and re.search(r"^# copy \d of 4", c.source, re.M)]
    assert len(marked) == 4, marked
    between = [c for c in cells[marked[0]:marked[-1] + 1] if c.cell_type == "code"]
    assert len(between) == 4, "only markdown may sit between the copy cells"
    sources = [cells[i].source for i in marked]
    for n, source in enumerate(sources, 1):
        assert f"# copy {n} of 4" in source and len(source.strip().splitlines()) <= 25
        assert not re.search(r"\b(helpers|batching|plots|tf1)\.", source), f"copy {n} calls a helper"
        assert "on_epoch_begin" not in source and "params[" not in source  # exercise 2's answer is not here
    for name in ("def stateful_dataset(", "def reset_stateful(", "class StatefulResets(", "def room_model("):
        assert sum(name in source for source in sources) == 1
    assert "shuffle=False" in sources[3] and "batch_shape=batch_shape" in sources[3]
    features, temperature = batching.room_series()
    scope = {"np": np, "tf": tf, "keras": keras, "features": features, "temperature": temperature}
    for source in sources:
        source = source.replace("\nNUM_STEPS = 10 ", "\nNUM_STEPS = 40 ")  # 10 batches per pass: quicker
        exec(compile(source, "copy cell", "exec"), scope)  # noqa: S102 - our own notebook
    assert scope["windows_per_row"] == 10 and len(scope["room_history"].history["val_loss"]) == 3
    printed = capsys.readouterr().out
    assert "10 batches in one pass" in printed and "val_loss after each pass" in printed


def _many_series_scope():
    """The notebook's three-line cell for many series (the toy series, their groups, the figure), then copy 5
    (grouped_stateful_dataset, GroupResets, the toy demo; in docs/batching.md in round 26, back in the notebook since
    round 27's second pass), on copies 1-3."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    StatefulResets = notebook_function("StatefulResets", *_STATEFUL_HELPERS)
    scope = {"np": np, "stateful_dataset": notebook_function("stateful_dataset"), "StatefulResets": StatefulResets,
             "reset_stateful": notebook_function("reset_stateful", "stateful_layers"), "plots": plots, "plt": plt}
    exec(compile(_notebook_cell("groups = [by_length[i:i + 4]"), "three lines", "exec"), scope)  # noqa: S102
    plt.close("all")
    # round 26: copies 5 and 6 are one cell (copy 5: the dataset and GroupResets), paying for the split of the
    # one-step prediction cell; round 26's second pass: copy 5 to docs/batching.md (paying for the runnable
    # GradientTape loop); round 27's second pass: back in the notebook, right after the three-line cell
    exec(compile(_notebook_cell("# copy 5"), "copy 5", "exec"), scope)  # noqa: S102 - our own notebook
    return scope


def _zero_state_batches(data, callback, features=1, epochs=2):
    """The batches (counted across epochs) a real fit starts from a zero state, with ``callback``; the losses."""
    model = keras.Sequential([keras.Input(batch_shape=(4, 5, features)),
                              keras.layers.LSTM(2, return_sequences=True, stateful=True), keras.layers.Dense(features)])
    model.compile("sgd", "mse")
    lstm, zero, seen = model.layers[0], [], []

    class Spy(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            if all(float(np.abs(state.numpy()).max()) == 0.0 for state in lstm.states):
                zero.append(len(seen))
            seen.append(batch)

    history = model.fit(data, epochs=epochs, shuffle=False, verbose=0, callbacks=[callback, Spy()])
    return zero, history.history["loss"]


def test_the_notebooks_many_series_cell_groups_series_of_different_lengths_and_resets_at_each_group(capsys):
    # Round 23 (three readers: "several sensors or users?", "different lengths: told, not shown", "the densest, least
    # reusable section; rows start at [200, 0, 600, 400] puzzled me"): copy 5, grouped_stateful_dataset(series_list,
    # batch_size, num_steps) -> (dataset, pass_lengths), sorts 8 toy series by length into two groups of 4 rows, cuts
    # each group to its shortest and joins it end to end (copy 1), one group after the other; the demo prints which
    # series (by index) each batch's rows read, and where GroupResets (copy 3 for groups) resets: batches 0 and 3.
    # Round 25: pass_lengths is batches_per_group (a reader: the name said nothing).
    scope = _many_series_scope()
    printed = capsys.readouterr().out.splitlines()
    series_list = scope["series_list"]
    assert len({len(one) for one in series_list}) > 4 and scope["batches_per_group"] == [3, 4]  # different lengths
    # round 25 (two readers lost at copy 5): the trick first in three lines (sort, 4 at a time, cut to the group's
    # shortest and join), printed group by group, with a figure of the groups stacked in rows (tests/test_plots.py)
    assert printed[:2] == [
        "group 0: series [2, 0, 6, 4], [16, 17, 17, 18] steps, cut to 16; joined, 64 steps: copy 1's 4 rows of 16 "
        "are the 4 series",
        "group 1: series [3, 7, 5, 1], [21, 22, 23, 24] steps, cut to 21; joined, 84 steps: copy 1's 4 rows of 21 "
        "are the 4 series"]
    assert all(np.array_equal(joined, np.concatenate(batching_rows)) for joined, batching_rows in zip(
        scope["joined"], [[series_list[i][:16] for i in (2, 0, 6, 4)], [series_list[i][:21] for i in (3, 7, 5, 1)]]))
    # round 26: the three-line cell counts what the cuts drop (it cuts); copy 5 prints the batches per group and
    # where GroupResets resets (the figure above it names batches 0-6 group by group; the batch check is below)
    assert printed[2:] == ["cutting each group to its shortest drops 10 of 158 steps",
                           "batches per group: [3, 4]; resets before batches [0, 3] of each pass"]
    by_length = sorted(range(8), key=lambda i: len(series_list[i]))  # stable: equal lengths keep their order
    batches = [bx.numpy() for bx, _ in scope["many_series"]]
    assert len(batches) == 7
    for g, (first, count) in enumerate([(0, 3), (3, 4)]):
        group = by_length[4 * g:4 * g + 4]
        rows = np.concatenate(batches[first:first + count], axis=1)
        for s, index in enumerate(group):  # row s reads series by_length[4g + s] from its start, nothing else
            assert np.array_equal(rows[s], series_list[index][:rows.shape[1]])
        assert rows.shape[1] <= min(len(series_list[i]) for i in group)
    # the batches' rows, as copy 5's demo printed them until round 26 (series // 100, steps % 100)
    assert [((bx[:, 0] // 100).tolist(), bx[0, 0] % 100, bx[0, -1] % 100) for bx in batches] == [
        ([2, 0, 6, 4], 0, 4), ([2, 0, 6, 4], 5, 9), ([2, 0, 6, 4], 10, 14), ([3, 7, 5, 1], 0, 4),
        ([3, 7, 5, 1], 5, 9), ([3, 7, 5, 1], 10, 14), ([3, 7, 5, 1], 15, 19)]
    cut = sum(len(series_list[i]) - min(len(series_list[j]) for j in by_length[4 * g:4 * g + 4])
              for g in range(2) for i in by_length[4 * g:4 * g + 4])
    assert cut == 10 and sum(map(len, series_list)) == 158  # counted again, group by group
    assert scope["resets"].group_starts == {0, 3}
    # in a real fit over the groups, two epochs: a zero state at each group's first batch and only there; copy 3
    # itself (an int: one pass of 7) resets at 0 and 7 only
    data = scope["many_series"].map(lambda x, y: (tf.cast(x[..., None], "float32") / 800,
                                                  tf.cast(y[..., None], "float32") / 800))
    assert _zero_state_batches(data, scope["GroupResets"](scope["batches_per_group"]))[0] == [0, 3, 7, 10]
    assert _zero_state_batches(data, scope["StatefulResets"](7))[0] == [0, 7]
    # round 25, third edit (a reader: make copy 5 a first-class recipe): the dataset and the resets, copies 5 and 6,
    # were two cells; round 26 (to pay for splitting the one-step prediction cell) one cell, copy 5, at most 25
    # lines, without helper calls; round 26's second pass: in docs/batching.md, still one block without helper calls;
    # round 27's second pass (4 of the last 5 readers asked): a notebook cell again, at most 25 lines
    dataset_code = code = _notebook_cell("# copy 5")
    assert len(code.strip().splitlines()) <= 25
    assert "class GroupResets(" in code and code.index("def grouped") < code.index("class GroupResets(")
    assert not re.search(r"\b(helpers|batching|plots|tf1)\.", code)  # a copy cell: no helper call
    assert issubclass(scope["GroupResets"], scope["StatefulResets"]) and "on_test_begin" not in code  # copy 3's
    # round 25 (a reader): GroupResets passed sum(pass_lengths) as "windows_per_row"; copy 3's argument is now
    # batches_per_pass (one pass over the data: windows_per_row for one stream, every group's pass here)
    assert scope["GroupResets"]([3, 4]).batches_per_pass == 7 and "windows_per_row=" not in code
    assert re.search(r"^# copy 5", dataset_code, re.M)


def test_the_notebooks_grouped_dataset_on_series_of_three_lengths_with_features_trains_with_resets_per_group():
    # Copy 5 on data like a learner's: 13 series of [steps, 2 features] in three length classes, given in a shuffled
    # order; the 13th (one too few for a group of 4) is left out. Each group's rows are its series, in length order,
    # whole windows only; a real 3-epoch fit with GroupResets starts from a zero state exactly at each group's first
    # batch, every epoch, and its loss falls.
    scope = _many_series_scope()
    rng = np.random.default_rng(3)
    lengths = [21, 22, 23, 24, 33, 34, 35, 36, 48, 49, 50, 51, 60]
    order = rng.permutation(len(lengths))
    series_list = [np.sin(np.arange(lengths[i])[:, None] * [0.3, 0.5] + i).astype("float32") for i in order]
    dataset, batches_per_group = scope["grouped_stateful_dataset"](series_list, 4, 5)
    assert batches_per_group == [(21 - 1) // 5, (33 - 1) // 5, (48 - 1) // 5] == [4, 6, 9]
    batches = [(bx.numpy(), by.numpy()) for bx, by in dataset]
    assert len(batches) == sum(batches_per_group) and batches[0][0].shape == (4, 5, 2)
    by_length = sorted(range(len(series_list)), key=lambda i: len(series_list[i]))
    first = 0
    for g, count in enumerate(batches_per_group):
        xs = np.concatenate([bx for bx, _ in batches[first:first + count]], axis=1)
        ys = np.concatenate([by for _, by in batches[first:first + count]], axis=1)
        for s in range(4):
            one = series_list[by_length[4 * g + s]]
            assert np.array_equal(xs[s], one[:5 * count]) and np.array_equal(ys[s], one[1:5 * count + 1])
        first += count
    assert not any(np.array_equal(bx[0, :5], series_list[by_length[12]][:5]) for bx, _ in batches)  # left out
    zero, losses = _zero_state_batches(dataset, scope["GroupResets"](batches_per_group), features=2, epochs=3)
    assert zero == [0, 4, 10, 19, 23, 29, 38, 42, 48]
    assert all(np.isfinite(losses)) and losses[-1] < losses[0]
    # round 25, third edit (a reader: series with their own targets, e.g. sensors): y=, a list of target series,
    # as copy 1's y: y[i][t] is the target of series i at step t, cut and joined as the series are
    targets = [np.cumsum(one[:, :1], axis=0) for one in series_list]
    dataset, batches_per_group = scope["grouped_stateful_dataset"](series_list, 4, 5, y=targets)
    assert batches_per_group == [21 // 5, 33 // 5, 48 // 5] == [4, 6, 9]
    batches = [(bx.numpy(), by.numpy()) for bx, by in dataset]
    assert batches[0][1].shape == (4, 5, 1)
    first = 0
    for g, count in enumerate(batches_per_group):
        xs = np.concatenate([bx for bx, _ in batches[first:first + count]], axis=1)
        ys = np.concatenate([by for _, by in batches[first:first + count]], axis=1)
        for s in range(4):
            i = by_length[4 * g + s]
            assert np.array_equal(xs[s], series_list[i][:5 * count]) and np.array_equal(ys[s], targets[i][:5 * count])
        first += count


def test_the_fables_state_runs_across_the_joins_between_fables_inside_the_rows():
    # The markdown after the many-series cell: the fables share one stream, so a row's state runs across the joins
    # (a blank line) between fables. Counted here from the notebook's own batches (until round 23 the cell printed
    # "12 joins; the state runs across 12"): every join of the training stream, read inside a row.
    stateful_dataset = notebook_function("stateful_dataset")
    fables = batching.load_corpus().lower().split("\n\n")  # as the notebook's fables cell reads them
    vocab = {c: i for i, c in enumerate(sorted(set("\n\n".join(fables))))}
    train_ids = np.array([vocab[c] for c in "\n\n".join(fables[:-3])], dtype=np.int32)
    text_batches, _ = stateful_dataset(train_ids, 8, 10)
    nl = vocab["\n"]
    joins = int(np.sum((train_ids[:-1] == nl) & (train_ids[1:] == nl)))
    read = np.concatenate([bx.numpy() for bx, _ in text_batches], axis=1)  # what each row reads, in order
    inside = sum(int(np.sum((row[:-1] == nl) & (row[1:] == nl))) for row in read)
    assert joins == len(fables[:-3]) - 1 == 12 and inside == joins
