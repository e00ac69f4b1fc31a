"""Hostile ONNX models (tests/converter/hostile_onnx.py) through the converter, each in a worker
process under a time and an address-space limit (tests/converter/hostile_onnx_fuzz.py): no
hangs, blow-ups, internal errors or crashes, in the converter or in the interpreter running what
it converted. EDGELITE_ONNX_FUZZ_CASES (default 200) sets the number of cases,
EDGELITE_ONNX_FUZZ_SEED (default 0) the first seed; tools/fuzz_hostile_onnx.py runs 10**3 and
more and prints the counts by outcome. Run with -s to see them here."""
from __future__ import annotations

import collections
import os

from tests.converter.hostile_onnx_fuzz import fuzz, is_failure

CASES = int(os.environ.get("EDGELITE_ONNX_FUZZ_CASES", "200"))
FIRST_SEED = int(os.environ.get("EDGELITE_ONNX_FUZZ_SEED", "0"))


def test_hostile_onnx_models_are_converted_or_refused():
    results = fuzz(range(FIRST_SEED, FIRST_SEED + CASES))
    counts = collections.Counter(r["outcome"] for r in results)
    print("\n" + "\n".join(f"{n:6d}  {outcome}" for outcome, n in counts.most_common()))
    failures = [r for r in results if is_failure(r["outcome"])]
    assert not failures, failures[:10]
    assert len(results) == CASES
    # the generator makes both kinds (a generator whose every case is refused tests little)
    assert counts["refused"] > CASES // 10 and counts["converted, ran"] > CASES // 10, counts
