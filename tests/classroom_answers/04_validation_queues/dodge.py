"""Answers of notebook 04 that dodge the exercise: the helper does the loop; values from a formula."""
import numpy as np
from helpers import validation

POINTS = {"mean_loss": 0, "validate_at": 0}


def mean_loss(model, dataset, loss_fn):
    return validation.evaluate(model, dataset, loss_fn)["loss"]


def validate_at(train_ds, val_ds, train_step, val_sums, eval_steps):
    # the answer: the right reads, but the means from a closed form of the example ids
    train_iterator, curve = iter(train_ds), []
    for step in range(max(eval_steps) + 1):
        if step > 0:
            train_step(*next(train_iterator))
        if step in eval_steps:
            ids = []
            for x, y in val_ds:
                val_sums(x, y)
                ids += np.asarray(x)[:, 0].tolist()
            curve.append((step, float(np.mean(np.array(ids) + 1.0)) * (step + 1.0)))
    return curve
