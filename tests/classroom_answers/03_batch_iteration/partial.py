"""Smaller mistakes in notebook 03's exercises, worth part of the points."""
import keras
import numpy as np
from helpers import batching

POINTS = {"batch_positions": 2, "reset_callback": 1}


def batch_positions(k, n_tokens, batch_size, num_steps):
    # right inside the first epoch; no wrap-around after it
    row_length = n_tokens // batch_size
    return np.arange(batch_size)[:, None] * row_length + k * num_steps + np.arange(num_steps)[None, :]


def reset_callback(epoch_size):
    # counts with Keras' `batch` argument, which starts again at 0 in every Keras epoch
    class ByKerasBatch(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            if batch % epoch_size == 0:
                batching.reset_stateful(self.model)

    return ByKerasBatch()
