"""The floor of a tiny int8 model's invoke on the numpy path, against LiteRT (issue 17, goal 1).

    python benchmarks/bench_int8_floor.py [--models mwk_okay_nabu,digits_cnn_int8] [--blocks 15]
                                          [--json OUT]

For each model, 1 thread, CPU time of the calling thread (a busy machine's other processes do
not count), medians of alternating blocks:

- invoke: edgelite's `Interpreter.invoke` and LiteRT's, and their ratio;
- steps: the sum of the plan's bound steps, each timed alone (the rest of the invoke is the
  interpreter's own: thread limits, numpy's error state, the generated step function);
- numpy calls per invoke (tests/interpreter/numpy_calls.py: ufuncs and numpy's builtins) and
  the dispatch floor: the calls other than the GEMMs and einsums, each at the cost of the
  cheapest numpy call there is (a 64-value copyto's C function);
- the compute floor: each CONV_2D / FULLY_CONNECTED's float32 GEMM and each depthwise einsum
  (one output pixel: its product pass and ones-row dot) alone, calls included, on arrays of
  its shapes (the arithmetic edgelite's default int8 kernels run), inside int8 chains too;
- the floor: dispatch + compute, the least any numpy step list could cost, as x LiteRT.

A goal below the floor cannot be met by the numpy path however its kernels are arranged: only
fewer numpy calls (fusing ops across layers) or compiled code get under it.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # before numpy loads OpenBLAS

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
MODELS = "mwk_okay_nabu,digits_cnn_int8"


def models_dir() -> Path:
    return Path(os.environ.get("EDGELITE_MODELS", REPO.parent / "shared" / "models"))


def per_call(fn, calls: int) -> float:
    start = time.thread_time()
    for _ in range(calls):
        fn()
    return (time.thread_time() - start) / calls * 1e6


def alternating(fns: dict, blocks: int, calls: int) -> dict:
    """Median µs per call of each function, timed in alternating blocks."""
    times = {name: [] for name in fns}
    for _ in range(blocks):
        for name, fn in fns.items():
            times[name].append(per_call(fn, calls))
    return {name: statistics.median(v) for name, v in times.items()}


def feed(it) -> None:
    rng = np.random.default_rng(0)
    for d in it.get_input_details():
        info = np.iinfo(d["dtype"]) if np.issubdtype(d["dtype"], np.integer) else None
        value = rng.integers(info.min, info.max + 1, d["shape"]) if info else \
            rng.standard_normal(d["shape"])
        it.set_tensor(d["index"], value.astype(d["dtype"]))


def numpy_call_count(it) -> dict:
    import pytest
    sys.path.insert(0, str(REPO))
    from tests.interpreter.numpy_calls import numpy_calls
    with pytest.MonkeyPatch.context() as m:
        counts = numpy_calls(it.invoke, m)
    return counts


def kernel_ops(plan):
    """(op name, kernel name, input shape, weights shape or None, output shape) of each
    kernel the plan's steps run, the ops inside an int8 chain (interpreter/fusion_int8.py)
    one by one."""
    for oi, (run, args) in zip(plan.step_ops, plan.steps):
        if not args:
            continue
        kernel = getattr(run, "__qualname__", "")
        if kernel.startswith("_chain_run"):
            cells = dict(zip(run.__code__.co_freevars, (c.cell_contents for c in run.__closure__)))
            links = [(cells["first"].run, cells["first"].node)] + \
                [(lifted, link.node) for _, lifted, link, _ in cells["consumers"]]
            for k, (step_run, node) in enumerate(links):
                if k == 0:      # (maybe a fused step itself: conv + pool)
                    w = args[1].shape if len(args) > 2 and hasattr(args[1], "shape") else None
                    yield (plan.sg.operators[oi].opcode.name,
                           getattr(step_run, "__qualname__", ""), args[0].shape, w,
                           tuple(node.outputs[0].shape))
                    continue
                w = node.inputs[1].shape if len(node.inputs) > 1 and node.inputs[1] is not None \
                    else None
                yield (node.op, getattr(step_run, "__qualname__", ""),
                       tuple(node.inputs[0].shape), w, tuple(node.outputs[0].shape))
            continue
        w = args[1].shape if len(args) > 2 and hasattr(args[1], "shape") else None
        yield plan.sg.operators[oi].opcode.name, kernel, args[0].shape, w, args[-1].shape


def compute_floor(plan, blocks: int) -> tuple:
    """(µs, calls) of the model's GEMMs and depthwise einsums alone (float32, zeros of their
    shapes)."""
    from numpy._core.multiarray import c_einsum
    calls = []
    for name, kernel, x, w, out in kernel_ops(plan):
        size = int(np.prod(out))
        if name == "CONV_2D" and w is not None and len(w) == 4:
            a = np.zeros((size // out[-1], int(np.prod(w[1:])) + 1), np.float32)
            b = np.zeros((a.shape[1], out[-1]), np.float32)
        elif name == "FULLY_CONNECTED" and w is not None:
            units, depth = w
            a = np.zeros((size // units, depth + 1), np.float32)
            b = np.zeros((depth + 1, units), np.float32)
        elif kernel.startswith("depthwise_conv_2d") or \
                (name in ("DEPTHWISE_CONV_2D", "CONCATENATION") and "depthwise" in kernel):
            # (a MixConv block's too: mixconv.py)
            k, c = int(np.prod(x)) // x[-1] // x[0], out[-1]
            a, b = np.zeros((k + 1, c), np.float32), np.zeros((k + 1, c), np.float32)
            if int(np.prod(out)) == c:     # one pixel: a product pass and a ones row's dot
                tmp, ones, row = np.empty_like(a), np.ones((1, k + 1), np.float32), \
                    np.empty((1, c), np.float32)
                calls.append(lambda a=a, b=b, t=tmp: np.multiply(a, b, out=t))
                calls.append(lambda o=ones, t=tmp, r=row: np.dot(o, t, r))
                continue
            acc = np.empty(c, np.float32)
            calls.append(lambda a=a, b=b, acc=acc: c_einsum("ij,ij->j", a, b, out=acc))
            continue
        else:
            continue
        acc = np.empty((a.shape[0], b.shape[1]), np.float32)
        calls.append(lambda a=a, b=b, acc=acc: np.dot(a, b, acc))

    def all_calls():
        for call in calls:
            call()
    return alternating({"compute": all_calls}, blocks, 2000)["compute"], len(calls)


def measure(name: str, blocks: int) -> dict:
    from ai_edge_litert.interpreter import Interpreter as LiteRT

    from edgelite.interpreter import Interpreter
    from edgelite.interpreter.plan import bind_step
    path = models_dir() / f"{name}.tflite"
    ours, theirs = Interpreter(model_path=str(path), num_threads=1), \
        LiteRT(model_path=str(path), num_threads=1)
    for it in (ours, theirs):
        it.allocate_tensors()
        feed(it)
        it.invoke()
    plan = ours._main
    steps = []
    for run, args in plan.steps:
        if run.__name__ == "_view_step":
            continue
        bound = bind_step(run, list(args))
        steps.append(bound if bound is not None else (lambda run=run, args=args: run(*args)))
    with np.errstate(all="ignore"):
        def all_steps():
            for step in steps:
                step()
        t = alternating({"edgelite": ours.invoke, "litert": theirs.invoke,
                         "steps": all_steps}, blocks, 2000)
    counts = numpy_call_count(ours)
    calls = counts["ufuncs"] + counts["builtins"]
    a, b = np.zeros(64, np.int8), np.zeros(64, np.int8)
    copyto = getattr(np.copyto, "_implementation", np.copyto)
    cheapest = alternating({"c": lambda: copyto(a, b)}, blocks, 20000)["c"]
    compute, gemms = compute_floor(plan, blocks)
    dispatch = (calls - gemms) * cheapest        # (the GEMMs' own calls are in `compute`)
    floor = dispatch + compute
    return {"model": name, "edgelite_us": t["edgelite"], "litert_us": t["litert"],
            "ratio": t["edgelite"] / t["litert"], "steps": len(steps),
            "steps_us": t["steps"], "numpy_calls": calls, "cheapest_call_us": cheapest,
            "dispatch_floor_us": dispatch, "compute_floor_us": compute, "gemms": gemms,
            "floor_us": floor, "floor_ratio": floor / t["litert"]}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=MODELS)
    ap.add_argument("--blocks", type=int, default=15)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    rows = [measure(name, args.blocks) for name in args.models.split(",")]
    print(f"load average {os.getloadavg()[0]:.2f}; 1 thread; CPU µs per invoke, medians")
    print("| model | edgelite | LiteRT | x LiteRT | steps (sum alone) | numpy calls | dispatch "
          "floor | compute floor | floor | floor x LiteRT |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['model']} | {r['edgelite_us']:.1f} | {r['litert_us']:.2f} | "
              f"{r['ratio']:.1f}x | {r['steps']} ({r['steps_us']:.1f}) | {r['numpy_calls']} | "
              f"{r['dispatch_floor_us']:.1f} ({r['cheapest_call_us']:.2f} each) | "
              f"{r['compute_floor_us']:.1f} | {r['floor_us']:.1f} | {r['floor_ratio']:.1f}x |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
