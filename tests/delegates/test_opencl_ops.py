"""Every delegated op on its own, through the same cases as the CPU kernels (the `CASES` and
`AUTO_CASES` of tests/interpreter/cases_*.py), on the OpenCL delegate against edgelite's CPU
interpreter: max abs error <= 1e-4 x max |ref| in fp32, <= 1e-2 x max |ref| in fp16. Cases the
delegate declines (int8 arithmetic, ...) stay on the CPU and must give exactly the CPU's result."""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest

from edgelite.schema import load
from tests.interpreter.test_ops import _all_cases
from tests.opmodel import _run, run_edgelite

TOLERANCE = {"fp32": 1e-4, "fp16": 1e-2}


@lru_cache(maxsize=None)
def _delegated_ops() -> frozenset:
    try:
        from edgelite.delegates.opencl.ops import OPS
    except ImportError:
        return frozenset()
    return frozenset(OPS)


def _op(case) -> str:
    return load(case.model).subgraphs[0].operators[0].opcode.name


def _cases():
    from edgelite.delegates.opencl import ops  # noqa: F401  (no pyopencl needed to list)
    return [c for c in _all_cases("CASES") + _all_cases("AUTO_CASES")
            if _op(c.values[0]) in ops.OPS]


def assert_matches(ours: list, ref: list, rel: float) -> None:
    assert len(ours) == len(ref)
    for k, (a, b) in enumerate(zip(ours, ref)):
        assert a.shape == b.shape and a.dtype == b.dtype, f"output {k}"
        if not np.issubdtype(b.dtype, np.floating):
            np.testing.assert_array_equal(a, b, err_msg=f"output {k}")
            continue
        finite = np.isfinite(b)
        np.testing.assert_array_equal(np.isfinite(a), finite, err_msg=f"output {k}: inf/nan")
        if not finite.any():
            continue
        err = float(np.max(np.abs(a[finite].astype(np.float64) - b[finite])))
        bound = rel * float(np.max(np.abs(b[finite])))
        assert err <= bound, f"output {k}: max abs error {err:.3g} > {bound:.3g}"


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("case", _cases())
def test_op_on_opencl_matches_cpu(case, precision, opencl):
    from edgelite.delegates import placement
    from edgelite.interpreter import Interpreter

    delegate = opencl(precision)
    ref = run_edgelite(case.model, case.feeds)
    it = Interpreter(model_content=case.model, experimental_delegates=[delegate])
    ours = _run(it, case.feeds)
    where = [p for p in placement(it) if p["where"] != "folded"]
    if not where or where[0]["where"] != delegate.name:
        # Folded at prepare, or declined (int8 arithmetic, ...): the op stays on the CPU, and
        # with a delegate present the result must be exactly the CPU interpreter's.
        assert not where or "failed" not in (where[0]["reason"] or ""), where[0]["reason"]
        assert_matches(ours, ref, 0.0)
        return
    assert_matches(ours, ref, TOLERANCE[precision])
