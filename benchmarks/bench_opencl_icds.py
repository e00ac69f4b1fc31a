"""The OpenCL delegate on two (or more) OpenCL installations side by side: bench_opencl.py in
alternating processes, one per installation and round, medians over the rounds.

    python benchmarks/bench_opencl_icds.py \
        --side pip=/work/venv/bin/python \
        --side debian=/work/venv-pocl-deb/bin/python,OCL_ICD_VENDORS=/etc/OpenCL/vendors-debian \
        [--rounds 3] [--only mobilenet_v2,mp_face_detection] [--threads 1] [--int8 integer]
        [--seconds 1.5] [--json OUT]

A side is NAME=PYTHON[,VAR=VALUE...]: the interpreter of a venv whose pyopencl finds that
installation (pip's PoCL: `pyopencl[pocl]`; a system PoCL: pyopencl alone, and the ICD loader
reads /etc/OpenCL/vendors or OCL_ICD_VENDORS), and variables for its processes (each side
should have a POCL_CACHE_DIR of its own, warm: the first round's compilation is not timed by
bench_opencl, but a cold cache costs that process minutes). Two PoCL builds cannot share a
process (each brings its own LLVM), hence processes; they alternate (side A, side B, side A,
...) so load from other processes falls on both alike. Each cell: median over the rounds of
bench_opencl's median CPU time of the whole process per invoke (PoCL's workers included), and
LiteRT's in the same processes; then the same table in wall time. A side may also be an
older edgelite: NAME=PYTHON,PYTHONPATH=/tmp/wt/ (a git worktree at /tmp/wt/edgelite) runs
this tree's bench_opencl.py on that code.
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


def parse_side(text: str) -> tuple:
    name, _, rest = text.partition("=")
    python, *pairs = rest.split(",")
    env = dict(p.split("=", 1) for p in pairs)
    if not name or not python:
        raise SystemExit(f"--side {text!r}: use NAME=PYTHON[,VAR=VALUE...]")
    return name, python, env


def run_side(python: str, env: dict, args, threads: str) -> list:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r.json"
        cmd = [python, str(HERE / "bench_opencl.py"), "--precision", "fp32", "--threads",
               threads, "--seconds", str(args.seconds), "--no-startup", "--json", str(out),
               "--int8", args.int8]
        if args.only:
            cmd += ["--only", args.only]
        if args.models:
            cmd += ["--models", args.models]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL,
                       env=dict(os.environ, **env))
        return json.loads(out.read_text())


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--side", action="append", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only")
    ap.add_argument("--models")
    ap.add_argument("--threads", default="1")
    ap.add_argument("--int8", default="integer")
    ap.add_argument("--seconds", type=float, default=1.5)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    sides = [parse_side(s) for s in args.side]
    cells: dict = {}  # (model, threads, side) -> {"opencl": [...], "litert": [...]}
    devices: dict = {}
    loads = [os.getloadavg()[0]]
    for r in range(args.rounds):
        for t in args.threads.split(","):
            for name, python, env in (sides if r % 2 == 0 else sides[::-1]):
                print(f"round {r + 1}, {t} thread(s), {name} ...", file=sys.stderr, flush=True)
                for res in run_side(python, env, args, t):
                    c, w = res["median_cpu_ms"], res["median_ms"]
                    cell = cells.setdefault((res["model"], t, name),
                                            {"opencl": [], "litert": [], "opencl_wall": [],
                                             "litert_wall": []})
                    cell["opencl"].append(c[f"opencl fp32 {t}t"])
                    cell["litert"].append(c[f"LiteRT {t}t"])
                    cell["opencl_wall"].append(w[f"opencl fp32 {t}t"])
                    cell["litert_wall"].append(w[f"LiteRT {t}t"])
                    devices[name] = res["device"]
        loads.append(os.getloadavg()[0])
    names = [s[0] for s in sides]
    print(f"### The OpenCL delegate on {len(names)} OpenCL installations (fp32 and the int8 "
          f"model's --int8 {args.int8}; median CPU time of the process per invoke, median of "
          f"{args.rounds} alternating processes each; load {min(loads):.1f}-{max(loads):.1f})\n")
    for n in names:
        print(f"- {n}: {devices.get(n, '?')}")
    print()
    head = " | ".join(f"{n} | {n} / LiteRT" for n in names)
    print(f"| model | threads | {head} | LiteRT | {names[-1]} / {names[0]} |")
    print("|---|---:|" + "---:|" * (2 * len(names) + 2))
    table = []
    for (model, t) in dict.fromkeys((m, t) for m, t, _ in cells):
        med = {n: statistics.median(cells[(model, t, n)]["opencl"]) for n in names}
        lite = statistics.median(v for n in names for v in cells[(model, t, n)]["litert"])
        row = " | ".join(f"{med[n]:.2f} ms | {med[n] / lite:.2f}x" for n in names)
        print(f"| {model} | {t} | {row} | {lite:.2f} ms | {med[names[-1]] / med[names[0]]:.2f}x |")
        table.append({"model": model, "threads": int(t), "litert_ms": lite,
                      **{f"{n}_ms": med[n] for n in names},
                      **{f"{n}_all_ms": cells[(model, t, n)]["opencl"] for n in names}})
    print("\nWall time, the same runs (median of the rounds' median single invokes):\n")
    print(f"| model | threads | {head} | LiteRT | {names[-1]} / {names[0]} |")
    print("|---|---:|" + "---:|" * (2 * len(names) + 2))
    for row in table:
        model, t = row["model"], row["threads"]
        med = {n: statistics.median(cells[(model, str(t), n)]["opencl_wall"]) for n in names}
        lite = statistics.median(v for n in names
                                 for v in cells[(model, str(t), n)]["litert_wall"])
        cells_ = " | ".join(f"{med[n]:.2f} ms | {med[n] / lite:.2f}x" for n in names)
        print(f"| {model} | {t} | {cells_} | {lite:.2f} ms | "
              f"{med[names[-1]] / med[names[0]]:.2f}x |")
        row.update({"litert_wall_ms": lite, **{f"{n}_wall_ms": med[n] for n in names}})
    if args.json:
        Path(args.json).write_text(json.dumps({"devices": devices, "rows": table}, indent=1))


if __name__ == "__main__":
    main()
