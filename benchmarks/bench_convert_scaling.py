"""Conversion time against graph size: chains of ONNX nodes converted by `convert_onnx`.

    python benchmarks/bench_convert_scaling.py [--sizes 5000,40000,100000] [--kinds relu]
        [--timeout 600] [--json OUT]

Kinds: `relu` (n Relu nodes in a row: nothing fuses), `add_relu` (n Add(constant) -> Relu pairs:
every Relu fuses into its Add, n edits of the graph), `conv_relu` (n 1x1 Conv -> Relu pairs: the
layout pass cancels a transpose pair per conv): the graphs of tests/converter/chains.py. Each size
runs in a fresh process (one at a time, never in parallel) and is cut off at `--timeout` seconds.
Linear scaling shows as a constant µs per node; the CPU time of the child process is the figure
(the wall clock is beside it, a busy machine inflates it). The test that keeps this linear counts
work instead of timing it: tests/converter/test_convert_linear.py.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import sys, time
sys.path.insert(0, sys.argv[3])
from edgelite.converter.convert import convert_onnx
from tests.converter.chains import chain

kind, n = sys.argv[1], int(sys.argv[2])
model = chain(kind, n)
wall, cpu = time.perf_counter(), time.process_time()
conversion = convert_onnx(model)
print(time.perf_counter() - wall, time.process_time() - cpu, len(model.graph.node),
      sum(len(sg.operators) for sg in conversion.model.subgraphs))
"""


def measure(kind: str, n: int, timeout: float) -> dict:
    try:
        run = subprocess.run([sys.executable, "-c", CHILD, kind, str(n), str(REPO_ROOT)],
                             capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"kind": kind, "n": n, "status": f"over {timeout:g} s"}
    if run.returncode != 0:
        return {"kind": kind, "n": n, "status": run.stderr.strip().splitlines()[-1][:120]}
    wall, cpu, nodes, ops = run.stdout.split()
    return {"kind": kind, "n": n, "status": "ok", "nodes": int(nodes), "ops_out": int(ops),
            "wall_s": float(wall), "cpu_s": float(cpu),
            "us_per_node": 1e6 * float(cpu) / int(nodes)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="5000,40000,100000")
    parser.add_argument("--kinds", default="relu")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    rows = []
    print("| kind | chain length | ONNX nodes | CPU s | wall s | µs per node |")
    print("|---|---|---|---|---|---|")
    for kind in args.kinds.split(","):
        for n in (int(s) for s in args.sizes.split(",")):
            row = measure(kind, n, args.timeout)
            rows.append(row)
            if row["status"] != "ok":
                print(f"| {kind} | {n} | | {row['status']} | | |", flush=True)
                continue
            print(f"| {kind} | {n} | {row['nodes']} | {row['cpu_s']:.1f} | {row['wall_s']:.1f} "
                  f"| {row['us_per_node']:.0f} |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
