"""Batch inference over Ray Data: `map_batches` with an actor pool of edgelite interpreters.

    result = predict("model.tflite", {"image": x}, workers=2, batch_size=256)
    result.outputs["Identity"]; result.per_worker   # samples, seconds, inferences/s per actor

Arrays: the data set is the batch numbers 0..ceil(n / batch_size)-1 (`ray.data.range`); an
actor takes its batches' samples from the object store (the arrays are put there once) and runs
them, so every batch is the same slice [k * batch_size, (k + 1) * batch_size) as in
`edgelite.interpreter.training.predict(..., batch_size)` and the outputs equal that single-
process run bit for bit (numpy's matrix products round differently at different batch sizes,
so the slices, not just the samples, must be the same). A `ray.data.Dataset` (read from files:
`ray.data.read_numpy`, `read_parquet`, ... for data sets no process holds) is scored row by
row in the batches Ray Data forms, its columns named as the model's inputs.

The pool's actors ask for a fractional CPU (`num_cpus`, default 1 / workers of one CPU... at
most 0.5): Ray Data's pool waits forever for whole CPUs a 2-CPU machine does not have free.
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from . import _ray

INDEX, WORKER, SECONDS = "__index__", "__worker__", "__seconds__"


class Scorer:
    """A Ray Data actor: one edgelite Interpreter of the model, called on batches."""

    def __init__(self, content: bytes, signature: str | None, arrays=None,
                 batch_size: int = 256, threads: int | None = 1):
        from edgelite.interpreter import Interpreter

        self.it = Interpreter(model_content=content, num_threads=threads)
        if arrays is not None and not isinstance(arrays, dict):  # an ObjectRef: shared memory
            arrays = _ray.ray().get(arrays)
        self.arrays, self.batch_size = arrays, batch_size
        self.worker = f"{os.uname().nodename}:{os.getpid()}"
        sigs = self.it.get_signature_list()
        if sigs:
            key = signature if signature is not None else next(iter(sigs))
            runner = self.it.get_signature_runner(key)
            self.inputs = list(runner.get_input_details())
            self.dtypes = {k: d["dtype"] for k, d in runner.get_input_details().items()}
            self._run = lambda feeds: dict(runner(**feeds))
        else:
            details = self.it.get_input_details()
            self.inputs = [d["name"] for d in details]
            self.dtypes = {d["name"]: d["dtype"] for d in details}
            self._run = self._invoke

    def _invoke(self, feeds: dict) -> dict:
        """Subgraph 0 with its inputs resized to the batch (a model without signatures)."""
        it = self.it
        details = it.get_input_details()
        for d in details:
            it.resize_tensor_input(d["index"], list(np.shape(feeds[d["name"]])))
        it.allocate_tensors()
        for d in details:
            it.set_tensor(d["index"], feeds[d["name"]])
        it.invoke()
        return {d["name"]: it.get_tensor(d["index"]).copy() for d in it.get_output_details()}

    def score(self, feeds: dict) -> dict:
        return {k: np.array(v) for k, v in self._run(
            {k: np.ascontiguousarray(feeds[k], self.dtypes[k]) for k in self.inputs}).items()}

    def __call__(self, batch: dict) -> dict:
        start = time.perf_counter()
        if self.arrays is not None:  # rows are batch numbers: score those slices
            parts, index = [], []
            for k in np.asarray(batch["id"]).tolist():
                sl = slice(k * self.batch_size, (k + 1) * self.batch_size)
                feeds = {name: a[sl] for name, a in self.arrays.items()}
                parts.append(self.score(feeds))
                index.append(np.arange(sl.start, sl.start + len(next(iter(feeds.values())))))
            out = {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}
            out[INDEX] = np.concatenate(index)
        else:
            out = self.score(batch)
            if INDEX in batch:
                out[INDEX] = np.asarray(batch[INDEX])
        rows = len(out[INDEX]) if INDEX in out else len(next(iter(out.values())))
        seconds = time.perf_counter() - start
        out[WORKER] = np.array([self.worker] * rows)
        out[SECONDS] = np.full(rows, seconds / max(rows, 1))
        return out


@dataclass
class Prediction:
    outputs: dict                      # output name -> array over the inputs, in order
    seconds: float
    per_worker: dict = field(default_factory=dict)  # worker -> {samples, seconds, per_second}

    @property
    def samples(self) -> int:
        return len(next(iter(self.outputs.values()))) if self.outputs else 0

    @property
    def per_second(self) -> float:
        return self.samples / max(self.seconds, 1e-9)


def _content(model) -> bytes:
    from edgelite.interpreter.training import as_model
    from edgelite.schema import save

    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model)
    return save(as_model(model))


def predict(model, inputs, workers: int = 2, batch_size: int = 256,
            signature: str | None = None, num_cpus: float | None = None,
            progress=None, threads: int | None = 1) -> Prediction:
    """Score `inputs` ({input name: samples}, one array for a one-input model, or a
    `ray.data.Dataset` of rows) with `model` on an actor pool of `workers` interpreters;
    `progress(done, total)` (arrays: samples; a Dataset: total None) as batches come back."""
    ray = _ray.ray()
    if not ray.is_initialized():
        _ray.init()
    import ray.data

    content = _content(model)
    num_cpus = num_cpus if num_cpus is not None else min(0.5, 1.0 / workers)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    pool = ray.data.ActorPoolStrategy(size=workers)
    start = time.perf_counter()
    if isinstance(inputs, ray.data.Dataset):
        ds, total = inputs, None
        kwargs = {"content": content, "signature": signature, "threads": threads}
        mapped = ds.map_batches(Scorer, fn_constructor_kwargs=kwargs, batch_size=batch_size,
                                compute=pool, num_cpus=num_cpus, batch_format="numpy")
    else:
        if not isinstance(inputs, dict):
            names = Scorer(content, signature).inputs
            if len(names) != 1:
                raise ValueError(f"the model has inputs {names}: pass {{name: array}}")
            inputs = {names[0]: inputs}
        arrays = {k: np.asarray(v) for k, v in inputs.items()}
        sizes = {len(a) for a in arrays.values()}
        if len(sizes) != 1:
            raise ValueError(f"the inputs have different sample counts {sorted(sizes)}")
        total = sizes.pop()
        batches = -(-total // batch_size)
        kwargs = {"content": content, "signature": signature, "arrays": ray.put(arrays),
                  "batch_size": batch_size, "threads": threads}
        ds = ray.data.range(batches, override_num_blocks=min(batches, 4 * workers))
        mapped = ds.map_batches(Scorer, fn_constructor_kwargs=kwargs, batch_size=1,
                                compute=pool, num_cpus=num_cpus, batch_format="numpy")
    parts, done = [], 0
    for batch in mapped.iter_batches(batch_size=None, batch_format="numpy"):
        parts.append(batch)
        done += len(batch[WORKER])
        if progress is not None:
            progress(done, total)
    seconds = time.perf_counter() - start
    if not parts:
        return Prediction({}, seconds)
    joined = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    per_worker = {}
    for w in np.unique(joined[WORKER]):
        mask = joined[WORKER] == w
        busy = float(joined[SECONDS][mask].sum())
        per_worker[str(w)] = {"samples": int(mask.sum()), "seconds": busy,
                              "per_second": float(mask.sum() / max(busy, 1e-9))}
    order = np.argsort(joined[INDEX], kind="stable") if INDEX in joined else slice(None)
    outputs = {k: v[order] for k, v in joined.items() if k not in (INDEX, WORKER, SECONDS)}
    return Prediction(outputs, seconds, per_worker)


def print_progress(done: int, total: int | None) -> None:
    """A progress callback: `scored done/total` redrawn on stderr."""
    sys.stderr.write(f"\rscored {done}" + (f"/{total}" if total else ""))
    sys.stderr.flush()
