"""Calibration: run the float model in edgelite's interpreter over a representative dataset and
record every float activation's range.

Ranges: "minmax" (the extremes seen), "percentile" (the given percentile at each end: outliers
clipped) or "mse" (the range whose 8-bit rounding and clipping error, estimated from a
histogram, is smallest). The last two take a second pass over the samples for histograms.
"""
from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping

import numpy as np

from edgelite.schema import Model, save

BINS = 2048
METHODS = ("minmax", "percentile", "mse")


# -- the samples ---------------------------------------------------------------------------------

def input_specs(model: Model) -> list:
    """[(tensor index, names a sample may use for it, shape, numpy dtype)] of subgraph 0."""
    sg = model.subgraphs[0]
    aliases: dict = {}
    for sig in model.signature_defs:
        if sig.subgraph_index == 0:
            for name, t in sig.inputs.items():
                aliases.setdefault(t, []).append(name)
    specs = []
    for k, t in enumerate(sg.inputs):
        tensor = sg.tensors[t]
        names = list(dict.fromkeys([*aliases.get(t, []), tensor.name, f"input_{k}"]))
        shape = tensor.shape_signature if tensor.shape_signature is not None else tensor.shape
        specs.append((t, names, tuple(shape), tensor.np_dtype))   # -1: a dynamic dim
    return specs


def samples(dataset, model: Model) -> list:
    """The representative dataset as a list of samples, each a list of arrays in the order of the
    model's inputs, shaped like them. Accepts what TensorFlow's `representative_dataset` yields
    (a callable giving lists of arrays or dicts by input name) or {input name: array with samples
    along its first axis} (an .npz's arrays), or an iterable of samples."""
    specs = input_specs(model)
    if isinstance(dataset, Mapping):
        columns = [_lookup(dataset, names, "the calibration data") for _, names, _, _ in specs]
        counts = {len(c) for c in columns}
        if len(counts) != 1:
            raise ValueError(f"calibration arrays hold different numbers of samples: "
                             f"{sorted(counts)}")
        return [[_fit(c[i:i + 1], spec) for c, spec in zip(columns, specs)]
                for i in range(counts.pop())]
    items = dataset() if isinstance(dataset, Callable) else dataset
    if not isinstance(items, Iterable):
        raise ValueError("representative_dataset must be a callable returning an iterable of "
                         "samples (lists of input arrays), or {input name: array}")
    out = []
    for item in items:
        if isinstance(item, Mapping):
            arrays = [_lookup(item, names, "a calibration sample") for _, names, _, _ in specs]
        elif isinstance(item, np.ndarray):
            arrays = [item]
        else:
            arrays = list(item)
        if len(arrays) != len(specs):
            raise ValueError(f"a calibration sample holds {len(arrays)} arrays; the model has "
                             f"{len(specs)} inputs")
        out.append([_fit(np.asarray(a), spec) for a, spec in zip(arrays, specs)])
    if not out:
        raise ValueError("the representative dataset is empty")
    return out


def _lookup(mapping, names: list, what: str):
    for name in names:
        if name in mapping:
            return np.asarray(mapping[name])
    if len(mapping) == 1 and len(names) and names[-1] == "input_0":
        return np.asarray(next(iter(mapping.values())))
    raise ValueError(f"{what} has no array for input {' or '.join(map(repr, names))} "
                     f"(it has: {', '.join(map(str, mapping)) or 'nothing'})")


def _fit(a: np.ndarray, spec) -> np.ndarray:
    """A sample as the input takes it: its shape (any size where the dim is dynamic, -1), or
    reshaped to it when the element counts agree."""
    _, names, shape, dtype = spec
    fits = a.ndim == len(shape) and all(s in (-1, d) for d, s in zip(a.shape, shape))
    if not fits:
        fixed = -1 not in shape
        if not fixed or a.size != int(np.prod(shape)):
            raise ValueError(f"calibration input {names[0]!r}: a sample has shape "
                             f"{list(a.shape)}; the model takes {list(shape)}"
                             + (" (-1: any size)" if not fixed else ""))
        a = a.reshape(shape)
    return a.astype(dtype, copy=False)


# -- progress ------------------------------------------------------------------------------------

class Progress:
    """Progress on stderr: rich's bar on a terminal (when rich is installed), else a plain line
    every 10 % (rich off a terminal leaves a blank line behind)."""

    def __init__(self, total: int, description: str, enabled: bool = True):
        self.total, self.done, self.enabled = total, 0, enabled
        self.description = description
        self._rich = None
        self._shown = -1
        if enabled and _is_terminal(sys.stderr):
            try:
                from rich.console import Console
                from rich.progress import Progress as RichProgress
            except ImportError:
                return
            self._rich = RichProgress(transient=True, console=Console(stderr=True))
            self._task = self._rich.add_task(description, total=total)
            self._rich.start()

    def advance(self) -> None:
        self.done += 1
        if not self.enabled:
            return
        if self._rich is not None:
            self._rich.update(self._task, advance=1)
            return
        tenth = self.done * 10 // max(self.total, 1)
        if tenth != self._shown:
            self._shown = tenth
            print(f"{self.description}: {self.done}/{self.total}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._rich is not None:
            self._rich.stop()


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):   # no isatty, or closed
        return False


# -- calibration ---------------------------------------------------------------------------------

def calibrate(model: Model, data: list, method: str = "minmax", percentile: float = 99.99,
              progress: bool = True) -> dict:
    """{tensor index: (lo, hi)} for every non-constant float32 tensor of subgraph 0, over the
    samples `data` (from `samples`)."""
    from edgelite.interpreter import Interpreter

    if method not in METHODS:
        raise ValueError(f"unknown calibration method {method!r}; choose one of "
                         f"{', '.join(METHODS)}")
    it = Interpreter(model_content=save(model), experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    sg = model.subgraphs[0]
    tracked = [i for i, t in enumerate(sg.tensors)
               if t.dtype == "float32" and (i in sg.inputs or model.constant(sg, i) is None)]
    views = {i: it.tensor(i) for i in tracked if _kept(it, i)}
    inputs = [t for t, _, _, _ in input_specs(model)]
    lo = {i: np.inf for i in views}
    hi = {i: -np.inf for i in views}
    passes = 1 if method == "minmax" else 2
    bar = Progress(len(data) * passes, f"calibrating on {len(data)} samples", progress)
    try:
        for sample in data:
            _invoke(it, inputs, sample)
            for i, view in views.items():
                lo[i], hi[i] = _widened(view(), lo[i], hi[i])
            bar.advance()
        ranges = {i: (lo[i], hi[i]) for i in views if np.isfinite(lo[i])}
        if method == "minmax":
            return ranges
        hists = {i: np.zeros(BINS, np.int64) for i in ranges}
        for sample in data:
            _invoke(it, inputs, sample)
            for i in ranges:
                a, b = ranges[i]
                if b > a:
                    hists[i] += np.histogram(views[i](), BINS, (a, b))[0]
            bar.advance()
    finally:
        bar.close()
    pick = _percentile_range if method == "percentile" else _mse_range
    return {i: (pick(hists[i], *ranges[i], percentile) if ranges[i][1] > ranges[i][0]
                else ranges[i]) for i in ranges}


def _widened(values: np.ndarray, lo: float, hi: float) -> tuple:
    """(lo, hi) widened to the values' extremes. A function, so that no array from tensor()
    outlives it: the next invoke() refuses to run while one is alive."""
    if not values.size:
        return lo, hi
    return min(lo, float(values.min())), max(hi, float(values.max()))


def _kept(it, i: int) -> bool:
    try:
        it.tensor(i)()
        return True
    except ValueError:  # a tensor no step reads or writes
        return False


def _invoke(it, inputs: list, sample: list) -> None:
    """Run one sample; inputs with dynamic dims are resized to it first."""
    current = {d["index"]: tuple(d["shape"]) for d in it.get_input_details()}
    resized = False
    for t, value in zip(inputs, sample):
        if current.get(t, value.shape) != value.shape:
            it.resize_tensor_input(t, list(value.shape))
            resized = True
    if resized:
        it.allocate_tensors()
    for t, value in zip(inputs, sample):
        it.set_tensor(t, value)
    it.invoke()


def _percentile_range(hist, lo, hi, percentile) -> tuple:
    """The [lower, upper] percentiles of the histogram (each tail clipped by 100 - p %)."""
    cdf = np.cumsum(hist) / max(hist.sum(), 1)
    edges = np.linspace(lo, hi, BINS + 1)
    tail = (100.0 - percentile) / 100.0
    a = edges[int(np.searchsorted(cdf, tail, side="right"))]
    b = edges[int(np.searchsorted(cdf, 1.0 - tail, side="left")) + 1]
    return float(min(a, 0.0) if lo >= 0 else a), float(b)


def _mse_range(hist, lo, hi, _percentile=None, levels: int = 255) -> tuple:
    """The range [a, b] whose expected squared error of clipping and 8-bit rounding over the
    histogram's bin centres is smallest: the upper end then the lower one (twice) searched over
    200 geometric fractions of the extremes."""
    edges = np.linspace(lo, hi, BINS + 1)
    centres = ((edges[:-1] + edges[1:]) / 2)[None, :]
    weights = hist[None, :].astype(np.float64)

    def errors(a, b):
        a, b = np.broadcast_arrays(np.atleast_1d(a)[:, None], np.atleast_1d(b)[:, None])
        clipped = np.clip(centres, a, b)
        step = (b - a) / levels
        noise = np.where(clipped == centres, step * step / 12, (centres - clipped) ** 2)
        return (weights * noise).sum(axis=1)

    a, b = min(lo, 0.0), max(hi, 0.0)
    fractions = np.geomspace(1e-3, 1.0, 200)
    for _ in range(2):
        if b > 0:
            candidates = b * fractions
            b = float(candidates[np.argmin(errors(a, candidates))])
        if a < 0:
            candidates = a * fractions
            a = float(candidates[np.argmin(errors(candidates, b))])
    return a, b
