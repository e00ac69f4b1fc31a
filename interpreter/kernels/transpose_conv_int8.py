"""TRANSPOSE_CONV on int8 (per-channel weights), uint8 (per-tensor, weight zero point) and 16x8,
bit-exact to TFLite's reference kernels (reference_integer_ops::TransposeConv,
reference_ops::TransposeConv for uint8).

TFLite scatters each input pixel's products into an accumulator over the whole output, adds the
bias and requantizes every element: int32 accumulators with the double-rounding multiplier for
8-bit data, int64 ones with the single-rounding one for int16 (int32 when the options say
quantized_bias_type INT32). Here the products of every pixel are one float BLAS matmul (exact:
float32 while the sums stay below 2^24, float64 beyond) and the scatter is kh*kw strided adds.
The registry keys TRANSPOSE_CONV by its data input (input 2), so these kernels are its integer
ones.
"""
from __future__ import annotations

import numpy as np

from .common import activation_code
from .conv_int16 import X_MAX, requantizer
from .conv_integer import bias_16x8, conv_multipliers, integer_bias, integer_weights, \
    weight_zero_point
from .fixed_point import exact_float_type
from .geometry import transpose_conv_shape
from .quant_params import activation_range, expect_output_type, quant_params
from .registry import register
from .requantize import Requantizer, exact_rounding
from .taps import patch_accumulator, scatter_patches


@register("TRANSPOSE_CONV", "int8", "uint8", "int16")
def transpose_conv(node):
    node.expect_inputs(3, 4)
    x = node.input(2)
    key = x.type_name
    w = integer_weights(node, 1, "uint8" if key == "uint8" else "int8")
    expect_output_type(node, key)
    out_shape, (sh, sw), (pt, pl) = transpose_conv_shape(node, x.shape, w.shape)
    n, h, wd, c = x.shape
    o, kh, kw, _ = w.shape
    ho, wo = out_shape[1], out_shape[2]
    opts = node.options

    _, zx = quant_params(node, 2)
    _, zo = quant_params(node, 0, output=True)
    multiplier, shift = conv_multipliers(node, key, o, 0, data=2)
    lo, hi = activation_range(activation_code(opts), node.outputs[0], node)
    wc = w.astype(np.int64) - weight_zero_point(node)
    if key == "int16":
        if zx or zo:
            raise node.fail("int16 input and output need zero point 0")
        bias, wide = bias_16x8(node, 3, o)
        x_max = X_MAX
    else:
        bias, wide = integer_bias(node, 3, o), False
        x_max = 255
    taps = -(-kh // sh) * -(-kw // sw)        # at most this many pixels reach an output
    acc_bound = np.abs(wc).reshape(o, -1).max(1) * x_max * taps * c
    ftype = np.float64 if key == "int16" else exact_float_type(float(acc_bound.max(initial=0)))
    wm = np.ascontiguousarray(wc.transpose(3, 1, 2, 0).reshape(c, kh * kw * o), dtype=ftype)
    rows = n * ho * wo
    if key == "int16":
        requant = requantizer(multiplier, shift, lo, hi, rows, o, bias, wide, acc_bound)
    else:
        r = Requantizer(multiplier, shift, zo, lo, hi, (rows, o), bias,
                        acc_bound if ftype == np.float32 else None,
                        exact=exact_rounding(node))
        work = r.work()
        requant = lambda acc, out: r(acc, out, work)   # noqa: E731
    xf = np.empty((n * h * wd, c), ftype)
    cols = np.empty((n, h, wd, kh, kw, o), ftype)
    acc = patch_accumulator(x.shape, w.shape, out_shape, (sh, sw), (pt, pl), ftype)
    window = acc[:, pt:pt + ho, pl:pl + wo]
    result = np.empty((n, ho, wo, o), ftype)

    def run(_shape, w_, x, *rest):
        out = rest[-1]
        np.subtract(x.reshape(n * h * wd, c), zx, out=xf, dtype=ftype)
        np.matmul(xf, wm, out=cols.reshape(n * h * wd, kh * kw * o))
        scatter_patches(acc, cols, (sh, sw))
        np.copyto(result, window)
        requant(result.reshape(rows, o), out.reshape(rows, o))
    return run
