"""ONNX node conformance of the converter + edgelite's interpreter, counted per op.

    python benchmarks/onnx_conformance.py [--filter SUBSTR] [--failures] [--litert] [--json OUT]

Each of ONNX's backend node test cases (generated from the installed onnx by the shared
`onnx_node_tests.py`, ~10 s the first time) whose ops are all in the converter's op list
(issue 4) is converted with its inputs kept as graph inputs, run in edgelite's interpreter and
compared with the expected outputs at onnx's tolerances; the cases in
`converter/conformance_exclusions.txt` (types `.tflite` cannot hold, training mode) are left
out. Prints a markdown table: per op, the passing cases of those that use it. `--litert` runs
the same converted models in LiteRT instead (the issue scores edgelite; this shows that the files
are standard .tflite).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # before numpy loads OpenBLAS


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--filter", help="only cases whose name contains this")
    parser.add_argument("--root", help="the generated cases (default: the tool's lookup)")
    parser.add_argument("--failures", action="store_true", help="list failing cases and why")
    parser.add_argument("--litert", action="store_true",
                        help="run the converted models in LiteRT instead of edgelite")
    parser.add_argument("--json", help="write counts and per-case results here")
    args = parser.parse_args()

    from edgelite.converter import conformance

    start = time.perf_counter()
    runtime = "litert" if args.litert else "edgelite"
    result, cases, skipped = conformance.run(args.root, args.filter, runtime)
    seconds = time.perf_counter() - start
    table = conformance.per_op(result, cases)
    total, passed = result["total"], result["passed"]
    print(f"ONNX node conformance ({runtime}): {passed} / {total} cases pass "
          f"({100 * passed / max(total, 1):.1f} %), {result['failed']} wrong, "
          f"{result['errors']} not converted or failed to run; {seconds:.0f} s")
    excluded = sum(1 for reason in skipped.values() if not reason.startswith("ops outside"))
    print(f"left out: {excluded} excluded (conformance_exclusions.txt), "
          f"{len(skipped) - excluded} with ops outside the list\n")
    print("| op | pass | cases |\n|---|---:|---:|")
    for op, (ok, count) in table.items():
        mark = "" if ok == count else " ⚠"
        print(f"| {op} | {ok} | {count}{mark} |")
    if args.failures:
        print()
        for name, (status, detail) in sorted(result["cases"].items()):
            if status != "pass":
                print(f"{status:5s} {name}: {detail}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"passed": passed, "total": total, "per_op": table,
                       "cases": result["cases"], "excluded": skipped}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
