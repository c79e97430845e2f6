"""Small models a learner brings after the notebooks, shared by tests/test_models_learners_bring*.py."""

from __future__ import annotations

import keras


class TwoHeads(keras.Model):
    """A subclassed model whose call returns a tuple (no output names)."""

    def __init__(self, width_b: int = 2):
        super().__init__()
        self.a, self.b = keras.layers.Dense(1), keras.layers.Dense(width_b)

    def call(self, x):
        return self.a(x), self.b(x)


def two_outputs(kind: str = "list", *, hidden: bool = False, seed: int = 1) -> keras.Model:
    """A functional model with outputs named ``a`` (1 unit) and ``b`` (2 units), as a list or dict."""
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((3,))
    features = keras.layers.Dense(4, activation="tanh")(inputs) if hidden else inputs
    a, b = keras.layers.Dense(1, name="a")(features), keras.layers.Dense(2, name="b")(features)
    return keras.Model(inputs, {"a": a, "b": b} if kind == "dict" else [a, b])


class Counter(keras.layers.Layer):
    """Counts its calls in a non-trainable weight, in inference too, and scales by the count."""

    def build(self, shape):
        self.seen = self.add_weight(shape=(), initializer="zeros", trainable=False, name="seen")

    def call(self, x):
        self.seen.assign_add(1.0)
        return x * self.seen
