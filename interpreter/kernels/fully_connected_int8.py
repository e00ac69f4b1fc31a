"""FULLY_CONNECTED (int8 per-tensor / per-channel, uint8) and BATCH_MATMUL (int8), bit-exact to
TFLite's reference kernels.

TFLite's reference FULLY_CONNECTED requantizes in floating point (since 2025):
round(double(acc) * (double(input_scale) * double(filter_scale) / double(output_scale))), halves
away from zero, where the optimized kernels use the fixed-point multiplier. BATCH_MATMUL keeps the
fixed-point MultiplyByQuantizedMultiplier, with the multiplier of float32(input_scale *
filter_scale) / output_scale.
"""
from __future__ import annotations

import math

import numpy as np

from .common import clip, clip_, matmul_shape, raw
from .conv_integer import integer_bias, integer_weights
from .fixed_point import EXACT_F32, exact_float_type, f32, quantize_multiplier, round_half_away
from .geometry import fully_connected_shape
from .int8_stage import CLIP, Stage, copy
from .quant_params import TYPE_RANGE, activation_range, channel_scales, expect_output_type, \
    quant_params
from .requantize import Requantizer, exact_rounding
from .registry import register
from .steps import call, calls_step, source_step


@register("FULLY_CONNECTED", "int8", "uint8")
def fully_connected(node, input_lift: int = 0):
    """`input_lift`: as conv_int8.conv_2d's (the input as float32 values + the lift, written
    into the kernel's row by the op before: fusion_int8.py)."""
    node.expect_inputs(2, 3)
    x, wt = node.input(0), node.input(1)
    key = x.type_name
    integer_weights(node, 1, key)
    batch, units, depth = fully_connected_shape(node, wt.shape)
    expect_output_type(node, key)
    opts, out = node.options, node.outputs[0]

    in_scale, zx = quant_params(node, 0)
    zx += input_lift
    out_scale, zo = quant_params(node, 0, output=True)
    q = wt.quantization
    if key == "uint8" and q is not None and q.scale.size > 1:
        raise node.fail("uint8 fully-connected takes per-tensor weight scales only")
    scales = channel_scales(node, 1, units, 0).astype(np.float64)
    effective = float(in_scale) * scales / float(out_scale)
    zw = int(q.zero_point[0]) if q is not None and q.zero_point.size else 0
    wc = wt.data.astype(np.int64) - zw
    bias = integer_bias(node, 2, units) - zx * wc.sum(1)
    lo, hi = activation_range(opts.fused_activation_function, out, node)

    x_max = 128 if key == "int8" and not input_lift else 255
    acc_bound = float(np.abs(wc).sum(1).max(initial=0)) * x_max
    ftype = exact_float_type(acc_bound)
    fast = None if exact_rounding(node) or ftype != np.float32 else \
        _fast_run(wc, effective, bias.astype(np.float64), zo, lo, hi, x_max, batch)
    if fast is not None:
        return fast
    # The bias as a last row of the weights (times a column of ones) while sums stay exact.
    fold = ftype == np.float32 and acc_bound + float(np.abs(bias).max(initial=0)) < EXACT_F32
    wmat = np.ascontiguousarray(wc.T, dtype=ftype)
    if fold:
        wmat = np.concatenate([wmat, bias[None, :].astype(ftype)])
    xf = np.empty((batch, depth + fold), ftype)
    xf[:, depth:] = 1.0         # the column of ones (no pass over the whole buffer at prepare)
    acc = np.empty((batch, units), ftype)
    scaled = np.empty((batch, units), np.float64)
    rounded = np.empty((batch, units), np.float64)
    bias_f = bias.astype(np.float64)
    low, high = float(lo - zo), float(hi - zo)

    def run(x, w_, *rest):
        out = rest[-1].reshape(batch, units)
        np.copyto(xf[:, :depth], x.reshape(batch, depth), casting="unsafe")
        np.matmul(xf, wmat, out=acc)
        if fold:
            np.multiply(acc, effective, out=scaled)
        else:
            np.add(acc, bias_f, out=scaled)
            np.multiply(scaled, effective, out=scaled)
        # C's round(): halves away from zero. rint rounds them to even; exact halves (where
        # the two differ) are rare and redone.
        np.rint(scaled, out=rounded)
        np.subtract(scaled, rounded, out=scaled)
        np.abs(scaled, out=scaled)
        if scaled.max(initial=0.0) >= 0.5:
            product = (acc if fold else acc + bias_f) * effective
            np.copyto(rounded, round_half_away(product))
        clip_(rounded, low, high)
        np.add(rounded, zo, out=out, casting="unsafe")
    return run


@register("BATCH_MATMUL", "int8")
def batch_matmul(node):
    node.expect_inputs(2)
    a, b = node.input(0), node.input(1)
    if b.type_name != "int8":
        raise node.fail(f"int8 BATCH_MATMUL needs an int8 right-hand side, got {b.type_name}")
    if not (2 <= len(a.shape) <= 5 and 2 <= len(b.shape) <= 5):
        raise node.fail(f"inputs must have rank 2 to 5, got {list(a.shape)} and {list(b.shape)}")
    adj_x, adj_y, rows, depth, cols, batch = matmul_shape(node, a.shape, b.shape)
    out = node.outputs[0]
    out.shape = tuple(batch) + (rows, cols)
    expect_output_type(node, "int8")
    sa, za = quant_params(node, 0)
    sb, zb = quant_params(node, 1)
    so, zo = quant_params(node, 0, output=True)
    m, s = quantize_multiplier(float(f32(sa) * f32(sb)) / float(so))
    lo, hi = TYPE_RANGE["int8"]
    # (a - za)(b - zb) with |a - za|, |b - zb| <= 255: float32 exact for depth <= 256.
    ftype = np.float32 if depth * 255 * 255 < EXACT_F32 else np.float64
    af = np.empty(a.shape, ftype)
    bf = np.empty(b.shape, ftype)
    acc = np.empty(out.shape, ftype)
    requant = Requantizer(m, s, zo, lo, hi, out.shape, exact=exact_rounding(node))
    work = requant.work()
    b_const = None
    if b.data is not None:
        b_const = b.data.astype(ftype) - zb

    def run(x, y, out):
        np.subtract(x, za, out=af, dtype=ftype)
        lhs = af.swapaxes(-1, -2) if adj_x else af
        if b_const is None:
            np.subtract(y, zb, out=bf, dtype=ftype)
            rhs = bf
        else:
            rhs = b_const
        rhs = rhs.swapaxes(-1, -2) if adj_y else rhs
        np.matmul(lhs, rhs, out=acc)
        requant(acc, out, work)
    return run


def _fast_run(wc, effective, bias, zo: int, lo: int, hi: int, x_max: int, batch: int):
    """Not exact (LiteRT's optimized kernels' contract, at most 1 from the reference): the
    scale, bias, zero point and 1/2 in float32 weights, floor(x W' + c) = round(acc * scale) +
    zo within 1 (halves), where the float32 sums are provably within 1/4; else None."""
    units, depth = wc.shape
    scaled_w = wc.T * effective                                      # float64 (depth, units)
    offset = bias * effective + zo + 0.5
    error = (depth + 2) * 2.0 ** -24 * float(
        (x_max * np.abs(scaled_w).sum(0) + np.abs(offset)).max(initial=0.0))
    if error >= 0.25:
        return None
    wmat = np.concatenate([scaled_w.astype(np.float32), offset[None, :].astype(np.float32)])
    xf = np.empty((batch, depth + 1), np.float32)
    xf[:, depth] = 1.0
    acc = np.empty((batch, units), np.float32)
    bounds = np.float32(lo), np.float32(hi)

    def run(x, w_, *rest):
        np.copyto(xf[:, :depth], x.reshape(batch, depth), casting="unsafe")
        np.dot(xf, wmat, acc)
        np.floor(acc, out=acc)
        clip(acc, *bounds, out=rest[-1].reshape(batch, units), casting="unsafe")

    def bind(x, w_, *rest):
        """`run` on the plan's fixed arrays (plan.bind_step): views and 0-d bounds made once;
        the same passes, as a Stage's step (its calls, or a line of Python where the output is
        one value: written into the plan's run_steps, or into a chain's)."""
        head, rows, out = xf[:, :depth], x.reshape(batch, depth), rest[-1].reshape(batch, units)
        lo, hi = (np.array(b, np.float32) for b in bounds)
        if batch * units == 1 and rest[-1].flags.c_contiguous:
            # One output (a detector's score): floor and clamp as Python numbers, a line of
            # Python (three numpy calls on one value cost ~1.5 µs more); the same value.
            finish = source_step("{dest}[0] = min(max({floor}({value}(0)), {low}), {high})",
                                 dest=rest[-1].reshape(-1), floor=math.floor,
                                 value=acc.reshape(-1).item, low=int(bounds[0]),
                                 high=int(bounds[1]))
        else:   # (the clip in place, then the cast: cheaper than clip's cast)
            finish = calls_step(call((np, "floor"), acc, acc), call(CLIP, acc, lo, hi, acc),
                                copy(out, acc))
        # fusion_int8.Stage: floor(clip(acc)) is clip(floor(acc)) at integer bounds
        return Stage(head, ((head, rows),), (call(raw(np.dot), xf, wmat, acc),),
                     acc.reshape(-1), lo, hi, 0, None, finish).step()

    run.bind = bind
    run.stage_out = run.stage_in = run.stage_lift_zero = True
    return run
