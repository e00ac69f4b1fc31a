"""Rules of the test suite itself. A test module that imports from another test module inherits
that module's module-level skips: tests/delegates/test_opencl_ops.py once took its cases from
tests/interpreter/test_ops.py, whose `importorskip("ai_edge_litert")` silently skipped every
OpenCL op test (and the fusion and model suites importing from it) wherever LiteRT was absent.
Shared helpers and cases live in plain modules (tests/interpreter/op_cases.py, ...)."""
from __future__ import annotations

import ast

from tests.conftest import REPO_ROOT

TESTS = REPO_ROOT / "tests"


def _module_skips(tree: ast.Module) -> set:
    """What a module skips for at import: the modules of its top-level importorskip calls, and
    "skip" for a module-level pytest.skip or pytestmark."""
    found = set()
    for stmt in tree.body:
        value = stmt.value if isinstance(stmt, (ast.Expr, ast.Assign)) else None
        marks = isinstance(stmt, ast.Assign) and any(getattr(t, "id", "") == "pytestmark"
                                                     for t in stmt.targets)
        if marks and "skip" in ast.unparse(stmt.value):
            found.add("skip")
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
            if value.func.attr == "importorskip" and value.args:
                found.add(ast.literal_eval(value.args[0]).split(".")[0])
            elif value.func.attr == "skip":
                found.add("skip")
    return found


def test_no_test_module_inherits_skips_from_another():
    trees = {p: ast.parse(p.read_text(), str(p)) for p in sorted(TESTS.rglob("*.py"))}
    hidden = []
    for path, tree in trees.items():
        own = _module_skips(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("tests."):
                continue
            parts = node.module.split(".")
            if not parts[-1].startswith("test_"):
                continue
            target = REPO_ROOT.joinpath(*parts).with_suffix(".py")
            extra = _module_skips(trees[target]) - own if target in trees else set()
            if extra:
                hidden.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno} imports "
                              f"{node.module}, which skips for {sorted(extra)}")
    assert not hidden, "\n".join(hidden)
