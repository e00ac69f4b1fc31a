"""Binary elementwise ops with broadcasting, and their fused activations."""
from __future__ import annotations

import numpy as np

from .common import broadcast_shape, fused_activation, with_activation
from .registry import register


def _binary(ufunc):
    def prepare(node):
        node.expect_inputs(2)
        a, b = node.input(0), node.input(1)
        node.outputs[0].shape = broadcast_shape(node, a.shape, b.shape)
        act = fused_activation(getattr(node.options, "fused_activation_function", 0), node)

        def compute(x, y, out):
            ufunc(x, y, out=out)
        return with_activation(compute, act)
    return prepare


register("ADD", "float32", "int32", "int64")(_binary(np.add))
register("SUB", "float32", "int32", "int64")(_binary(np.subtract))
register("MUL", "float32", "int32", "int64")(_binary(np.multiply))
