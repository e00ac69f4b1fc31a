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

from .conv import transpose_padding
from .conv_int16 import X_MAX, bias_16x8, requantizer, symmetric_weights
from .conv_int8 import _bias
from .fixed_point import EXACT_F32, f32, quantize_multiplier, quantize_multipliers
from .quant_params import activation_range, channel_scales, quant_params
from .requantize import Requantizer, exact_rounding
from .registry import register


@register("TRANSPOSE_CONV", "int8", "uint8", "int16")
def transpose_conv(node):
    node.expect_inputs(3, 4)
    shape_info, w, x = node.input(0), node.input(1), node.input(2)
    key = x.type_name
    w_key = "uint8" if key == "uint8" else "int8"
    if w.type_name != w_key:
        raise node.fail(f"weights are {w.type_name}; {key} inputs need {w_key} weights")
    if w.data is None:
        raise node.fail(f"weights (input 1, {w.name!r}) must be constant for integer kernels")
    if node.outputs[0].type_name != key:
        raise node.fail(f"output is {node.outputs[0].type_name}; expected {key}")
    if shape_info.type_name != "int32" or shape_info.data is None:
        raise node.fail("the output shape (input 0) must be a constant int32 tensor")
    out_shape = tuple(int(d) for d in np.asarray(shape_info.data).reshape(-1))
    if len(out_shape) != 4 or len(x.shape) != 4 or len(w.shape) != 4:
        raise node.fail(f"output shape {list(out_shape)}, input {list(x.shape)} and filter "
                        f"{list(w.shape)} must be 4-D")
    n, h, wd, c = x.shape
    o, kh, kw, wc_ = w.shape
    if wc_ != c or out_shape[0] != n or out_shape[3] != o:
        raise node.fail(f"filter {list(w.shape)} does not fit input {list(x.shape)} and "
                        f"output shape {list(out_shape)}")
    opts = node.options
    sh, sw, padding = int(opts.stride_h or 1), int(opts.stride_w or 1), int(opts.padding or 0)
    ho, wo = out_shape[1], out_shape[2]
    pt, pl = transpose_padding(padding, ho, kh, sh), transpose_padding(padding, wo, kw, sw)
    node.outputs[0].shape = out_shape

    _, zx = quant_params(node, 2)
    _, zo = quant_params(node, 0, output=True)
    multiplier, shift = _multipliers(node, key, o)
    lo, hi = activation_range(getattr(opts, "fused_activation_function", 0), node.outputs[0],
                              node)
    wc = w.data.astype(np.int64)
    if key == "uint8":
        q = w.quantization
        wc = wc - (int(q.zero_point[0]) if q is not None and q.zero_point.size else 0)
    if key == "int16":
        symmetric_weights(node)
        if zx or zo:
            raise node.fail("int16 input and output need zero point 0")
        bias, wide = bias_16x8(node, 3, o)
        x_max = X_MAX
    else:
        bias, wide = _bias(node, 3, o), False
        x_max = 255
    taps = -(-kh // sh) * -(-kw // sw)        # at most this many pixels reach an output
    acc_bound = np.abs(wc).reshape(o, -1).max(1) * x_max * taps * c
    exact32 = key != "int16" and float(acc_bound.max(initial=0)) < EXACT_F32
    ftype = np.float32 if exact32 else np.float64
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
    acc = np.zeros((n, max((h - 1) * sh + kh, pt + ho), max((wd - 1) * sw + kw, pl + wo), o),
                   ftype)
    window = acc[:, pt:pt + ho, pl:pl + wo]
    result = np.empty((n, ho, wo, o), ftype)

    def run(_shape, w_, x, *rest):
        out = rest[-1]
        np.subtract(x.reshape(n * h * wd, c), zx, out=xf, dtype=ftype)
        np.matmul(xf, wm, out=cols.reshape(n * h * wd, kh * kw * o))
        acc.fill(0)
        for i in range(kh):
            for j in range(kw):
                dst = acc[:, i:i + (h - 1) * sh + 1:sh, j:j + (wd - 1) * sw + 1:sw]
                np.add(dst, cols[:, :, :, i, j], out=dst)
        np.copyto(result, window)
        requant(result.reshape(rows, o), out.reshape(rows, o))
    return run



def _multipliers(node, key: str, channels: int) -> tuple:
    """PopulateConvolutionQuantizationParams: per-channel (multiplier, shift) in double; uint8
    per tensor with the float32 product input_scale * filter_scale."""
    in_scale, _ = quant_params(node, 2)
    out_scale, _ = quant_params(node, 0, output=True)
    scales = channel_scales(node, 1, channels, 0)
    if key == "uint8":
        if scales.size > 1 and np.any(scales != scales[0]):
            raise node.fail("uint8 transposed convolutions take per-tensor weight scales only")
        m, s = quantize_multiplier(float(f32(in_scale) * scales[0]) / float(out_scale))
        return np.full(channels, m, np.int64), np.full(channels, s, np.int64)
    return quantize_multipliers(float(in_scale) * scales.astype(np.float64) / float(out_scale))
