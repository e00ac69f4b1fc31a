"""Dynamic-range (hybrid) convnets against their float32 twins, edgelite and LiteRT (issue 17,
goal 6): is the gap to LiteRT the hybrid path or the model?

    python benchmarks/bench_hybrid.py [--corpus DIR] [--only densenet] [--blocks 7] [--json OUT]
                                      [--delegate [--precision fp32] [--inputs 3]
                                       [--max-rel 3e-2] [--profile]]

For each of the corpus's Keras DenseNet121 and EfficientNetB0 (`tools/tflite_corpus.py keras`,
~/.cache/edgelite-tflite-corpus) as float32 and dynamic-range files: the calling thread's CPU
time per invoke (`time.thread_time`: a 1-thread invoke runs in the calling thread, other
processes do not count), edgelite and LiteRT (1 thread, its defaults: XNNPACK) alternating in
blocks of ~0.2 s in one process, medians over blocks; then edgelite's time by op type (each plan
step timed alone, CPU time) and what the hybrid files cost over the float ones in edgelite: the
on-the-fly input quantization (the default resolver's hybrid convolution is the float kernel on
weights dequantized at prepare and the input quantized and dequantized again). LiteRT's hybrid
convolutions are int8 GEMMs (faster than its own float ones here); edgelite's run on float32
BLAS, so the float file's time is their floor. A dynamic-range file also runs as its float
twin (the same graph with the weights dequantized to float32: tests/delegates/hybrid.py) in
both, in the same rotation; and the floor column is the arithmetic alone: one BLAS matmul per
CONV_2D / FULLY_CONNECTED and one einsum per DEPTHWISE_CONV_2D on the model's shapes.

--delegate: the same files through the OpenCL delegate (delegates/opencl; "hybrid":
"dequantize", its default: hybrid CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED on weights
dequantized once at prepare, quant.py), its 1-thread device (PoCL: the calling thread), beside
edgelite's numpy path and LiteRT, the three alternating in blocks in one process: per invoke the
calling thread's CPU time, the process's CPU time (every thread) and wall time, medians over
blocks; where the delegate's nodes run (partitions, ops it refused); and the accuracy on
--inputs inputs from the corpus's input range: max abs difference from LiteRT on the same file
and that over max |LiteRT output| (for hybrid files: LiteRT's integer hybrid kernels, XNNPACK's
and its builtin ones), for the delegate and for edgelite's CPU path (--max-rel: exit 1 when
the delegate is further from either); the convolutions' GFLOP/s (2 x multiply-adds per CPU
second; a hybrid file's are int8 products in LiteRT). --profile: the delegate's kernel launches
by op (benchmarks/bench_opencl.py's profile).
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


def input_range(path: Path) -> tuple:
    """The corpus manifest's input range of a file (tools/tflite_corpus.py), 0..255 without."""
    manifest = path.parent / "manifest.json"
    if manifest.exists():
        entry = json.loads(manifest.read_text()).get(path.name, {})
        if "input_range" in entry:
            return tuple(entry["input_range"])
    return (0.0, 255.0)


def _feed(it, rng, value_range) -> None:
    for d in it.get_input_details():
        it.set_tensor(d["index"], rng.uniform(*value_range, tuple(d["shape"])).astype(d["dtype"]))


def _loaded(cls, path: Path, content: bytes | None = None, **kw):
    """An interpreter of `path` (or of `content`, fed `path`'s input range), run once."""
    if content is None:
        it = cls(model_path=str(path), num_threads=1, **kw)
    else:
        it = cls(model_content=content, num_threads=1, **kw)
    it.allocate_tensors()
    _feed(it, np.random.default_rng(0), input_range(path))
    it.invoke()
    return it


def float_twin(path: Path) -> bytes:
    """The dynamic-range file with its int8 weights dequantized to float32 (the same graph:
    tests/delegates/hybrid.py's float_twin)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "delegates"))
    from hybrid import float_twin as twin
    return twin(path.read_bytes())


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
    """edgelite and LiteRT on the file, alternating in blocks; for a dynamic-range file also
    both on its float twin (the same graph, float32 weights), in the same rotation."""
    from ai_edge_litert.interpreter import Interpreter as LiteRT

    from edgelite.interpreter import Interpreter
    runners = {"edgelite": _loaded(Interpreter, path), "litert": _loaded(LiteRT, path)}
    if "dynamic" in path.name:
        twin = float_twin(path)
        runners["twin"] = _loaded(Interpreter, path, twin)
        runners["twin_litert"] = _loaded(LiteRT, path, twin)
    times = {k: [] for k in runners}
    for _ in range(blocks):
        for k, it in runners.items():
            times[k].append(_block(it))
    ours, theirs = runners["edgelite"], runners["litert"]
    out = [it.get_tensor(it.get_output_details()[0]["index"]) for it in (ours, theirs)]
    med = {k: float(np.median(v)) for k, v in times.items()}
    e, lt = med["edgelite"], med["litert"]
    row = {"edgelite_ms": e, "litert_ms": lt, "ratio": e / lt,
           "max_abs_diff": float(np.abs(out[0] - out[1]).max()),
           "by_op": op_types(ours), "floor_ms": floor_ms(ours), "steps": steps_run(ours)}
    if "twin" in med:
        row.update(twin_ms=med["twin"], twin_litert_ms=med["twin_litert"])
    return row


def steps_run(it) -> tuple:
    """(plan steps an invoke runs, operators): fusion runs chains as one step (fusion.py)."""
    plan = it._runtime.subgraph(0)
    return len(getattr(plan, "run_ops", plan.steps)), len(plan.step_ops)


def floor_ms(it, runs: int = 5) -> dict:
    """CPU ms per invoke of the arithmetic alone, each on fresh contiguous float32 arrays of the
    model's shapes: per CONV_2D and FULLY_CONNECTED one BLAS matmul (P, K) @ (K, O); per
    DEPTHWISE_CONV_2D numpy's einsum over taps laid out as the kernel lays them (whole output
    rows, kh x kw views: the stride-1 layout of its output grid). What no numpy kernel of
    these ops can go below; the rest of an invoke is the passes around them."""
    from numpy.lib.stride_tricks import as_strided
    sg = it._runtime.subgraph(0).sg
    total = {"matmul": 0.0, "einsum": 0.0}
    rng = np.random.default_rng(0)
    for op in sg.operators:
        if op.op not in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"):
            continue
        w, y = sg.tensors[op.inputs[1]], sg.tensors[op.outputs[0]]
        if op.op == "DEPTHWISE_CONV_2D":
            _, kh, kw, c = w.shape
            _, ho, wo, _ = y.shape
            base = rng.random((ho + kh - 1, wo + kw - 1, c), np.float32)
            sy, sx, sc = base.strides
            views = as_strided(base, (kh, kw, 1, ho, wo * c), (sy, sx, 0, sy, sc))
            taps = rng.random((kh, kw, wo * c), np.float32)
            dest = np.empty((1, ho, wo * c), np.float32)
            total["einsum"] += _cpu_ms(np.einsum, runs, "ijnyk,ijk->nyk", views, taps,
                                       out=dest)
            continue
        o = w.shape[0]
        k = int(np.prod(w.shape[1:]))
        p = int(np.prod(y.shape)) // o
        a, b = rng.random((p, k), np.float32), rng.random((k, o), np.float32)
        dest = np.empty((p, o), np.float32)
        total["matmul"] += _cpu_ms(np.matmul, runs, a, b, out=dest)
    return total


def _cpu_ms(fn, runs: int, *args, **kwargs) -> float:
    spent = []
    for _ in range(runs):
        t = time.thread_time()
        fn(*args, **kwargs)
        spent.append(time.thread_time() - t)
    return float(np.median(spent)) * 1e3


def _clocks(it) -> tuple:
    """(thread CPU, process CPU, wall) ms per invoke over one block of >= BLOCK_S wall and
    2 invokes."""
    n, t0, p0, w0 = 0, time.thread_time(), time.process_time(), time.perf_counter()
    while True:
        it.invoke()
        n += 1
        wall = time.perf_counter() - w0
        if wall >= BLOCK_S and n >= 2:
            return ((time.thread_time() - t0) / n * 1e3, (time.process_time() - p0) / n * 1e3,
                    wall / n * 1e3)


def _outputs(it) -> list:
    return [it.get_tensor(o["index"]).copy() for o in it.get_output_details()]


def accuracy(runners: dict, references: dict, path: Path, inputs: int) -> dict:
    """(runner, reference) -> max abs difference of the runner's outputs from the reference's
    over `inputs` inputs of the corpus's input range, and that over max |reference output|."""
    errors: dict = {}
    peak = dict.fromkeys(references, 0.0)
    for i in range(inputs):
        for it in list(runners.values()) + list(references.values()):
            _feed(it, np.random.default_rng(100 + i), input_range(path))
            it.invoke()
        for r, ref_it in references.items():
            ref = _outputs(ref_it)
            peak[r] = max(peak[r], max(float(np.abs(x).max()) for x in ref))
            for k, it in runners.items():
                err = max(float(np.abs(g - x).max()) for g, x in zip(_outputs(it), ref))
                errors[k, r] = max(errors.get((k, r), 0.0), err)
    return {(k, r): (a, a / peak[r] if peak[r] else float("nan"))
            for (k, r), a in errors.items()}


def macs(it) -> float:
    """Multiply-adds per invoke of the model's CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED."""
    sg = it._runtime.subgraph(0).sg
    total = 0
    for op in sg.operators:
        if op.op not in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"):
            continue
        w, out = sg.tensors[op.inputs[1]], sg.tensors[op.outputs[0]]
        depth = {"CONV_2D": int(np.prod(w.shape[1:])), "FULLY_CONNECTED": w.shape[-1]}.get(
            op.op, int(np.prod(w.shape[1:3])))
        total += int(np.prod(out.shape)) * depth
    return float(total)


def where(it) -> dict:
    """Partitions of the delegate and the ops it left on the CPU (op -> count, first reason)."""
    from edgelite.interpreter.delegation import placement
    pl = placement(it)
    cpu: dict = {}
    for p in pl:
        if p["where"] == "CPU":
            n, why = cpu.get(p["op"], (0, p["reason"]))
            cpu[p["op"]] = (n + 1, why)
    parts = {p["partition"] for p in pl if p["where"] not in ("CPU", "folded")}
    return {"partitions": len(parts), "delegated": sum(p["where"] not in ("CPU", "folded")
                                                       for p in pl),
            "cpu": {k: list(v) for k, v in cpu.items()}}


def compare_delegate(path: Path, blocks: int, precision: str, inputs: int) -> dict:
    """edgelite (numpy), edgelite + the OpenCL delegate and LiteRT on one file, alternating;
    accuracy against LiteRT's default kernels (XNNPACK) and its builtin ones."""
    from ai_edge_litert.interpreter import Interpreter as LiteRT
    from ai_edge_litert.interpreter import OpResolverType

    from edgelite.delegates import load_delegate
    from edgelite.interpreter import Interpreter
    delegate = load_delegate("opencl", {"precision": precision})
    start = time.perf_counter()
    opencl = _loaded(Interpreter, path, experimental_delegates=[delegate])
    prepare_s = time.perf_counter() - start
    runners = {"numpy": _loaded(Interpreter, path), "opencl": opencl,
               "litert": _loaded(LiteRT, path)}
    clocks = {k: [] for k in runners}
    for _ in range(blocks):
        for k, it in runners.items():
            clocks[k].append(_clocks(it))
    med = {k: np.median(np.array(v), axis=0) for k, v in clocks.items()}
    out = {f"{k}_{c}_ms": float(med[k][i]) for k in runners
           for i, c in enumerate(("thread", "process", "wall"))}
    for k in ("numpy", "opencl"):
        out[f"{k}_ratio_cpu"] = float(med[k][1] / med["litert"][1])
        out[f"{k}_ratio_wall"] = float(med[k][2] / med["litert"][2])
    builtin = _loaded(LiteRT, path, experimental_op_resolver_type=OpResolverType
                      .BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    acc = accuracy({k: runners[k] for k in ("numpy", "opencl")},
                   {"litert": runners["litert"], "builtin": builtin}, path, inputs)
    out.update({f"{k}_vs_{r}_max_abs": a for (k, r), (a, _) in acc.items()})
    out.update({f"{k}_vs_{r}_rel": e for (k, r), (_, e) in acc.items()})
    out["gmac"] = macs(opencl) / 1e9
    out["placement"] = where(opencl)
    out["prepare_s"] = prepare_s
    return out


def delegate_table(names: list, args) -> dict:
    print(f"\nThrough the OpenCL delegate ({args.precision}, 1 thread), edgelite's numpy path "
          "and LiteRT (XNNPACK) alternating; ms per invoke: process CPU time (every thread) / "
          f"wall. Accuracy over {args.inputs} inputs: max abs difference from LiteRT on the "
          "same file (XNNPACK's kernels; its builtin ones) over max |LiteRT output|. GFLOP/s: "
          "2 x the convolutions' multiply-adds per CPU second\n")
    print("| model | numpy ms | OpenCL ms | LiteRT ms | numpy/LiteRT CPU | OpenCL/LiteRT "
          "CPU, wall | OpenCL vs LiteRT (XNNPACK; builtin) | numpy vs LiteRT (XNNPACK; builtin) "
          "| GMAC | GFLOP/s OpenCL, LiteRT | partitions | on CPU |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    rows, worst = {}, 0.0
    for name in names:
        path = args.corpus / name
        if not path.exists():
            print(f"| {name} | not in {args.corpus}: tools/tflite_corpus.py keras |")
            continue
        r = rows[name] = compare_delegate(path, args.blocks, args.precision, args.inputs)
        pl = r["placement"]
        cpu = ", ".join(f"{op} x{n}" for op, (n, _) in pl["cpu"].items()) or "-"
        flops = [2 * r["gmac"] / (r[f"{k}_process_ms"] * 1e-3) for k in ("opencl", "litert")]
        acc = ["; ".join(f"{r[f'{k}_vs_{ref}_rel']:.1e}" for ref in ("litert", "builtin"))
               for k in ("opencl", "numpy")]
        worst = max(worst, r["opencl_vs_litert_rel"], r["opencl_vs_builtin_rel"])
        print(f"| {name} | {r['numpy_process_ms']:.1f} / {r['numpy_wall_ms']:.1f} "
              f"| {r['opencl_process_ms']:.1f} / {r['opencl_wall_ms']:.1f} "
              f"| {r['litert_process_ms']:.1f} / {r['litert_wall_ms']:.1f} "
              f"| {r['numpy_ratio_cpu']:.2f}x | {r['opencl_ratio_cpu']:.2f}x, "
              f"{r['opencl_ratio_wall']:.2f}x | {acc[0]} | {acc[1]} | {r['gmac']:.2f} "
              f"| {flops[0]:.0f}, {flops[1]:.0f} | {pl['partitions']} | {cpu} |", flush=True)
        for op, (n, why) in pl["cpu"].items():
            print(f"  {name}: {op} x{n} on the CPU: {why}")
    if args.profile:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from bench_opencl import profile
        print(f"\n### Kernel launches ({args.precision}, bench_opencl.profile)\n")
        for name in rows:
            print(profile(args.corpus / name, args.precision, None, top=8))
    if args.max_rel is not None and worst > args.max_rel:
        print(f"\nFAIL: the delegate is {worst:.2g} of max |LiteRT output| from LiteRT "
              f"(> --max-rel {args.max_rel:g})")
        sys.exit(1)
    return rows


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
    p.add_argument("--delegate", action="store_true", help="through the OpenCL delegate only")
    p.add_argument("--precision", default="fp32")
    p.add_argument("--inputs", type=int, default=3)
    p.add_argument("--max-rel", type=float, help="--delegate: fail past this accuracy")
    p.add_argument("--profile", action="store_true", help="--delegate: kernel launches too")
    args = p.parse_args(argv)
    names = [n for n in MODELS if not args.only or any(s in n for s in args.only)]
    import numpy
    print(f"numpy {numpy.__version__}; OPENBLAS_CORETYPE="
          f"{os.environ.get('OPENBLAS_CORETYPE', '(native)')}; CPU ms per invoke, 1 thread\n")
    if args.delegate:
        rows = delegate_table(names, args)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1))
        return 0
    print("| model | edgelite ms | LiteRT ms | edgelite/LiteRT | max abs diff | "
          "float twin: edgelite ms, / LiteRT float, / LiteRT this file | floor: GEMM + "
          "einsum ms, / LiteRT | steps run / ops |")
    print("|---|---:|---:|---:|---:|---|---|---|")
    rows = {}
    for name in names:
        path = args.corpus / name
        if not path.exists():
            print(f"| {name} | not in {args.corpus}: tools/tflite_corpus.py keras | | | | | | |")
            continue
        r = rows[name] = compare(path, args.blocks)
        twin = "-"
        if "twin_ms" in r:
            twin = (f"{r['twin_ms']:.2f}, {r['twin_ms'] / r['twin_litert_ms']:.2f}x, "
                    f"{r['twin_ms'] / r['litert_ms']:.2f}x")
        fl = sum(r["floor_ms"].values())
        print(f"| {name} | {r['edgelite_ms']:.2f} | {r['litert_ms']:.2f} | {r['ratio']:.2f}x "
              f"| {r['max_abs_diff']:.2g} | {twin} | {r['floor_ms']['matmul']:.2f} + "
              f"{r['floor_ms']['einsum']:.2f}, {fl / r['litert_ms']:.2f}x "
              f"| {r['steps'][0]} / {r['steps'][1]} |", flush=True)
    print("\nedgelite's CPU ms by op type (each plan step timed alone; a fused step counts as "
          "its first op: a convolution with the swish it feeds, LOGISTIC with its MUL)\n")
    for name, r in rows.items():
        print(f"- {name}: " + ", ".join(f"{op} {ms:.2f}" for op, ms in r["by_op"].items()
                                         if ms >= 0.01))
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
