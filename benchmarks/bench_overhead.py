"""Interpreter overhead per op: a chain of tiny ops, where the arithmetic costs next to nothing.

    python benchmarks/bench_overhead.py [--ops 200] [--blocks 30] [--json OUT]

Builds (with edgelite's IR) x[1] -> ADD(c) -> MUL(c) -> ADD(c) -> ... of `--ops` float32 ops, once
plain and once with a fused RELU on every ADD, and times `invoke` in edgelite and LiteRT (1
thread, XNNPACK default) in alternating blocks. The issue's budget is 3 µs per op. Times are
the calling thread's CPU time, so other processes on a busy machine do not count. Then it takes
edgelite's time apart, layer by layer: `Interpreter.invoke` -> `SubgraphPlan.invoke` -> a bare
loop over the plan's steps -> the ufunc call each kernel makes -> the same call spelled otherwise,
and counts the Python frames each op runs (cProfile), so the table says where the µs go.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # before numpy loads OpenBLAS

import numpy as np  # noqa: E402

BUDGET_US = 3.0       # the target per op
PAUSE_S = 0.02        # between blocks, so neither runtime's spinning threads slow the other


def chain_model(n_ops: int, fused_relu: bool) -> bytes:
    """x[1] float32 -> n_ops alternating ADD / MUL with a [1] constant (RELU fused into ADDs)."""
    from edgelite.schema import (Model, Operator, OperatorCode, Subgraph, Tensor, default_options,
                                 save)

    model = Model(description=f"overhead chain of {n_ops} ops")
    sg = Subgraph(name="main")
    x = sg.add_tensor(Tensor("x", (1,), "float32"))
    c = sg.add_tensor(Tensor("c", (1,), "float32",
                             buffer=model.add_buffer(np.array([1.0001], np.float32))))
    prev = x
    for i in range(n_ops):
        out = sg.add_tensor(Tensor(f"t{i}", (1,), "float32"))
        op = "ADD" if i % 2 == 0 else "MUL"
        options = {"fused_activation_function": 1} if op == "ADD" and fused_relu else {}
        sg.operators.append(Operator(OperatorCode(op, 0), [prev, c], [out],
                                     default_options(op, **options)))
        prev = out
    sg.inputs, sg.outputs = [x], [prev]
    model.subgraphs.append(sg)
    return save(model)


def loaded(module, content: bytes):
    it = module.Interpreter(model_content=content, num_threads=1)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], np.ones(1, np.float32))
    it.invoke()
    return it


def block_seconds(fn, calls: int) -> float:
    """CPU seconds of this thread per call of `fn`: all the work of a 1-thread invoke happens in
    the calling thread, and thread CPU time leaves out the time slices the scheduler gives other
    processes (on a busy machine they dwarf a 0.5 µs op)."""
    fn()   # untimed: caches and branch predictors warm, whatever ran before
    start = time.thread_time()
    for _ in range(calls):
        fn()
    return (time.thread_time() - start) / calls


def us_per_op(fns: dict, n_ops: int, blocks: int, block_s: float) -> dict:
    """Median and p10 µs per op of each no-argument function doing `n_ops` ops, timed in
    alternating blocks of about `block_s` seconds (the order rotates each round; a pause before
    and after LiteRT, whose threads may spin after a call)."""
    calls = {name: max(3, int(block_s / block_seconds(fn, 3))) for name, fn in fns.items()}
    times = {name: [] for name in fns}
    names = list(fns)
    for b in range(blocks):
        previous = None
        for name in names[b % len(names):] + names[:b % len(names)]:
            if "LiteRT" in name or (previous and "LiteRT" in previous):
                time.sleep(PAUSE_S)
            times[name].append(block_seconds(fns[name], calls[name]))
            previous = name
    return {name: float(np.median(t)) / n_ops * 1e6 for name, t in times.items()}, \
        {name: float(np.percentile(t, 10)) / n_ops * 1e6 for name, t in times.items()}


def python_frames_per_op(plan, n_ops: int, invokes: int = 20) -> float:
    """Python function calls per op inside `SubgraphPlan.invoke` (cProfile's primitive calls)."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(invokes):
        plan.invoke()
    profiler.disable()
    stats = pstats.Stats(profiler)
    calls = sum(pc for (path, _, name), (pc, *_) in stats.stats.items()
                if path != "~" and name != "invoke")   # "~": C functions
    return calls / invokes / n_ops


UFUNC_KEYWORD = "np.add(x, c, out=out)  (as the kernels call it)"
UFUNC_POSITIONAL = "np.add(x, c, out)  (out positional)"
UFUNC_IN_PLACE = "np.add(out, c, out)  (in place)"
RELU_IN_PLACE = "np.add(x, c, out); clip_(out, 0, inf)  (RELU in place, as now)"
RELU_SCRATCH = "np.add(x, c, tmp); clip(tmp, 0, inf, out)  (no in-place call)"


def microbenchmarks(n_ops: int) -> dict:
    """The calls a kernel's `run` can make, n_ops times each, on [1]-shaped float32 arrays."""
    from edgelite.interpreter.kernels.common import clip, clip_

    x, c, out, tmp = (np.ones(1, np.float32) for _ in range(4))
    add, ops, inf = np.add, range(n_ops), np.inf

    def noop(*_):
        pass

    def call_noop():
        for _ in ops:
            noop(x, c, out)

    def ufunc_out_keyword():
        for _ in ops:
            add(x, c, out=out)

    def ufunc_out_positional():
        for _ in ops:
            add(x, c, out)

    def ufunc_in_place():
        for _ in ops:
            add(out, c, out)

    def relu_in_place():
        for _ in ops:
            add(x, c, out)
            clip_(out, 0.0, inf)

    def relu_from_scratch():
        for _ in ops:
            add(x, c, tmp)
            clip(tmp, 0.0, inf, out)

    return {"Python loop + call of a no-op": call_noop, UFUNC_KEYWORD: ufunc_out_keyword,
            UFUNC_POSITIONAL: ufunc_out_positional, UFUNC_IN_PLACE: ufunc_in_place,
            RELU_IN_PLACE: relu_in_place, RELU_SCRATCH: relu_from_scratch}


def measure(n_ops: int, blocks: int, block_s: float) -> dict:
    from ai_edge_litert import interpreter as litert

    from edgelite import interpreter as edgelite

    results = {"ops": n_ops, "budget_us_per_op": BUDGET_US, "numpy": np.__version__}
    for variant, fused in (("plain", False), ("fused_relu", True)):
        content = chain_model(n_ops, fused)
        ours, theirs = loaded(edgelite, content), loaded(litert, content)
        np.testing.assert_allclose(ours.get_tensor(ours.get_output_details()[0]["index"]),
                                   theirs.get_tensor(theirs.get_output_details()[0]["index"]),
                                   rtol=1e-5)
        plan = ours._main   # the execution plan of subgraph 0
        steps = plan.steps

        def bare_loop(steps=steps):
            for run, args in steps:
                run(*args)

        fns = {"edgelite Interpreter.invoke": ours.invoke, "LiteRT invoke": theirs.invoke,
               "edgelite SubgraphPlan.invoke": plan.invoke,
               "bare loop: for run, args in steps: run(*args)": bare_loop}
        if not fused:
            fns.update(microbenchmarks(n_ops))
        times, fast = us_per_op(fns, n_ops, blocks, block_s)
        results[variant] = {"us_per_op": times, "us_per_op_p10": fast,
                            "python_frames_per_op": python_frames_per_op(plan, n_ops)}
    return results


def report(r: dict) -> list:
    n, budget = r["ops"], r["budget_us_per_op"]
    plain, fused = r["plain"]["us_per_op"], r["fused_relu"]["us_per_op"]
    key = "edgelite Interpreter.invoke"
    def verdict(us: float) -> str:
        return "within" if us <= budget else "OVER"

    lines = [f"## Interpreter overhead: a chain of {n} [1]-shaped float32 ops, 1 thread "
             f"(numpy {r['numpy']})", "",
             "| chain | edgelite µs/op | LiteRT µs/op | edgelite/LiteRT | Python frames/op | "
             f"budget {budget:g} µs |", "|---|---:|---:|---:|---:|---|"]
    for name, variant in (("ADD, MUL", "plain"), ("ADD+RELU, MUL", "fused_relu")):
        t = r[variant]["us_per_op"]
        lines.append(f"| {name} | {t[key]:.2f} | {t['LiteRT invoke']:.3f} | "
                     f"{t[key] / t['LiteRT invoke']:.0f}x | "
                     f"{r[variant]['python_frames_per_op']:.1f} | {verdict(t[key])} |")
    lines += ["", "Where edgelite's time goes (µs per op, plain chain unless said):", "",
              "| layer | µs/op |", "|---|---:|"]
    for name, us in plain.items():
        if name != "LiteRT invoke":
            lines.append(f"| {name} | {us:.2f} |")
    lines.append(f"| fused chain: bare loop over steps | "
                 f"{fused['bare loop: for run, args in steps: run(*args)']:.2f} |")
    lines += ["", *findings(r)]
    return lines


def findings(r: dict) -> list:
    """What the numbers say, in words (computed, so they hold on the machine that ran them)."""
    n, n_fused = r["ops"], (r["ops"] + 1) // 2
    p, f = r["plain"]["us_per_op"], r["fused_relu"]["us_per_op"]
    api, plan = p["edgelite Interpreter.invoke"], p["edgelite SubgraphPlan.invoke"]
    bare = p["bare loop: for run, args in steps: run(*args)"]
    keyword, positional = p[UFUNC_KEYWORD], p[UFUNC_POSITIONAL]
    fused_extra = (f["edgelite Interpreter.invoke"] - api) * n / n_fused
    extra_frames = (r["fused_relu"]["python_frames_per_op"]
                    - r["plain"]["python_frames_per_op"]) * n / n_fused
    return [
        f"- Per invoke, outside the ops: Interpreter.invoke adds {(api - plan) * n:.1f} µs "
        "(threads.limit sets OpenBLAS's thread count and back on each call); "
        f"SubgraphPlan.invoke's enumerate and try add {(plan - bare) * n:.1f} µs over a bare loop.",
        f"- Plain chain: {api:.2f} µs/op, of which the ufunc call is {keyword:.2f} µs (`out=` "
        f"as a keyword; {positional:.2f} µs with `out` positional) and the loop and closure "
        f"call the rest. Passing `out` positionally in the kernels' closures (elementwise._binary's"
        f" compute) would save ~{keyword - positional:.2f} µs/op; numpy deprecates a positional "
        "out only for maximum/minimum.",
        f"- A fused RELU costs {fused_extra:.2f} µs more per fused op: {extra_frames:.0f} more "
        "Python frames (with_activation's wrapper, the activation lambda, clip_) and a clip "
        f"in place. In-place calls on tiny arrays are slow in numpy: np.add in place "
        f"{p[UFUNC_IN_PLACE]:.2f} µs vs {positional:.2f} µs into another array; add then "
        f"RELU in place {p[RELU_IN_PLACE]:.2f} µs vs {p[RELU_SCRATCH]:.2f} µs through a "
        "scratch array. Fix: bind the activation into the kernel's closure (one frame), and "
        "for small tensors compute into a scratch array made at prepare and clip it into `out`.",
    ]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=200, help="ops in the chain (default 200)")
    parser.add_argument("--blocks", type=int, default=30, help="timed blocks per variant")
    parser.add_argument("--block-ms", type=float, default=5.0, help="length of a timed block")
    parser.add_argument("--json", type=argparse.FileType("w"), help="write all numbers here")
    args = parser.parse_args(argv)
    results = measure(args.ops, args.blocks, args.block_ms / 1e3)
    print("\n".join(report(results)))
    if args.json:
        json.dump(results, args.json, indent=1)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
