"""Plausible mistakes in notebook 04's exercises."""

POINTS = {"mean_loss": 0, "validate_at": 0}


def mean_loss(model, dataset, loss_fn):
    # the average of the batch means: a smaller last batch counts as much as a full one
    means = [float(loss_fn(y, model(x, training=False))) for x, y in dataset]
    return sum(means) / len(means)


def validate_at(train_ds, val_ds, train_step, val_sums, eval_steps):
    # one validation iterator for all evaluations: used up after the first
    train_iterator, val_iterator, curve = iter(train_ds), iter(val_ds), []
    for step in range(max(eval_steps) + 1):
        if step > 0:
            train_step(*next(train_iterator))
        if step in eval_steps:
            total, count = 0.0, 0
            for x, y in val_iterator:
                batch_sum, n = val_sums(x, y)
                total, count = total + float(batch_sum), count + int(n)
            curve.append((step, total / count))
    return curve
