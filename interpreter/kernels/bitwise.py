"""Bit-level ops: BITWISE_XOR, RIGHT_SHIFT (broadcasting, integer types) and BITCAST (the same
bytes read as another type), as TFLite's kernels compute them."""
from __future__ import annotations

import numpy as np

from .common import broadcast_shape
from .registry import register

BITWISE_TYPES = ("int8", "uint8", "int16", "uint16", "int32", "uint32")


def _binary_integer(node) -> tuple:
    node.expect_inputs(2)
    a, b = node.input(0), node.input(1)
    if a.dtype != b.dtype:
        raise node.fail(f"inputs must have the same type, got {a.type_name} and {b.type_name}")
    if node.outputs[0].dtype != a.dtype:
        raise node.fail(f"the output must be {a.type_name}, got {node.outputs[0].type_name}")
    node.outputs[0].shape = broadcast_shape(node, a.shape, b.shape)
    return a, b


@register("BITWISE_XOR", *BITWISE_TYPES)
def bitwise_xor(node):
    _binary_integer(node)
    return lambda a, b, out: np.bitwise_xor(a, b, out=out)


@register("RIGHT_SHIFT", *BITWISE_TYPES)
def right_shift(node):
    """x >> y with y clamped to [0, bits - 1] (TFLite's guard against undefined shifts);
    arithmetic for signed types."""
    a, _ = _binary_integer(node)
    top = a.dtype.itemsize * 8 - 1
    lo = 0 if a.dtype.kind == "i" else None
    y = node.input(1)
    if y.data is not None:  # a constant shift amount is clamped once
        amount = np.clip(y.data, lo, top).astype(a.dtype)
        return lambda x, _y, out: np.right_shift(x, amount, out=out)
    clamped = np.empty(y.shape, a.dtype)

    def run(x, shift, out):
        np.clip(shift, lo, top, out=clamped)
        np.right_shift(x, clamped, out=out)
    return run


@register("BITCAST", "float32", "float16", "float64", "int8", "uint8", "int16", "uint16",
          "int32", "uint32", "int64", "uint64", "bool", "complex64", "complex128")
def bitcast(node):
    """The input's bytes as the output's type. A wider input gains a last dimension of
    (in size / out size); a narrower one must end in a dimension of (out size / in size),
    which goes."""
    node.expect_inputs(1)
    x, y = node.input(0), node.outputs[0]
    n_in, n_out = x.dtype.itemsize, y.dtype.itemsize
    shape = tuple(x.shape)
    if n_in > n_out:
        if n_in % n_out:
            raise node.fail(f"cannot bitcast {x.type_name} to {y.type_name}")
        shape = shape + (n_in // n_out,)
    elif n_in < n_out:
        if n_out % n_in or not shape or shape[-1] != n_out // n_in:
            raise node.fail(f"bitcasting {x.type_name}{list(x.shape)} to {y.type_name} needs a "
                            f"last dimension of {n_out // max(n_in, 1)}")
        shape = shape[:-1]
    y.shape = shape

    def run(a, out):
        out.reshape(-1).view(np.uint8)[...] = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    return run
