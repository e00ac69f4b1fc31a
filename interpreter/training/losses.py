"""Losses: each emits the loss (a scalar, the mean over every example and position, so any batch
size works) and its gradient with respect to the prediction, in closed form.

The cross-entropies take logits. When the model ends in the op that turns logits into
probabilities (SOFTMAX for the softmax losses, LOGISTIC for binary cross-entropy), training starts
from that op's input instead: the same loss, computed without the round trip through
probabilities, and its gradient exact.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .emit import Emitter, GradientError


@dataclass(frozen=True)
class Loss:
    name: str
    build: Callable      # (em, prediction, labels) -> (loss, d loss / d prediction)
    labels: Callable     # (prediction signature) -> (labels signature, dtype)
    logits_of: str | None  # the op whose input is the logits when the model ends in it
    doc: str


def _all_axes(em: Emitter, t: int) -> list:
    return list(range(len(em.sig(t))))


def _mean(em: Emitter, t: int) -> int:
    axes = _all_axes(em, t)
    return em.op("MEAN", [t, em.i32(axes)], keep_dims=False) if axes else t


def _classes(em: Emitter, logits: int) -> int:
    sig = em.sig(logits)
    if not sig or sig[-1] == -1:
        raise GradientError(f"the logits {list(sig)} need a static last (class) axis")
    return sig[-1]


def _softmax_ce(em: Emitter, logits: int, target: int):
    """Cross-entropy of softmax(logits) against a target distribution: its mean over the
    examples, and the gradient softmax * sum(target) - target, over the example count."""
    rank = len(em.sig(logits))
    log_p = em.op("LOG_SOFTMAX", [logits])
    nll = em.op("NEG", [em.sum(em.mul(target, log_p), [rank - 1])])
    mass = em.sum(target, [rank - 1], keep=True)
    grad = em.sub(em.mul(em.op("EXP", [log_p]), mass), target)
    return _mean(em, nll), em.divide_by(grad, em.count(nll, _all_axes(em, nll)))


def sparse_softmax_cross_entropy(em: Emitter, logits: int, labels: int):
    classes = _classes(em, logits)
    index = em.op("EXPAND_DIMS", [labels, em.i32(-1)])
    hot = em.cast(em.op("EQUAL", [index, em.i32(np.arange(classes))], dtype="bool"),
                  "float32")
    return _softmax_ce(em, logits, hot)


def softmax_cross_entropy(em: Emitter, logits: int, labels: int):
    _classes(em, logits)
    return _softmax_ce(em, logits, labels)


def mean_squared_error(em: Emitter, prediction: int, target: int):
    diff = em.sub(prediction, target)
    loss = _mean(em, em.mul(diff, diff))
    return loss, em.divide_by(em.scale(diff, 2.0), em.count(diff, _all_axes(em, diff)))


def binary_cross_entropy(em: Emitter, logits: int, target: int):
    """max(z, 0) - z*t + log(1 + exp(-|z|)) per element: the stable form of
    -t log(sigmoid z) - (1 - t) log(1 - sigmoid z)."""
    z = logits
    soft = em.op("LOG", [em.add(em.op("EXP", [em.op("NEG", [em.op("ABS", [z])])]),
                                em.scalar(1.0))])
    per = em.add(em.sub(em.op("RELU", [z]), em.mul(z, target)), soft)
    grad = em.sub(em.op("LOGISTIC", [z]), target)
    return _mean(em, per), em.divide_by(grad, em.count(per, _all_axes(em, per)))


def _sparse_labels(sig):
    return tuple(sig[:-1]), "int32"


def _like_prediction(sig):
    return tuple(sig), "float32"


LOSSES = {loss.name: loss for loss in (
    Loss("sparse_softmax_cross_entropy", sparse_softmax_cross_entropy, _sparse_labels, "SOFTMAX",
         "class indices (int32) against logits [..., classes]"),
    Loss("softmax_cross_entropy", softmax_cross_entropy, _like_prediction, "SOFTMAX",
         "one-hot or probability labels (float32) against logits [..., classes]"),
    Loss("mean_squared_error", mean_squared_error, _like_prediction, None,
         "float32 targets shaped like the output"),
    Loss("binary_cross_entropy", binary_cross_entropy, _like_prediction, "LOGISTIC",
         "0/1 (or probability) float32 targets against logits"),
)}
ALIASES = {"sparse_categorical_crossentropy": "sparse_softmax_cross_entropy",
           "categorical_crossentropy": "softmax_cross_entropy", "mse": "mean_squared_error",
           "bce": "binary_cross_entropy", "cross_entropy": "sparse_softmax_cross_entropy"}


def get_loss(name: str) -> Loss:
    key = ALIASES.get(name, name)
    if key not in LOSSES:
        raise GradientError(f"unknown loss {name!r}; losses: "
                            + "; ".join(f"{n} ({v.doc})" for n, v in LOSSES.items()))
    return LOSSES[key]
