"""Hostile ONNX models through the converter (issue 19): counts by outcome.

    python tools/fuzz_hostile_onnx.py [--cases 1000] [--seed 0] [--json OUT] [--litert]

Each case (tests/converter/hostile_onnx.py: a small valid model of one of 26 op families with
one to three hostile mutations) is converted in a worker process under a 10 s alarm and a 2 GiB
address-space limit above the worker's baseline (tests/converter/hostile_onnx_fuzz.py); what
converts is run by edgelite's interpreter. Failures (hangs, blow-ups, internal errors, crashes)
are listed with their seeds: `hostile_onnx.case(seed)` rebuilds one. Exit status 1 when any.
--litert: every .tflite the converter wrote is also run in LiteRT (converted again here, then
run in a worker process under the same limits, restarted when LiteRT dies), with its counts.
"""
from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.converter.hostile_onnx_fuzz import fuzz, is_failure  # noqa: E402


# Runs each .tflite path read from stdin in LiteRT (inputs zeros, as edgelite's run), one JSON
# line per file, under an address-space limit of 2 GiB above its baseline.
_LITERT_WORKER = r"""
import json, os, resource, sys
import numpy as np
from ai_edge_litert.interpreter import Interpreter
with open("/proc/self/statm") as f:
    base = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
resource.setrlimit(resource.RLIMIT_AS, (base + (2 << 30),) * 2)
os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
for path in sys.stdin:
    try:
        it = Interpreter(model_path=path.strip())
        it.allocate_tensors()
        for d in it.get_input_details():
            it.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
        it.invoke()
        outcome = "ran"
    except MemoryError:
        outcome = "blow-up"
    except Exception as e:  # noqa: BLE001
        outcome = f"refused ({type(e).__name__})"
    print(json.dumps(outcome), flush=True)
"""


def litert_outcomes(seeds: list) -> dict:
    """{seed: LiteRT's outcome} on the .tflite each seed's case converts to."""
    from edgelite.converter.convert import convert_onnx
    from tests.converter.hostile_onnx import case

    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for seed in seeds:
            paths[seed] = Path(tmp) / f"{seed}.tflite"
            paths[seed].write_bytes(convert_onnx(case(seed)[1]).content)
        pending = list(seeds)
        while pending:
            proc = subprocess.Popen([sys.executable, "-c", _LITERT_WORKER], text=True,
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            while pending:
                seed = pending[0]
                try:
                    proc.stdin.write(f"{paths[seed]}\n")
                    proc.stdin.flush()
                    line = proc.stdout.readline()
                except BrokenPipeError:
                    line = ""
                pending.pop(0)
                if not line:
                    out[seed] = f"crash (exit {proc.wait()})"
                    break
                out[seed] = json.loads(line)
            if proc.poll() is None:
                proc.stdin.close()
                proc.wait()
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json")
    parser.add_argument("--litert", action="store_true",
                        help="run every converted file in LiteRT too")
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
    if args.litert:
        converted = [r["seed"] for r in results if r["outcome"].startswith("converted")]
        theirs = litert_outcomes(converted)
        for r in results:
            if r["seed"] in theirs:
                r["litert"] = theirs[r["seed"]]
        pairs = collections.Counter((r["outcome"], r["litert"]) for r in results
                                    if "litert" in r)
        print(f"\nthe {len(converted)} converted files in LiteRT:\n")
        print("| edgelite | LiteRT | files |\n|---|---|---|")
        for (ours, litert), n in pairs.most_common():
            print(f"| {ours} | {litert} | {n} |")
    failures = [r for r in results if is_failure(r["outcome"])]
    for r in failures:
        print(f"FAIL seed {r['seed']}: {r['what']}: {r['outcome']}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
