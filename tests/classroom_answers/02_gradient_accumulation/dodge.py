"""Answers of notebook 02 that break the device's rule (the issue's: one tape through model.call)."""
import tensorflow as tf

POINTS = {"accumulate": 0, "means_gradient": 0}


def accumulate(model, loss_fn, x, y, max_examples):
    # the whole batch at once, through model.call instead of model(...)
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model.call(x, training=True))
    return tape.gradient(loss, model.trainable_variables)


def means_gradient(model, micro_batches):
    # the micro-batches joined again, inside a compiled function
    @tf.function
    def joined(x, y):
        with tf.GradientTape() as tape:
            loss = tf.square(tf.reduce_mean(model(x, training=True)) - tf.reduce_mean(y))
        return tape.gradient(loss, model.trainable_variables)

    return joined(tf.concat([x for x, _ in micro_batches], 0), tf.concat([y for _, y in micro_batches], 0))
