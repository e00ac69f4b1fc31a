"""The OpenCL delegate's kernel files of a git revision (A) against the working tree's (B), in
one process, alternating, beside LiteRT: is an edit of a .cl file faster?

    python benchmarks/ab_opencl_kernels.py [--rev HEAD] [--only mobilenet_v2,...]
                                           [--threads 1] [--precision fp32] [--seconds 2]
                                           [--int8 integer]

On a shared machine the same build measured in two processes moved by +-25 % from run to
run (load from the others falls on whichever process is running), more than most kernel
edits change: here both builds live in one process (the device's programs are built once
from A's sources, then again from B's) and run in alternating blocks (bench_opencl.latency),
so load falls on both alike. Reported: median CPU time of the process per invoke (and wall),
B / A and each / LiteRT, and the largest difference between A's and B's outputs (0 where the
edit keeps the arithmetic). Python-side changes (ops*.py) are not compared: both builds use
the working tree's.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_opencl as bo  # noqa: E402

KERNELS = Path(bo.REPO_ROOT) / "delegates" / "opencl"


def sources(rev: str | None) -> dict:
    """File stem -> text of every .cl file, at `rev` (None: the working tree)."""
    out = {}
    for path in sorted(KERNELS.glob("*.cl")):
        if rev is None:
            out[path.stem] = path.read_text()
            continue
        r = subprocess.run(["git", "-C", str(bo.REPO_ROOT), "show",
                            f"{rev}:{path.relative_to(bo.REPO_ROOT)}"],
                           capture_output=True, text=True)
        if r.returncode == 0:  # a file new in the working tree is used as it is
            out[path.stem] = r.stdout
    return out


def built(path: Path, texts: dict, options: dict, x: np.ndarray):
    """An interpreter whose delegate's programs are compiled from `texts`."""
    from edgelite.delegates import load_delegate
    from edgelite.delegates.opencl import device
    from edgelite.interpreter import Interpreter
    device._SOURCES.clear()
    device._SOURCES.update(texts)
    for dev in device._DEVICES.values():
        dev.programs.clear()  # the next build reads the sources again
    d = load_delegate("opencl", options)
    return bo._prepared(Interpreter(model_path=str(path), experimental_delegates=[d]), x)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", default="HEAD")
    ap.add_argument("--only", default="mobilenet_v2,mp_face_detection,mp_hand_landmark")
    ap.add_argument("--models")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--int8", default=None)  # an int8 model's "int8" option (e.g. integer)
    args = ap.parse_args(argv)
    from ai_edge_litert.interpreter import Interpreter as LiteRT
    from edgelite.delegates.opencl import device
    a, b = sources(args.rev), sources(None)
    changed = sorted(k for k in b if a.get(k) != b[k])
    print(f"### {args.rev} (A) vs the working tree (B): {', '.join(changed) or 'no'} .cl "
          f"changed; {args.precision}, {args.threads} thread(s); {bo.machine()}\n")
    print("| model | load | A | B | LiteRT | B / A CPU | A / LiteRT CPU | B / LiteRT CPU | "
          "max abs A - B |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    options = {"precision": args.precision, "threads": args.threads}
    if args.int8:
        options["int8"] = args.int8
    try:
        for name in args.only.split(","):
            path = bo.models_dir(args.models) / f"{name}.tflite"
            x = bo._input(path)
            runners = {"A": built(path, a, options, x), "B": built(path, b, options, x)}
            runners["LiteRT"] = bo._prepared(LiteRT(model_path=str(path),
                                                    num_threads=args.threads), x)
            diff = max(float(np.max(np.abs(p - q))) for p, q in
                       zip(bo._outputs(runners["A"]), bo._outputs(runners["B"])))
            wall, cpu = bo.latency(runners, args.seconds)
            w = {k: v[len(v) // 2] * 1e3 for k, v in wall.items()}
            c = {k: v[len(v) // 2] * 1e3 for k, v in cpu.items()}
            load = open("/proc/loadavg").read().split()[0]
            cells = " | ".join(f"{w[k]:.2f} / {c[k]:.2f} ms" for k in ("A", "B", "LiteRT"))
            print(f"| {name} | {load} | {cells} | {c['B'] / c['A']:.3f} | "
                  f"{c['A'] / c['LiteRT']:.3f} | {c['B'] / c['LiteRT']:.3f} | {diff:.1e} |",
                  flush=True)
    finally:
        device._SOURCES.clear()
    print("\nEach cell: median wall / median CPU time of the process per invoke.")


if __name__ == "__main__":
    main()
