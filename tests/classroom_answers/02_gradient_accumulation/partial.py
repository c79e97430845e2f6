"""Smaller mistakes in notebook 02's exercises: right only when the micro-batches are equal."""
import tensorflow as tf

POINTS = {"accumulate": 2, "means_gradient": 2}


def accumulate(model, loss_fn, x, y, max_examples):
    # averages the micro-batch gradients equally
    n = int(x.shape[0])
    grads = []
    for start in range(0, n, max_examples):
        with tf.GradientTape() as tape:
            loss = loss_fn(y[start:start + max_examples], model(x[start:start + max_examples], training=True))
        grads.append(tape.gradient(loss, model.trainable_variables))
    return [tf.add_n(list(g)) / len(grads) for g in zip(*grads)]


def means_gradient(model, micro_batches):
    # two passes, but the second weights each micro-batch's mean prediction equally
    n = sum(int(x.shape[0]) for x, _ in micro_batches)
    mean_pred = sum(float(tf.reduce_sum(model(x, training=True))) for x, _ in micro_batches) / n
    mean_true = sum(float(tf.reduce_sum(y)) for _, y in micro_batches) / n
    slope = 2 * (mean_pred - mean_true)
    total = [tf.zeros_like(v) for v in model.trainable_variables]
    for x, _ in micro_batches:
        with tf.GradientTape() as tape:
            share = tf.reduce_mean(model(x, training=True)) / len(micro_batches)
        total = [t + slope * g for t, g in zip(total, tape.gradient(share, model.trainable_variables))]
    return total
