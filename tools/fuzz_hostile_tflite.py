"""The structured hostile .tflite fuzzer at scale: N seeds (default 10000) of
tests/schema/hostile.py in edgelite and in LiteRT, each case in a worker process under a 2 GiB
address-space limit (above its baseline) and a CPU-time hang check; prints the counts by outcome
for both runtimes, per family, and the seeds where they disagree; writes every answer to a JSON
file (--out).

Run: python tools/fuzz_hostile_tflite.py [--cases 10000] [--seed 0] [--workers 2] [--out F]
Exit status 1 when edgelite hangs, blows up, crashes, raises an internal error, or runs a file
LiteRT refuses.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.schema import hostile_fuzz  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--runtimes", default="edgelite,litert")
    ap.add_argument("--out", type=Path, default=Path("hostile_fuzz_results.json"))
    args = ap.parse_args()
    seeds = list(range(args.seed, args.seed + args.cases))
    start = time.monotonic()
    results = hostile_fuzz.run(seeds, args.runtimes.split(","), workers=args.workers)
    print(f"{args.cases} cases (seeds {args.seed}..{args.seed + args.cases - 1}) in "
          f"{time.monotonic() - start:.0f} s")
    print(hostile_fuzz.table(results))
    disagree = hostile_fuzz.disagreements(results)
    for what, seeds_ in disagree.items():
        print(f"{what}: {len(seeds_)}")
        for s in seeds_[:20]:
            print(f"  seed {s} ({results['edgelite'][s]['family']}): edgelite: "
                  f"{results['edgelite'][s]['detail'][:120]!r} LiteRT: "
                  f"{results['litert'][s]['detail'][:120]!r}")
    args.out.write_text(json.dumps({r: {str(k): v for k, v in a.items()}
                                    for r, a in results.items()}))
    ours = results.get("edgelite", {})
    bad = [a for a in ours.values() if a["outcome"] not in ("ran", "refused")]
    return 1 if bad or disagree["edgelite ran, LiteRT refused"] else 0


if __name__ == "__main__":
    sys.exit(main())
