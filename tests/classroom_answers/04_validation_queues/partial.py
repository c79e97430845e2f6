"""Smaller mistakes in notebook 04's exercises, worth part of the points."""

POINTS = {"mean_loss": 1, "validate_at": 4}


def mean_loss(model, dataset, loss_fn):
    # right, but counts the examples in a first pass of its own
    count = sum(int(x.shape[0]) for x, _ in dataset)
    return sum(float(loss_fn(y, model(x, training=False))) * int(x.shape[0]) for x, y in dataset) / count


def validate_at(train_ds, val_ds, train_step, val_sums, eval_steps):
    # right means, but every round starts the training stream over (a new iterator each time)
    curve, done = [], 0
    for step in eval_steps:
        for x, y in train_ds.take(step - done):
            train_step(x, y)
        done = step
        total, count = 0.0, 0
        for x, y in val_ds:
            batch_sum, n = val_sums(x, y)
            total, count = total + float(batch_sum), count + int(n)
        curve.append((step, total / count))
    return curve
