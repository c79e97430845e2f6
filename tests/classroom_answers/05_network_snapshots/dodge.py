"""Answers of notebook 05 that dodge the exercise (the issue's: get_weights through an alias)."""
import tensorflow as tf

POINTS = {"soft_update": 0, "remember": 0}


def soft_update(source_vars, target_vars, tau, step):
    # new variables in the list, the past network's own variables untouched
    rate = max(tau, 1 / (step + 1))
    for k, (source, target) in enumerate(zip(source_vars, target_vars)):
        target_vars[k] = tf.Variable(rate * source + (1.0 - rate) * target)


_take, _put = "get_weights", "set_weights"  # an alias made outside the function


def remember(model):
    saved = getattr(model, _take)()
    return lambda: getattr(model, _put)(saved)
