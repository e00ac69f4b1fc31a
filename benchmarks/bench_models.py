"""edgelite vs LiteRT on real models, side by side in one process, with edgelite's profile.

    python benchmarks/bench_models.py [--threads 1] [--seconds 4] [--models DIR] [--only NAME]
                                      [--json OUT] [--openblas-core native|Haswell|...]

For every `.tflite` in the shared models folder ($EDGELITE_MODELS, else ../shared/models from the
repository root) and the sample model (samples/default.tflite, from samples/make_default_model.py):

- latency: both runtimes get the same thread count (LiteRT with its defaults, i.e. XNNPACK), warm
  up, then run in alternating blocks with a pause between blocks (OpenBLAS and XNNPACK threads
  spin for a while after a call); median, p10 and p90 of single invokes, and the ratio of the
  medians edgelite / LiteRT;
- correctness of what was timed: the largest difference of edgelite's first outputs from the
  reference outputs in the manifest's refs/*.npz (or from LiteRT's, without refs);
- edgelite's profile: each step of the execution plan timed alone, summed by op type;
- memory: the arena's bytes vs the live-tensor lower bound (the most bytes alive at one step),
  and the peak RSS of a fresh process that loads, allocates and invokes the model (edgelite and
  LiteRT, each alone; "+model" is the growth over that process after its imports).

A model with operators edgelite cannot run yet gets the interpreter's list of them and LiteRT's
latency alone. The markdown tables at the end are ready to paste into a note.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path


def _threads_arg(argv: list) -> str:
    """--threads from the command line, read before numpy loads OpenBLAS (which reads the
    environment once)."""
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--threads="):
            return a.split("=", 1)[1]
    return "1"


def _core_arg(argv: list) -> str | None:
    """--openblas-core from the command line (OpenBLAS reads OPENBLAS_CORETYPE once, at load)."""
    for i, a in enumerate(argv):
        if a == "--openblas-core" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--openblas-core="):
            return a.split("=", 1)[1]
    return None


os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = _threads_arg(sys.argv[1:])
_CORE = _core_arg(sys.argv[1:])
if _CORE == "native":
    os.environ.pop("OPENBLAS_CORETYPE", None)
elif _CORE:
    os.environ["OPENBLAS_CORETYPE"] = _CORE

import numpy as np  # noqa: E402

from edgelite.cli.session import (duration, op_type_profile, percentiles_ms,  # noqa: E402
                                  random_inputs, step_times)

REPO_ROOT = Path(__file__).resolve().parents[1]
SAMPLE = REPO_ROOT / "samples" / "default.tflite"
SAMPLE_DATA = REPO_ROOT / "samples" / "default_test.npz"
BLOCK_S = 0.2          # a block of runs of one runtime lasts about this long
MIN_BLOCKS = 4         # per runtime
PAUSE_S = 0.05         # between blocks
WARMUP_S = 0.3
TOP_OPS = 3            # op types per model in the profile table


def models_dir(given: str | None) -> Path:
    path = Path(given or os.environ.get("EDGELITE_MODELS")
                or REPO_ROOT.parent / "shared" / "models")
    if not path.is_dir():
        sys.exit(f"error: no models folder at {path} (set EDGELITE_MODELS or --models)")
    return path


def model_list(folder: Path, only: str | None) -> list:
    """(path, reference .npz or None) for each model to run."""
    refs = {}
    manifest = folder / "manifest.json"
    if manifest.exists():
        for entry in json.loads(manifest.read_text())["models"]:
            ref = (entry.get("reference") or {}).get("ref_io")
            if ref:
                refs[entry["path"]] = folder / ref
    found = [(p, refs.get(p.name)) for p in sorted(folder.glob("*.tflite"))]
    if SAMPLE.exists():
        found.append((SAMPLE, SAMPLE_DATA if SAMPLE_DATA.exists() else None))
    else:
        print(f"note: {SAMPLE} is missing: run python samples/make_default_model.py",
              file=sys.stderr)
    return [(p, r) for p, r in found if not only or only in p.name]


# --- inputs and checks ---------------------------------------------------------------------------

def inputs_for(details: list, ref: Path | None) -> tuple:
    """(arrays, where they came from): a reference .npz's input_k (the sample's test set: its first
    image) when shapes and dtypes fit, else seeded random inputs."""
    if ref is not None and ref.exists():
        with np.load(ref) as data:
            arrays = [data[f"input_{k}"] if f"input_{k}" in data else None
                      for k in range(len(details))]
            if ref == SAMPLE_DATA:
                arrays = [data["x"][:1]]
        if all(a is not None and a.shape == tuple(d["shape"]) and a.dtype == d["dtype"]
               for a, d in zip(arrays, details)):
            return arrays, ref.name
    return random_inputs([(tuple(d["shape"]), d["dtype"]) for d in details]), "random"


def reference_outputs(ref: Path | None, n: int) -> list | None:
    if ref is None or not ref.exists() or ref == SAMPLE_DATA:
        return None
    with np.load(ref) as data:
        outs = [data.get(f"output_{k}") for k in range(n)]
    return outs if all(o is not None for o in outs) else None


def max_diff(ours: list, theirs: list) -> float | None:
    """The largest |difference| over all outputs (integers: in units of the last place)."""
    worst = 0.0
    for a, b in zip(ours, theirs):
        if a.shape != b.shape:
            return None
        worst = max(worst, float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)),
                                        initial=0.0)))
    return worst


def run_once(interpreter, details: list, arrays: list) -> list:
    for d, a in zip(details, arrays):
        interpreter.set_tensor(d["index"], a)
    interpreter.invoke()
    return [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]


# --- timing --------------------------------------------------------------------------------------

def side_by_side(invokes: dict, seconds: float) -> tuple:
    """Wall seconds of single invokes of each runtime, and the process CPU seconds per invoke of
    each block: warm-up, then blocks of about BLOCK_S seconds in alternating order, a pause
    before each block. On a loaded machine the scheduler takes the CPU away for whole time
    slices (~10 ms), which lands on long invokes more often than on short ones; CPU time does
    not count those waits (with 1 thread it is the work of the invoke itself)."""
    clock, cpu = time.perf_counter, time.process_time
    per_block = {}
    for name, invoke in invokes.items():
        warm, start = [], clock()
        while len(warm) < 3 or clock() - start < WARMUP_S:
            t = clock()
            invoke()
            warm.append(clock() - t)
        per_block[name] = max(1, int(BLOCK_S / float(np.median(warm))))
    blocks = max(MIN_BLOCKS, round(seconds / (BLOCK_S * len(invokes))))
    wall = {name: [] for name in invokes}
    cpu_per_invoke = {name: [] for name in invokes}
    names = list(invokes)
    for b in range(blocks):
        for name in names if b % 2 == 0 else names[::-1]:
            time.sleep(PAUSE_S)
            invoke, n, times = invokes[name], per_block[name], wall[name]
            cpu_start = cpu()
            for _ in range(n):
                t = clock()
                invoke()
                times.append(clock() - t)
            cpu_per_invoke[name].append((cpu() - cpu_start) / n)
    return wall, cpu_per_invoke


def peak_rss(runtime: str, model: Path, threads: int) -> dict | None:
    """Peak RSS of a fresh process running the model once in `runtime` (see rss_child)."""
    cmd = [sys.executable, __file__, "--rss-child", runtime, str(model), "--threads", str(threads)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        return None
    lines = done.stdout.strip().splitlines()
    return json.loads(lines[-1]) if done.returncode == 0 and lines else None


def _status_mb(field: str) -> float | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def rss_child(runtime: str, model: str, threads: int) -> None:
    """Print this process's RSS after its imports and its peak RSS after running the model: from
    /proc (the high-water mark reset after the imports, whose transient peak, e.g. compiling the
    schema's generated module where bytecode is not cached, would hide a small model), else
    getrusage's ru_maxrss, which Linux carries over from the parent across fork and exec."""
    import resource

    if runtime == "litert":
        from ai_edge_litert.interpreter import Interpreter
    else:
        from edgelite.interpreter import Interpreter
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")   # reset the high-water mark to the current RSS
    except OSError:
        pass
    baseline = _status_mb("VmRSS")
    it = Interpreter(model_path=model, num_threads=threads)
    it.allocate_tensors()
    details = it.get_input_details()
    arrays = random_inputs([(tuple(d["shape"]), d["dtype"]) for d in details])
    for _ in range(3):
        run_once(it, details, arrays)
    peak = _status_mb("VmHWM")
    if baseline is None or peak is None:
        baseline = peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB
    print(json.dumps({"baseline_mb": baseline, "peak_mb": peak}))


# --- one model -----------------------------------------------------------------------------------

def bench_model(path: Path, ref: Path | None, args) -> dict:
    from ai_edge_litert.interpreter import Interpreter as LiteRT

    from edgelite.interpreter import Interpreter, UnsupportedOpsError
    from edgelite.schema import load

    ir = load(path)
    result = {"model": path.name, "ops": sum(len(sg.operators) for sg in ir.subgraphs)}
    theirs = LiteRT(model_path=str(path), num_threads=args.threads)
    theirs.allocate_tensors()
    details = theirs.get_input_details()
    arrays, result["inputs"] = inputs_for(details, ref)
    invokes = {"litert": theirs.invoke}
    try:
        ours = Interpreter(model_path=str(path), num_threads=args.threads)
        ours.allocate_tensors()
        first = run_once(ours, ours.get_input_details(), arrays)
    except UnsupportedOpsError as e:
        result["unsupported"] = str(e).splitlines()
        ours = None
    except Exception as e:   # a kernel that refuses this model at prepare or fails running it
        result["error"] = f"{type(e).__name__}: {e}"
        ours = None
    litert_first = run_once(theirs, details, arrays)
    if ours is not None:
        expected = reference_outputs(ref, len(first))
        result["diff_vs"] = "reference" if expected is not None else "LiteRT"
        result["max_abs_diff"] = max_diff(first, expected if expected is not None else litert_first)
        invokes["edgelite"] = ours.invoke
    wall, cpu = side_by_side(invokes, args.seconds)
    for name in invokes:
        result[name] = percentiles_ms(wall[name])
        result[name]["cpu_median"] = float(np.median(cpu[name])) * 1e3
    if ours is None:
        return result
    result["ratio"] = result["edgelite"]["median"] / result["litert"]["median"]
    result["cpu_ratio"] = result["edgelite"]["cpu_median"] / result["litert"]["cpu_median"]
    plan = ours._main   # the execution plan of subgraph 0
    seconds = step_times(plan, args.profile_runs, args.threads)
    result["profile"] = op_type_profile(plan, seconds)
    result["steps_ms"] = sum(seconds) * 1e3
    result["arena_bytes"], result["live_bytes"] = plan.arena_bytes, plan.live_bytes
    result["arena_ratio"] = plan.arena_bytes / plan.live_bytes if plan.live_bytes else None
    return result


# --- report --------------------------------------------------------------------------------------

def missing_ops(lines: list) -> str:
    """"CONV_2D x3, ..." from the interpreter's list of unsupported operators."""
    counts: dict = {}
    for line in lines[1:]:
        m = re.match(r"\s*subgraph \d+ operator \d+: (custom op '[^']*'|\S+)( with \S+)?", line)
        what = (m[1] + (f" ({m[2].split()[-1]})" if m[2] else "")) if m else line.strip()
        counts[what] = counts.get(what, 0) + 1
    return ", ".join(f"{w} x{n}" if n > 1 else w for w, n in counts.items())


def latency(t: dict | None) -> str:
    if not t:
        return "-"
    return (f"{duration(t['median'])} ({duration(t['p10'])}–{duration(t['p90'])}); "
            f"CPU {duration(t['cpu_median'])}")


def size(nbytes: int) -> str:
    return f"{nbytes / 2**20:.2f} MiB" if nbytes >= 2**20 else f"{nbytes / 1024:.1f} KiB"


def mb(rss: dict | None) -> str:
    return f"{rss['peak_mb']:.0f} (+{rss['peak_mb'] - rss['baseline_mb']:.0f})" if rss else "-"


def openblas_core() -> str:
    """The kernels numpy's OpenBLAS runs (its core name), and whether the environment chose
    them (OPENBLAS_CORETYPE) or OpenBLAS did from the CPU."""
    import ctypes
    import glob
    name = "unknown"
    libs = glob.glob(os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs",
                                  "*openblas*"))
    for lib in libs:
        try:
            cdll = ctypes.CDLL(lib)
        except OSError:
            continue
        for symbol in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename",
                       "openblas_get_corename64_", "openblas_get_corename"):
            get = getattr(cdll, symbol, None)
            if get is not None:
                get.restype = ctypes.c_char_p
                name = get().decode()
                break
    forced = os.environ.get("OPENBLAS_CORETYPE")
    return f"{name} (set by OPENBLAS_CORETYPE={forced})" if forced else \
        f"{name} (chosen by OpenBLAS for this CPU)"


def tables(results: list, meta: dict) -> list:
    threads = meta["threads"]
    lines = [f"### edgelite vs LiteRT (XNNPACK), {threads} thread{'s' if threads > 1 else ''}",
             "",
             f"numpy {meta['numpy']}, OpenBLAS kernels {meta['openblas']}; load average "
             f"{meta['load_before']:.1f} before, "
             f"{meta['load_after']:.1f} after, on {meta['cpus']} CPUs. Latency: median (p10–p90) "
             "of single invokes, wall clock; CPU: the process's CPU time per invoke (median over "
             "blocks), which does not count the time the scheduler gave other processes.", "",
             "| model | ops | edgelite | LiteRT | edgelite/LiteRT | CPU ratio | max abs diff "
             "| arena / live | peak RSS MiB edgelite (+model) | LiteRT |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        rss = r.get("rss", {})
        if "edgelite" not in r:
            why = "missing: " + missing_ops(r["unsupported"]) if "unsupported" in r else r["error"]
            lines.append(f"| {r['model']} | {r['ops']} | {why} | {latency(r.get('litert'))} | "
                         f"| | | | | {mb(rss.get('litert'))} |")
            continue
        diff = r["max_abs_diff"]
        diff = "shapes differ" if diff is None else \
            f"{diff:.2g} vs {'ref' if r['diff_vs'] == 'reference' else 'LiteRT'}"
        arena = (f"{size(r['arena_bytes'])} / {size(r['live_bytes'])} ({r['arena_ratio']:.2f}x)"
                 if r["arena_ratio"] else size(r["arena_bytes"]))
        lines.append(f"| {r['model']} | {r['ops']} | {latency(r['edgelite'])} | "
                     f"{latency(r['litert'])} | {r['ratio']:.1f}x | {r['cpu_ratio']:.1f}x | "
                     f"{diff} | {arena} | {mb(rss.get('edgelite'))} | {mb(rss.get('litert'))} |")
    profiled = [r for r in results if "profile" in r]
    if profiled:
        lines += ["", f"### Where edgelite's time goes: each plan step timed alone (median of "
                      f"{meta['profile_runs']} runs), summed by op type; top {TOP_OPS}", "",
                  "| model | sum of steps | edgelite invoke (median) | top op types (share of "
                  "the sum) |", "|---|---:|---:|---|"]
        for r in profiled:
            top = ", ".join(f"{o['op']} x{o['steps']} {duration(o['ms'])} ({o['share']:.0%})"
                            for o in r["profile"][:TOP_OPS])
            lines.append(f"| {r['model']} | {duration(r['steps_ms'])} | "
                         f"{duration(r['edgelite']['median'])} | {top} |")
    return lines


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="both runtimes (default 1)")
    parser.add_argument("--seconds", type=float, default=4.0,
                        help="timed seconds per model, both runtimes together (default 4)")
    parser.add_argument("--profile-runs", type=int, default=5, help="runs of the step profile")
    parser.add_argument("--models", help="models folder (default $EDGELITE_MODELS or "
                                         "../shared/models)")
    parser.add_argument("--only", help="only models whose file name contains this")
    parser.add_argument("--no-rss", action="store_true", help="skip the peak-RSS subprocesses")
    parser.add_argument("--json", type=Path, help="write all numbers to this file")
    parser.add_argument("--openblas-core", metavar="NAME",
                        help="numpy's OpenBLAS kernels: a core name (Haswell, SkylakeX...) or "
                             "'native' for OpenBLAS's own choice (default: the environment's)")
    parser.add_argument("--rss-child", nargs=2, metavar=("RUNTIME", "MODEL"),
                        help=argparse.SUPPRESS)   # internal: one peak-RSS measurement
    args = parser.parse_args(argv)
    if args.rss_child:
        rss_child(*args.rss_child, args.threads)
        return

    meta = {"threads": args.threads, "numpy": np.__version__, "cpus": os.cpu_count(),
            "profile_runs": args.profile_runs, "load_before": os.getloadavg()[0],
            "openblas": openblas_core()}
    results = []
    for path, ref in model_list(models_dir(args.models), args.only):
        print(f"{path.name} ...", file=sys.stderr, flush=True)
        result = bench_model(path, ref, args)
        if "unsupported" in result:
            print("\n  ".join(result["unsupported"]), file=sys.stderr)
        if not args.no_rss:
            result["rss"] = {rt: peak_rss(rt, path, args.threads) for rt in ("edgelite", "litert")
                             if rt == "litert" or "edgelite" in result}
        results.append(result)
    meta["load_after"] = os.getloadavg()[0]
    print("\n".join(tables(results, meta)))
    if args.json:
        args.json.write_text(json.dumps({**meta, "models": results}, indent=1))


if __name__ == "__main__":
    main()
