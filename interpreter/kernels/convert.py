"""Type conversions: CAST, DEQUANTIZE (float16 and int8/uint8/int16 to float32, per tensor or
per channel) and QUANTIZE from float32 (to int8/uint8/int16, per tensor or per channel) or from
integers (requantization, bit-exact to TFLite's reference kernel: clamp(MultiplyByQuantized-
Multiplier(x - input_zero_point, m, shift) + output_zero_point) with the multiplier of
input_scale / output_scale; quantize.cc, reference requantize.h)."""
from __future__ import annotations

import numpy as np

from .common import clip_
from .fixed_point import mbqm, quantize_multiplier
from .lut import all_values, lookup
from .quant_params import TYPE_RANGE, quant_params
from .requantize import exact_rounding
from .registry import register

_CAST_TYPES = ("float32", "float16", "float64", "int8", "uint8", "int16", "uint16", "int32",
               "uint32", "int64", "uint64", "bool")


@register("CAST", *_CAST_TYPES)
def cast(node):
    """C++ static_cast: floats truncate toward zero, nonzero becomes true; a float past an
    integer type's range saturates and NaN becomes its greatest value (as LiteRT's CAST, both
    resolvers)."""
    node.expect_inputs(1)
    from edgelite.schema.model import TENSOR_TYPES
    for name in ("in_data_type", "out_data_type"):   # LiteRT parses them: a bad code fails
        code = getattr(node.options, name, 0) if node.options is not None else 0
        if code not in TENSOR_TYPES:
            raise node.fail(f"options {name} {code} is not a tensor type code")
    node.outputs[0].shape = node.input(0).shape
    copyto = np.copyto
    if node.input(0).dtype.kind == "f" and node.outputs[0].dtype.kind in "iu":
        return _saturating_cast(node.outputs[0].dtype)

    def run(x, out):
        copyto(out, x, casting="unsafe")
    return run


def _saturating_cast(dtype):
    """CAST of floats to an integer type: truncation, saturation past its range, NaN to its
    greatest value. The bounds are the range's ends +-1 in float64 (powers of two, or exact)."""
    info = np.iinfo(dtype)
    below, above = np.float64(info.min) - 1, np.float64(info.max) + 1
    lo, hi = info.min, info.max

    def run(x, out):
        with np.errstate(invalid="ignore"):
            np.copyto(out, x, casting="unsafe")
            if x.size and not (x.min() > below and x.max() < above):   # NaN fails both
                out[~(x < above)] = hi
                out[x <= below] = lo
    return run


def _affine(node, t, what: str):
    """(scale, zero_point) of tensor `t` as float32 arrays shaped to broadcast against it."""
    q = t.quantization
    if q is None or q.scale is None or np.size(q.scale) == 0:
        raise node.fail(f"the {what} ({t.name!r}) has no quantization parameters")
    scale = np.asarray(q.scale, np.float32).reshape(-1)
    zero = np.asarray(q.zero_point if q.zero_point is not None and np.size(q.zero_point)
                      else np.zeros(scale.size), np.int64).reshape(-1)
    if zero.size == 1 and scale.size > 1:
        zero = np.repeat(zero, scale.size)
    if scale.size == 1:
        return scale.reshape(()), zero.reshape(()).astype(np.float32)
    axis = int(q.quantized_dimension or 0)
    rank = len(t.shape)
    if not 0 <= axis < rank or t.shape[axis] != scale.size or zero.size != scale.size:
        raise node.fail(f"the {what} ({t.name!r}) has {scale.size} scales along dimension "
                        f"{axis}, which does not match its shape {list(t.shape)}")
    view = (1,) * axis + (scale.size,) + (1,) * (rank - axis - 1)
    return scale.reshape(view), zero.reshape(view).astype(np.float32)


@register("DEQUANTIZE", "float16", "int8", "uint8", "int16", "int4")
def dequantize(node):
    """float16 -> float32, or (q - zero_point) * scale (exact products: as TFLite's double);
    int4 constants arrive unpacked to int8 values."""
    node.expect_inputs(1)
    x = node.input(0)
    node.outputs[0].shape = x.shape
    if node.outputs[0].dtype != np.float32:
        raise node.fail(f"the output must be float32, got {node.outputs[0].type_name}")
    if x.dtype == np.float16:
        def run(x, out):
            np.copyto(out, x)
        return run
    scale, zero = _affine(node, x, "input")

    def run(x, out):
        np.subtract(x, zero, out=out, dtype=np.float32)
        np.multiply(out, scale, out=out)
    return run


@register("QUANTIZE", "float32")
def quantize(node):
    """round(x / scale) + zero_point, clamped to the output type; rounding half away from zero
    (TfLiteRound). The rounding runs in float64, where |y| + 0.5 is exact for float32 y."""
    node.expect_inputs(1)
    x, y = node.input(0), node.outputs[0]
    y.shape = x.shape
    if y.dtype not in (np.int8, np.uint8, np.int16):
        raise node.fail(f"quantizing float32 to {y.type_name} is not supported (int8, uint8 "
                        "and int16 are)")
    scale, zero = _affine(node, y, "output")
    info = np.iinfo(y.dtype)
    lo, hi = float(info.min), float(info.max)
    q = np.empty(x.shape, np.float32)
    r = np.empty(x.shape, np.float64)
    # Past int32 (NaN, inf, |x / scale| >= 2^31): what LiteRT gives. Its reference kernel casts
    # the rounded value to int32 (x86: INT32_MIN), adds the zero point (wrapping) and clamps;
    # under the default resolver XNNPACK quantizes per-tensor int8 / uint8, saturating, NaN to
    # the greatest value.
    xnnpack = not exact_rounding(node) and y.dtype != np.int16 and np.ndim(scale) == 0

    def run(x, out):
        np.divide(x, scale, out=q)
        # two float32 reductions (NaN fails both tests), cheaper than one over float64 r
        past = q.size and not (q.min() >= -_INT32_EDGE and q.max() < _INT32_EDGE)
        np.absolute(q, out=r)
        np.add(r, 0.5, out=r)
        np.floor(r, out=r)
        bad = ~(r < _INT32_EDGE) if past else None    # NaN: not below
        np.copysign(r, q, out=r)
        if bad is not None and not xnnpack:
            r[bad] = _INT32_MIN
        np.add(r, zero, out=r)
        if bad is not None and not xnnpack:
            np.subtract(np.mod(r + 2.0 ** 31, 2.0 ** 32), 2.0 ** 31, out=r)   # int32 wrap
        clip_(r, lo, hi)
        if bad is not None and xnnpack:
            r[np.isnan(r)] = hi
        np.copyto(out, r, casting="unsafe")
    return run


_INT32_EDGE, _INT32_MIN = 2.0 ** 31, -2.0 ** 31


# Requantization: what each integer input type may become.
_OUTPUTS = {"int8": ("uint8", "int8", "int16"), "uint8": ("uint8", "int8", "int16"),
            "int16": ("int8", "int16", "int32"), "int32": ("int8", "int16")}


@register("QUANTIZE", "int8", "uint8", "int16", "int32")
def requantize(node):
    node.expect_inputs(1)
    x, out = node.input(0), node.outputs[0]
    key = x.type_name
    if out.type_name not in _OUTPUTS[key]:
        raise node.fail(f"{key} input with {out.type_name} output is not supported (TFLite "
                        f"requantizes {key} to {', '.join(_OUTPUTS[key])})")
    if out.quantization is not None and out.quantization.scale.size > 1:
        raise node.fail("per-channel output quantization needs a float32 input")
    out.shape = tuple(x.shape)
    s_in, z_in = quant_params(node, 0)
    s_out, z_out = quant_params(node, 0, output=True)
    if key == "int16" and out.type_name == "int16" and (z_in or z_out):
        raise node.fail("int16 to int16 requantization needs zero points of 0")
    m, s = quantize_multiplier(float(s_in) / float(s_out))
    lo, hi = TYPE_RANGE[out.type_name]

    def rescale(v):
        return np.clip(mbqm(v - z_in, m, s) + z_out, lo, hi)

    if key in ("int8", "uint8"):
        return lookup(rescale(all_values(key)).astype(out.dtype))

    def run(x, out):
        np.copyto(out, rescale(x.astype(np.int64)), casting="unsafe")
    return run
