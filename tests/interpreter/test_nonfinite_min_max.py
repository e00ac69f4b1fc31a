"""float32 MAXIMUM / MINIMUM with a NaN operand as LiteRT: TFLite's el1 > el2 ? el1 : el2 skips a
NaN first operand only (numpy's maximum propagates both)."""
from __future__ import annotations

import numpy as np
import pytest

from tests.interpreter.op_cases import all_cases
from tests.interpreter.test_nonfinite import assert_same_pattern
from tests.opmodel import run_edgelite, run_litert

pytest.importorskip("ai_edge_litert", reason="LiteRT (ai-edge-litert) is the oracle")

MIN_MAX = ["elementwise:maximum_broadcast1", "elementwise:minimum_broadcast1",
           "elementwise:maximum_broadcast4", "elementwise:minimum_broadcast2"]
_CASES = {p.id: p.values[0] for p in all_cases("CASES") if p.id in MIN_MAX}


@pytest.mark.parametrize("reference", [False, True], ids=["default", "builtin_ref"])
@pytest.mark.parametrize("operand", [0, 1])
@pytest.mark.parametrize("case_id", MIN_MAX)
def test_float32_min_max_nan_operand_as_litert(case_id, operand, reference):
    from edgelite.interpreter import OpResolverType
    feeds = [np.asarray(f).copy() for f in _CASES[case_id].feeds]
    feeds[operand].reshape(-1)[:2] = np.nan
    resolver = OpResolverType.BUILTIN_REF if reference else OpResolverType.AUTO
    ours = run_edgelite(_CASES[case_id].model, feeds, experimental_op_resolver_type=resolver)
    theirs = run_litert(_CASES[case_id].model, feeds, reference)
    assert np.isnan(theirs[0]).any() == (operand == 1)
    assert_same_pattern(ours, theirs)
