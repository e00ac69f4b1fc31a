"""The structured hostile fuzzer (hostile.py) in CI: EDGELITE_HOSTILE_CASES seeds (default
300) from EDGELITE_HOSTILE_SEED (default 0), each run in edgelite and in LiteRT in worker
processes (hostile_fuzz.py). edgelite has no hang (over 10 s of CPU for the case), no blow-up
(past 2 GiB of address space above the worker's baseline), no internal error and no crash; and
every file LiteRT refuses, edgelite refuses too. Run with -s to see the counts; the 10**4-case
run is tools/fuzz_hostile_tflite.py."""
from __future__ import annotations

import os

from tests.schema import hostile_fuzz

CASES = int(os.environ.get("EDGELITE_HOSTILE_CASES", "300"))
FIRST_SEED = int(os.environ.get("EDGELITE_HOSTILE_SEED", "0"))


def test_structured_hostile_files():
    seeds = list(range(FIRST_SEED, FIRST_SEED + CASES))
    results = hostile_fuzz.run(seeds, workers=2)
    print("\n" + hostile_fuzz.table(results))
    ours = results["edgelite"]
    assert len(ours) == CASES
    bad = sorted((a for a in ours.values() if a["outcome"] not in ("ran", "refused")),
                 key=lambda a: a["seed"])
    assert not bad, (f"{len(bad)} failing seeds; replay one with `python -m "
                     f"tests.schema.hostile_worker edgelite --show SEED`:\n"
                     + "\n".join(f"seed {a['seed']} ({a['family']}): {a['outcome']}: "
                                 f"{a['detail']}" for a in bad[:10]))
    lenient = hostile_fuzz.disagreements(results)["edgelite ran, LiteRT refused"]
    assert not lenient, "LiteRT refuses, edgelite runs: " + "\n".join(
        f"seed {s} ({ours[s]['family']}): LiteRT: {results['litert'][s]['detail']}"
        for s in lenient[:10])
