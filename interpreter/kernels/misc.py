"""Small ops real models use: ADD_N, ATAN2, BROADCAST_ARGS, FAKE_QUANT, BUCKETIZE and
LOCAL_RESPONSE_NORMALIZATION, computed as TFLite's kernels compute them (float32 arithmetic in
their order of operations)."""
from __future__ import annotations

import numpy as np

from .common import FLT_MAX, clip
from .fixed_point import round_half_away
from .registry import register


@register("ADD_N", "float32", "int32")
def add_n(node):
    """The sum of N same-shaped tensors, added in input order (as TFLite's reference loop); a
    float sum clamps to [-FLT_MAX, FLT_MAX] as LiteRT's (both resolvers): an inf is +-3.4e38."""
    if len(node.inputs) < 2:
        raise node.fail(f"expected at least 2 inputs, got {len(node.inputs)}")
    shape = node.input(0).shape
    for k, t in enumerate(node.inputs):
        if t is None or tuple(t.shape) != tuple(shape) or t.dtype != node.inputs[0].dtype:
            raise node.fail(f"input {k} must have the shape {list(shape)} and type "
                            f"{node.inputs[0].type_name} of input 0")
    node.outputs[0].shape = tuple(shape)
    n = len(node.inputs)
    floats = node.inputs[0].dtype == np.float32
    lo, hi = np.float32(-FLT_MAX), np.float32(FLT_MAX)

    def run(*arrays):
        out = arrays[n]
        np.add(arrays[0], arrays[1], out=out)
        for x in arrays[2:n]:
            np.add(out, x, out=out)
        if floats:
            clip(out, lo, hi, out=out)
    return run


@register("ATAN2", "float32", "float64", "float16")
def atan2(node):
    """atan2(y, x) of same-shaped tensors; float32 is computed in float64 and rounded once,
    as the C library's correctly rounded atan2f; float16 is that float32 rounded to half, as
    LiteRT computes it."""
    node.expect_inputs(2)
    y, x = node.input(0), node.input(1)
    if y.dtype != x.dtype or tuple(y.shape) != tuple(x.shape):
        raise node.fail(f"inputs must have the same shape and type, got {y.type_name}"
                        f"{list(y.shape)} and {x.type_name}{list(x.shape)}")
    node.outputs[0].shape = tuple(y.shape)
    if y.dtype == np.float64:
        return lambda a, b, out: np.arctan2(a, b, out=out)
    if y.dtype == np.float16:
        def run_half(a, b, out):
            out[...] = np.arctan2(a.astype(np.float64), b.astype(np.float64)).astype(np.float32)
        return run_half

    def run(a, b, out):
        out[...] = np.arctan2(a.astype(np.float64), b.astype(np.float64))
    return run


@register("BROADCAST_ARGS", "int32", "int64")
def broadcast_args(node):
    """The shape two shapes broadcast to (their values are the inputs)."""
    node.expect_inputs(2)
    s0, s1 = node.input(0), node.input(1)
    if len(s0.shape) != 1 or len(s1.shape) != 1 or s0.dtype != s1.dtype:
        raise node.fail("inputs must be two 1-D shape tensors of the same type")
    node.outputs[0].shape = (max(s0.shape[0], s1.shape[0]),)

    def run(a, b, out):
        out[...] = np.broadcast_shapes(tuple(int(d) for d in a), tuple(int(d) for d in b))
    return run


@register("FAKE_QUANT", "float32")
def fake_quant(node):
    """Quantize and dequantize with TensorFlow's nudged range (FakeQuantWithMinMaxArgs), over
    [0, 2^num_bits - 1]; TFLite refuses `narrow_range` (meant for weights only), so here too."""
    node.expect_inputs(1)
    opts = node.options
    if opts.narrow_range:
        raise node.fail("narrow_range is not supported at run time (it is meant for weights, "
                        "not activations)")
    rmin, rmax, bits = np.float32(opts.min), np.float32(opts.max), int(opts.num_bits)
    if not rmin <= 0 <= rmax or not rmin < rmax:
        raise node.fail(f"the range [{rmin}, {rmax}] must contain 0")
    if not 2 <= bits <= 16:
        raise node.fail(f"num_bits must be in [2, 16], got {bits}")
    node.outputs[0].shape = tuple(node.input(0).shape)
    qmin, qmax = np.float32(0), np.float32((1 << bits) - 1)
    scale = np.float32((rmax - rmin) / (qmax - qmin))
    zero_from_min = np.float32(qmin - rmin / scale)
    if zero_from_min < qmin:
        zero = qmin
    elif zero_from_min > qmax:
        zero = qmax
    else:
        zero = np.float32(round_half_away(np.array(zero_from_min)))
    lo, hi = np.float32((qmin - zero) * scale), np.float32((qmax - zero) * scale)
    inv_scale = np.float32(np.float32(1) / scale)

    def run(x, out):
        np.fmax(x, lo, out=out)      # std::max(nudged_min, x): NaN becomes the range's floor
        np.minimum(out, hi, out=out)
        out -= lo
        out *= inv_scale
        out[...] = round_half_away(out)
        out *= scale
        out += lo
    return run


@register("BUCKETIZE", "float32", "float64", "int32", "int64")
def bucketize(node):
    """For each value, the index of the first boundary above it (std::upper_bound); integers
    are compared as float32, as C++ compares them with the float boundaries."""
    node.expect_inputs(1)
    x = node.input(0)
    bounds = np.asarray(node.options.boundaries or (), np.float32)
    if bounds.size > 1 and np.any(bounds[1:] < bounds[:-1]):
        raise node.fail("boundaries must be sorted in ascending order")
    if node.outputs[0].type_name != "int32":
        raise node.fail(f"the output must be int32, got {node.outputs[0].type_name}")
    node.outputs[0].shape = tuple(x.shape)
    if x.dtype == np.float64:
        bounds = bounds.astype(np.float64)
        cast = None
    else:
        cast = None if x.dtype == np.float32 else np.float32

    def run(values, out):
        v = values if cast is None else values.astype(cast)
        out[...] = np.searchsorted(bounds, v, side="right")
    return run


@register("LOCAL_RESPONSE_NORMALIZATION", "float32")
def local_response_normalization(node):
    """x / (bias + alpha * sum of squares over channels [c - r, c + r]) ** beta.

    The window is TensorFlow's (2r + 1 channels), as LiteRT's default kernel computes it;
    LiteRT's reference kernel stops one channel short (c + r excluded)."""
    node.expect_inputs(1)
    x = node.input(0)
    if len(x.shape) != 4:
        raise node.fail(f"input must be rank 4, got shape {list(x.shape)}")
    opts = node.options
    radius = int(opts.radius)
    bias, alpha, beta = np.float32(opts.bias), np.float32(opts.alpha), np.float32(opts.beta)
    node.outputs[0].shape = tuple(x.shape)
    depth = x.shape[-1]
    # Window sums as a matrix product with a band of ones: exact enough, and one BLAS call.
    c = np.arange(depth)
    band = (np.abs(c[:, None] - c[None, :]) <= radius).astype(np.float32)

    def run(a, out):
        sq = a * a
        sq *= alpha
        np.matmul(sq, band, out=out)
        out += bias
        if beta == 1:
            np.reciprocal(out, out=out)
        elif beta == np.float32(0.5):
            np.sqrt(out, out=out)
            np.reciprocal(out, out=out)
        else:
            np.power(out, -beta, out=out)
        out *= a
    return run
