"""Every kernel against LiteRT's reference kernels, on single-op models: one parametrized suite.

Each family of kernels keeps its cases in a `cases_*.py` module beside this file (a list `CASES`
of `tests.opmodel.Case`, and `AUTO_CASES` for ops only LiteRT's default resolver has); this file
runs them all (collected by op_cases.py, which the OpenCL op suite shares).
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from edgelite.interpreter import OpResolverType
from tests.interpreter.op_cases import all_cases
from tests.opmodel import assert_close, run_litert
from tests.opmodel import run_edgelite as _run_edgelite

BUILTIN_REF = OpResolverType.BUILTIN_REF

pytest.importorskip("ai_edge_litert",
                    reason="LiteRT (ai-edge-litert) is the oracle: pip install -e '.[dev]'")


def run_edgelite(content: bytes, feeds: list, **kwargs) -> list:
    """edgelite's outputs, with any warning an error: a numpy RuntimeWarning from a kernel's
    prepare or run would reach users' programs (and fail those run under `-W error`)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return _run_edgelite(content, feeds, **kwargs)


@pytest.mark.parametrize("case", all_cases("CASES"))
def test_op_matches_litert(case):
    """Under BUILTIN_REF, bit-exact (integer) or within the case's tolerance (float). Under
    edgelite's default resolver the 8-bit kernels may round in float, at most 1 from the
    reference (as LiteRT's optimized kernels do)."""
    ours = run_edgelite(case.model, case.feeds, experimental_op_resolver_type=BUILTIN_REF)
    theirs = run_litert(case.model, case.feeds)
    assert_close(ours, theirs, rtol=case.rtol, atol=case.atol)
    if any(t.dtype in (np.int8, np.uint8) for t in theirs):
        fast = run_edgelite(case.model, case.feeds)
        for k, (a, b) in enumerate(zip(fast, theirs)):
            if a.dtype in (np.int8, np.uint8):
                assert np.abs(a.astype(int) - b).max(initial=0) <= 1, f"output {k}"
            else:
                np.testing.assert_allclose(a, b, rtol=case.rtol, atol=case.atol)


@pytest.mark.parametrize("case", all_cases("AUTO_CASES"))
def test_op_matches_litert_default_kernels(case):
    """Ops LiteRT's reference resolver lacks (CEIL, ROUND, ELU, ...): against its default one."""
    ours = run_edgelite(case.model, case.feeds)
    theirs = run_litert(case.model, case.feeds, reference=False)
    assert_close(ours, theirs, rtol=case.rtol, atol=case.atol)
