"""Issue 17's speed goals in one run: every ratio of the goal table, measured on the benchmark set.

    python benchmarks/bench_goals.py [--only overhead,int8,hybrid,recurrent,threads,opencl,import]
                                     [--quick] [--json OUT] [--keep DIR]

Runs the benchmark scripts of this folder one after another, each in a process of its own (each
sets OpenBLAS's thread count before numpy loads, and PoCL starts its worker threads once per
process), with `--json` into a scratch folder, then prints one table: each goal, the model, the
two runtimes' numbers, the ratio, the target and whether it is met. The parts:

- overhead (bench_overhead.py): µs per op of a 200-op chain; CPU µs per invoke of the tiny
  models, MobileNetV2 and the int8 files, alternating with LiteRT;
- int8 (the same run's rows): edgelite int8 / edgelite float and / LiteRT int8, MobileNetV2;
- hybrid (bench_hybrid.py): dynamic-range DenseNet121 / EfficientNetB0 vs LiteRT, CPU ms, on
  the numpy path and (with pyopencl) through the OpenCL delegate (`--delegate`);
- recurrent (bench_recurrent.py): the sequence ops and Keras LSTM/GRU vs LiteRT, and the
  10^6-step WHILE;
- threads (bench_threads.py): 2 threads / 1 thread (wall) on every model of the set above 1 ms;
- opencl (bench_opencl.py): the delegate on PoCL vs LiteRT at 1 and 2 threads (CPU time, wall
  beside it), and the first start with a warm kernel cache;
- import (bench_import.py): `import edgelite.interpreter` without cached bytecode.

The machine line names the CPU, its vector extensions and numpy's BLAS (with OPENBLAS_CORETYPE).
Times are medians; on a shared machine quote the ratios, and the load average printed with them.
`--quick` runs fewer blocks (a smoke test of the script, not a measurement).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PARTS = ("overhead", "int8", "hybrid", "recurrent", "threads", "opencl", "import")
TINY = ("digits_cnn.tflite", "keras_kws_head.float32", "silero_vad", "mwk_okay_nabu.tflite")
OVERHEAD_MODELS = TINY + ("mobilenet_v2.tflite", "mobilenet_v2_int8.tflite",
                          "digits_cnn_int8.tflite")
OPENCL_MODELS = ("mobilenet_v2", "mp_face_detection", "mp_hand_landmark")
HYBRID = ("keras_densenet121.dynamic.tflite", "keras_efficientnet_b0.dynamic.tflite")


def machine() -> str:
    cpu, flags = "?", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and cpu == "?":
                cpu = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    isa = [f for f in ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "neon", "asimd")
           if f in flags]
    code = ("import numpy, json; c = numpy.show_config(mode='dicts'); "
            "b = c['Build Dependencies']['blas']; print(json.dumps([numpy.__version__, "
            "b.get('name'), b.get('version')]))")
    try:
        np_version, blas, blas_version = json.loads(subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    except (subprocess.CalledProcessError, ValueError, KeyError):
        np_version, blas, blas_version = "?", "?", "?"
    return (f"CPU {cpu} ({os.cpu_count()} CPUs; {', '.join(isa) or 'no AVX2'}); numpy "
            f"{np_version}, BLAS {blas} {blas_version}, OPENBLAS_CORETYPE="
            f"{os.environ.get('OPENBLAS_CORETYPE', '(native kernels)')}")


def _run(script: str, args: list, out: Path) -> dict | list | None:
    """One benchmark script with --json OUT; its table goes to our stderr (the log)."""
    cmd = [sys.executable, str(HERE / script), *args, "--json", str(out)]
    print(f"$ {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
    r = subprocess.run(cmd, cwd=REPO, stdout=sys.stderr, stderr=sys.stderr)
    if r.returncode or not out.exists():
        print(f"{script} failed (exit {r.returncode})", file=sys.stderr)
        return None
    return json.loads(out.read_text())


class Table:
    def __init__(self):
        self.rows = []

    def add(self, goal: str, model: str, ours, theirs, ratio, target, unit: str = "",
            note: str = "", budget: bool = False):
        """target: of the ratio, or with budget=True of edgelite's own number (in unit)."""
        measured = ours if budget else ratio
        met = None if measured is None or target is None else measured <= target
        self.rows.append({"goal": goal, "model": model, "edgelite": ours, "reference": theirs,
                          "ratio": ratio, "target": target, "unit": unit, "met": met,
                          "note": note, "budget": budget})

    def missing(self, goal: str, model: str, why: str):
        self.rows.append({"goal": goal, "model": model, "edgelite": None, "reference": None,
                          "ratio": None, "target": None, "unit": "", "met": None, "note": why,
                          "budget": False})

    def markdown(self) -> list:
        def num(v):
            return "" if v is None else f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"

        def cell(v, unit):
            return "" if v is None else num(v) + (f" {unit}" if unit else "")

        lines = ["| goal | model | edgelite | reference | ratio | target | met |",
                 "|---|---|---:|---:|---:|---:|---|"]
        for r in self.rows:
            met = {True: "yes", False: "**no**", None: ""}[r["met"]]
            ratio = "" if r["ratio"] is None else f"{r['ratio']:.2f}"
            target = "" if r["target"] is None else f"≤ {r['target']:g}" + (
                f" {r['unit']}" if r["budget"] else "x")
            note = f" ({r['note']})" if r["note"] else ""
            lines.append(f"| {r['goal']} | {r['model']}{note} | {cell(r['edgelite'], r['unit'])} | "
                         f"{cell(r['reference'], r['unit'])} | {ratio} | {target} | {met} |")
        return lines


def overhead(t: Table, tmp: Path, quick: bool, parts: set):
    models = list(OVERHEAD_MODELS)
    sample = REPO / "samples" / "default.tflite"
    if sample.exists():
        models.insert(len(TINY), str(sample))
    r = _run("bench_overhead.py", ["--blocks", "5" if quick else "30",
                                   "--models", ",".join(models)], tmp / "overhead.json")
    if r is None:
        return t.missing("1 small models", "all", "bench_overhead.py failed")
    if "overhead" in parts:
        for variant, facts in r.items():
            if variant == "models" or not isinstance(facts, dict) or "us_per_op" not in facts:
                continue
            per_op = facts["us_per_op"]
            ours = per_op.get("edgelite Interpreter.invoke")
            theirs = per_op.get("LiteRT invoke")
            t.add("1 per-op overhead ≤ 0.5 µs", f"{variant} chain", ours, theirs,
                  ours / theirs if ours and theirs else None, 0.5, "µs", budget=True)
    rows = {Path(m["model"]).name: m for m in r.get("models", [])}
    for name, row in rows.items():
        if row.get("missing"):
            if "overhead" in parts and (name in TINY or name == "default.tflite"):
                t.missing("1 small models ≤ 2.5x", name, "not on this machine")
            continue
        ratio = row["edgelite_us"] / row["litert_us"]
        if "overhead" in parts and (name in TINY or name == "default.tflite"):
            t.add("1 small models ≤ 2.5x LiteRT", name, row["edgelite_us"], row["litert_us"],
                  ratio, 2.5, "µs")
        if "overhead" in parts and name == "mobilenet_v2.tflite":
            t.add("1 large models not slower", name, row["edgelite_us"] / 1e3,
                  row["litert_us"] / 1e3, ratio, None, "ms", "before: 3.10x")
    f, q = rows.get("mobilenet_v2.tflite"), rows.get("mobilenet_v2_int8.tflite")
    if "int8" in parts and f and q and not f.get("missing") and not q.get("missing"):
        t.add("2 int8 ≤ 0.8x edgelite float", "mobilenet_v2_int8", q["edgelite_us"] / 1e3,
              f["edgelite_us"] / 1e3, q["edgelite_us"] / f["edgelite_us"], 0.8, "ms",
              "reference = edgelite float")
        t.add("2 int8 ≤ 2x LiteRT int8", "mobilenet_v2_int8", q["edgelite_us"] / 1e3,
              q["litert_us"] / 1e3, q["edgelite_us"] / q["litert_us"], 2.0, "ms")
    d = rows.get("digits_cnn_int8.tflite")
    if "int8" in parts and d and not d.get("missing"):
        t.add("2 int8 ≤ 2x LiteRT int8", "digits_cnn_int8", d["edgelite_us"], d["litert_us"],
              d["edgelite_us"] / d["litert_us"], 2.0, "µs")


def hybrid(t: Table, tmp: Path, quick: bool):
    r = _run("bench_hybrid.py", ["--blocks", "3" if quick else "7", "--only", *HYBRID],
             tmp / "hybrid.json")
    for name in HYBRID:
        row = (r or {}).get(name)
        if row is None:
            t.missing("6 hybrid convolutions ≤ 2x", name,
                      "not in the corpus (tools/tflite_corpus.py keras)" if r is not None
                      else "bench_hybrid.py failed")
            continue
        t.add("6 hybrid convolutions ≤ 2x LiteRT", name, row["edgelite_ms"], row["litert_ms"],
              row["ratio"], 2.0, "ms")
    try:
        import pyopencl  # noqa: F401
    except ImportError:
        return t.missing("6 hybrid convolutions ≤ 2x, OpenCL delegate", "all",
                         "pyopencl is not installed")
    r = _run("bench_hybrid.py", ["--delegate", "--blocks", "3" if quick else "7", "--only",
                                 *HYBRID], tmp / "hybrid_delegate.json")
    for name, row in (r or {}).items():
        t.add("6 hybrid convolutions ≤ 2x LiteRT, OpenCL delegate on PoCL", name,
              row["opencl_process_ms"], row["litert_process_ms"], row["opencl_ratio_cpu"], 2.0,
              "ms", f"CPU time; wall {row['opencl_ratio_wall']:.2f}x")


def recurrent(t: Table, tmp: Path, quick: bool):
    r = _run("bench_recurrent.py", ["--blocks", "3" if quick else "15"]
             + (["--steps", "100000"] if quick else []), tmp / "recurrent.json")
    if r is None:
        return t.missing("6 recurrent ≤ 3x", "all", "bench_recurrent.py failed")
    for name, row in r["rows"].items():
        if name == "counter":
            continue
        t.add("6 recurrent ≤ 3x LiteRT", name, row["edgelite_ms"], row["litert_ms"],
              row["ratio"], 3.0, "ms")
    c = r["rows"].get("counter")
    if c:
        steps = "10^5 (--quick)" if quick else "10^6"
        t.add("6 WHILE of 10^6 steps ≤ 3 s", f"counter loop, {steps} steps", c["edgelite_s"],
              c["litert_s"], c["ratio"], 3.0, "s", budget=True)


def threads(t: Table, tmp: Path, quick: bool):
    r = _run("bench_threads.py", ["--seconds", "0.5" if quick else "2"], tmp / "threads.json")
    if r is None:
        return t.missing("5 threads", "all", "bench_threads.py failed")
    for name, row in r["models"].items():
        if "error" in row:
            continue
        one, two = row["edgelite 1"]["wall_ms"], row["edgelite 2"]["wall_ms"]
        if one < 1.0:
            continue
        lite = row["LiteRT 2"]["wall_ms"] / row["LiteRT 1"]["wall_ms"]
        t.add("5 2 threads faster than 1 (wall)", name, two, one, two / one, 1.0, "ms",
              f"reference = edgelite 1 thread; LiteRT 2/1 {lite:.2f}; load "
              f"{r['load_before']:.1f}")


def opencl(t: Table, tmp: Path, quick: bool):
    try:
        import pyopencl  # noqa: F401
    except ImportError:
        return t.missing("3 OpenCL on PoCL ≤ 1x", "all", "pyopencl is not installed")
    r = _run("bench_opencl.py", ["--only", ",".join(OPENCL_MODELS), "--threads", "1,2",
                                 "--precision", "fp32", "--seconds", "0.5" if quick else "1.5"],
             tmp / "opencl.json")
    if r is None:
        return t.missing("3 OpenCL on PoCL ≤ 1x", "all", "bench_opencl.py failed")
    for row in r:
        wall, cpu = row["median_ms"], row["median_cpu_ms"]
        for n in (1, 2):
            ours, theirs = f"opencl fp32 {n}t", f"LiteRT {n}t"
            if ours in cpu and theirs in cpu:
                t.add(f"3 OpenCL on PoCL ≤ 1x LiteRT, {n} thread{'s' * (n > 1)}", row["model"],
                      cpu[ours], cpu[theirs], cpu[ours] / cpu[theirs], 1.0, "ms",
                      f"CPU time; wall {wall[ours] / wall[theirs]:.2f}x")
        start = row.get("startup", {}).get("cached")
        if start:
            t.add("4 OpenCL first start, warm cache ≤ 2 s", row["model"], start["process_s"],
                  None, None, 2.0, "s", "process start to first invoke done", budget=True)
    for n in (1, 2):  # int8 MobileNetV2 through the delegate's integer kernels
        q = _run("bench_opencl_int8.py", ["--threads", str(n), "--seconds",
                                          "0.5" if quick else "2"], tmp / f"opencl_int8_{n}.json")
        if q is None:
            t.missing("3 OpenCL int8 ≤ 2x LiteRT int8", "mobilenet_v2_int8",
                      "bench_opencl_int8.py failed")
            continue
        cpu, ours = q["cpu_ms"], q["cpu_ms"]["now"]
        t.add(f"3 OpenCL int8 (integer) ≤ 2x LiteRT int8, {n} thread{'s' * (n > 1)}",
              "mobilenet_v2_int8", ours, cpu["LiteRT int8"], ours / cpu["LiteRT int8"], 2.0,
              "ms", "CPU time")
        fp32 = cpu.get("delegate fp32 (float model)")
        if fp32:
            t.add(f"2 int8 ≤ 0.8x float, OpenCL delegate, {n} thread{'s' * (n > 1)}",
                  "mobilenet_v2_int8", ours, fp32, ours / fp32, 0.8, "ms",
                  "CPU time; reference = the delegate's fp32 on mobilenet_v2")


def start_up(t: Table, quick: bool):
    sys.path.insert(0, str(HERE))
    import bench_import

    rows, _ = bench_import.measure("edgelite.interpreter", 3 if quick else 7)
    wall = statistics.median(r[0] for r in rows)
    numpy_rows, _ = bench_import.measure("numpy", 3 if quick else 7)
    floor = statistics.median(r[0] for r in numpy_rows)
    t.add("4 import edgelite.interpreter ≤ 0.2 s (no bytecode)", "import", wall, floor,
          wall / floor, 0.2, "s", "reference = import numpy", budget=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", help=f"comma-separated parts (default all: {','.join(PARTS)})")
    p.add_argument("--quick", action="store_true", help="fewer blocks: a smoke test")
    p.add_argument("--json", type=Path, help="write the table's rows here")
    p.add_argument("--keep", type=Path, help="keep each script's JSON in this folder")
    args = p.parse_args(argv)
    parts = set(args.only.split(",")) if args.only else set(PARTS)
    unknown = parts - set(PARTS)
    if unknown:
        p.error(f"unknown part(s) {', '.join(sorted(unknown))}; the parts: {', '.join(PARTS)}")
    load = os.getloadavg()[0]
    head = machine()
    t = Table()
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.keep or Path(scratch)
        tmp.mkdir(parents=True, exist_ok=True)
        if parts & {"overhead", "int8"}:
            overhead(t, tmp, args.quick, parts)
        if "hybrid" in parts:
            hybrid(t, tmp, args.quick)
        if "recurrent" in parts:
            recurrent(t, tmp, args.quick)
        if "threads" in parts:
            threads(t, tmp, args.quick)
        if "opencl" in parts:
            opencl(t, tmp, args.quick)
        if "import" in parts:
            start_up(t, args.quick)
    print(f"{head}; load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
          f"{'; --quick (not a measurement)' if args.quick else ''}\n")
    print("\n".join(t.markdown()))
    met = [r["met"] for r in t.rows if r["met"] is not None]
    print(f"\n{sum(met)} of {len(met)} rows meet their target")
    if args.json:
        args.json.write_text(json.dumps({"machine": head, "load": load, "rows": t.rows},
                                        indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
