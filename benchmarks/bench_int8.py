"""int8 vs float latency in edgelite (and LiteRT) on the shared models, with a per-op profile;
hybrid (dynamic-range) models too.

    python benchmarks/bench_int8.py [--models DIR] [--only mobilenet_v2] [--blocks 15] [--profile]
                                    [--cpu] [--hybrid DIR] [--hybrid-only]

For each pair (MODEL.tflite, MODEL_int8.tflite): the median wall-clock latency of one invoke in
edgelite (float; int8 with the default resolver, at most 1 LSB from the reference kernels, and
with BUILTIN_REF, bit-exact) and LiteRT (its default path, int8 and float), 1 thread, measured in
alternating blocks with a pause before each (OpenBLAS and XNNPACK threads spin after a call).
`--profile` adds each int8 step timed alone (best of N), summed by op type, beside the float
model's. With `--hybrid DIR` (default: ~/.cache/edgelite-tflite-corpus when it exists, from
tools/tflite_corpus.py) the dynamic-range files there (HYBRID) run too: edgelite's default and
BUILTIN_REF against LiteRT's default. The heading names the CPU and numpy's BLAS.
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy loads OpenBLAS

import numpy as np  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
PAIRS = ("mobilenet_v2", "digits_cnn")
HYBRID = ("keras_densenet121.dynamic", "keras_efficientnet_b0.dynamic")
CORPUS = Path.home() / ".cache" / "edgelite-tflite-corpus"


def machine() -> str:
    """The CPU model and numpy's BLAS (library, version, kernel set), for the heading."""
    cpu = "unknown CPU"
    try:
        flags = Path("/proc/cpuinfo").read_text()
        for line in flags.splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        cpu += " (AVX-512)" if " avx512f " in flags else " (AVX2)" if " avx2 " in flags else ""
    except OSError:
        pass
    blas = "unknown BLAS"
    try:
        info = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        blas = f"{info.get('name')} {info.get('version')} " \
            f"({info.get('openblas configuration', '')})"
    except Exception:  # noqa: BLE001 (older numpy: no dicts)
        pass
    return f"{cpu}; numpy {np.__version__}, {blas}; OPENBLAS_NUM_THREADS=" \
        f"{os.environ.get('OPENBLAS_NUM_THREADS')}"


def _interpreter(path: Path, litert: bool = False, reference: bool = False):
    """An allocated interpreter fed a seeded input; `reference`: edgelite's BUILTIN_REF (the
    integer arithmetic of TFLite's reference kernels, bit for bit)."""
    kwargs = {}
    if litert:
        from ai_edge_litert.interpreter import Interpreter
    else:
        from edgelite.interpreter import Interpreter, OpResolverType
        if reference:
            kwargs["experimental_op_resolver_type"] = OpResolverType.BUILTIN_REF
    it = Interpreter(model_path=str(path), num_threads=1, **kwargs)
    it.allocate_tensors()
    d = it.get_input_details()[0]
    rng = np.random.default_rng(0)
    if d["dtype"] == np.float32:
        x = rng.random(d["shape"], np.float32)
    else:
        x = rng.integers(-128, 128, d["shape"]).astype(d["dtype"])
    it.set_tensor(d["index"], x)
    it.invoke()
    return it


def _block(it, seconds: float, clock=time.perf_counter) -> list:
    times = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t = clock()
        it.invoke()
        times.append(clock() - t)
    return times


def latencies(runners: dict, blocks: int, seconds: float, clock=time.perf_counter) -> dict:
    """Median latency per runner, alternating blocks of `seconds` with a 50 ms pause each;
    `clock` time.process_time reads the CPU time of each invoke (steadier on a shared machine;
    LiteRT's is then its calling thread's only at 1 thread)."""
    times = {name: [] for name in runners}
    for _ in range(blocks):
        for name, it in runners.items():
            time.sleep(0.05)
            times[name] += _block(it, seconds, clock)
    return {name: float(np.median(t)) for name, t in times.items()}


def profile(it, reps: int) -> dict:
    """op type -> [steps, seconds] (each step best of `reps`)."""
    from edgelite.interpreter import threads

    plan = it._runtime.subgraph(0)
    ops = plan.sg.operators
    by_op = collections.defaultdict(lambda: [0, 0.0])
    with threads.limit(1):
        for (run, args), oi in zip(plan.steps, plan.step_ops):
            best = float("inf")
            for _ in range(reps):
                t = time.perf_counter()
                run(*args)
                best = min(best, time.perf_counter() - t)
            entry = by_op[ops[oi].opcode.name]
            entry[0] += 1
            entry[1] += best
    return dict(by_op)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=os.environ.get("EDGELITE_MODELS",
                                                       str(REPO_ROOT.parent / "shared" / "models")))
    ap.add_argument("--only", help="one model name (of the float model)")
    ap.add_argument("--blocks", type=int, default=15)
    ap.add_argument("--seconds", type=float, default=0.2, help="length of one block")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--cpu", action="store_true",
                    help="process CPU time per invoke instead of wall-clock time")
    ap.add_argument("--hybrid", help="folder of the dynamic-range corpus files (HYBRID)")
    ap.add_argument("--hybrid-only", action="store_true", help="only the hybrid models")
    args = ap.parse_args()
    folder = Path(args.models)
    clock = time.process_time if args.cpu else time.perf_counter
    print(f"{machine()}; {'CPU' if args.cpu else 'wall-clock'} time per invoke, medians, "
          "1 thread\n")
    profiles = {}
    if not args.hybrid_only:
        print("| model | float | int8 | int8/float | int8 BUILTIN_REF | REF/float | LiteRT int8 "
              "| int8/LiteRT | LiteRT float | float/LiteRT |")
        print("|---|---|---|---|---|---|---|---|---|---|")
    for name in ([] if args.hybrid_only else [args.only] if args.only else PAIRS):
        runners = {"float": _interpreter(folder / f"{name}.tflite"),
                   "int8": _interpreter(folder / f"{name}_int8.tflite"),
                   "ref": _interpreter(folder / f"{name}_int8.tflite", reference=True),
                   "litert": _interpreter(folder / f"{name}_int8.tflite", litert=True),
                   "litert_float": _interpreter(folder / f"{name}.tflite", litert=True)}
        med = latencies(runners, args.blocks, args.seconds, clock)
        f, q, r, lt, lf = (med[k] for k in ("float", "int8", "ref", "litert", "litert_float"))
        unit, k = ("ms", 1e3) if f > 1e-3 else ("µs", 1e6)
        print(f"| {name} | {f * k:.2f} {unit} | {q * k:.2f} {unit} | {q / f:.2f}× | "
              f"{r * k:.2f} {unit} | {r / f:.2f}× | {lt * k:.2f} {unit} | {q / lt:.1f}× | "
              f"{lf * k:.2f} {unit} | {f / lf:.1f}× |")
        if args.profile:
            profiles[name] = (profile(runners["float"], args.reps),
                              profile(runners["int8"], args.reps))
    hybrid = Path(args.hybrid) if args.hybrid else CORPUS
    found = [n for n in HYBRID if (hybrid / f"{n}.tflite").exists()]
    if found:
        print("\n| hybrid model | edgelite | edgelite BUILTIN_REF | LiteRT | edgelite/LiteRT |")
        print("|---|---|---|---|---|")
    for name in found:
        path = hybrid / f"{name}.tflite"
        runners = {"ours": _interpreter(path), "ref": _interpreter(path, reference=True),
                   "litert": _interpreter(path, litert=True)}
        med = latencies(runners, max(3, args.blocks // 3), args.seconds * 2, clock)
        o, r, lt = med["ours"], med["ref"], med["litert"]
        print(f"| {name} | {o * 1e3:.1f} ms | {r * 1e3:.1f} ms | {lt * 1e3:.1f} ms | "
              f"{o / lt:.1f}× |")
    if args.hybrid and not found:
        print(f"note: none of {', '.join(HYBRID)} in {hybrid}", file=sys.stderr)
    for name, (pf, pq) in profiles.items():
        print(f"\n{name}: per-op sums (best of {args.reps}), µs")
        print("| op | float steps | float | int8 steps | int8 |")
        print("|---|---|---|---|---|")
        for op in sorted(set(pf) | set(pq), key=lambda o: -pq.get(o, [0, 0])[1]):
            a, b = pf.get(op, [0, 0.0]), pq.get(op, [0, 0.0])
            print(f"| {op} | {a[0]} | {a[1] * 1e6:.0f} | {b[0]} | {b[1] * 1e6:.0f} |")
        print(f"| total | | {sum(v[1] for v in pf.values()) * 1e6:.0f} | "
              f"| {sum(v[1] for v in pq.values()) * 1e6:.0f} |")


if __name__ == "__main__":
    main()
