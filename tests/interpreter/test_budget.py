"""The allocation budget's API as the converter uses it (issue 12 item 5): kernel nodes whose
`runtime` is a `budget.Owner` fold constants through `budget.fold`, held under a key, and a fold
past the limit is refused before it allocates, naming the op and the size."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.interpreter import budget
from edgelite.interpreter.kernels import registry
from edgelite.interpreter.kernels.registry import Node, TensorInfo
from edgelite.schema import default_options


def _range_node(owner, limit: int) -> Node:
    def const(i, name, v):
        a = np.array(v, np.int32)
        return TensorInfo(i, name, (), a.dtype, "int32", None, a)
    out = TensorInfo(3, "y", (0,), np.dtype(np.int32), "int32")
    return Node("RANGE", 0, [const(0, "start", 0), const(1, "limit", limit),
                             const(2, "delta", 1)], [out], default_options("RANGE"),
                runtime=owner)


def test_folding_through_an_owner_is_counted_and_held():
    owner = budget.Owner(1 << 20)
    node = _range_node(owner, 1000)
    run = registry.lookup(node)(node)
    (value,) = budget.fold(node, run, key="folded")
    np.testing.assert_array_equal(value, np.arange(1000))
    assert not value.flags.writeable
    assert owner.budget.held == {"folded": 4000} and owner.budget.used == 4000
    node = _range_node(owner, 2 ** 18)          # 1 MiB more: past the 1 MiB limit
    run = registry.lookup(node)(node)
    with pytest.raises(budget.MemoryBudgetError, match=r"operator 0 \(RANGE\): folding output "
                                                       r"0 \[262144\] of int32 needs 1\.0 MiB"):
        budget.fold(node, run, key="folded")
    assert owner.budget.used == 4000            # nothing charged for the refused fold
    owner.budget.release("folded")
    assert owner.budget.used == 0


def test_default_limit():
    """256 MiB + 64 bytes per byte of model and inputs, at most the machine's; the variable
    replaces it."""
    machine = budget.machine_limit()
    assert budget.default_limit(736) == min(machine, (256 << 20) + 64 * 736)
    assert budget.default_limit(100 << 20, 3 << 20) == min(machine, (256 << 20) + 64 * (103 << 20))


def test_the_limit_variable(monkeypatch):
    monkeypatch.setenv("EDGELITE_MEMORY_LIMIT", "1.5G")
    assert budget.default_limit(10) == int(1.5 * (1 << 30))
    monkeypatch.setenv("EDGELITE_MEMORY_LIMIT", "lots")
    with pytest.raises(ValueError, match="EDGELITE_MEMORY_LIMIT='LOTS' is not a number of bytes"):
        budget.default_limit(10)


def test_a_kernel_outside_any_interpreter_is_bounded_by_the_machine():
    """check() with no budget (a node without a runtime): only the machine's limit."""
    node = _range_node(None, 1)
    budget.check(node, 1 << 20, "a block")
    with pytest.raises(budget.MemoryBudgetError, match=r"RANGE\): a block needs"):
        budget.check(node, budget.machine_limit() + 1, "a block")
