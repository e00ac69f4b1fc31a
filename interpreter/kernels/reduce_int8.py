"""Reductions on int8 / uint8 (and int16 where TFLite has them), bit-exact to TFLite's reference
kernels (reduce.h): MEAN, SUM, REDUCE_PROD, REDUCE_MAX / REDUCE_MIN, ARG_MAX / ARG_MIN.

MEAN and SUM rescale the zero-point-corrected int32 sum once (QuantizedMeanOrSum; MEAN with the
multiplier of input_scale / output_scale folded with 1 / count); REDUCE_PROD rescales the
running product after every factor (QuantizedReduceProd). REDUCE_MAX / REDUCE_MIN and the arg
ops compare raw values: reduce.py's kernels registered for the integer types.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from . import reduce
from .fixed_point import EXACT_F32, mbqm, mbqm64, quantize_multiplier, wrap32
from .quant_params import TYPE_RANGE, expect_output_type, quant_params
from .registry import register
from .requantize import Requantizer, exact_rounding


class Reduction(NamedTuple):
    """What a quantized reduction reads at prepare: the input, its type, the reduced axes,
    keep_dims, the output shape, both tensors' quantization, the count of reduced values per
    output and the type's range."""

    x: object
    key: str
    axes: tuple
    keep: bool
    shape: tuple
    s_in: float
    z_in: int
    s_out: float
    z_out: int
    count: int
    lo: int
    hi: int


def quantized_reduction(node, name: str) -> Reduction:
    """The checks MEAN / SUM / REDUCE_PROD share; sets the output shape."""
    node.expect_inputs(2)
    x = node.input(0)
    key = x.type_name
    expect_output_type(node, key)
    axes = tuple(sorted(reduce.constant_axes(node, len(x.shape))))
    keep = bool(getattr(node.options, "keep_dims", False))
    shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape) if keep or i not in axes)
    node.outputs[0].shape = shape
    s_in, z_in = quant_params(node, 0)
    s_out, z_out = quant_params(node, 0, output=True)
    if key == "int16" and (z_in or z_out):
        raise node.fail(f"int16 {name} needs zero points of 0")
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    return Reduction(x, key, axes, keep, shape, s_in, z_in, s_out, z_out, count,
                     *TYPE_RANGE[key])


# -- MEAN --------------------------------------------------------------------------------------

@register("MEAN", "int8", "uint8", "int16")
def mean(node):
    _, _, axes, keep, shape, s_in, z_in, s_out, z_out, count, lo, hi = \
        quantized_reduction(node, "MEAN")
    multiplier, shift = quantize_multiplier(float(s_in) / float(s_out))
    if count > 0:
        # reduce.h: fold 1 / count into the multiplier.
        k = max(0, min(count.bit_length() - 1, 32, 31 + shift))
        multiplier = (multiplier << k) // count
        shift -= k
    if count == 0 or int(np.prod(shape, dtype=np.int64)) == 0:
        def run_empty(x, axis_, out):
            out[...] = 0
        return run_empty
    size = int(np.prod(shape, dtype=np.int64))
    if count * 32768 < EXACT_F32:
        # float32 sums are exact: the requantizer's fast path reads them.
        sums = np.empty(shape, np.float32)
        requant = Requantizer(multiplier, shift, z_out, lo, hi, (size, 1), -z_in * count,
                              acc_bound=np.array([count * 32768]),
                              exact=exact_rounding(node))
        work = requant.work()

        def run(x, axis_, out):
            np.sum(x, axis=axes, dtype=np.float32, keepdims=keep, out=sums)
            requant(sums.reshape(size, 1), out.reshape(size, 1), work)
        return run
    sums = np.empty(shape, np.int64)

    def run(x, axis_, out):
        np.sum(x, axis=axes, dtype=np.int64, keepdims=keep, out=sums)
        y = mbqm(sums - z_in * count, multiplier, shift) + z_out
        np.copyto(out, np.clip(y, lo, hi), casting="unsafe")
    return run


# -- SUM ---------------------------------------------------------------------------------------

@register("SUM", "int8", "uint8", "int16")
def sum_(node):
    _, _, axes, keep, shape, s_in, z_in, s_out, z_out, count, lo, hi = \
        quantized_reduction(node, "SUM")
    multiplier, shift = quantize_multiplier(float(s_in) / float(s_out))
    sums = np.empty(shape, np.int64)

    def run(x, axis_, out):
        if x.size == 0:
            out[...] = 0
            return
        np.sum(x, axis=axes, dtype=np.int64, keepdims=keep, out=sums)
        y = mbqm(wrap32(sums - z_in * count), multiplier, shift) + z_out
        np.copyto(out, np.clip(y, lo, hi), casting="unsafe")
    return run


# -- REDUCE_PROD -------------------------------------------------------------------------------

_raw_prod = reduce._reducer(np.multiply)


@register("REDUCE_PROD", "int8", "int16")
def reduce_prod(node):
    """Quantized: the running product rescaled after every factor by input_scale /
    output_scale^(1/n) with the int64 MultiplyByQuantizedMultiplier, in the input's order, and
    once more at the end (reduce.h's QuantizedReduceProd). Unquantized: the raw product."""
    q = node.input(0).quantization
    if q is None or q.scale.size == 0:
        return _raw_prod(node)
    x, _, axes, _, _, s_in, z_in, s_out, z_out, count, lo, hi = \
        quantized_reduction(node, "REDUCE_PROD")
    kept = [i for i in range(len(x.shape)) if i not in axes]
    outputs = int(np.prod([x.shape[a] for a in kept], dtype=np.int64))
    if count == 0 or outputs == 0:
        return lambda x, axis_, out: out.fill(0)
    m, e = quantize_multiplier(float(s_in) / math.pow(float(s_out), 1.0 / count))
    order = kept + list(axes)      # reduced elements of one output, in the input's order

    def run(x, axis_, out):
        v = np.transpose(x, order).reshape(outputs, count).astype(np.int64) - z_in
        prod = v[:, 0]
        for k in range(1, count):
            prod = mbqm64(prod * v[:, k], m, e)
        y = mbqm64(prod, m, e) + z_out
        np.copyto(out.reshape(-1), np.clip(y, lo, hi), casting="unsafe")
    return run


# -- raw values --------------------------------------------------------------

register("ARG_MAX", "int8", "uint8")(reduce._arg("argmax"))
register("ARG_MIN", "int8", "uint8")(reduce._arg("argmin"))


def _same_quantization(prepare):
    """TFLite's quantized REDUCE_MAX / REDUCE_MIN compare raw values: the output must share
    the input's scale and zero point."""
    def checked(node):
        if quant_params(node, 0) != quant_params(node, 0, output=True):
            raise node.fail("input and output must have the same scale and zero point")
        return prepare(node)
    return checked


register("REDUCE_MAX", "int8", "uint8", "int16")(_same_quantization(reduce._reducer(np.maximum)))
register("REDUCE_MIN", "int8", "uint8", "int16")(_same_quantization(reduce._reducer(np.minimum)))
