"""CONV_3D and CONV_3D_TRANSPOSE, float32, on NDHWC tensors.

Filters are [depth, height, width, in, out] (CONV_3D) and [depth, height, width, out, in]
(CONV_3D_TRANSPOSE, whose inputs are output_shape, filter, input, bias). Both run one matrix
product per filter tap over strided views: 3-D filters are small, and each product is a GEMM.
"""
from __future__ import annotations

import itertools

import numpy as np

from .common import bias_epilogue, clamp_activation, conv_output, int_vector, reference_resolver
from .geometry import check_padding
from .registry import DATA_INPUT, register

DATA_INPUT.setdefault("CONV_3D_TRANSPOSE", 2)


def _params(node):
    o = node.options
    strides = (int(o.stride_d), int(o.stride_h), int(o.stride_w))
    dilations = (int(o.dilation_d_factor), int(o.dilation_h_factor), int(o.dilation_w_factor))
    if min(strides) < 1 or min(dilations) < 1:
        raise node.fail(f"strides {list(strides)} and dilations {list(dilations)} must be >= 1")
    return (check_padding(node, int(o.padding)), strides, dilations,
            clamp_activation(o.fused_activation_function, node))   # both resolvers


def _nan_to_high(act):
    """CONV_3D's clamp under LiteRT's default resolver (the optimized kernel): min then max, so
    a NaN comes out the upper bound (FLT_MAX, 6 or 1), as LiteRT 2.3.0's does."""
    lo, hi = act.bounds

    def clamp(x):
        np.fmin(x, hi, out=x)
        np.maximum(x, lo, out=x)
    clamp.bounds = act.bounds
    return clamp


def _bias(node, k: int, channels: int):
    b = node.optional_input(k)
    if b is not None and tuple(b.shape) != (channels,):
        raise node.fail(f"bias has shape {list(b.shape)}, expected [{channels}]")
    return b


@register("CONV_3D", "float32")
def conv_3d(node):
    node.expect_inputs(2, 3)
    x, w = node.input(0), node.input(1)
    if len(x.shape) != 5 or len(w.shape) != 5:
        raise node.fail(f"input and filter must be rank 5, got {list(x.shape)} and "
                        f"{list(w.shape)}")
    if w.shape[3] != x.shape[4]:
        raise node.fail(f"filter takes {w.shape[3]} input channels, the input has {x.shape[4]}")
    padding, strides, dilations, act = _params(node)
    if not reference_resolver(node):
        act = _nan_to_high(act)
    bias = _bias(node, 2, w.shape[4])
    sizes, pads = [], []
    for d in range(3):
        size, pad = conv_output(padding, x.shape[1 + d], w.shape[d], strides[d], dilations[d])
        if size <= 0:
            raise node.fail(f"the filter does not fit the input {list(x.shape)}")
        sizes.append(size)
        pads.append(pad)
    out_shape = (x.shape[0],) + tuple(sizes) + (w.shape[4],)
    node.outputs[0].shape = out_shape
    # padded input: enough room on both sides for every tap of every output position
    padded = [(sizes[d] - 1) * strides[d] + (w.shape[d] - 1) * dilations[d] + 1
              for d in range(3)]
    taps = list(itertools.product(*(range(w.shape[d]) for d in range(3))))
    has_bias = bias is not None
    n, od, oh, ow, oc = out_shape
    tail = bias_epilogue(bias, act, (n * od * oh, ow * oc), ow)

    def run(a, f, *rest):
        out = rest[-1]
        buf = np.zeros((a.shape[0],) + tuple(max(p, s + pd) for p, s, pd in
                                             zip(padded, a.shape[1:4], pads)) + (a.shape[4],),
                       np.float32)
        buf[:, pads[0]:pads[0] + a.shape[1], pads[1]:pads[1] + a.shape[2],
            pads[2]:pads[2] + a.shape[3]] = a
        out.fill(0)
        for kd, kh, kw in taps:
            d0, h0, w0 = kd * dilations[0], kh * dilations[1], kw * dilations[2]
            view = buf[:, d0:d0 + (sizes[0] - 1) * strides[0] + 1:strides[0],
                       h0:h0 + (sizes[1] - 1) * strides[1] + 1:strides[1],
                       w0:w0 + (sizes[2] - 1) * strides[2] + 1:strides[2]]
            out += view @ f[kd, kh, kw]
        if tail is not None:
            tail(out, rest[0] if has_bias else None)
    return run


@register("CONV_3D_TRANSPOSE", "float32")
def conv_3d_transpose(node):
    node.expect_inputs(3, 4)
    if len(node.input(0).shape) != 1:
        raise node.fail(f"output_shape (input 0) must be a vector, got shape "
                        f"{list(node.input(0).shape)}")
    shape = [int(d) for d in int_vector(node, 0, "output_shape")]
    w, x = node.input(1), node.input(2)
    if len(x.shape) != 5 or len(w.shape) != 5 or len(shape) != 5:
        raise node.fail(f"input, filter and output_shape must describe rank-5 tensors, got "
                        f"{list(x.shape)}, {list(w.shape)} and {shape}")
    if w.shape[4] != x.shape[4]:
        raise node.fail(f"filter takes {w.shape[4]} input channels, the input has {x.shape[4]}")
    if shape[0] != x.shape[0] or shape[4] != w.shape[3]:
        raise node.fail(f"output_shape {shape} must have the input's batch {x.shape[0]} and "
                        f"the filter's {w.shape[3]} output channels")
    padding, strides, dilations, act = _params(node)
    bias = _bias(node, 3, shape[4])
    pads = []
    for d in range(3):
        size, pad = conv_output(padding, shape[1 + d], w.shape[d], strides[d], dilations[d])
        if size != x.shape[1 + d]:
            raise node.fail(f"output_shape {shape} does not convolve back to the input shape "
                            f"{list(x.shape)}")
        pads.append(pad)
    node.outputs[0].shape = tuple(shape)
    full = [max((x.shape[1 + d] - 1) * strides[d] + (w.shape[d] - 1) * dilations[d] + 1,
                pads[d] + shape[1 + d]) for d in range(3)]
    taps = list(itertools.product(*(range(w.shape[d]) for d in range(3))))
    has_bias = bias is not None
    tail = bias_epilogue(bias, act, (shape[0] * shape[1] * shape[2], shape[3] * shape[4]),
                         shape[3])

    def run(_shape, f, a, *rest):
        out = rest[-1]
        buf = np.zeros((a.shape[0],) + tuple(full) + (shape[4],), np.float32)
        n = a.shape[1:4]
        for kd, kh, kw in taps:
            d0, h0, w0 = kd * dilations[0], kh * dilations[1], kw * dilations[2]
            buf[:, d0:d0 + (n[0] - 1) * strides[0] + 1:strides[0],
                h0:h0 + (n[1] - 1) * strides[1] + 1:strides[1],
                w0:w0 + (n[2] - 1) * strides[2] + 1:strides[2]] += a @ f[kd, kh, kw].T
        out[...] = buf[:, pads[0]:pads[0] + shape[1], pads[1]:pads[1] + shape[2],
                       pads[2]:pads[2] + shape[3]]
        if tail is not None:
            tail(out, rest[0] if has_bias else None)
    return run
