"""Every single-op case of the kernels: the `CASES` and `AUTO_CASES` of tests/interpreter/
cases_*.py, as pytest params. A plain module (no oracle imported, nothing skipped), so that each
suite running the cases skips only for what it needs itself: test_ops.py for LiteRT, the
OpenCL op suite (tests/delegates/test_opencl_ops.py) for a device."""
from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest


def all_cases(attribute: str) -> list:
    """The cases of every cases_*.py module's list `attribute`, ids `<family>:<case id>`."""
    here = Path(__file__).parent
    cases = []
    for info in sorted(pkgutil.iter_modules([str(here)]), key=lambda m: m.name):
        if info.name.startswith("cases_"):
            module = importlib.import_module(f"tests.interpreter.{info.name}")
            cases.extend(pytest.param(c, id=f"{info.name[6:]}:{c.id}")
                         for c in getattr(module, attribute, ()))
    return cases
