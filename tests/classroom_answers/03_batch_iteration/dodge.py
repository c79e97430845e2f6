"""Answers of notebook 03 that dodge the exercise: run the pipeline; never carry the state over."""
import keras
import numpy as np
from helpers import batching

POINTS = {"batch_positions": 0, "reset_callback": 0}


def batch_positions(k, n_tokens, batch_size, num_steps):
    # asks the producer instead of predicting it
    stream = batching.ptb_batches(np.arange(n_tokens), batch_size, num_steps, repeat=True)
    return next(iter(stream.skip(k)))[0].numpy()


def reset_callback(windows_per_row):
    # resets before every batch: never wrong about a jump, but the rows no longer continue
    class Always(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            batching.reset_stateful(self.model)

    return Always()
