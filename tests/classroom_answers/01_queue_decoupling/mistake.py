"""Plausible mistakes in notebook 01's exercises."""
import tensorflow as tf
from helpers import decoupling

POINTS = {"armijo_step": 0, "gradient_check": 0}


def armijo_step(iterator, model, loss_fn, shrink=0.5, c=1e-4, max_tries=30):
    # accepts the first step that lowers the loss at all: the sufficient decrease (c) is forgotten
    objective = decoupling.BatchObjective(model, loss_fn, next(iterator))
    theta = objective.initial_params()
    f0, g = objective(theta)
    t = 1.0
    for _ in range(max_tries):
        if objective(theta - t * g)[0] < f0:
            return t
        t *= shrink
    objective.assign(theta)
    return 0.0


def gradient_check(iterator, model, loss_fn, num_batches, h):
    # evaluates in training mode: Dropout changes the loss between the two evaluations
    @tf.function(reduce_retracing=True)
    def loss_and_grads(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        return loss, tape.gradient(loss, model.trainable_variables)

    variables = model.trainable_variables
    start = [v.numpy() for v in variables]
    pairs = []
    for _ in range(num_batches):
        x, y = next(iterator)
        _, grads = loss_and_grads(x, y)
        norm = float(tf.linalg.global_norm(grads))
        ends = []
        for sign in (1.0, -1.0):
            for v, w0, g in zip(variables, start, grads):
                v.assign(w0 + sign * h * g / norm)
            ends.append(float(loss_and_grads(x, y)[0]))
        for v, w0 in zip(variables, start):
            v.assign(w0)
        pairs.append((norm, (ends[0] - ends[1]) / (2 * h)))
    return pairs
