"""The runtimes `edgelite benchmark --compare` times beside edgelite, in one process: LiteRT
(ai-edge-litert) on the same .tflite and the same inputs, onnxruntime on an .onnx with its own
seeded random inputs; `alternating` runs them in blocks of about BLOCK_S seconds, in alternating
order with a pause before each block (OpenBLAS and XNNPACK threads spin for a while after a call
and would slow whichever runtime comes next)."""
from __future__ import annotations

import statistics
import time
from pathlib import Path

from .benchmark import percentile
from .common import fail, installed, one_line
from .progress import Progress, note

BLOCK_S = 0.2          # a block of one runtime's runs lasts about this long
MIN_BLOCKS = 4         # blocks per runtime at least
PAUSE_S = 0.05         # before each block
PEERS = {"litert": ("ai_edge_litert", "ai-edge-litert"),   # name: (module, package)
         "onnxruntime": ("onnxruntime", "onnxruntime")}

def parse_compare(spec, path: Path) -> dict:
    """{name: peer runner} from "litert,onnxruntime=m.onnx" (or a list of such items)."""
    if not spec:
        return {}
    items = spec if isinstance(spec, (list, tuple)) else spec.split(",")
    found = {}
    for item in (i.strip() for i in items if i.strip()):
        name, _, arg = item.partition("=")
        if name not in PEERS:
            fail(f"--compare {name!r}: the peers are {', '.join(PEERS)}")
        module, package = PEERS[name]
        if not installed(module):
            fail(f"--compare {name} needs {package}, which is not installed: "
                 f"pip install {package}")
        found[name] = (name, Path(arg) if arg else None)
    return found


def make_peers(found: dict, path: Path, threads: int, our_inputs: list) -> dict:
    return {name: (LiteRT(path, threads, our_inputs) if name == "litert"
                   else OnnxRuntime(onnx or path.with_suffix(".onnx"), threads))
            for name, (_, onnx) in found.items()}


class LiteRT:
    package = "ai-edge-litert"
    same_inputs = True

    def __init__(self, path: Path, threads: int, values: list):
        from ai_edge_litert.interpreter import Interpreter

        self.model = path
        start = time.perf_counter()
        it = Interpreter(model_path=str(path), num_threads=threads)
        it.allocate_tensors()
        self.init_s = time.perf_counter() - start
        for d, v in zip(it.get_input_details(), values):
            it.set_tensor(d["index"], v)
        self.it, self.invoke = it, it.invoke

    def outputs(self) -> list:
        return [self.it.get_tensor(d["index"]) for d in self.it.get_output_details()]


class OnnxRuntime:
    package = "onnxruntime"
    same_inputs = False   # its own model and layout: timed on seeded random inputs of its own

    def __init__(self, path: Path, threads: int):
        import numpy as np
        import onnxruntime as ort

        from .session import random_inputs

        if not path.exists():
            fail(f"--compare onnxruntime: no ONNX model at {path} (name one: "
                 "--compare onnxruntime=MODEL.onnx)")
        self.model = path
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        types = {"tensor(float)": np.float32, "tensor(float16)": np.float16,
                 "tensor(double)": np.float64, "tensor(int64)": np.int64,
                 "tensor(int32)": np.int32, "tensor(int8)": np.int8,
                 "tensor(uint8)": np.uint8, "tensor(bool)": np.bool_}
        start = time.perf_counter()
        try:
            session = ort.InferenceSession(str(path), options,
                                           providers=["CPUExecutionProvider"])
        except Exception as e:  # noqa: BLE001  onnxruntime's errors are one refusal here
            fail(f"--compare onnxruntime: {path}: {one_line(e)}")
        self.init_s = time.perf_counter() - start
        specs = [([d if isinstance(d, int) and d > 0 else 1 for d in i.shape],
                  types.get(i.type, np.float32)) for i in session.get_inputs()]
        feeds = {i.name: v for i, v in zip(session.get_inputs(), random_inputs(specs))}
        self._last: list = []
        self.invoke = lambda: self._last.__setitem__(slice(None), session.run(None, feeds))

    def outputs(self) -> list:
        return list(self._last)



def alternating(invokes: dict, runs: int, min_secs: float, max_secs: float,
                 quiet: bool) -> dict:
    """Seconds of single invokes of each runtime, in blocks of about BLOCK_S in alternating
    order with a pause before each: until every runtime has `runs` invokes and `min_secs` of
    them, and MIN_BLOCKS blocks; at most `max_secs` in all."""
    clock = time.perf_counter
    per_block = {}
    for name, invoke in invokes.items():   # each runtime warms up; block sizes from its speed
        warm = []
        t0 = clock()
        while len(warm) < 3 or clock() - t0 < BLOCK_S:
            t = clock()
            invoke()
            warm.append(clock() - t)
        per_block[name] = max(1, int(BLOCK_S / statistics.median(warm)))
    note(f"Running {', '.join(invokes)} in alternating blocks: at least {runs} iterations and "
         f"{min_secs:g} seconds each, at most {max_secs:g} seconds in all.", quiet)
    samples = {name: [] for name in invokes}
    names, start, b = list(invokes), clock(), 0
    with Progress("compare", total=None, quiet=quiet, line=False) as bar:
        while True:
            done = all(len(t) >= runs and sum(t) >= min_secs for t in samples.values())
            if (done and b >= MIN_BLOCKS) or (b and clock() - start >= max_secs):
                break
            for name in names if b % 2 == 0 else names[::-1]:
                time.sleep(PAUSE_S)
                invoke, times = invokes[name], samples[name]
                for _ in range(per_block[name]):
                    t = clock()
                    invoke()
                    times.append(clock() - t)
            b += 1
            bar.advance()
    return samples


def peer_facts(peer_times: list, our_times: list, peer, our_outputs: list) -> dict:
    ours, theirs = statistics.median(our_times), statistics.median(peer_times)
    facts = {"package": peer.package, "model": str(peer.model), "init_ms": round(
        peer.init_s * 1e3, 6), "median_ms": round(theirs * 1e3, 6),
        "p5_ms": round(percentile(peer_times, 5) * 1e3, 6),
        "p95_ms": round(percentile(peer_times, 95) * 1e3, 6), "num_runs": len(peer_times),
        "edgelite_median_ms": round(ours * 1e3, 6), "edgelite_num_runs": len(our_times),
        "ratio": round(ours / theirs, 3)}
    facts["max_abs_diff"] = _max_diff(our_outputs, peer.outputs()) if peer.same_inputs else None
    return facts


def _max_diff(ours: list, theirs: list) -> float | None:
    import numpy as np

    if len(ours) != len(theirs) or any(a.shape != b.shape for a, b in zip(ours, theirs)):
        return None
    return max((float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)), initial=0))
                for a, b in zip(ours, theirs)), default=0.0)
