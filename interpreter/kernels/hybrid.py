"""Hybrid kernels (float32 activations, int8 weights: dynamic-range models) as LiteRT runs them.

The float input is quantized on the fly, per batch (per row for FULLY_CONNECTED and
BATCH_MATMUL), to int8: symmetrically (scale max|x| / 127) or asymmetrically (TFLite's nudged
zero point), exactly as tensor_utils' SymmetricQuantizeFloats / AsymmetricQuantizeFloats. The
integer sums run exactly on float BLAS; the float result is acc * scales + bias, with the float32
products in the order of LiteRT's kernels:

- FULLY_CONNECTED (EvalHybridDense): acc * (row_scale * channel_scale) + bias; asymmetric inputs
  when the op's `asymmetric_quantize_inputs` says so.
- CONV_2D: distinct per-channel scales (or groups) take reference HybridConvPerChannel,
  asymmetric inputs, (acc * channel_scale) * row_scale + bias; otherwise HybridConv, symmetric
  inputs, acc * (row_scale * filter_scale) + bias.
- DEPTHWISE_CONV_2D (reference DepthwiseConvHybridPerChannel): asymmetric inputs,
  acc * (channel_scale * row_scale) + bias.
- BATCH_MATMUL (reference BatchMatMul, hybrid): rows of the left-hand side quantized per row,
  (row_scale * channel_scale) * acc.

Padding contributes nothing (TFLite skips taps outside the image). Convolutions reuse the float
kernels on the centered integer input (q - offset) with the integer weights as float32: exact
while every partial sum stays below 2^24, else the weights are split into balanced base-16
digits, each digit's sums exact, combined in float64 (a CONV_2D first splits its input channels
into groups whose sums are exact: one grouped convolution). That is BUILTIN_REF's arithmetic;
under the default resolver a convolution or FULLY_CONNECTED runs the float kernel on weights
dequantized at prepare and the quantized-then-dequantized input instead (dequantize_rows),
and at batch 1 the convolutions run their own products with the quantization in fewer passes
(issue 17): a 1x1 and a large stride-1 kxk CONV_2D (no im2col) and a DEPTHWISE_CONV_2D (the
input quantized into the taps' padded buffer), the row scale on the weights (hybrid_conv.py),
one pixel as a one-row FULLY_CONNECTED; conv_2d_default builds a CONV_2D that takes its
producer's per-channel MUL and clamp (fusion_hybrid.py).
"""
from __future__ import annotations

import math
import struct

import numpy as np

from edgelite.schema.ops import ACTIVATION_BOUNDS

from .common import TANH, bias_epilogue, clip_, matmul_shape, \
    with_optional_inputs
from .eigen_math import eigen_tanh_
from .fixed_point import EXACT_F32, round_half_away
from .geometry import conv_2d_groups, conv_windows, depthwise_multiplier, fully_connected_shape
from .registry import KERNELS, Node, TensorInfo, register
from .requantize import exact_rounding

F32 = np.dtype(np.float32)


# -- on-the-fly input quantization ---------------------------------------------------------------
#
# LiteRT's x86 builds run tensor_utils' NEON code (through NEON_2_SSE), whose arithmetic differs
# from the portable reference in three places, followed here: the asymmetric range
# rmax - rmin is a float32 difference; rounding in blocks of 8 values is trunc(y +- 0.5) in
# float32 (std::round for the last size % 8 values); the zero point is added after rounding.

def _round_litert(q: np.ndarray, half: np.ndarray, signs=None) -> None:
    """q (rows, size) float32, in place: NEON's RoundToNearest, trunc(y + (y < 0 ? -0.5 : 0.5))
    in float32, for the first size // 8 * 8 columns (for y = -0.0 copysign's -0.5 gives the
    same 0); halves away from zero, exactly, for the rest. `half`: a work buffer like q.
    `signs`: +1 / -1 where every value of that row has that sign (zeros of either sign round
    alike), 0 for mixed rows; a signed row adds its constant half (one pass fewer)."""
    v = q.shape[1] // 8 * 8
    if v < q.shape[1]:
        q[:, v:] = round_half_away(q[:, v:])
    if not v:
        return
    head = q[:, :v]
    if signs is not None and np.all(signs != 0):
        if q.shape[0] == 1:
            np.add(head, np.float32(0.5) * signs[0], out=head)
        else:
            np.add(head, (np.float32(0.5) * signs)[:, None], out=head)
    else:
        h = half[:, :v]
        np.copysign(np.float32(0.5), head, out=h)
        np.add(head, h, out=head)
    np.trunc(head, out=head)


def _row_signs(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Per row of values in [lo, hi]: +1 (none negative), -1 (none positive), else 0, float32."""
    return np.where(lo >= 0, np.float32(1), np.where(hi <= 0, np.float32(-1), np.float32(0)))


def _rounded(y: np.ndarray) -> tuple:
    """The least and greatest of _round_litert's two roundings and rint's of float32 values y."""
    neon = np.trunc(y + np.copysign(np.float32(0.5), y))
    exact, even = round_half_away(y), np.rint(y)
    return np.minimum(np.minimum(neon, exact), even), np.maximum(np.maximum(neon, exact), even)


def _round(q: np.ndarray, half: np.ndarray, signs, fast: bool) -> None:
    """LiteRT's rounding (_round_litert), or with `fast` (the default resolver) rint: halves to
    even, one pass; it differs only on exact halves, by one step, as optimized kernels may."""
    if fast:
        np.rint(q, out=q)
    else:
        _round_litert(q, half, signs)


def quantize_rows_symmetric(x: np.ndarray, q: np.ndarray, scales: np.ndarray,
                            half: np.ndarray, fast: bool = False) -> None:
    """SymmetricQuantizeFloats per row of x (rows, size) float32: q (float32 holding integers in
    [-127, 127]) = round(x * (127 / r)), scales = r / 127 with r = max|x| (1 for zero rows).
    |x * (127 / r)| <= 127 (1 + 2^-23) rounds to at most 127: no clamp needed. `fast`: rint's
    rounding (see _round)."""
    lo, hi = x.min(axis=1), x.max(axis=1)
    rng = np.maximum(np.abs(lo), np.abs(hi))
    zero = rng == 0
    safe = np.where(zero, np.float32(1), rng)
    np.divide(safe, np.float32(127), out=scales)
    scales[zero] = 1
    inv = (np.float32(127) / safe).astype(F32)
    np.multiply(x, inv[:, None], out=q)
    _round(q, half, _row_signs(lo, hi), fast)


def quantize_rows_asymmetric(x: np.ndarray, q: np.ndarray, scales: np.ndarray,
                             offsets: np.ndarray, half: np.ndarray,
                             centered: bool = False, fast: bool = False) -> None:
    """AsymmetricQuantizeFloats per row: the range [min(x, 0), max(x, 0)] onto [-128, 127] with a
    nudged zero point (offsets, float32 integers); q = round(x / scale) + offset, clamped, or
    with `centered` q - offset (what the integer sums take). All-zero rows get scale 1. The
    clamp is skipped where the rounded row bounds show it moves nothing (rounding is
    monotonic). `fast`: rint's rounding (see _round)."""
    lo, hi = x.min(axis=1), x.max(axis=1)
    rmin = np.minimum(lo, np.float32(0))
    rmax = np.maximum(hi, np.float32(0))
    flat = rmin == rmax
    scale = np.where(flat, 1.0, (rmax - rmin).astype(np.float64) / 255.0)
    rmin, rmax = rmin.astype(np.float64), rmax.astype(np.float64)
    from_min, from_max = -128.0 - rmin / scale, 127.0 - rmax / scale
    use_min = (128.0 + np.abs(rmin / scale)) < (127.0 + np.abs(rmax / scale))
    zp = np.where(use_min, from_min, from_max)
    zp = np.where(zp <= -128, -128.0, np.where(zp >= 127, 127.0, round_half_away(zp)))
    zp[flat] = 0
    scales[...] = scale
    scales[flat] = 1
    offsets[...] = zp
    inv = (1.0 / scales.astype(np.float64)).astype(F32)
    np.multiply(x, inv[:, None], out=q)
    low, _ = _rounded(lo * inv)
    _, high = _rounded(hi * inv)
    clamps = (low + offsets < -128) | (high + offsets > 127)
    _round(q, half, _row_signs(lo, hi), fast)
    if centered:      # clamp(round + zp, -128, 127) - zp, row by row
        for r in np.flatnonzero(clamps).tolist():
            z = float(offsets[r])
            clip_(q[r], -128.0 - z, 127.0 - z)
    else:
        np.add(q, offsets[:, None], out=q)
        if np.any(clamps):
            clip_(q, -128.0, 127.0)


def _to_f32(v: float) -> float:
    """v rounded to float32, as a Python float (struct: half the cost of np.float32)."""
    try:
        return _F32_STRUCT.unpack(_F32_STRUCT.pack(v))[0]
    except OverflowError:      # past float32's range: IEEE's rounding (to the max, or inf)
        with np.errstate(over="ignore"):
            return float(F32.type(v))


_F32_STRUCT = struct.Struct("f")


def _zero_point(rmin: float, rmax: float, scale: float) -> float:
    """AsymmetricQuantizeFloats' nudged zero point of the range [rmin, rmax] (rmin < rmax),
    `scale` the float64 one (rmax - rmin in float32, / 255). A row holding NaN or +inf has
    a NaN zero point (LiteRT casts it to int: undefined), which makes the row's values NaN."""
    from_min, from_max = -128.0 - rmin / scale, 127.0 - rmax / scale
    zp = from_min if 128.0 + abs(rmin / scale) < 127.0 + abs(rmax / scale) else from_max
    if zp != zp:
        return zp
    if zp <= -128:
        return -128.0
    if zp >= 127:
        return 127.0
    whole = float(math.trunc(zp))   # C's round: halves away from zero (the fraction is exact)
    return whole + (zp - whole >= 0.5) - (zp - whole <= -0.5)


_ONE, _127, _ZERO32 = F32.type(1), F32.type(127), F32.type(0)


def dequantize_rows(x: np.ndarray, xq: np.ndarray, asymmetric: bool) -> None:
    """The default resolver's hybrid input: x (rows, size) float32 quantized per row as LiteRT
    quantizes it (symmetric or asymmetric, rint's rounding: see _round), then dequantized
    again, xq = (q - offset) * row_scale. One row (every hybrid convolution at batch 1, the
    recurrent step) takes its statistics as Python scalars (dequantize_row): five passes over
    x and no one-element arrays, the same numbers as the array path."""
    if x.shape[0] != 1:
        _dequantize_many(x, xq, asymmetric)
        return
    dequantize_row(x, xq, asymmetric, _min(x, None), _max(x, None))


def dequantize_row(x: np.ndarray, xq: np.ndarray, asymmetric: bool, lo, hi,
                   scalars=None) -> None:
    """dequantize_rows of one row whose float32 least and greatest values `lo`, `hi` are known
    (the recurrent kernels take them by argmin/argmax: a quarter of a reduction's call cost).
    The parameters quantize_rows_symmetric / quantize_rows_asymmetric give the row (scale, its
    inverse, the offset: q = round(x * inv) + offset) in Python floats, the same numbers as
    those functions' arrays bit for bit (a float32 difference or quotient is the double one
    rounded once) instead of ~40 passes over one-element arrays; scale and inv round to
    float32 once, into numpy scalars, or into `scalars`: two float32 0-d arrays the caller
    owns (an assignment and a 0-d operand cost a third of making two numpy scalars and
    multiplying by them)."""
    lo, hi = float(lo), float(hi)
    zp = 0.0
    if not asymmetric:
        r = max(-lo, hi)
        scale, f_inv = (1.0, 127.0) if r == 0 else (r / 127.0, 127.0 / r)
    else:
        rmin, rmax = min(lo, 0.0), max(hi, 0.0)
        if rmin == rmax:
            scale = f_inv = 1.0
        else:
            try:   # _to_f32 twice, inline (a recurrent step quantizes a row each)
                wide = _F32_STRUCT.unpack(_F32_STRUCT.pack(rmax - rmin))[0] / 255.0
                scale = _F32_STRUCT.unpack(_F32_STRUCT.pack(wide))[0]
            except OverflowError:
                wide = _to_f32(rmax - rmin) / 255.0
                scale = _to_f32(wide)
            f_inv, zp = 1.0 / scale, _zero_point(rmin, rmax, wide)
    if scalars is None:
        scale, inv = F32.type(scale), F32.type(f_inv)
    else:
        scalars[0][()], scalars[1][()] = scale, f_inv
        scale, inv = scalars
    np.multiply(x, inv, xq)
    np.rint(xq, xq)
    if asymmetric:
        # rint is monotonic: the bounds, rounded, say whether a clamp moves anything; read in
        # double with a margin over float32's rounding of the product and of inv (|x * inv| <=
        # 256), it clamps a row that might need it (clamping a row inside the range changes
        # nothing)
        if lo * f_inv + zp < _LOW or hi * f_inv + zp > _HIGH:
            clip_(xq, -128.0 - zp, 127.0 - zp)   # clamp(round + zp) - zp, as the array path
    np.multiply(xq, scale, xq)


def _dequantize_many(x, xq, asymmetric: bool) -> None:
    """dequantize_rows for several rows: the rows' scales in a few passes over their bounds,
    the zero points in Python (_zero_point), then three passes over all the rows and a clamp
    of the rows that need one."""
    lo, hi = _min(x, 1), _max(x, 1)
    if asymmetric:
        rmin, rmax = np.minimum(lo, _ZERO32), np.maximum(hi, _ZERO32)
        width = rmax - rmin                                  # float32, as the kernel's
        flat = width == 0
        scale = np.where(flat, 1.0, width.astype(np.float64) / 255.0)
        zps = [0.0 if a == b else _zero_point(a, b, c)
               for a, b, c in zip(rmin.tolist(), rmax.tolist(), scale.tolist())]
        scale32 = scale.astype(F32)
        inv = (1.0 / scale32.astype(np.float64)).astype(F32)
    else:
        r = np.maximum(np.negative(lo), hi)                  # max |x| (lo <= hi)
        zero = r == 0
        safe = np.where(zero, _ONE, r)
        scale32 = np.where(zero, _ONE, np.divide(safe, _127))
        inv = np.divide(_127, safe)
    np.multiply(x, inv[:, None], out=xq)
    np.rint(xq, out=xq)
    if asymmetric:
        for r, (a, b, f_inv, zp) in enumerate(zip(lo.tolist(), hi.tolist(), inv.tolist(), zps)):
            if a * f_inv + zp < _LOW or b * f_inv + zp > _HIGH:
                clip_(xq[r], -128.0 - zp, 127.0 - zp)
    np.multiply(xq, scale32[:, None], out=xq)


def row_parameters(lo: float, hi: float, asymmetric: bool) -> tuple:
    """(scale, inverse, zero point) of one row whose float32 bounds are lo <= hi, as Python
    floats: q = round(x * inverse) + zero point, the value (q - zero point) * scale. The
    arithmetic of dequantize_row (which inlines it: a recurrent step counts its frames) and of
    quantize_rows_symmetric / quantize_rows_asymmetric; scale and inverse are float32 values."""
    if not asymmetric:
        r = max(-lo, hi)
        scale, inv = (1.0, 127.0) if r == 0 else (r / 127.0, 127.0 / r)
        return _to_f32(scale), _to_f32(inv), 0.0
    rmin, rmax = min(lo, 0.0), max(hi, 0.0)
    if rmin == rmax:
        return 1.0, 1.0, 0.0
    wide = _to_f32(rmax - rmin) / 255.0
    scale = _to_f32(wide)
    return scale, _to_f32(1.0 / scale), _zero_point(rmin, rmax, wide)


_min, _max = np.minimum.reduce, np.maximum.reduce
_LOW, _HIGH = -128.5 + 1e-3, 127.5 - 1e-3


def dequantized_weights(w: np.ndarray, scales: np.ndarray, axis: int) -> np.ndarray:
    """int8 weights as float32, w * scale with the scales (one, or one per index of `axis`)
    along `axis`, each product rounded once to float32: the one dequantization of constant
    hybrid weights, made at prepare."""
    scales = np.asarray(scales, F32).reshape(-1)
    if scales.size == 1:
        return (w.astype(F32) * scales[0]).astype(F32)
    shape = [1] * w.ndim
    shape[axis] = -1
    return (w.astype(F32) * scales.reshape(shape)).astype(F32)


def _activation(node, code: int, allow_curves: bool):
    """In-place float activation: clamps (every hybrid op), tanh (FULLY_CONNECTED's and the
    LSTM's ApplyActivationToVector: numpy's by default, Eigen's under BUILTIN_REF, as LiteRT's,
    eigen_math.py); the other codes do nothing, as in TFLite's conv kernels. The format has no
    code 6 (SIGMOID exists only inside TFLite): LiteRT's parser reads it as NONE, so here too."""
    code = int(code or 0)
    if code in ACTIVATION_BOUNDS:
        lo, hi = ACTIVATION_BOUNDS[code]
        return lambda v: clip_(v, lo, hi)
    if allow_curves and code == TANH:
        return eigen_tanh_ if exact_rounding(node) else (lambda v: np.tanh(v, out=v))
    return None


def _int8_weights(node, k: int) -> tuple:
    """(int8 values, float32 scales, quantized dimension) of the constant weights input k."""
    w = node.input(k)
    if w.type_name not in ("int8", "int4"):   # int4: unpacked to int8 values by the plan
        raise node.fail(f"hybrid {node.op} takes int8 or int4 weights, got {w.type_name} "
                        "(uint8 hybrid weights are not supported)")
    if w.data is None:
        raise node.fail(f"hybrid weights (input {k}, {w.name!r}) must be constant")
    q = w.quantization
    if q is None or q.scale.size == 0:
        raise node.fail(f"hybrid weights (input {k}, {w.name!r}) have no quantization scale")
    if q.zero_point.size and np.any(q.zero_point != 0):
        raise node.fail(f"hybrid weights (input {k}, {w.name!r}) must be symmetric "
                        "(zero point 0)")
    return w.data, q.scale.astype(F32), int(q.quantized_dimension)


def _float_bias(node, k: int, channels: int):
    b = node.optional_input(k)
    if b is None:
        return None
    if b.type_name != "float32" or b.data is None:
        raise node.fail("a hybrid op's bias must be a constant float32 tensor")
    if b.data.size != channels:
        raise node.fail(f"bias has {b.data.size} values for {channels} output channels")
    return b.data.reshape(-1).astype(F32)


def _channel_scales(node, scales, channels: int, axis: int) -> np.ndarray:
    if scales.size == 1:
        return np.full(channels, scales[0], F32)
    if scales.size != channels:
        raise node.fail(f"weights have {scales.size} scales for {channels} channels "
                        f"(quantized dimension {axis})")
    return scales


# -- exact integer sums on float kernels ----------------------------------------------------------

def _balanced_digits(w: np.ndarray, base: int = 16) -> list:
    """[(weight, digit array)] with w = sum weight * digit and |digit| <= base / 2."""
    rest = w.astype(np.int64)
    parts, power = [], 1
    while np.any(rest):
        d = (rest + base // 2) % base - base // 2
        parts.append((power, d))
        rest = (rest - d) // base
        power *= base
    return parts or [(1, rest)]


def _sum_bound(w: np.ndarray, reduce_axes: tuple) -> float:
    return float(np.abs(w.astype(np.int64)).sum(axis=reduce_axes).max(initial=0))


class _IntegerConv:
    """sum(w * xc) over each window for int8 weights and integer float32 input xc (|xc| <=
    x_max), exactly, with the float32 kernel of `node.op`.

    Sums past float32's exact range split a CONV_2D's input channels into the fewest equal
    groups whose partial sums stay exact: one grouped float convolution (the FLOPs of one
    convolution, one im2col) gives every group's sums, added exactly (two groups: one float32
    addition rounds the exact sum once, as C's int -> float does; more: in float64). Other
    kernels, or channels that do not split, run one float kernel per balanced weight digit."""

    def __init__(self, node, w: np.ndarray, x_max: int, reduce_axes: tuple):
        parts = [(1, w)]
        self.groups = 1
        shape = node.outputs[0].shape
        if _sum_bound(w, reduce_axes) * x_max >= EXACT_F32:
            groups = _channel_groups(node, w, x_max)
            if groups:
                self.groups = groups
                cout, kh, kw, cin = w.shape
                split = w.reshape(cout, kh, kw, groups, cin // groups).transpose(3, 0, 1, 2, 4)
                run = _float_kernel(node, split.reshape(groups * cout, kh, kw, cin // groups)
                                    .astype(F32), tuple(shape[:3]) + (groups * cout,))
                self.runs = [(1.0, run)]
                self.single = False
                self.part = np.empty(tuple(shape[:3]) + (groups, cout), F32)
                return
            parts = _balanced_digits(w)
            if max(_sum_bound(d, reduce_axes) for _, d in parts) * x_max >= EXACT_F32:
                parts = _balanced_digits(w, 2)
        self.runs = [(float(p), _float_kernel(node, d.astype(F32))) for p, d in parts]
        self.single = len(self.runs) == 1
        self.part = None if self.single else np.empty(shape, F32)
        self.total = None if self.single else np.empty(shape, np.float64)

    def __call__(self, xc: np.ndarray, acc: np.ndarray) -> None:
        """acc (float32) = the integer sums, rounded to float32 as C's int -> float."""
        if self.single:
            self.runs[0][1](xc, None, acc)
            return
        if self.groups > 1:
            part = self.part
            self.runs[0][1](xc, None, part)
            if self.groups == 2:
                np.add(part[..., 0, :], part[..., 1, :], out=acc)
            else:
                np.copyto(acc, part.sum(axis=-2, dtype=np.float64), casting="unsafe")
            return
        self.total[...] = 0
        for power, run in self.runs:
            run(xc, None, self.part)
            self.total += power * self.part.astype(np.float64)
        np.copyto(acc, self.total, casting="unsafe")


MAX_CHANNEL_GROUPS = 16   # beyond, the digits' runs cost less than adding the groups' sums


def _channel_groups(node, w: np.ndarray, x_max: int):
    """The fewest equal groups of a CONV_2D's input channels (ungrouped weights [O, kh, kw, C])
    whose sums stay float32-exact, or None (another op, grouped weights, no such split)."""
    if node.op != "CONV_2D" or w.shape[3] != node.input(0).shape[3]:
        return None
    cout, kh, kw, cin = w.shape
    a = np.abs(w.astype(np.int64)).sum(axis=(1, 2))                    # [O, C]
    for groups in range(2, min(cin, MAX_CHANNEL_GROUPS) + 1):
        if cin % groups == 0 and \
                a.reshape(cout, groups, -1).sum(axis=2).max(initial=0) * x_max < EXACT_F32:
            return groups
    return None


def _float_kernel(node, weights: np.ndarray, out_shape=None, bias=None, fused: bool = False):
    """The float32 kernel of node.op on float weights `weights`: run(x, None, out), without bias
    or activation unless given (`bias` a float32 vector; `fused`: the node's activation);
    `out_shape`: its output's when it differs from the node's (channel groups)."""
    x, w = node.input(0), node.input(1)
    out = node.outputs[0]
    shape = tuple(out.shape) if out_shape is None else tuple(out_shape)
    inputs = [TensorInfo(x.index, x.name, tuple(x.shape), F32, "float32"),
              TensorInfo(w.index, w.name, tuple(weights.shape), F32, "float32", data=weights)]
    if bias is not None:
        b = node.input(2)
        inputs.append(TensorInfo(b.index, b.name, tuple(bias.shape), F32, "float32", data=bias))
    act = node.options.fused_activation_function if fused else 0
    sub = Node(op=node.op, index=node.index, inputs=inputs,
               outputs=[TensorInfo(out.index, out.name, shape, F32, "float32")],
               options=node.options.replace(fused_activation_function=act),
               subgraph=node.subgraph, runtime=node.runtime)
    run = KERNELS[node.op]["float32"](sub)
    if tuple(sub.outputs[0].shape) != shape:
        raise node.fail(f"output shape {list(sub.outputs[0].shape)} differs from {list(shape)}")
    if bias is not None:
        return lambda x, _w, o: run(x, weights, bias, o)
    return lambda x, _w, o: run(x, weights, o)


# -- CONV_2D and DEPTHWISE_CONV_2D ----------------------------------------------------------------

@register("CONV_2D", "hybrid")
def conv_2d(node):
    return with_optional_inputs(node, _conv_2d_run(node), 3)


def _conv_2d_run(node, pre=None, clamp_output: bool = True):
    """conv_2d's run(x, w, b, out); pre, clamp_output: conv_2d_default's."""
    node.expect_inputs(2, 3)
    x = node.input(0)
    w, scales, _ = _int8_weights(node, 1)
    groups = conv_2d_groups(node, x.shape, w.shape)
    node.outputs[0].shape = _conv_shape(node, x.shape, w.shape, w.shape[0])
    per_channel = groups != 1 or (scales.size > 1 and np.any(scales != scales[0]))
    channel = _channel_scales(node, scales, w.shape[0], 0)
    return _conv_run(node, w, channel, per_channel, (1, 2, 3), "conv", pre, clamp_output)


@register("DEPTHWISE_CONV_2D", "hybrid")
def depthwise_conv_2d(node):
    node.expect_inputs(2, 3)
    x = node.input(0)
    w, scales, _ = _int8_weights(node, 1)
    depthwise_multiplier(node, x.shape, w.shape)
    node.outputs[0].shape = _conv_shape(node, x.shape, w.shape, w.shape[3])
    channel = _channel_scales(node, scales, w.shape[3], 3)
    return with_optional_inputs(node, _conv_run(node, w, channel, True, (0, 1, 2), "depthwise"), 3)


def _conv_shape(node, x_shape, w_shape, cout) -> tuple:
    win = conv_windows(node, x_shape, w_shape[1], w_shape[2])
    return (x_shape[0], win.oh, win.ow, cout)


def _conv_run(node, w, channel, asymmetric: bool, reduce_axes: tuple, kind: str, pre=None,
              clamp_output: bool = True):
    x = node.input(0)
    n = x.shape[0]
    out_shape = node.outputs[0].shape
    cout = out_shape[3]
    bias = _float_bias(node, 2, cout)
    code = int(node.options.fused_activation_function or 0)
    if not exact_rounding(node) and (code == 0 or code in ACTIVATION_BOUNDS):
        return _dequantized_conv_run(node, w, channel, asymmetric, kind, bias, pre, clamp_output)
    tail = bias_epilogue(node.optional_input(2),
                         _activation(node, node.options.fused_activation_function, False),
                         (n * out_shape[1], out_shape[2] * cout), out_shape[2])
    sums = _IntegerConv(node, w, 255 if asymmetric else 127, reduce_axes)
    x_rows = int(np.prod(x.shape[1:]))
    xq = np.empty((n, x_rows), F32)
    half = np.empty((n, x_rows), F32)
    row_scales = np.empty(n, F32)
    offsets = np.zeros(n, F32)
    filter_scale = channel[0]
    acc = np.empty(out_shape, F32)
    acc3 = acc.reshape(n, -1, cout)

    def run(x, w_, b_, out):
        x2 = x.reshape(n, x_rows)
        if asymmetric:
            quantize_rows_asymmetric(x2, xq, row_scales, offsets, half, centered=True)
        else:
            quantize_rows_symmetric(x2, xq, row_scales, half)
        sums(xq.reshape(x.shape), acc)
        o3 = out.reshape(acc3.shape)
        if kind == "conv" and asymmetric:        # (acc * channel) * row
            np.multiply(acc3, channel, out=o3)
            np.multiply(o3, row_scales[:, None, None], out=o3)
        elif kind == "conv":                     # acc * (row * filter)
            np.multiply(acc3, (row_scales * filter_scale)[:, None, None], out=o3)
        else:                                    # acc * (channel * row)
            np.multiply(acc3, channel[None, None, :] * row_scales[:, None, None], out=o3)
        if tail is not None:
            tail(out, None)
    return run


def conv_2d_default(node, pre=None, clamp_output: bool = True):
    """A hybrid CONV_2D's default-resolver run at batch 1 (the shifted, 1x1 or float-kernel
    form) for a fused chain (fusion_hybrid.py): conv_2d with its input left as `pre` says
    (hybrid_conv.Pre: the producer's channel multipliers and clamp, done here), its own fused
    activation left out when not `clamp_output` (the next op does it); None where the
    convolution does not run those forms (BUILTIN_REF, batch > 1, one pixel, grouped, an
    activation other than a clamp)."""
    x, w = node.input(0), node.input(1)
    code = int(node.options.fused_activation_function or 0)
    if node.op != "CONV_2D" or exact_rounding(node) or x.shape[0] != 1 \
            or tuple(x.shape[1:3]) == (1, 1) or (code != 0 and code not in ACTIVATION_BOUNDS) \
            or conv_2d_groups(node, x.shape, w.shape) != 1:
        return None
    return _conv_2d_run(node, pre, clamp_output)


def _dequantized_conv_run(node, w, channel, asymmetric: bool, kind: str, bias, pre=None,
                          clamp_output: bool = True):
    """The default resolver's hybrid convolution: the input quantized on the fly as LiteRT's
    (rint's rounding, see _round) and dequantized again (dequantize_rows), then the float
    kernel on the dequantized weights w * channel_scale with the op's bias and activation
    fused (its ones column, its clamp). The products and sums are float32's instead of exact
    integers scaled twice, and an input exactly halfway between two steps may round to the
    other one: float32 rounding from the reference, as LiteRT's optimized kernels (whose own gap
    to its reference kernels is of that kind: on the corpus's dynamic-range DenseNet121 and
    EfficientNetB0, 3.4e-3 and 2.3e-2 x max|output|, edgelite's default 3.8e-3 and 2.6e-2), and
    no pass over the output."""
    x = node.input(0)
    n = x.shape[0]
    x_rows = int(np.prod(x.shape[1:]))
    if kind == "conv" and n == 1 and tuple(x.shape[1:3]) == (1, 1) and w.shape[1:3] == (1, 1) \
            and w.shape[3] == x.shape[3] and tuple(node.outputs[0].shape[1:3]) == (1, 1) \
            and pre is None and clamp_output:
        # one pixel (squeeze-excite's convolutions): a one-row FULLY_CONNECTED, np.dot
        code = int(node.options.fused_activation_function or 0)
        return _dequantized_fc_run(1, w.shape[0], w.shape[3], w.reshape(w.shape[0], -1),
                                   channel, bias, asymmetric, _activation(node, code, False))
    weights = dequantized_weights(w, channel, 0 if kind == "conv" else 3)
    from . import hybrid_conv    # (it imports this module)
    if kind == "conv" and hybrid_conv.shifted_applies(node, x.shape, w.shape) and clamp_output:
        return hybrid_conv.shifted_conv_run(node, weights, bias, asymmetric, pre)
    if kind == "conv" and hybrid_conv.pointwise_applies(node, x.shape, w.shape,
                                                        node.outputs[0].shape):
        return hybrid_conv.pointwise_run(node, weights, bias, asymmetric, pre, clamp_output)
    if kind == "depthwise" and n == 1:
        return hybrid_conv.depthwise_run(node, weights, bias, asymmetric)
    run_float = _float_kernel(node, weights, bias=bias, fused=clamp_output)
    xq = np.empty((n, x_rows), F32)
    xq_nhwc = xq.reshape(x.shape)   # one view: the float kernels bind to the array they see
    multiply, quantized = np.multiply, hybrid_conv._quantized

    if pre is not None:      # (batch 1: conv_2d_default)
        h, row = x.shape[1], x_rows // x.shape[1]
        pre, xq_rows = pre.along_rows(x.shape[2]), xq.reshape(h, row)

        def run(x, w_, b_, out):
            multiply(xq, quantized(x.reshape(h, row), xq_rows, asymmetric, pre), xq)
            run_float(xq_nhwc, None, out)
        return run

    def run(x, w_, b_, out):
        dequantize_rows(x.reshape(n, x_rows), xq, asymmetric)
        run_float(xq_nhwc, None, out)
    return run


# -- FULLY_CONNECTED ------------------------------------------------------------------------------

@register("FULLY_CONNECTED", "hybrid")
def fully_connected(node):
    node.expect_inputs(2, 3)
    w, scales, _ = _int8_weights(node, 1)
    rows, units, depth = fully_connected_shape(node, w.shape)
    opts = node.options
    per_channel = scales.size > 1
    channel = _channel_scales(node, scales, units, 0)
    asymmetric = bool(getattr(opts, "asymmetric_quantize_inputs", False))
    bias = _float_bias(node, 2, units)
    act = _activation(node, opts.fused_activation_function, True)
    if not exact_rounding(node):
        run = _dequantized_fc_run(rows, units, depth, w, channel, bias, asymmetric, act)
        return with_optional_inputs(node, run, 3)
    matmul = _IntegerMatmul(w.T, (0,), 255 if asymmetric else 127)
    row_sums = w.astype(np.float64).sum(axis=1)
    xq = np.empty((rows, depth), F32)
    half = np.empty((rows, depth), F32)
    row_scales = np.empty(rows, F32)
    offsets = np.zeros(rows, F32)
    acc = np.empty((rows, units), F32)

    def run(x, w_, *rest):
        out = rest[-1].reshape(rows, units)
        x2 = x.reshape(rows, depth)
        if asymmetric:
            quantize_rows_asymmetric(x2, xq, row_scales, offsets, half)
        else:
            quantize_rows_symmetric(x2, xq, row_scales, half)
        matmul(xq, acc, offsets if asymmetric else None, row_sums)
        if per_channel:
            scale = row_scales[:, None] * channel[None, :]
        else:
            scale = (row_scales * channel[0])[:, None]
        np.multiply(acc, scale, out=out)
        if bias is not None:
            np.add(out, bias, out=out)
        if act is not None:
            act(out)
    return with_optional_inputs(node, run, 3)


def _dequantized_fc_run(rows, units, depth, w, channel, bias, asymmetric: bool, act):
    """The default resolver's hybrid FULLY_CONNECTED, as its convolutions: the rows quantized
    and dequantized (dequantize_rows), one float32 GEMM with the weights dequantized at
    prepare (float32 sums instead of exact integers scaled once: float32 rounding from the
    reference, no float64 product where the integer sums would pass 2^24), bias, activation."""
    weights_t = np.ascontiguousarray(dequantized_weights(w, channel, 0).T)    # [depth, units]
    xq = np.empty((rows, depth), F32)
    one_row = rows == 1
    if one_row:
        return _one_row_fc_run(units, depth, weights_t, xq, bias, asymmetric, act)

    def run(x, w_, *rest):
        out = rest[-1].reshape(rows, units)
        dequantize_rows(x.reshape(rows, depth), xq, asymmetric)
        if one_row:     # np.dot: a fraction of matmul's call cost
            np.dot(xq, weights_t, out=out)
        else:
            np.matmul(xq, weights_t, out=out)
        if bias is not None:
            np.add(out, bias, out=out)
        if act is not None:
            act(out)
    return run


def _one_row_fc_run(units, depth, weights_t, xq, bias, asymmetric: bool, act):
    """_dequantized_fc_run of one row (squeeze-excite's one-pixel convolutions, a batch-1
    FULLY_CONNECTED): the row's bounds by argmin / argmax (a quarter of a reduction's call
    cost), its scale and inverse into two 0-d arrays, ndarray.dot (hybrid_row.RowProduct's
    form); the same numbers, ~4 us less a call."""
    scalars = (np.zeros((), F32), np.zeros((), F32))
    bias_row = None if bias is None else np.ascontiguousarray(bias.reshape(1, units), F32)
    add = np.add
    bound = []

    def run(x, w_, *rest):
        out = rest[-1]
        if not bound or bound[0] is not x or bound[1] is not out:
            bound[:] = [x, out, x.reshape(1, depth), out.reshape(1, units)]
        x1, out1 = bound[2], bound[3]
        dequantize_row(x1, xq, asymmetric, x1.item(x1.argmin()), x1.item(x1.argmax()),
                       scalars)
        xq.dot(weights_t, out1)    # the method: no dispatcher frame
        if bias_row is not None:
            add(out1, bias_row, out1)
        if act is not None:
            act(out1)
    return run


class _IntegerMatmul:
    """acc = q @ w - offset * column sums of w, exactly (float32 BLAS while the sums stay below
    2^24, else float64), rounded to float32 as C's int -> float."""

    def __init__(self, w: np.ndarray, reduce_axes: tuple, x_max: int):
        bound = _sum_bound(w, reduce_axes) * x_max
        self.dtype = np.float32 if bound < EXACT_F32 else np.float64
        self.w = np.ascontiguousarray(w, dtype=self.dtype) if w.ndim == 2 else w.astype(self.dtype)

    def __call__(self, q, acc, offsets, col_sums) -> None:
        a = np.matmul(q.astype(self.dtype, copy=False), self.w)
        if offsets is not None:  # q @ (w) with q - offset: subtract offset * sum(w)
            a = a - offsets.astype(np.float64)[..., None] * col_sums[..., None, :]
        np.copyto(acc, a, casting="unsafe")


# -- BATCH_MATMUL ---------------------------------------------------------------------------------

@register("BATCH_MATMUL", "hybrid")
def batch_matmul(node):
    node.expect_inputs(2)
    x = node.input(0)
    w, scales, axis = _int8_weights(node, 1)
    if len(x.shape) < 2 or w.ndim < 2:
        raise node.fail(f"inputs {list(x.shape)} and {list(w.shape)} must have rank >= 2")
    opts = node.options
    adj_x, adj_y, m, k, n, batch = matmul_shape(node, x.shape, w.shape)
    wk = np.swapaxes(w, -1, -2) if adj_y else w                      # [..., K, N]
    node.outputs[0].shape = tuple(batch) + (m, n)
    per_channel = scales.size > 1
    if per_channel and scales.size != w.shape[axis]:
        raise node.fail(f"weights have {scales.size} scales along dimension {axis} of "
                        f"{list(w.shape)}")
    channel = scales if per_channel else scales[:1]
    asymmetric = bool(getattr(opts, "asymmetric_quantize_inputs", False))
    matmul = _IntegerMatmul(wk, (-2,), 255 if asymmetric else 127)
    col_sums = wk.astype(np.float64).sum(axis=-2)                    # [..., N]
    lhs_shape = tuple(x.shape[:-2]) + (m, k)
    rows = int(np.prod(lhs_shape[:-1], dtype=np.int64))
    xq = np.empty((rows, k), F32)
    half = np.empty((rows, k), F32)
    row_scales = np.empty(rows, F32)
    offsets = np.zeros(rows, F32)
    acc = np.empty(node.outputs[0].shape, F32)

    def run(x, w_, out):
        lhs = np.swapaxes(x, -1, -2) if adj_x else x
        x2 = np.ascontiguousarray(lhs).reshape(rows, k)
        if asymmetric:
            quantize_rows_asymmetric(x2, xq, row_scales, offsets, half)
        else:
            quantize_rows_symmetric(x2, xq, row_scales, half)
        q = xq.reshape(lhs_shape)
        matmul(q, acc, offsets.reshape(lhs_shape[:-1]) if asymmetric else None, col_sums)
        rs = row_scales.reshape(lhs_shape[:-1])[..., None]
        scale = rs * channel if per_channel else rs * channel[0]
        np.multiply(scale, acc, out=out)
    return run
