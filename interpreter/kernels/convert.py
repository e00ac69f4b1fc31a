"""Type conversions: CAST, DEQUANTIZE (float16 and int8/uint8/int16 to float32, per tensor or
per channel) and QUANTIZE from float32 (to int8/uint8/int16, per tensor or per channel) or from
integers (requantization, bit-exact to TFLite's reference kernel: clamp(MultiplyByQuantized-
Multiplier(x - input_zero_point, m, shift) + output_zero_point) with the multiplier of
input_scale / output_scale; quantize.cc, reference requantize.h)."""
from __future__ import annotations

import numpy as np

from .common import clip, clip_, raw
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
        return _saturating_cast(node.input(0).dtype, node.outputs[0].dtype)

    def run(x, out):
        copyto(out, x, casting="unsafe")
    return run


def _saturating_cast(in_dtype, dtype):
    """CAST of floats to an integer type: truncation, saturation past its range, NaN to its
    greatest value. The range check is two reductions (NaN fails both); past it, a range whose
    ends the float type holds exactly (int8 / uint8 / int16 from float32) is a clip in float
    then the truncating cast (truncation and the clip to integer bounds commute), NaN set apart;
    other ranges (int32 from float32) compare against its ends +-1 in float64 (powers of two,
    or exact)."""
    info = np.iinfo(dtype)
    below, above = np.float64(info.min) - 1, np.float64(info.max) + 1
    lo, hi = info.min, info.max
    ftype = np.dtype(in_dtype).type
    exact = all(abs(b) <= float(np.finfo(ftype).max) and int(ftype(b)) == b for b in (lo, hi))
    lo_f, hi_f = (np.array(b, in_dtype) for b in (lo, hi)) if exact else (None, None)
    copyto, minimum, maximum = raw(np.copyto), np.minimum.reduce, np.maximum.reduce

    held = []    # the clip's float buffer and a NaN mask, made at the first input past it

    def run(x, out):
        if not x.size or (minimum(x, None) > below and maximum(x, None) < above):
            copyto(out, x, casting="unsafe")
            return
        with np.errstate(invalid="ignore"):
            if exact:
                if not held or held[0].shape != x.shape:
                    held[:] = [np.empty(x.shape, in_dtype), np.empty(x.shape, np.bool_)]
                copyto(out, clip(x, lo_f, hi_f, held[0]), casting="unsafe")
                if np.isnan(maximum(x, None)):
                    copyto(out, hi, where=np.isnan(x, out=held[1]))
                return
            copyto(out, x, casting="unsafe")
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
    (TfLiteRound), in float32 as trunc(q + copysign(1/2 - 2^-25, q)): exact for every float32
    q (the sum reaches the next integer exactly when frac(|q|) >= 1/2; past 2^24, where it may
    not, every value clamps). The sign goes on by its bit (np.copysign is a scalar loop, 7x an
    add); the clamp runs before the truncation (they commute at integer bounds), so the
    truncating cast is the rounding's last step: a zero point of +-128 that moves the int8 /
    uint8 range onto the other one is the cast to that type and a flip of the top bit."""
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
    half = np.empty(x.shape, np.float32)
    low, high = (np.asarray(b - zero, np.float32) for b in (lo, hi))
    # Past int32 (NaN, inf, |x / scale| >= 2^31): what LiteRT gives. Its reference kernel casts
    # the rounded value to int32 (x86: INT32_MIN), adds the zero point (wrapping) and clamps;
    # under the default resolver XNNPACK quantizes per-tensor int8 / uint8, saturating, NaN to
    # the greatest value: there the clamp saturates as XNNPACK and only NaN is left, which the
    # cast reports (numpy's invalid-value check, no pass of its own).
    xnnpack = not exact_rounding(node) and y.dtype != np.int16 and np.ndim(scale) == 0
    flip = np.ndim(zero) == 0 and (y.dtype, float(zero)) in ((np.int8, -128.0),
                                                              (np.uint8, 128.0))
    zero_point = not flip and bool(np.any(zero != 0))
    other = np.uint8 if y.dtype == np.int8 else np.int8
    top = np.array(128, np.uint8)
    bits, signs = q.view(np.uint32), half.view(np.uint32)
    copyto, minimum, maximum = raw(np.copyto), np.minimum.reduce, np.maximum.reduce

    views = [None, None, None]     # out, as the other 8-bit type and as uint8

    def rounded(x, out):
        """The float32 path into `out` (the cast may raise on NaN)."""
        np.bitwise_and(bits, _SIGN, out=signs)
        np.bitwise_or(signs, _HALF_BITS, out=signs)
        np.add(q, half, out=q)
        clip(q, low, high, q)
        if flip:
            if views[0] is not out:
                views[:] = [out, out.view(other), out.view(np.uint8)]
            copyto(views[1], q, casting="unsafe")
            np.bitwise_xor(views[2], top, views[2])
            return
        if zero_point:
            np.trunc(q, out=q)
            np.add(q, zero, out=q)
        copyto(out, q, casting="unsafe")

    def run(x, out):
        np.divide(x, scale, out=q)
        if xnnpack:
            try:
                with np.errstate(invalid="raise"):
                    rounded(x, out)
                return
            except FloatingPointError:                  # NaN
                np.divide(x, scale, out=q)
        elif not q.size or (minimum(q, None) >= -_INT32_EDGE and
                            maximum(q, None) < _INT32_EDGE):   # (NaN fails both)
            rounded(x, out)
            return
        _past_int32(q, zero, lo, hi, xnnpack, out)
    return run


_SIGN = np.array(0x80000000, np.uint32)
_HALF_BITS = np.array(np.float32(0.5 - 2.0 ** -25)).view(np.uint32)


def _past_int32(q, zero, lo, hi, xnnpack, out) -> None:
    """QUANTIZE's rounding of q = x / scale holding values past int32 (NaN, inf, >= 2^31 in
    magnitude), in float64, as LiteRT gives them (see quantize)."""
    with np.errstate(invalid="ignore"):
        r = np.floor(np.absolute(q, dtype=np.float64) + 0.5)
        bad = ~(r < _INT32_EDGE)                      # NaN: not below
        np.copysign(r, q, out=r)
        if not xnnpack:
            r[bad] = _INT32_MIN
        np.add(r, zero, out=r)
        if not xnnpack:
            np.subtract(np.mod(r + 2.0 ** 31, 2.0 ** 32), 2.0 ** 31, out=r)   # int32 wrap
        clip_(r, lo, hi)
        if xnnpack:
            r[np.isnan(r)] = hi
        np.copyto(out, r, casting="unsafe")


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
