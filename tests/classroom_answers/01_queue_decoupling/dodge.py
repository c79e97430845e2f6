"""Answers of notebook 01 that break the rule: one dequeue per batch."""
import tensorflow as tf
from helpers import decoupling

POINTS = {"armijo_step": 0, "gradient_check": 0}


def armijo_step(iterator, model, loss_fn, shrink=0.5, c=1e-4, max_tries=30):
    # every trial reads a new batch, as a TF1 graph that dequeues at every run would
    objective = decoupling.BatchObjective(model, loss_fn, next(iterator))
    theta = objective.initial_params()
    f0, g = objective(theta)
    t = 1.0
    for _ in range(max_tries):
        trial = decoupling.BatchObjective(model, loss_fn, next(iterator))
        if trial(theta - t * g)[0] <= f0 - c * t * (g @ g):
            return t
        t *= shrink
    objective.assign(theta)
    return 0.0


def gradient_check(iterator, model, loss_fn, num_batches, h):
    # a new batch for every evaluation
    compute = decoupling.LossAndGradient(model, loss_fn)
    variables = model.trainable_variables
    start = [v.numpy() for v in variables]
    pairs = []
    for _ in range(num_batches):
        _, grads = compute(*next(iterator))
        norm = float(tf.linalg.global_norm(grads))
        ends = []
        for sign in (1.0, -1.0):
            for v, w0, g in zip(variables, start, grads):
                v.assign(w0 + sign * h * g / norm)
            ends.append(float(compute(*next(iterator))[0]))
        for v, w0 in zip(variables, start):
            v.assign(w0)
        pairs.append((norm, (ends[0] - ends[1]) / (2 * h)))
    return pairs
