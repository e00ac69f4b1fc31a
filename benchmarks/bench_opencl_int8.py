"""int8 MobileNetV2 through the OpenCL delegate ("int8": "integer") in variants, beside the
delegate's fp32 on the float model and LiteRT int8, in one process, alternating.

    python benchmarks/bench_opencl_int8.py [--variants "vpdpwssd:EDGELITE_OPENCL_U8=0;now:"]
                                           [--threads 1] [--seconds 2] [--profile]
                                           [--model mobilenet_v2_int8] [--json OUT]

A variant is `name:VAR=value,VAR=value` (empty: the defaults; `precision=fp16` the delegate's
option): its environment is set while its interpreter is prepared (the delegate reads its
switches then: EDGELITE_OPENCL_U8, EDGELITE_OPENCL_INT_DW, EDGELITE_OPENCL_VNNI, ...) and
restored after, so every variant's kernels live in one process
and run in alternating blocks (bench_opencl.latency: load falls on all alike). Reported: the
median CPU time of the process per invoke (and wall), each / LiteRT int8, each / the delegate's
fp32 on the float twin (`<model minus _int8>.tflite`), launches, and whether each variant's
outputs equal the first's (all are bit-exact to BUILTIN_REF in tests/delegates). --profile:
bench_opencl.profile of each variant (OpenCL events: time by op and kernel).

--against DIR [--rounds 3]: before / after across processes: this script's default variant
run alternately with PYTHONPATH=DIR (a worktree of an older revision, `git worktree add
DIR/edgelite <rev>`) and with the installed tree, `rounds` times each, each process with
its own LiteRT int8 and delegate fp32 runners; the medians over the rounds.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_opencl as bo  # noqa: E402


def parse_variants(text: str) -> dict:
    """`name:VAR=v,VAR=v;name:` -> name -> {VAR: v}."""
    out = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        name, _, env = part.partition(":")
        out[name] = dict(kv.split("=", 1) for kv in filter(None, env.split(",")))
    return out


@contextlib.contextmanager
def environment(env: dict):
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def delegated(path: Path, options: dict, x, threads: int):
    from edgelite.delegates import load_delegate
    from edgelite.interpreter import Interpreter
    d = load_delegate("opencl", dict(options, threads=threads))
    return bo._prepared(Interpreter(model_path=str(path), num_threads=threads,
                                    experimental_delegates=[d]), x)


def against(args) -> None:
    """Old (PYTHONPATH=args.against) and new processes in turn; medians over the rounds."""
    import subprocess
    import tempfile
    rows: dict = {"before": [], "after": []}
    base = [sys.executable, __file__, "--model", args.model, "--threads", str(args.threads),
            "--seconds", str(args.seconds), "--precision", args.precision]
    if args.models:
        base += ["--models", args.models]
    for _ in range(args.rounds):
        for name in rows:
            env = dict(os.environ)
            if name == "before":
                env["PYTHONPATH"] = args.against
            with tempfile.NamedTemporaryFile(suffix=".json") as f:
                subprocess.run(base + ["--json", f.name], env=env, check=True,
                               capture_output=True)
                rows[name].append(json.loads(Path(f.name).read_text()))
    print(f"### {args.model}, {args.threads} thread(s): {args.against} (before) vs this tree "
          f"(after), {args.rounds} alternating processes each; {bo.machine()}\n")
    print("| | CPU ms | / LiteRT int8 CPU | / delegate fp32 CPU | launches | load |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, runs in rows.items():
        ms = [r["cpu_ms"]["now"] for r in runs]
        lite = [r["cpu_ms"]["now"] / r["cpu_ms"]["LiteRT int8"] for r in runs]
        fp32 = [r["cpu_ms"]["now"] / r["cpu_ms"]["delegate fp32 (float model)"] for r in runs]
        print(f"| {name} | {np.median(ms):.2f} | {np.median(lite):.2f}x | "
              f"{np.median(fp32):.2f}x | {runs[0]['launches']['now']} | "
              f"{np.median([r['load'] for r in runs]):.1f} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mobilenet_v2_int8")
    ap.add_argument("--models")
    ap.add_argument("--variants", default="now:")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--against")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    if args.against:
        return against(args)
    from ai_edge_litert.interpreter import Interpreter as LiteRT
    folder = bo.models_dir(args.models)
    path = folder / f"{args.model}.tflite"
    x = bo._input(path)
    variants = parse_variants(args.variants)
    runners, launches, outputs, precisions = {}, {}, {}, {}
    for name, env in variants.items():
        env = dict(env)   # (variants stays whole for --profile)
        precisions[name] = env.pop("precision", args.precision)
        options = {"int8": "integer", "precision": precisions[name]}
        with environment(env):
            it = delegated(path, options, x, args.threads)
        runners[name] = it
        launches[name] = sum(getattr(run, "launches", 0) or 0
                             for run, _ in it._runtime.plans[0].steps)
        outputs[name] = bo._outputs(it)
    twin = folder / f"{args.model.removesuffix('_int8')}.tflite"
    if twin != path and twin.exists():
        runners["delegate fp32 (float model)"] = delegated(twin, {"precision": "fp32"},
                                                           bo._input(twin), args.threads)
    runners["LiteRT int8"] = bo._prepared(LiteRT(model_path=str(path),
                                                 num_threads=args.threads), x)
    times, cpu = bo.latency(runners, args.seconds)
    wall = {k: float(np.median(v)) * 1e3 for k, v in times.items()}
    cpu_ms = {k: float(np.median(v)) * 1e3 for k, v in cpu.items()}
    first = next(iter(variants))
    print(f"### {args.model} through the OpenCL delegate, {args.threads} thread(s), "
          f"{args.precision} storage; {bo.machine()}; load {os.getloadavg()[0]:.1f}\n")
    print("| runner | CPU ms | wall ms | / LiteRT int8 CPU | / delegate fp32 CPU | launches | "
          f"outputs == {first}'s |")
    print("|---|---:|---:|---:|---:|---:|---|")
    fp32 = cpu_ms.get("delegate fp32 (float model)")
    for k in runners:
        same = ""
        if k in outputs:
            same = str(all(np.array_equal(a, b) for a, b in zip(outputs[k], outputs[first])))
        rel = f"{cpu_ms[k] / fp32:.2f}x" if fp32 else ""
        print(f"| {k} | {cpu_ms[k]:.2f} | {wall[k]:.2f} | "
              f"{cpu_ms[k] / cpu_ms['LiteRT int8']:.2f}x | {rel} | {launches.get(k, '')} | "
              f"{same} |")
    if args.profile:
        for name, env in variants.items():
            env = {k: v for k, v in env.items() if k != "precision"}
            with environment(env):
                print(f"\n#### variant {name}\n")
                print(bo.profile(path, precisions[name], None, int8="integer"))
    if args.json:
        Path(args.json).write_text(json.dumps({"cpu_ms": cpu_ms, "wall_ms": wall,
                                               "launches": launches,
                                               "load": os.getloadavg()[0]}, indent=1))


if __name__ == "__main__":
    main()
