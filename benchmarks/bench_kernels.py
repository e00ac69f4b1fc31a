"""Micro-benchmarks of the float32 conv / depthwise / pool / fully-connected kernels on the layers
of the shared real models: each step of a model's plan timed alone (best of N back-to-back runs,
so warm caches).

    python benchmarks/bench_kernels.py [--models DIR] [--only NAME] [--ops CONV_2D,...] [--top 15]
                                       [--sequence]

Prints, per model, the time by op type and the slowest steps with their shapes and the
multiply-add rate they reach (GMAC/s). With --sequence each step is also timed where it runs
in a whole invoke (median over the runs): the difference from the warm time is what the step
loses to caches the steps before it left cold (its input, weights and work buffers).
"""
from __future__ import annotations

import argparse
import collections
import functools
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy loads OpenBLAS

import numpy as np  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
MODELS = ("mobilenet_v2", "mp_face_detection", "mp_hand_landmark", "digits_cnn")
REFS = {"digits_cnn": "digits_cnn_tfl"}


def best_of(fn, reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def macs(op: str, args: tuple) -> int:
    """Multiply-adds a step does (0 where not meaningful)."""
    out = args[-1]
    if op == "CONV_2D":
        w = args[1]
        return out.size * int(np.prod(w.shape[1:]))
    if op == "DEPTHWISE_CONV_2D":
        w = args[1]
        return out.size * w.shape[1] * w.shape[2]
    if op in ("FULLY_CONNECTED", "BATCH_MATMUL"):
        return out.size * args[0].shape[-1]
    return 0


def in_sequence(steps: list, reps: int) -> list:
    """Median seconds of each step timed inside whole invokes (the steps in plan order)."""
    clock = time.perf_counter
    times = np.zeros((reps, len(steps)))
    for r in range(reps):
        for i, (run, args) in enumerate(steps):
            t = clock()
            run(*args)
            times[r, i] = clock() - t
    return list(np.median(times, axis=0))


def bench_model(path: Path, ref: Path, ops: set | None, top: int, reps: int,
                sequence: bool = False) -> None:
    from edgelite.interpreter import Interpreter
    from edgelite.interpreter import threads

    x = np.load(ref)["input_0"]
    it = Interpreter(model_path=str(path), num_threads=1)
    it.allocate_tensors()
    detail = it.get_input_details()[0]
    it.set_tensor(detail["index"], x.reshape(detail["shape"]))
    it.invoke()
    plan = it._main
    operators = plan.sg.operators
    rows = []
    with threads.limit(1):
        seq = in_sequence(plan.steps, max(reps, 30)) if sequence else [0.0] * len(plan.steps)
        for (run, args), oi, t_seq in zip(plan.steps, plan.step_ops, seq):
            op = operators[oi].opcode.name
            if ops and op not in ops:
                continue
            t = best_of(functools.partial(run, *args), reps)
            shapes = [None if a is None else tuple(a.shape) for a in args]
            rows.append((t, op, shapes, macs(op, args), t_seq))
    total = sum(r[0] for r in rows)
    print(f"\n{path.stem}: {len(rows)} steps, {total * 1e3:.2f} ms (sum of best-of-{reps})"
          + (f"; in sequence {sum(r[4] for r in rows) * 1e3:.2f} ms (sum of medians)"
             if sequence else ""))
    by_op = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for t, op, _, _, t_seq in rows:
        by_op[op][0] += 1
        by_op[op][1] += t
        by_op[op][2] += t_seq
    for op, (count, t, t_seq) in sorted(by_op.items(), key=lambda kv: -kv[1][1]):
        print(f"  {op:24s} {count:3d} steps {t * 1e3:8.3f} ms"
              + (f"  in sequence {t_seq * 1e3:8.3f} ms" if sequence else ""))
    print(f"  slowest {top}:")
    for t, op, shapes, m, t_seq in sorted(rows, key=lambda r: -r[0])[:top]:
        rate = f"{m / t / 1e9:6.1f} GMAC/s" if m else ""
        cold = f"{t_seq * 1e3:7.3f} ms in sequence " if sequence else ""
        print(f"    {t * 1e3:7.3f} ms {cold}{op:20s} {rate:14s} {shapes}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=os.environ.get("EDGELITE_MODELS",
                                                       str(REPO_ROOT.parent / "shared" / "models")))
    ap.add_argument("--only", help="one model name")
    ap.add_argument("--ops", help="comma-separated op types to time (default: all)")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--sequence", action="store_true",
                    help="also time each step inside whole invokes (caches as they really are)")
    args = ap.parse_args()
    folder = Path(args.models)
    ops = set(args.ops.split(",")) if args.ops else None
    for name in ([args.only] if args.only else MODELS):
        path, ref = folder / f"{name}.tflite", folder / "refs" / f"{REFS.get(name, name)}.npz"
        if not path.exists() or not ref.exists():
            print(f"{name}: not found in {folder}")
            continue
        bench_model(path, ref, ops, args.top, args.reps, args.sequence)


if __name__ == "__main__":
    main()
