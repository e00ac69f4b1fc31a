"""Unary math: ABS NEG EXP LOG SQRT RSQRT SQUARE SIN COS FLOOR CEIL ROUND SIGN.

Each is one or two ufunc calls with `out=`; ROUND rounds half to even like TFLite's reference
kernel (and numpy's rint).
"""
from __future__ import annotations

import numpy as np

from .registry import register


def _unary(*ufuncs):
    """A kernel applying `ufuncs` in turn: the first reads the input, the rest work in place."""
    first, rest = ufuncs[0], ufuncs[1:]

    def prepare(node):
        node.expect_inputs(1)
        node.outputs[0].shape = node.input(0).shape
        if not rest:
            def run(x, out):
                first(x, out=out)
            return run
        second = rest[0]

        def run(x, out):
            first(x, out=out)
            second(out, out=out)
        return run
    return prepare


register("ABS", "float32", "int32")(_unary(np.absolute))
register("NEG", "float32", "int32", "int64")(_unary(np.negative))
register("EXP", "float32")(_unary(np.exp))
register("LOG", "float32")(_unary(np.log))
register("SQRT", "float32")(_unary(np.sqrt))
register("RSQRT", "float32")(_unary(np.sqrt, np.reciprocal))  # 1 / sqrt(x), as TFLite does
register("SQUARE", "float32")(_unary(np.square))
register("SIN", "float32")(_unary(np.sin))
register("COS", "float32")(_unary(np.cos))
register("FLOOR", "float32")(_unary(np.floor))
register("CEIL", "float32")(_unary(np.ceil))
register("ROUND", "float32")(_unary(np.rint))
register("SIGN", "float32", "float64", "int32")(_unary(np.sign))
