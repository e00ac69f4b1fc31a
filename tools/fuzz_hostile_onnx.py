"""Hostile ONNX models through the converter (issue 19): counts by outcome.

    python tools/fuzz_hostile_onnx.py [--cases 1000] [--seed 0] [--json OUT]

Each case (tests/converter/hostile_onnx.py: a small valid model of one of 26 op families with
one to three hostile mutations) is converted in a worker process under a 10 s alarm and a 2 GiB
address-space limit above the worker's baseline (tests/converter/hostile_onnx_fuzz.py); what
converts is run by edgelite's interpreter. Failures (hangs, blow-ups, internal errors, crashes)
are listed with their seeds: `hostile_onnx.case(seed)` rebuilds one. Exit status 1 when any.
"""
from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.converter.hostile_onnx_fuzz import fuzz, is_failure  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    done = [0]

    def progress(result):
        done[0] += 1
        if done[0] % 100 == 0:
            print(f"  {done[0]}/{args.cases} ...", file=sys.stderr, flush=True)

    results = fuzz(range(args.seed, args.seed + args.cases), progress)
    seconds = time.perf_counter() - start
    counts = collections.Counter(r["outcome"] for r in results)
    families = collections.Counter(r["what"].split(":")[0] for r in results)
    print(f"{len(results)} hostile ONNX models (seeds {args.seed}..{args.seed + args.cases - 1}), "
          f"{seconds:.0f} s\n")
    print("| outcome | cases |\n|---|---|")
    for outcome, n in counts.most_common():
        print(f"| {outcome} | {n} |")
    print(f"\nop families: {', '.join(f'{k} {v}' for k, v in sorted(families.items()))}")
    failures = [r for r in results if is_failure(r["outcome"])]
    for r in failures:
        print(f"FAIL seed {r['seed']}: {r['what']}: {r['outcome']}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
