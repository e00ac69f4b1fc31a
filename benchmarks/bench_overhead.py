"""Interpreter overhead per op, and the per-invoke cost of tiny models, against LiteRT.

    python benchmarks/bench_overhead.py [--ops 200] [--blocks 30] [--models LIST] [--json OUT]

Builds (with edgelite's IR) x[1] -> ADD(c) -> MUL(c) -> ADD(c) -> ... of `--ops` float32 ops, once
plain and once with a fused RELU on every ADD, and times `invoke` in edgelite and LiteRT (1
thread, XNNPACK default) in alternating blocks; then the same chains on [8] tensors (one-element
ops run as Python floats, elementwise.python_binary; eight elements take numpy's calls: the
per-op cost of every other elementwise op). The issue's budget is 0.5 µs per op. Times are
the calling thread's CPU time, so other processes on a busy machine do not count. Then it takes
edgelite's time apart, layer by layer: `Interpreter.invoke` -> `SubgraphPlan.invoke` -> the
plan's generated `run_steps` -> a loop over the plan's (kernel, arrays) steps -> the ufunc call
each kernel makes -> the same call spelled otherwise, and counts the Python frames each op runs
(cProfile), so the table says where the µs go.

Then the tiny models of issue 17 (goal: <= 2.5x LiteRT per invoke at 1 thread) and MobileNetV2
(must not get slower), the same way: CPU time per invoke in alternating blocks, medians. `--models`
takes shared-model file names, corpus names (tools/tflite_corpus.py) and `silero_vad` (converted
from the shared ONNX file at 8 chunks, as samples/raspberry_pi/setup_models.py does); `none`
skips the table.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # before numpy loads OpenBLAS

import numpy as np  # noqa: E402

BUDGET_US = 0.5       # the target per op
RATIO_GOAL = 2.5      # tiny models: edgelite / LiteRT per invoke
MODELS = ("digits_cnn.tflite,keras_kws_head.float32,silero_vad,mwk_okay_nabu.tflite,"
          "mobilenet_v2.tflite")
PAUSE_S = 0.02        # between blocks, so neither runtime's spinning threads slow the other


def chain_model(n_ops: int, fused_relu: bool, width: int = 1) -> bytes:
    """x[width] float32 -> n_ops alternating ADD / MUL with a [width] constant (RELU fused into
    ADDs)."""
    from edgelite.schema import (Model, Operator, OperatorCode, Subgraph, Tensor, default_options,
                                 save)

    model = Model(description=f"overhead chain of {n_ops} ops")
    sg = Subgraph(name="main")
    x = sg.add_tensor(Tensor("x", (width,), "float32"))
    c = sg.add_tensor(Tensor("c", (width,), "float32",
                             buffer=model.add_buffer(np.full(width, 1.0001, np.float32))))
    prev = x
    for i in range(n_ops):
        out = sg.add_tensor(Tensor(f"t{i}", (width,), "float32"))
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
    d = it.get_input_details()[0]
    it.set_tensor(d["index"], np.ones(d["shape"], np.float32))
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


GENERATED = "generated run_steps (one call per step, arrays bound)"
BARE_LOOP = "loop: for run, args in steps: run(*args)"
UFUNC_KEYWORD = "np.add(x, c, out=out)"
UFUNC_POSITIONAL = "np.add(x, c, out)  (out positional, as the kernels call it)"
UFUNC_IN_PLACE = "np.add(out, c, out)  (in place)"
RELU_IN_PLACE = "np.add(x, c, out); clip(out, 0.0, inf, out)  (Python float bounds, in place)"
RELU_SCRATCH = "np.add(x, c, tmp); clip(tmp, lo, hi, out)  (0-d bounds, no call in place: now)"


def microbenchmarks(n_ops: int) -> dict:
    """The calls a kernel's `run` can make, n_ops times each, on [1]-shaped float32 arrays."""
    from edgelite.interpreter.kernels.common import clip

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
            clip(out, 0.0, inf, out)

    lo, hi = np.zeros((), np.float32), np.full((), inf, np.float32)

    def relu_from_scratch():
        for _ in ops:
            add(x, c, tmp)
            clip(tmp, lo, hi, out)

    return {"Python loop + call of a no-op": call_noop, UFUNC_KEYWORD: ufunc_out_keyword,
            UFUNC_POSITIONAL: ufunc_out_positional, UFUNC_IN_PLACE: ufunc_in_place,
            RELU_IN_PLACE: relu_in_place, RELU_SCRATCH: relu_from_scratch}


# (name, RELU fused into the ADDs, elements a tensor): one-element tensors run as Python
# floats (elementwise.python_binary), eight as numpy calls, one (ADD, MUL) or two (ADD+RELU)
# an op: the chain's per-op cost on each path.
VARIANTS = (("plain", False, 1), ("fused_relu", True, 1), ("plain_x8", False, 8),
            ("fused_relu_x8", True, 8))
CHAINS = {"plain": "ADD, MUL [1]", "fused_relu": "ADD+RELU, MUL [1]",
          "plain_x8": "ADD, MUL [8] (numpy calls)",
          "fused_relu_x8": "ADD+RELU, MUL [8] (numpy calls)"}


def measure(n_ops: int, blocks: int, block_s: float) -> dict:
    from ai_edge_litert import interpreter as litert

    from edgelite import interpreter as edgelite

    results = {"ops": n_ops, "budget_us_per_op": BUDGET_US, "numpy": np.__version__}
    for variant, fused, width in VARIANTS:
        content = chain_model(n_ops, fused, width)
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
               GENERATED: plan.run_steps, BARE_LOOP: bare_loop}
        if variant == "plain":
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

    lines = [f"## Interpreter overhead: a chain of {n} float32 ops, 1 thread "
             f"(numpy {r['numpy']})", "",
             "| chain | edgelite µs/op | LiteRT µs/op | edgelite/LiteRT | Python frames/op | "
             f"budget {budget:g} µs |", "|---|---:|---:|---:|---:|---|"]
    for variant, name in CHAINS.items():
        if variant not in r:
            continue
        t = r[variant]["us_per_op"]
        lines.append(f"| {name} | {t[key]:.2f} | {t['LiteRT invoke']:.3f} | "
                     f"{t[key] / t['LiteRT invoke']:.0f}x | "
                     f"{r[variant]['python_frames_per_op']:.1f} | {verdict(t[key])} |")
    lines += ["", "Where edgelite's time goes (µs per op, plain chain unless said):", "",
              "| layer | µs/op |", "|---|---:|"]
    for name, us in plain.items():
        if name != "LiteRT invoke":
            lines.append(f"| {name} | {us:.2f} |")
    lines.append(f"| fused chain: generated run_steps | {fused[GENERATED]:.2f} |")
    for variant in ("plain_x8", "fused_relu_x8"):
        if variant in r:
            lines.append(f"| {CHAINS[variant]}: generated run_steps | "
                         f"{r[variant]['us_per_op'][GENERATED]:.2f} |")
    lines += ["", *findings(r)]
    return lines


def findings(r: dict) -> list:
    """What the numbers say, in words (computed, so they hold on the machine that ran them)."""
    n = r["ops"]
    p, f = r["plain"]["us_per_op"], r["fused_relu"]["us_per_op"]
    api, plan = p["edgelite Interpreter.invoke"], p["edgelite SubgraphPlan.invoke"]
    generated, loop = p[GENERATED], p[BARE_LOOP]
    return [
        f"- Per invoke, outside the steps: Interpreter.invoke (its lock, the BLAS thread limit, "
        f"numpy's error state; it runs SubgraphPlan.invoke's lines itself) "
        f"{(api - generated) * n:+.1f} µs over the bare run_steps; SubgraphPlan.invoke (what "
        f"control flow calls) {(plan - generated) * n:+.1f} µs. (The bare run_steps runs under "
        "numpy's default error state, whose checks after each ufunc an invoke skips: either "
        "may come out negative.)",
        f"- The generated run_steps: {generated:.2f} µs/op, against {loop:.2f} µs/op for a loop "
        "over the plan's (kernel, arrays) tuples (what invoke ran before).",
        f"- The ufunc call itself: {p[UFUNC_POSITIONAL]:.2f} µs with `out` positional, "
        f"{p[UFUNC_KEYWORD]:.2f} µs as a keyword; in place on a one-element array "
        f"{p[UFUNC_IN_PLACE]:.2f} µs (numpy's slow path there). A fused RELU: "
        f"{p[RELU_IN_PLACE]:.2f} µs with Python-float bounds in place vs "
        f"{p[RELU_SCRATCH]:.2f} µs with 0-d bounds through a scratch array (the kernels' way); "
        f"the fused chain runs {f['edgelite Interpreter.invoke']:.2f} µs/op.",
    ]


def model_path(name: str, tmp: str) -> str | None:
    """The file of a --models entry: a shared model, a corpus model, or silero_vad converted
    here; None when it is not on this machine."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    shared = Path(os.environ.get("EDGELITE_MODELS") or root.parent / "shared" / "models")
    corpus = Path(os.environ.get("EDGELITE_TFLITE_CORPUS")
                  or Path.home() / ".cache" / "edgelite-tflite-corpus")
    if name == "silero_vad":
        onnx = shared / "silero_vad_seq.onnx"
        if not onnx.exists():
            return None
        from edgelite.converter.convert import convert_onnx   # the converter's extra (onnx)

        out = Path(tmp) / "silero_vad.tflite"
        out.write_bytes(convert_onnx(str(onnx), input_shapes={"input": [8, 576]}).content)
        return str(out)
    for path in (shared / name, corpus / f"{name}.tflite", corpus / name):
        if path.exists():
            return str(path)
    return None


def model_inputs(it) -> None:
    rng = np.random.default_rng(0)
    for d in it.get_input_details():
        value = rng.standard_normal(d["shape"]) * 0.5 if d["dtype"] in (np.float32, np.float64) \
            else rng.integers(-20, 20, d["shape"])
        it.set_tensor(d["index"], value.astype(d["dtype"]))


def measure_models(names: list, blocks: int, block_s: float) -> list:
    """CPU µs per invoke, edgelite and LiteRT in alternating blocks, for each model found."""
    import tempfile

    from ai_edge_litert import interpreter as litert

    from edgelite import interpreter as edgelite

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            path = model_path(name, tmp)
            if path is None:
                rows.append({"model": name, "missing": True})
                continue
            its = {}
            for label, module in (("edgelite", edgelite), ("LiteRT", litert)):
                it = its[label] = module.Interpreter(model_path=path, num_threads=1)
                it.allocate_tensors()
                model_inputs(it)
                it.invoke()
            times, _ = us_per_op({k: it.invoke for k, it in its.items()}, 1, blocks, block_s)
            rows.append({"model": name, "edgelite_us": times["edgelite"],
                         "litert_us": times["LiteRT"],
                         "steps": len(its["edgelite"]._main.steps),
                         "bound_steps": its["edgelite"]._main.run_steps.bound})
    return rows


def models_report(rows: list) -> list:
    lines = ["", "## Tiny models (and MobileNetV2): CPU time per invoke, 1 thread, alternating "
             f"blocks, medians; goal <= {RATIO_GOAL:g}x LiteRT", "",
             "| model | steps (bound) | edgelite µs | LiteRT µs | edgelite/LiteRT |",
             "|---|---:|---:|---:|---:|"]
    for r in rows:
        if r.get("missing"):
            lines.append(f"| {r['model']} | not on this machine | | | |")
            continue
        lines.append(f"| {r['model']} | {r['steps']} ({r['bound_steps']}) | "
                     f"{r['edgelite_us']:.1f} | {r['litert_us']:.1f} | "
                     f"{r['edgelite_us'] / r['litert_us']:.2f}x |")
    return lines


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=200, help="ops in the chain (default 200)")
    parser.add_argument("--blocks", type=int, default=30, help="timed blocks per variant")
    parser.add_argument("--block-ms", type=float, default=5.0, help="length of a timed block")
    parser.add_argument("--models", default=MODELS,
                        help=f"comma-separated models to time per invoke (default {MODELS}; "
                             "'none': only the chain)")
    parser.add_argument("--json", type=argparse.FileType("w"), help="write all numbers here")
    args = parser.parse_args(argv)
    results = measure(args.ops, args.blocks, args.block_ms / 1e3)
    lines = report(results)
    if args.models != "none":
        results["models"] = measure_models(args.models.split(","), args.blocks,
                                           4 * args.block_ms / 1e3)
        lines += models_report(results["models"])
    print("\n".join(lines))
    if args.json:
        json.dump(results, args.json, indent=1)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
