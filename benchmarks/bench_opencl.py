"""The OpenCL delegate vs edgelite's numpy path vs LiteRT, at 1 (and more) threads, and start-up.

    python benchmarks/bench_opencl.py [--only mobilenet] [--precision fp32,fp16] [--seconds 2]
                                      [--threads 1,2] [--device cpu] [--no-startup]
                                      [--json OUT] [--profile]

Each thread count T of --threads (default 1): the numpy path with num_threads=T (OpenBLAS; the
first T only), the delegate with "threads": T (on PoCL: T worker threads run its work-groups;
T = 1 PoCL's basic device, the calling thread) and LiteRT with num_threads=T (XNNPACK), in one
process per T (PoCL starts its workers once per process, as many as the first delegate's
"threads"). Latency: median of single invokes, every
runner in alternating blocks with a pause before each block (as bench_models.py), so load from
other processes falls on all of them alike; beside it the median CPU time of the process per
invoke. mobilenet_v2_int8 runs through the delegate with "int8": "dequantize" (LiteRT: its int8
kernels), or as --int8 says ("integer": bit-exact integer kernels, quant_int.py). Accuracy:
max abs difference of the delegate's outputs from the numpy interpreter's, over max |numpy
output|. The CPU, numpy's BLAS (its kernels: OPENBLAS_CORETYPE) and the CPU PoCL compiles
kernels for (pocl_cpu.py) head the table.

--profile: per kernel launch of the first precision, from OpenCL profiling events (a queue of
its own; the partition's launches re-enqueued as one batch, median of 20 batches): time by op
and kernel, the launches that take longest, and the batch's wall time (launch overhead and the
gaps between kernels are the difference). On PoCL an event's end may be stamped late, moving
time to the next kernel: trust the totals more than single lines.

Start-up: a fresh process loads the delegate and the model, prepares (program builds, weight
packing and upload) and invokes once, with empty OpenCL caches (PoCL's POCL_CACHE_DIR and
pyopencl's XDG_CACHE_HOME pointed at a new folder): first start; then again with those caches:
cached start, where "new cache files" must be 0 (nothing was rebuilt; PoCL's `tempfile_*`, the
source it writes on every build call, hit or miss, are not counted). On PoCL the first invoke
of a first start compiles each kernel (per set of defines) to machine code: most of the time.
"Waiting for a core": the cached start's main thread runnable but not running (Linux
schedstat), the part of its wall time beyond its CPU time that load from other processes adds.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# OpenBLAS may use every core: each interpreter holds it to its own num_threads while it runs.

import numpy as np  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
MODELS = ["mobilenet_v2", "mp_face_detection", "mp_hand_landmark", "digits_cnn",
          "mobilenet_v2_int8"]
BLOCK_S, PAUSE_S, MIN_BLOCKS = 0.2, 0.05, 4


def models_dir(arg) -> Path:
    if arg:
        return Path(arg)
    env = os.environ.get("EDGELITE_MODELS")
    return Path(env) if env else REPO_ROOT.parent / "shared" / "models"


def _prepared(interpreter, x):
    interpreter.allocate_tensors()
    d = interpreter.get_input_details()[0]
    interpreter.set_tensor(d["index"], x.reshape(d["shape"]).astype(d["dtype"]))
    interpreter.invoke()
    return interpreter


def _outputs(it) -> list:
    return [it.get_tensor(o["index"]).copy() for o in it.get_output_details()]


def _input(path: Path) -> np.ndarray:
    from edgelite.interpreter import Interpreter
    d = Interpreter(model_path=str(path)).get_input_details()[0]
    rng = np.random.default_rng(0)
    if d["dtype"] == np.int8:
        return rng.integers(-128, 128, d["shape"]).astype(np.int8)
    return rng.uniform(-1, 1, d["shape"]).astype(np.float32)


def latency(runners: dict, seconds: float) -> tuple:
    """name -> sorted single-invoke wall times, and name -> sorted CPU times of the process
    (every thread: PoCL's workers, OpenBLAS's and XNNPACK's too) per invoke, blocks of each
    runner in turn. On a machine that other processes load, the wall time of an invoke is
    mostly whether it got a core; the CPU time is the work it did (and any spinning)."""
    times = {k: [] for k in runners}
    cpu = {k: [] for k in runners}
    for it in runners.values():  # warm up
        end = time.perf_counter() + 0.3
        while time.perf_counter() < end:
            it.invoke()
    end = time.perf_counter() + seconds * len(runners)
    blocks = 0
    while time.perf_counter() < end or blocks < MIN_BLOCKS:
        for name, it in runners.items():
            time.sleep(PAUSE_S)
            stop = time.perf_counter() + BLOCK_S
            while time.perf_counter() < stop:
                t, c = time.perf_counter(), time.process_time()
                it.invoke()
                cpu[name].append(time.process_time() - c)
                times[name].append(time.perf_counter() - t)
        blocks += 1
    return {k: sorted(v) for k, v in times.items()}, {k: sorted(v) for k, v in cpu.items()}


def bench_model(path: Path, precisions: list, device, seconds: float, threads=(1,),
                int8: str = "dequantize") -> dict:
    from edgelite.delegates import load_delegate
    from edgelite.interpreter import Interpreter
    x = _input(path)
    runners, errors, launches = {}, {}, {}
    # the numpy path at the first count only: OpenBLAS's threads spin while they wait for a
    # core, and at 2 threads on a loaded 2-core machine an invoke took seconds (interpreter/
    # threads.py), which would also take the others' time
    runners[f"numpy {threads[0]}t"] = _prepared(
        Interpreter(model_path=str(path), num_threads=threads[0]), x)
    ref = _outputs(runners[f"numpy {threads[0]}t"])
    device_name = "?"
    modes = int8.split(",") if x.dtype == np.int8 else [None]
    for t in threads:
        for p, (k, mode) in itertools.product(precisions, enumerate(modes)):
            options = {"precision": p, "device": device, "threads": t}
            if mode is not None:
                options["int8"] = mode  # delegates/opencl/quant.py, quant_int.py
            d = load_delegate("opencl", options)
            it = _prepared(Interpreter(model_path=str(path), num_threads=t,
                                       experimental_delegates=[d]), x)
            if k:  # a further int8 mode: its own runner, beside the table (see main)
                runners[f"opencl {p} {mode} {t}t"] = it
                continue
            out = _outputs(it)
            errors[p] = max(float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))
                                  / max(np.max(np.abs(b)), 1e-30)) for a, b in zip(out, ref))
            runners[f"opencl {p} {t}t"] = it
            launches[p] = sum(getattr(run, "launches", 0)
                              for run, _ in it._runtime.plans[0].steps)
            device_name = d.dev.name + (f", kernels for {d.dev.kernel_cpu}"
                                        if d.dev.kernel_cpu else "")
    try:
        from ai_edge_litert.interpreter import Interpreter as LiteRT
        for t in threads:
            runners[f"LiteRT {t}t"] = _prepared(LiteRT(model_path=str(path), num_threads=t), x)
    except ImportError:
        pass
    times, cpu = latency(runners, seconds)
    med = {k: float(np.median(v)) * 1e3 for k, v in times.items()}
    med_cpu = {k: float(np.median(v)) * 1e3 for k, v in cpu.items()}
    return {"model": path.stem, "median_ms": med, "median_cpu_ms": med_cpu,
            "rel_error": errors, "device": device_name, "launches": launches,
            "threads": list(threads)}


def machine() -> str:
    """The CPU and numpy's BLAS, for the table's heading."""
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f
                       if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    blas = "?"
    try:
        cfg = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        blas = f"{cfg.get('name')} {cfg.get('version')}"
    except Exception:
        pass
    core = os.environ.get("OPENBLAS_CORETYPE")
    return f"{cpu}, {os.cpu_count()} cores; numpy {np.__version__} with {blas}" + (
        f" (OPENBLAS_CORETYPE={core})" if core else "")


STARTUP = r"""
import json, os, sys, time
marks = [(time.perf_counter(), time.process_time())]
import numpy as np
from edgelite.interpreter import Interpreter, load_delegate
marks.append((time.perf_counter(), time.process_time()))
d = load_delegate("opencl", {"precision": sys.argv[2], "device": sys.argv[3] or None})
marks.append((time.perf_counter(), time.process_time()))
it = Interpreter(model_path=sys.argv[1], experimental_delegates=[d])
it.allocate_tensors()
marks.append((time.perf_counter(), time.process_time()))
det = it.get_input_details()[0]
it.set_tensor(det["index"], np.zeros(det["shape"], det["dtype"]))
it.invoke()
marks.append((time.perf_counter(), time.process_time()))
from edgelite.delegates.opencl import device as opencl_device
out = {"programs": sum(dev.builds for dev in opencl_device._DEVICES.values())}  # every device
for k, name in enumerate(("import", "load_delegate", "prepare", "first_invoke")):
    out[name + "_s"] = marks[k + 1][0] - marks[k][0]
    out[name + "_cpu_s"] = marks[k + 1][1] - marks[k][1]
out["total_s"] = marks[-1][0] - marks[0][0]
out["opencl_cpu_s"] = marks[-1][1] - marks[1][1]  # load_delegate + prepare + first invoke
try:  # the main thread's time runnable but not running (Linux schedstat: waiting for a core)
    with open("/proc/thread-self/schedstat") as f:
        out["runqueue_wait_s"] = int(f.read().split()[1]) / 1e9
except (OSError, IndexError, ValueError):
    out["runqueue_wait_s"] = None
print(json.dumps(out))
"""


def _files(folder: Path) -> int:
    """Files in the caches, less PoCL's `tempfile_*` (it writes the program source there on
    every clBuildProgram, cache hit or not)."""
    return sum(1 for _, _, files in os.walk(folder) for f in files
               if not f.startswith("tempfile_"))


def _seconds(s) -> str:
    return "?" if s is None else f"{s:.2f} s"


def startup(path: Path, precision: str, device) -> dict:
    """First start (empty caches) and cached start, each in a fresh process."""
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, POCL_CACHE_DIR=str(Path(tmp) / "pocl"),
                   XDG_CACHE_HOME=str(Path(tmp) / "xdg"))
        out = {}
        for which in ("first", "cached"):
            before = _files(Path(tmp))
            t0, c0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
            r = subprocess.run([sys.executable, "-c", STARTUP, str(path), precision,
                                device or ""], env=env, capture_output=True, text=True,
                               cwd=REPO_ROOT)
            if r.returncode:
                raise RuntimeError(r.stderr[-2000:])
            process_s = time.perf_counter() - t0  # process start -> first invoke -> exit
            out[which] = json.loads(r.stdout.strip().splitlines()[-1])
            out[which]["process_s"] = process_s
            c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            out[which]["process_cpu_s"] = (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime)
            out[which]["new_cache_files"] = _files(Path(tmp)) - before
        return out


def profile(path: Path, precision: str, device, top: int = 12, int8: str = "dequantize") -> str:
    """A markdown report of the delegate's kernel launches on one model (see --profile)."""
    import pyopencl as cl

    from edgelite.delegates import load_delegate
    from edgelite.interpreter import Interpreter
    d = load_delegate("opencl", {"precision": precision, "device": device, "int8": int8})
    it = _prepared(Interpreter(model_path=str(path), experimental_delegates=[d]), _input(path))
    lines = [f"#### {path.stem} ({precision})\n"]
    for run, _ in it._runtime.plans[0].steps:
        if not getattr(run, "calls", None):
            continue
        # the interpreter's device (its num_threads: PoCL's basic device for 1), not d.dev
        queue = cl.CommandQueue(run.calls[0][0].context,
                                properties=cl.command_queue_properties.PROFILING_ENABLE)
        times, walls = [], []
        for _ in range(20):
            t = time.perf_counter()
            events = [cl.enqueue_nd_range_kernel(queue, *call) for call in run.calls]
            queue.finish()
            walls.append(time.perf_counter() - t)
            times.append([(e.profile.end - e.profile.start) * 1e-6 for e in events])
        ms = np.median(np.array(times), axis=0)
        by: dict = {}
        for (node, kernel, _), t in zip(run.labels, ms):
            key = (node.op if node is not None else "?", kernel)
            n, total = by.get(key, (0, 0.0))
            by[key] = (n + 1, total + t)
        lines.append(f"{len(run.calls)} launches, kernels {ms.sum():.3f} ms, batch wall "
                     f"{np.median(walls) * 1e3:.3f} ms\n")
        lines.append("| op | kernel | launches | ms | share |\n|---|---|---:|---:|---:|")
        for (op, kernel), (n, t) in sorted(by.items(), key=lambda kv: -kv[1][1]):
            lines.append(f"| {op} | {kernel} | {n} | {t:.3f} | {t / ms.sum():.0%} |")
        lines.append("\n| launch | operator | kernel | output | global size | ms |\n"
                     "|---:|---|---|---|---|---:|")
        for k in np.argsort(-ms)[:top]:
            node, kernel, gsize = run.labels[k]
            lines.append(f"| {k} | {node.index} {node.op} | {kernel} | "
                         f"{'x'.join(map(str, node.outputs[0].shape))} | {gsize} | {ms[k]:.3f} |")
    return "\n".join(lines) + "\n"


def bench_apart(name: str, args, threads: list) -> dict:
    """bench_model of `name` at each thread count in a process of its own (this script with
    one --threads), merged: PoCL starts its worker threads once per process, as many as the
    first delegate's "threads" (device.py), so 1 and 2 threads cannot share a process. The
    runners of one count still alternate in one process; numpy at the first count only."""
    merged: dict = {}
    for k, t in enumerate(threads):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "r.json"
            cmd = [sys.executable, __file__, "--only", name, "--threads", str(t),
                   "--precision", args.precision, "--seconds", str(args.seconds),
                   "--no-startup", "--json", str(out), "--int8", args.int8]
            if args.models:
                cmd += ["--models", args.models]
            if args.device:
                cmd += ["--device", args.device]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            r = next(x for x in json.loads(out.read_text()) if x["model"] == name)
        if k:
            for key in ("median_ms", "median_cpu_ms"):
                r[key].pop(f"numpy {t}t", None)
        if not merged:
            merged = r
        else:
            for key in ("median_ms", "median_cpu_ms"):
                merged[key].update(r[key])
    merged["threads"] = list(threads)
    return merged


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models")
    ap.add_argument("--only")
    ap.add_argument("--precision", default="fp32,fp16")
    ap.add_argument("--threads", default="1")
    ap.add_argument("--device", default=None)
    ap.add_argument("--seconds", type=float, default=1.5)
    ap.add_argument("--no-startup", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--int8", default="dequantize")  # dequantize, integer, cpu; a list: each
    ap.add_argument("--startup-only", action="store_true")
    args = ap.parse_args(argv)
    folder = models_dir(args.models)
    precisions = args.precision.split(",")
    threads = [int(t) for t in args.threads.split(",")]
    only = args.only.split(",") if args.only else []
    # a model's full name picks that model alone; else any model containing a given part
    names = [m for m in MODELS if not only or m in only
             or any(o in m and o not in MODELS for o in only)]
    results = []
    for name in names:
        print(f"{name} ...", file=sys.stderr, flush=True)
        if args.startup_only:
            r = {"model": name, "median_ms": {}, "median_cpu_ms": {}, "rel_error": {},
                 "device": "?", "launches": {}}
        elif len(threads) > 1:
            r = bench_apart(name, args, threads)
        else:
            r = bench_model(folder / f"{name}.tflite", precisions, args.device, args.seconds,
                            threads, args.int8)
        if not args.no_startup:
            r["startup"] = startup(folder / f"{name}.tflite", precisions[0], args.device)
        results.append(r)
    load = os.getloadavg()[0]
    device = results[0]["device"] if results else "?"
    print(f"### OpenCL delegate vs numpy vs LiteRT ({device}; {machine()}; load {load:.1f})\n")
    print("Each cell: median wall time of one invoke / median CPU time of the process per "
          "invoke (all its threads).\n")
    for t in [] if args.startup_only else threads:
        cols = [f"numpy {t}t"] + [f"opencl {p} {t}t" for p in precisions] + [f"LiteRT {t}t"]
        print(f"{t} thread{'s' if t > 1 else ''}:\n")
        print("| model | " + " | ".join(c.rsplit(" ", 1)[0] for c in cols)
              + " | numpy / opencl | opencl / LiteRT wall | opencl / LiteRT CPU | launches | "
              + " | ".join(f"error {p}" for p in precisions) + " |")
        print("|---" * (len(cols) + 5 + len(precisions)) + "|")
        for r in results:
            m, c = r["median_ms"], r["median_cpu_ms"]
            key = f"opencl {precisions[0]} {t}t"
            lite = f"LiteRT {t}t"
            row = [f"{m[k]:.2f} / {c[k]:.2f} ms" if k in m else "—" for k in cols]
            speedup = f"{m[f'numpy {t}t'] / m[key]:.2f}x" if key in m and f"numpy {t}t" in m \
                else "—"
            vs = f"{m[key] / m[lite]:.2f}x" if key in m and lite in m else "—"
            vs_cpu = f"{c[key] / c[lite]:.2f}x" if key in c and lite in c else "—"
            errs = [f"{r['rel_error'][p]:.1e}" for p in precisions]
            print(f"| {r['model']} | " + " | ".join(
                row + [speedup, vs, vs_cpu, str(r["launches"].get(precisions[0], "—"))]
                + errs) + " |")
        print()
        for r in results:  # further --int8 modes of an int8 model, against the first
            m, c = r["median_ms"], r["median_cpu_ms"]
            for mode in args.int8.split(",")[1:]:
                for p in precisions:
                    key, first = f"opencl {p} {mode} {t}t", f"opencl {p} {t}t"
                    if key in m:
                        print(f"- {r['model']} {p} int8 {mode}: {m[key]:.2f} / {c[key]:.2f} ms"
                              f" ({c[key] / c[first]:.2f}x {args.int8.split(',')[0]}'s CPU "
                              f"time, {c[key] / c[f'LiteRT {t}t']:.2f}x LiteRT's)")
        print()
    if not args.no_startup:
        print(f"\n### Start-up ({precisions[0]}): load delegate + prepare + first invoke, "
              "fresh process\n")
        print("| model | first start (process: wall, CPU) | cached start (process: wall, CPU) | "
              "import cached | "
              "OpenCL part cached (load, prepare, invoke): wall / CPU | prepare first / cached | "
              "first invoke first / cached | programs | new cache files on the cached start | "
              "cached start waiting for a core |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in results:
            s = r["startup"]
            c = s["cached"]
            part = c["load_delegate_s"] + c["prepare_s"] + c["first_invoke_s"]
            print(f"| {r['model']} | {s['first']['total_s']:.2f} s "
                  f"({s['first']['process_s']:.2f} s, {s['first']['process_cpu_s']:.2f} s) | "
                  f"{c['total_s']:.2f} s ({c['process_s']:.2f} s, {c['process_cpu_s']:.2f} s) | "
                  f"{c['import_s']:.2f} s | {part:.2f} s / "
                  f"{c['opencl_cpu_s']:.2f} s | {s['first']['prepare_s']:.2f} s / "
                  f"{s['cached']['prepare_s']:.2f} s | {s['first']['first_invoke_s']:.2f} s / "
                  f"{s['cached']['first_invoke_s']:.2f} s | {s['first']['programs']} | "
                  f"{s['cached']['new_cache_files']} | {_seconds(c.get('runqueue_wait_s'))} |")
    if args.profile:
        print(f"\n### Kernel launches ({precisions[0]})\n")
        for name in names:
            print(profile(folder / f"{name}.tflite", precisions[0], args.device,
                          int8=args.int8))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
