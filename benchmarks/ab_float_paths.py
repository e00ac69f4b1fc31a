"""A/B of issue 17's float-path changes in one process, against LiteRT: LOGISTIC as
0.5 + 0.5 tanh(x / 2) (was 1 / (1 + exp(-x)), restated here as `old_logistic`), a small 1x1
CONV_2D's bias tiled over its whole output (conv.BIAS_TILE_ELEMENTS) and its product through
np.dot (conv.DOT_MACS). The "old" interpreter is built with the old LOGISTIC registered and both
limits 0; the "new" one with today's kernels. CPU time of the calling thread per invoke, in
alternating blocks of each, medians over blocks (OPENBLAS_NUM_THREADS=1).

    python benchmarks/ab_float_paths.py [--blocks 15] [--invokes N] MODEL.tflite ...
"""
from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # before numpy loads OpenBLAS

import numpy as np  # noqa: E402

from edgelite.interpreter import Interpreter  # noqa: E402
from edgelite.interpreter.kernels import activations, conv  # noqa: E402
from edgelite.interpreter.kernels.registry import KERNELS  # noqa: E402


def old_logistic(node):
    """The LOGISTIC kernel before (negative, clip, exp, add, reciprocal)."""
    new = activations.logistic(node)          # (shape checks, BUILTIN_REF, one element)
    if int(np.prod(node.input(0).shape)) <= 1 or new is activations.reference_order.logistic:
        return new
    lo, cap = np.array(-np.inf, np.float32), np.array(88.0, np.float32)
    one = np.array(1.0, np.float32)

    def run(x, out):
        np.negative(x, out)
        np.clip(out, lo, cap, out)
        np.exp(out, out)
        np.add(out, one, out)
        np.reciprocal(out, out)
    return run


def build(path, old):
    saved = KERNELS["LOGISTIC"]["float32"], conv.BIAS_TILE_ELEMENTS, conv.DOT_MACS
    if old:
        KERNELS["LOGISTIC"]["float32"], conv.BIAS_TILE_ELEMENTS, conv.DOT_MACS = \
            old_logistic, 0, 0
    try:
        it = Interpreter(model_path=path)
        it.allocate_tensors()
    finally:
        KERNELS["LOGISTIC"]["float32"], conv.BIAS_TILE_ELEMENTS, conv.DOT_MACS = saved
    return it


def feed(it):
    rng = np.random.default_rng(0)
    for d in it.get_input_details():
        it.set_tensor(d["index"], rng.random(d["shape"]).astype(d["dtype"]))
    it.invoke()


def block(it, n):
    t = time.thread_time()
    for _ in range(n):
        it.invoke()
    return (time.thread_time() - t) / n * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("--blocks", type=int, default=15)
    ap.add_argument("--invokes", type=int, default=0, help="per block (default: ~20 ms)")
    args = ap.parse_args()
    from ai_edge_litert.interpreter import Interpreter as LiteRT
    print(f"load {os.getloadavg()[0]:.2f}; CPU us per invoke, medians of {args.blocks} blocks")
    print(f"{'model':40s} {'old':>10s} {'new':>10s} {'new/old':>8s} {'LiteRT':>10s}"
          f" {'old/L':>6s} {'new/L':>6s}")
    for path in args.models:
        runs = {"old": build(path, True), "new": build(path, False)}
        lite = LiteRT(model_path=path, num_threads=1)
        lite.allocate_tensors()
        runs["litert"] = lite
        for it in runs.values():
            feed(it)
        n = args.invokes or max(1, int(20000 / max(block(runs["new"], 3), 1.0)))
        times = {k: [] for k in runs}
        for _ in range(args.blocks):
            for k, it in runs.items():
                times[k].append(block(it, n))
        m = {k: float(np.median(v)) for k, v in times.items()}
        print(f"{os.path.basename(path):40s} {m['old']:10.1f} {m['new']:10.1f}"
              f" {m['new'] / m['old']:8.3f} {m['litert']:10.1f} {m['old'] / m['litert']:6.2f}"
              f" {m['new'] / m['litert']:6.2f}")


if __name__ == "__main__":
    main()
