"""The floor of the digits CNN's invoke in numpy: each call its plan makes, timed alone on the
same shapes, against the whole invoke and LiteRT's (issue 17, goal 1: <= 2.5x LiteRT).

    python benchmarks/bench_floor.py [--model PATH] [--rounds 40]

The plan runs the CNN as two steps (kernels/conv.py, fusion.py): convolution + pool (a take of
the im2col items, one sgemm, one maximum.reduce over the pool's taps, RELU as its initial 0,
an fmax: the pool's NaN rule, XNNPACK's clamp taking a NaN max to -inf), then convolution +
pool + FC + FC (the same calls, an sgemv with the bias as a column, the RELU's clip, an sgemv).
The plan writes these calls into its generated run_steps with no Python frame between them
(plan.compile_steps), so run_steps less their sum is what the plan adds. This times those calls
one by one on arrays of the shapes the plan's kernels use (computed here as they compute them),
the invoke's fixed cost (Interpreter.invoke less the generated run_steps), and LiteRT's invoke,
all in interleaved rounds in one process, thread CPU time, medians. The sum of the BLAS calls
alone is the floor no numpy path goes under.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # before numpy loads OpenBLAS

import numpy as np  # noqa: E402

F32 = np.float32


def compare(fns: dict, calls: int, rounds: int) -> dict:
    """Median µs per call of each function, timed in interleaved rounds (thread CPU time)."""
    for fn in fns.values():
        for _ in range(20):
            fn()
    times = {name: [] for name in fns}
    names = list(fns)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            fn = fns[name]
            start = time.thread_time()
            for _ in range(calls):
                fn()
            times[name].append((time.thread_time() - start) / calls * 1e6)
    return {name: float(np.median(t)) for name, t in times.items()}


def layer_calls(it) -> dict:
    """{label: (kind, no-argument call)} for each numpy call the digits CNN's plan makes, on
    arrays of its kernels' shapes (kind: "blas" or "numpy")."""
    from edgelite.interpreter.kernels.common import clip, raw
    from edgelite.interpreter.kernels.conv import gather_item

    rng = np.random.default_rng(0)
    dot, fold = raw(np.dot), np.maximum.reduce
    plan = it._main
    calls, relu = {}, (np.zeros((), F32), np.full((), np.inf, F32))
    for op in plan.sg.operators:
        name = op.opcode.name
        ins = [plan.infos[t] for t in op.inputs if t >= 0]
        out = plan.infos[op.outputs[0]]
        if name == "CONV_2D":
            x, w = ins[0], ins[1]
            c, o = x.shape[3], w.shape[0]
            q = gather_item(c)
            rows = int(np.prod(out.shape[:3]))
            items = w.shape[1] * w.shape[2] * c // q + 1
            source = np.zeros((int(np.prod(x.shape)) + 2 * q) // q * q, F32)
            view = source.view(np.dtype((np.void, 4 * q))) if q > 1 else source
            index = rng.integers(0, view.size, (rows, items)).astype(np.intp)
            cols = np.empty((rows, items * q), F32)
            cols_view = cols.view(view.dtype)
            weights = rng.standard_normal((items * q, o)).astype(F32)
            product = np.empty((rows, o), F32)
            taps = product.reshape(4, -1)          # the 2x2 pool that follows (digits CNN)
            pooled = np.empty(taps.shape[1], F32)
            label = f"conv {list(x.shape)} -> {o}"
            calls[f"{label}: take {rows}x{items} items of {q} floats"] = (
                "numpy", lambda t=view.take, i=index, v=cols_view: t(i, out=v, mode="wrap"))
            calls[f"{label}: sgemm {rows}x{items * q}x{o}"] = (
                "blas", lambda a=cols, b=weights, p=product: dot(a, b, p))
            calls[f"{label}: maximum.reduce {list(taps.shape)} (pool, RELU)"] = (
                "numpy", lambda a=taps, p=pooled: fold(a, 0, None, p, False, relu[0]))
            low = np.full(pooled.shape, -np.inf, F32)
            calls[f"{label}: fmax {list(pooled.shape)} (the pool's NaN to -inf)"] = (
                "numpy", lambda p=pooled, lo=low: np.fmax(p, lo, p))
        elif name == "FULLY_CONNECTED":
            units, depth = ins[1].shape
            w = rng.standard_normal((units, depth + 1)).astype(F32)
            x = rng.standard_normal(depth + 1).astype(F32)
            y = np.empty(units, F32)
            calls[f"fc {depth} -> {units}: sgemv {units}x{depth + 1}"] = (
                "blas", lambda a=w, b=x, p=y: dot(a, b, p))
            if op.options.fields.get("fused_activation_function"):
                calls[f"fc {depth} -> {units}: clip (RELU)"] = (
                    "numpy", lambda p=y: clip(p, relu[0], relu[1], p))
    return calls


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    root = Path(__file__).resolve().parents[1]
    shared = Path(os.environ.get("EDGELITE_MODELS") or root.parent / "shared" / "models")
    parser.add_argument("--model", default=str(shared / "digits_cnn.tflite"))
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args(argv)
    from ai_edge_litert import interpreter as litert

    from edgelite import interpreter as edgelite

    its = {}
    for label, module in (("edgelite", edgelite), ("LiteRT", litert)):
        it = its[label] = module.Interpreter(model_path=args.model, num_threads=1)
        it.allocate_tensors()
        d = it.get_input_details()[0]
        it.set_tensor(d["index"], np.random.default_rng(1).standard_normal(d["shape"])
                      .astype(np.float32))
        it.invoke()
    ours = its["edgelite"]
    calls = layer_calls(ours)
    fns = {"edgelite invoke": ours.invoke, "LiteRT invoke": its["LiteRT"].invoke,
           "edgelite run_steps": ours._main.run_steps}
    fns.update({label: fn for label, (_, fn) in calls.items()})
    t = compare(fns, 1000, args.rounds)
    litert_us = t["LiteRT invoke"]
    blas = sum(t[label] for label, (kind, _) in calls.items() if kind == "blas")
    other = sum(t[label] for label, (kind, _) in calls.items() if kind == "numpy")
    print(f"## The floor of {Path(args.model).name} in numpy (1 thread, thread CPU µs, medians; "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(auto)')}, load "
          f"{os.getloadavg()[0]:.1f})\n")
    print("| call | µs |\n|---|---:|")
    for label in calls:
        print(f"| {label} | {t[label]:.2f} |")
    print(f"| **BLAS calls alone** | **{blas:.2f}** |")
    print(f"| other numpy calls (takes, reductions, clips) | {other:.2f} |")
    print(f"| all calls, each alone | {blas + other:.2f} |")
    print(f"| edgelite run_steps | {t['edgelite run_steps']:.2f} |")
    print(f"| invoke's fixed cost (invoke - run_steps) | "
          f"{t['edgelite invoke'] - t['edgelite run_steps']:.2f} |")
    print(f"| edgelite invoke | {t['edgelite invoke']:.2f} "
          f"({t['edgelite invoke'] / litert_us:.2f}x LiteRT) |")
    print(f"| LiteRT invoke | {litert_us:.2f} |")
    print(f"\nGoal 2.5x LiteRT = {2.5 * litert_us:.2f} µs; the BLAS calls alone are "
          f"{blas / litert_us:.2f}x LiteRT's whole invoke, all calls "
          f"{(blas + other) / litert_us:.2f}x.")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
