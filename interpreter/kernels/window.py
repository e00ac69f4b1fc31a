"""Window ops: DILATE (spread the input out, padding between) and REDUCE_WINDOW (a reduction
over every window of a strided, dilated sliding window), as TFLite's builtin kernels compute
them."""
from __future__ import annotations

import numpy as np

from .registry import register

WINDOW_TYPES = ("float32", "float64", "float16", "int8", "uint8", "int16", "uint16", "int32",
                "uint32", "int64", "uint64", "bool")


def _int_vector(node, k: int, rank: int, what: str, dtype: str) -> list:
    """A constant vector of `dtype` (the one type LiteRT takes: a float's inf reached int())."""
    t = node.input(k)
    if t.data is None:
        raise node.fail(f"{what} (input {k}) must be a constant")
    if t.type_name != dtype:
        raise node.fail(f"{what} (input {k}) must be {dtype}, got {t.type_name}")
    values = [int(v) for v in np.asarray(t.data).reshape(-1)]
    if len(values) != rank:
        raise node.fail(f"{what} must hold {rank} values (the input's rank), got {len(values)}")
    return values


@register("DILATE", *WINDOW_TYPES)
def dilate(node):
    """Output dimension (d - 1) * dilation + 1: input values `dilation` apart, padding_value
    between them."""
    node.expect_inputs(3)
    x, pad = node.input(0), node.input(2)
    rank = len(x.shape)
    dilations = _int_vector(node, 1, rank, "the dilations", "int32")
    if any(d < 1 for d in dilations):
        raise node.fail(f"dilations must be >= 1, got {dilations}")
    if pad.dtype != x.dtype or int(np.prod(pad.shape)) != 1:
        raise node.fail(f"padding_value must be one {x.type_name} value")
    node.outputs[0].shape = tuple((d - 1) * s + 1 if d else 0 for d, s in zip(x.shape, dilations))
    spread = tuple(slice(None, None, s) for s in dilations)

    def run(a, _dilations, padding, out):
        out.fill(padding.reshape(-1)[0])
        out[spread] = a
    return run


# ReduceWindowFunction values of the format -> (ufunc, needs bool input)
_REDUCERS = {1: np.add, 2: np.multiply, 3: np.minimum, 4: np.maximum, 5: np.logical_and,
             6: np.logical_or}


def _later_unless_beaten(beats):
    """A float MAXIMUM / MINIMUM fold as LiteRT's REDUCE_WINDOW (checked against it): each
    tap x replaces the running value unless x < it (x > it for MINIMUM), so a NaN tap
    replaces it and the next tap replaces the NaN: a window's NaN comes out only from its last
    tap (or every tap NaN)."""
    def fold(acc, x, out):
        np.copyto(out, x, where=~beats(x, acc))
    return fold


@register("REDUCE_WINDOW", *WINDOW_TYPES)
def reduce_window(node):
    """init_value combined with every element of each window (window_shape, window_strides,
    window_dilations: constants of the input's rank); no padding."""
    node.expect_inputs(5)
    x, init = node.input(0), node.input(1)
    rank = len(x.shape)
    fn = int(node.options.reduce_function or 0)
    if fn not in _REDUCERS:
        raise node.fail(f"reduce_function {fn} is not one of ADD MUL MINIMUM MAXIMUM ALL ANY")
    if (fn >= 5) != (x.type_name == "bool"):
        raise node.fail(f"reduce_function {fn} does not apply to {x.type_name}")
    if init.dtype != x.dtype or int(np.prod(init.shape)) != 1:
        raise node.fail(f"init_value must be one {x.type_name} value")
    window = _int_vector(node, 2, rank, "window_shape", "int64")
    strides = _int_vector(node, 3, rank, "window_strides", "int64")
    dilations = _int_vector(node, 4, rank, "window_dilations", "int64")
    if min(window + strides + dilations, default=1) < 1:
        raise node.fail("window_shape, window_strides and window_dilations must be >= 1")
    extent = [(w - 1) * d + 1 for w, d in zip(window, dilations)]
    out_shape = tuple(max((n - e) // s + 1, 0) for n, e, s in zip(x.shape, extent, strides))
    node.outputs[0].shape = out_shape
    ufunc = _REDUCERS[fn]
    if x.dtype.kind == "f" and fn in (3, 4):
        ufunc = _later_unless_beaten(np.less if fn == 4 else np.greater)
    # Each tap of the window: a strided view of the input, combined into the output in turn.
    taps = [tuple(slice(o * dil, o * dil + (m - 1) * s + 1, s)
                  for o, dil, m, s in zip(offset, dilations, out_shape, strides))
            for offset in np.ndindex(*window)]
    if 0 in out_shape:
        return lambda *arrays: None

    def run(a, init_value, _w, _s, _d, out):
        out.fill(init_value.reshape(-1)[0])
        for tap in taps:
            ufunc(out, a[tap], out=out)
    return run
