"""Smaller mistakes in notebook 05's exercises (soft_update gives no partial credit)."""
import tensorflow as tf

POINTS = {"soft_update": 0, "remember": 3}


def soft_update(source_vars, target_vars, tau, step):
    # the warm-up off by one: 1/step (and a copy at step 0 to dodge the division by zero)
    rate = max(tau, 1 / step) if step else 1.0
    for source, target in zip(source_vars, target_vars):
        target.assign(rate * source + (1.0 - rate) * target)


def remember(model):
    # a zip is an iterator: the first restore() uses it up
    pairs = zip(model.variables, [tf.identity(v) for v in model.variables])

    def restore():
        for variable, value in pairs:
            variable.assign(value)

    return restore
