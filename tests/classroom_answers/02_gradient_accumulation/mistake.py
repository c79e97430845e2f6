"""Plausible mistakes in notebook 02's exercises."""
import tensorflow as tf

POINTS = {"accumulate": 0, "means_gradient": 0}


def accumulate(model, loss_fn, x, y, max_examples):
    # adds the micro-batch gradients: the sum, not the batch's mean
    n = int(x.shape[0])
    total = [tf.zeros_like(v) for v in model.trainable_variables]
    for start in range(0, n, max_examples):
        with tf.GradientTape() as tape:
            loss = loss_fn(y[start:start + max_examples], model(x[start:start + max_examples], training=True))
        total = [t + g for t, g in zip(total, tape.gradient(loss, model.trainable_variables))]
    return total


def means_gradient(model, micro_batches):
    # plain accumulation: each micro-batch's own (mean - mean)**2, weighted by its size
    n = sum(int(x.shape[0]) for x, _ in micro_batches)
    total = [tf.zeros_like(v) for v in model.trainable_variables]
    for x, y in micro_batches:
        with tf.GradientTape() as tape:
            loss = tf.square(tf.reduce_mean(model(x, training=True)) - tf.reduce_mean(y))
        share = int(x.shape[0]) / n
        total = [t + share * g for t, g in zip(total, tape.gradient(loss, model.trainable_variables))]
    return total
