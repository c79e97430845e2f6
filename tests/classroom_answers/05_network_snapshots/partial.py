"""Smaller mistakes in notebook 05's exercises (soft_update gives no partial credit)."""
import tensorflow as tf

POINTS = {"soft_update": 0, "remember": 3}


def soft_update(source_vars, target_vars, tau):
    # only the first variable
    source, target = source_vars[0], target_vars[0]
    target.assign(tau * source + (1.0 - tau) * target)


def remember(model):
    # a zip is an iterator: the first restore() uses it up
    pairs = zip(model.variables, [tf.identity(v) for v in model.variables])

    def restore():
        for variable, value in pairs:
            variable.assign(value)

    return restore
