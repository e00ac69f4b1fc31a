"""Running a training model: extend a loaded model at run time, train it over arrays, predict.

`fit`, `predict` and `evaluate` only call signature runners, so they drive an edgelite
interpreter and a LiteRT one alike.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from edgelite.schema import save

from .build import as_model, make_trainable


def extend(model, num_threads: int | None = None, **options):
    """An edgelite Interpreter of `model` (an Interpreter, Model, bytes or path: any `.tflite`,
    one never converted for training) extended with the `train`, `infer`, `save` and `restore`
    signatures. `options` go to `make_trainable` (trainable, loss, optimizer, ...)."""
    from ..api import Interpreter

    if isinstance(model, Interpreter):
        num_threads = num_threads if num_threads is not None else model._num_threads
        model = model._model
    training = make_trainable(as_model(model), **options)
    return Interpreter(model_content=save(training), num_threads=num_threads)


@dataclass
class History:
    losses: list = field(default_factory=list)        # one per step
    epoch_losses: list = field(default_factory=list)  # mean per epoch
    steps_per_second: float = 0.0


def _feed(details: dict, arrays: dict, idx) -> dict:
    return {n: np.asarray(arrays[n][idx], details[n]["dtype"]) for n in arrays}


def fit(interpreter, inputs: dict, labels, epochs: int = 1, batch_size: int = 32,
        shuffle: bool = True, seed: int = 0, callback=None) -> History:
    """Train over `inputs` ({train input name: array with a leading sample axis}) and `labels`
    in batches (the last one smaller); `callback(epoch, step, loss)` after each step."""
    runner = interpreter.get_signature_runner("train")
    details = runner.get_input_details()
    label_names = [n for n in details if n not in inputs]
    unknown = [n for n in inputs if n not in details]
    if len(label_names) != 1 or unknown:
        raise ValueError(f"the train signature takes {list(details)}; got inputs "
                         f"{list(inputs)} and labels")
    arrays = {**inputs, label_names[0]: np.asarray(labels)}
    n = len(arrays[label_names[0]])
    rng = np.random.default_rng(seed)
    history = History()
    start, steps = time.perf_counter(), 0
    for epoch in range(epochs):
        order = rng.permutation(n) if shuffle else np.arange(n)
        epoch_losses = []
        for step, first in enumerate(range(0, n, batch_size)):
            idx = order[first:first + batch_size]
            loss = float(runner(**_feed(details, arrays, idx))["loss"])
            epoch_losses.append(loss)
            steps += 1
            if callback is not None:
                callback(epoch, step, loss)
        history.losses += epoch_losses
        history.epoch_losses.append(float(np.mean(epoch_losses)))
    history.steps_per_second = steps / max(time.perf_counter() - start, 1e-9)
    return history


def predict(interpreter, inputs: dict, batch_size: int = 256, signature: str = "infer",
            output: str | None = None) -> np.ndarray:
    """The named (default: first) output of `signature` over `inputs`, batch by batch."""
    runner = interpreter.get_signature_runner(signature)
    details = runner.get_input_details()
    n = len(next(iter(inputs.values())))
    parts = []
    for first in range(0, n, batch_size):
        out = runner(**_feed(details, inputs, slice(first, first + batch_size)))
        parts.append(out[output] if output is not None else next(iter(out.values())))
    return np.concatenate(parts)


def evaluate(interpreter, inputs: dict, labels, batch_size: int = 256,
             signature: str = "infer") -> float:
    """Classification accuracy: the share of argmax(first output) equal to `labels`."""
    scores = predict(interpreter, inputs, batch_size, signature)
    return float(np.mean(scores.argmax(-1) == np.asarray(labels)))
