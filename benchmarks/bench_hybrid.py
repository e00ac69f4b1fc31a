"""Dynamic-range (hybrid) convnets against their float32 twins, edgelite and LiteRT (issue 17,
goal 6): is the gap to LiteRT the hybrid path or the model?

    python benchmarks/bench_hybrid.py [--corpus DIR] [--only densenet] [--blocks 7] [--json OUT]

For each of the corpus's Keras DenseNet121 and EfficientNetB0 (`tools/tflite_corpus.py keras`,
~/.cache/edgelite-tflite-corpus) as float32 and dynamic-range files: the calling thread's CPU
time per invoke (`time.thread_time`: a 1-thread invoke runs in the calling thread, other
processes do not count), edgelite and LiteRT (1 thread, its defaults: XNNPACK) alternating in
blocks of ~0.2 s in one process, medians over blocks; then edgelite's time by op type (each plan
step timed alone, CPU time) and what the hybrid files cost over the float ones in edgelite: the
on-the-fly input quantization (the default resolver's hybrid convolution is the float kernel on
weights dequantized at prepare and the input quantized and dequantized again). LiteRT's hybrid
convolutions are int8 GEMMs (faster than its own float ones here); edgelite's run on float32
BLAS, so the float file's time is their floor.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # before numpy loads OpenBLAS

import numpy as np  # noqa: E402

CORPUS = Path("~/.cache/edgelite-tflite-corpus").expanduser()
MODELS = [f"keras_{m}.{v}.tflite" for m in ("densenet121", "efficientnet_b0")
          for v in ("float32", "dynamic")]
BLOCK_S = 0.2


def _loaded(cls, path: Path):
    it = cls(model_path=str(path), num_threads=1)
    it.allocate_tensors()
    rng = np.random.default_rng(0)
    for d in it.get_input_details():
        it.set_tensor(d["index"], rng.uniform(0, 255, tuple(d["shape"])).astype(d["dtype"]))
    it.invoke()
    return it


def _block(it) -> float:
    """CPU ms per invoke over one block of at least BLOCK_S and 2 invokes."""
    n, start = 0, time.thread_time()
    while True:
        it.invoke()
        n += 1
        spent = time.thread_time() - start
        if spent >= BLOCK_S and n >= 2:
            return spent / n * 1e3


def compare(path: Path, blocks: int) -> dict:
    from ai_edge_litert.interpreter import Interpreter as LiteRT

    from edgelite.interpreter import Interpreter
    ours, theirs = _loaded(Interpreter, path), _loaded(LiteRT, path)
    times = {"edgelite": [], "litert": []}
    for _ in range(blocks):
        times["edgelite"].append(_block(ours))
        times["litert"].append(_block(theirs))
    out = [it.get_tensor(it.get_output_details()[0]["index"]) for it in (ours, theirs)]
    e, lt = (float(np.median(times[k])) for k in ("edgelite", "litert"))
    return {"edgelite_ms": e, "litert_ms": lt, "ratio": e / lt,
            "max_abs_diff": float(np.abs(out[0] - out[1]).max()),
            "by_op": op_types(ours)}


def op_types(it, runs: int = 3) -> dict:
    """CPU ms per invoke by op type, each step of the main plan timed alone (median of runs)."""
    plan = it._runtime.subgraph(0)
    per_step = [[] for _ in plan.steps]
    for _ in range(runs):
        for i, (run, args) in enumerate(plan.steps):
            t = time.thread_time()
            run(*args)
            per_step[i].append(time.thread_time() - t)
    by_op = defaultdict(float)
    for oi, t in zip(plan.step_ops, per_step):
        by_op[plan.sg.operators[oi].op] += float(np.median(t)) * 1e3
    return dict(sorted(by_op.items(), key=lambda kv: -kv[1]))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", type=Path, default=CORPUS)
    p.add_argument("--blocks", type=int, default=7)
    p.add_argument("--only", nargs="*", default=None)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    names = [n for n in MODELS if not args.only or any(s in n for s in args.only)]
    import numpy
    print(f"numpy {numpy.__version__}; OPENBLAS_CORETYPE="
          f"{os.environ.get('OPENBLAS_CORETYPE', '(native)')}; CPU ms per invoke, 1 thread\n")
    print("| model | edgelite ms | LiteRT ms | edgelite/LiteRT | max abs diff | "
          "CONV_2D ms | CONCATENATION ms |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    rows = {}
    for name in names:
        path = args.corpus / name
        if not path.exists():
            print(f"| {name} | not in {args.corpus}: tools/tflite_corpus.py keras | | | | | |")
            continue
        r = rows[name] = compare(path, args.blocks)
        ops = r["by_op"]
        print(f"| {name} | {r['edgelite_ms']:.2f} | {r['litert_ms']:.2f} | {r['ratio']:.2f}x "
              f"| {r['max_abs_diff']:.2g} | {ops.get('CONV_2D', 0):.2f} "
              f"| {ops.get('CONCATENATION', 0):.2f} |", flush=True)
    for model in ("densenet121", "efficientnet_b0"):
        f, d = (rows.get(f"keras_{model}.{v}.tflite") for v in ("float32", "dynamic"))
        if f and d:
            print(f"\n{model}: dynamic-range over float32 in edgelite "
                  f"{d['edgelite_ms'] - f['edgelite_ms']:+.2f} ms, in LiteRT "
                  f"{d['litert_ms'] - f['litert_ms']:+.2f} ms; edgelite's float32 file / "
                  f"LiteRT's dynamic-range file {f['edgelite_ms'] / d['litert_ms']:.2f}x "
                  "(the floor of the hybrid ratio on float32 BLAS)")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
