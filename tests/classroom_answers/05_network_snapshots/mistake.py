"""Plausible mistakes in notebook 05's exercises."""
import tensorflow as tf

POINTS = {"soft_update": 0, "remember": 0}


def soft_update(source_vars, target_vars, tau, step):
    # the warm-up forgotten: the plain soft update at every step
    for source, target in zip(source_vars, target_vars):
        target.assign(tau * source + (1.0 - tau) * target)


def remember(model):
    # the trainable variables only: BatchNorm's statistics and the Dropout seed are not kept
    saved = [tf.identity(v) for v in model.trainable_variables]

    def restore():
        for variable, value in zip(model.trainable_variables, saved):
            variable.assign(value)

    return restore
