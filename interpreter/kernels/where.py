"""WHERE: the coordinates of the true (non-zero) elements, one row each. Its output shape depends
on the input's values, so the kernel is dynamic (see `Node.dynamic`)."""
from __future__ import annotations

import numpy as np

from .registry import register


@register("WHERE", "bool", "float32", "int32", "int64", "int8", "uint8")
def where(node):
    node.expect_inputs(1)
    out = node.outputs[0]
    if out.type_name != "int64":
        raise node.fail(f"the output must be int64, got {out.type_name}")
    node.dynamic = True

    def run(condition):
        return [np.argwhere(condition).astype(np.int64, copy=False)]
    return run
