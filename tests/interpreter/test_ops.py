"""Every kernel against LiteRT's reference kernels, on single-op models: one parametrized suite.

Each family of kernels keeps its cases in a `cases_*.py` module beside this file (a list `CASES`
of `tests.opmodel.Case`, and `AUTO_CASES` for ops only LiteRT's default resolver has); this file
runs them all.
"""
from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest

from tests.opmodel import assert_close, run_edgelite, run_litert

pytest.importorskip("ai_edge_litert", reason="LiteRT (ai-edge-litert) is the oracle: pip install -e '.[dev]'")


def _all_cases(attribute: str):
    here = Path(__file__).parent
    cases = []
    for info in sorted(pkgutil.iter_modules([str(here)]), key=lambda m: m.name):
        if info.name.startswith("cases_"):
            module = importlib.import_module(f"tests.interpreter.{info.name}")
            cases.extend(pytest.param(c, id=f"{info.name[6:]}:{c.id}")
                         for c in getattr(module, attribute, ()))
    return cases


@pytest.mark.parametrize("case", _all_cases("CASES"))
def test_op_matches_litert(case):
    ours = run_edgelite(case.model, case.feeds)
    theirs = run_litert(case.model, case.feeds)
    assert_close(ours, theirs, rtol=case.rtol, atol=case.atol)


@pytest.mark.parametrize("case", _all_cases("AUTO_CASES"))
def test_op_matches_litert_default_kernels(case):
    """Ops LiteRT's reference resolver lacks (CEIL, ROUND, ELU, ...): against its default one."""
    ours = run_edgelite(case.model, case.feeds)
    theirs = run_litert(case.model, case.feeds, reference=False)
    assert_close(ours, theirs, rtol=case.rtol, atol=case.atol)
