"""MediaPipe's custom ops (mediapipe/util/tflite/operations, registered by MediaPipe's CPU op
resolver and, for the first three, by LiteRT's XNNPACK delegate):

- Convolution2DTransposeBias: a transposed convolution with a bias, NHWC, filter [O, kh, kw, C];
  options are the C struct TfLiteTransposeConvParams (padding, stride_w, stride_h).
- MaxPoolingWithArgmax2D: max pooling that also outputs, as float32, the position of each
  maximum inside its window (fy * filter_w + fx + 0.1); options TfLitePoolParams.
- MaxUnpooling2D: the inverse: each value written at the window position its index names, an
  output of (H * filter_h, W * filter_w), zeros elsewhere; options TfLitePoolParams.
- Landmarks2TransformMatrix (version 2): a 4x4 matrix mapping a crop around a subset of
  landmarks [1, N, 3] (rotated so two landmarks lie level) to that landmark region.
- TransformTensorBilinear (version 2): samples a [1, H, W, C] tensor bilinearly at the
  positions the matrix maps each output pixel to (pixel centres: "align corners"), zero
  outside the input.
- TransformLandmarks (version 2): applies the matrix's first two rows to landmarks [1, N, D]
  (D = 2 or 3; z is copied).
- Resampler: bilinear sampling of [B, H, W, C] at per-pixel (x, y) positions [B, H, W, 2].

The C-struct options are little-endian int32 fields. TfLitePadding counts from 1 (1 SAME,
2 VALID), unlike the schema's Padding. The float arithmetic follows MediaPipe's sources: the
same operand order, float32 where they compute in float and float64 where a double literal
promotes an expression, so the matrix ops match bit for bit and the samplers to rounding.
Only version 2 of the three landmark ops exists on MediaPipe's CPU path (version 1 is a GPU
form with 4-D inputs); a 4-D input gets an error saying so. (`edgetpu-custom-op`, a Coral Edge
TPU graph, has no CPU form: registry.UNAVAILABLE_CUSTOM_OPS says so at load.)
"""
from __future__ import annotations

import math
import struct

import numpy as np

from .common import F32, check_float, clamp_activation
from .detection import read_flexbuffer_map
from .registry import PURE_CUSTOM_OPS, register_custom_op
from .taps import patch_accumulator, scatter_patches

F64 = np.dtype(np.float64)
_SAME, _VALID = 1, 2   # TfLitePadding


def _struct_fields(node, count: int, what: str) -> tuple:
    """The first `count` int32 fields of the C-struct custom options."""
    data = bytes(node.custom_options or b"")
    if len(data) < 4 * count:
        raise node.fail(f"custom options are {len(data)} bytes; {what} needs at least "
                        f"{4 * count} ({count} int32 fields)")
    return struct.unpack_from(f"<{count}i", data)


def _flex_options(node) -> dict:
    try:
        return read_flexbuffer_map(node.custom_options)
    except Exception as e:  # noqa: BLE001  (a malformed buffer: say so, naming the op)
        raise node.fail(f"cannot read the custom options: {e}") from e


def _positive(node, **values) -> None:
    for name, v in values.items():
        if v <= 0:
            raise node.fail(f"{name} must be positive, got {v}")


def _check_rank(node, info, rank: int, what: str) -> None:
    if len(info.shape) != rank:
        raise node.fail(f"{what} {info.name!r} has shape {list(info.shape)}; expected rank "
                        f"{rank}")


# -- Convolution2DTransposeBias ----------------------------------------------------------------

def convolution_2d_transpose_bias(node):
    node.expect_inputs(3)
    if len(node.outputs) != 1:
        raise node.fail(f"expected 1 output, got {len(node.outputs)}")
    x, w, b = node.input(0), node.input(1), node.input(2)
    check_float(node, x, w, b)
    _check_rank(node, x, 4, "input")
    _check_rank(node, w, 4, "filter")
    _check_rank(node, b, 1, "bias")
    padding, sw, sh = _struct_fields(node, 3, "TfLiteTransposeConvParams")
    _positive(node, stride_w=sw, stride_h=sh)
    n, h, wd, c = x.shape
    o, kh, kw, wc = w.shape
    if wc != c:
        raise node.fail(f"filter {list(w.shape)} has {wc} input channels; the input has {c}")
    if b.shape[0] != o:
        raise node.fail(f"bias has {b.shape[0]} values; the filter has {o} output channels")
    pad_h = pad_w = 0
    if padding == _SAME:
        pad_h = max(0, kh - (h - 1) % sh - 1)
        pad_w = max(0, kw - (wd - 1) % sw - 1)
    ho, wo = sh * (h - 1) + kh - pad_h, sw * (wd - 1) + kw - pad_w
    out_shape = (n, ho, wo, o)
    node.outputs[0].shape = out_shape
    pt, pl = pad_h // 2, pad_w // 2
    acc = patch_accumulator(x.shape, w.shape, out_shape, (sh, sw), (pt, pl), F32)
    cols = np.empty((n, h, wd, kh, kw, o), F32)
    const_w = None if w.data is None else _patch_weights(w.data)

    def run(x, w, bias, out):
        wm = const_w if const_w is not None else _patch_weights(w)
        np.matmul(x.reshape(n * h * wd, c), wm, out=cols.reshape(n * h * wd, kh * kw * o))
        scatter_patches(acc, cols, (sh, sw))
        np.add(acc[:, pt:pt + ho, pl:pl + wo], bias, out=out)
    return run


def _patch_weights(w):
    """Filter [O, kh, kw, C] as the [C, kh*kw*O] matrix mapping a pixel to its patch."""
    o, kh, kw, c = w.shape
    return np.ascontiguousarray(np.asarray(w, F32).transpose(3, 1, 2, 0).reshape(c, kh * kw * o))


# -- MaxPoolingWithArgmax2D, MaxUnpooling2D -----------------------------------------------------

def _pool_params(node):
    padding, sw, sh, fw, fh, act = _struct_fields(node, 6, "TfLitePoolParams")
    _positive(node, stride_w=sw, stride_h=sh, filter_w=fw, filter_h=fh)
    return padding, sw, sh, fw, fh, act


def _compute_padding(stride, in_size, filter_size, out_size) -> int:
    """TFLite's ComputePadding (dilation 1): C division, never negative."""
    return max(0, int(((out_size - 1) * stride + filter_size - in_size) / 2))


def max_pooling_with_argmax_2d(node):
    node.expect_inputs(1)
    if len(node.outputs) != 2:
        raise node.fail(f"expected 2 outputs (values, indices), got {len(node.outputs)}")
    x = node.input(0)
    check_float(node, x, *node.outputs)
    _check_rank(node, x, 4, "input")
    padding, sw, sh, fw, fh, act = _pool_params(node)
    n, h, w, c = x.shape

    def out_size(size, f, s):
        if padding == _SAME:
            return (size + s - 1) // s
        if padding == _VALID:
            return (size - f + s) // s
        return 0
    ho, wo = out_size(h, fh, sh), out_size(w, fw, sw)
    if ho <= 0 or wo <= 0:
        raise node.fail(f"a {fh}x{fw} window with padding {padding} over a {h}x{w} input "
                        "leaves no output")
    pt, pl = _compute_padding(sh, h, fh, ho), _compute_padding(sw, w, fw, wo)
    for o in node.outputs:
        o.shape = (n, ho, wo, c)
    clamp = clamp_activation(act, node)
    lowest = np.finfo(F32).min
    # A window's taps read a buffer padded with -inf wide enough for every window: a tap
    # outside the input, like a NaN or a value not above float's lowest, never wins.
    ph = max(h + pt, (ho - 1) * sh + fh)
    pw = max(w + pl, (wo - 1) * sw + fw)
    padded = np.full((n, ph, pw, c), -np.inf, F32)
    inner = padded[:, pt:pt + h, pl:pl + w]
    taps = np.empty((fh * fw, n, ho, wo, c), F32)
    plus = np.float32(0.1)

    def run(x, out, indices):
        np.copyto(inner, x)
        np.copyto(inner, -np.inf, where=np.isnan(x))
        for fy in range(fh):
            for fx in range(fw):
                taps[fy * fw + fx] = padded[:, fy:fy + (ho - 1) * sh + 1:sh,
                                            fx:fx + (wo - 1) * sw + 1:sw]
        best = taps.max(axis=0)
        k = np.argmax(taps == best, axis=0)       # the first tap holding the maximum
        none = best <= lowest                      # no tap above float's lowest: tap 0
        k[none] = 0
        best[none] = lowest
        np.copyto(out, best)
        if clamp is not None:
            clamp(out)
        np.add(k.astype(F32), plus, out=indices)
    return run


def max_unpooling_2d(node):
    node.expect_inputs(2)
    if len(node.outputs) != 1:
        raise node.fail(f"expected 1 output, got {len(node.outputs)}")
    x, idx = node.input(0), node.input(1)
    check_float(node, x, idx)
    _check_rank(node, x, 4, "input")
    _check_rank(node, idx, 4, "indices")
    if tuple(idx.shape) != tuple(x.shape):
        raise node.fail(f"indices {list(idx.shape)} and input {list(x.shape)} differ in shape")
    _, sw, sh, fw, fh, _ = _pool_params(node)
    n, h, w, c = x.shape
    ho, wo = h * fh, w * fw
    pt, pl = _compute_padding(sh, ho, fh, h), _compute_padding(sw, wo, fw, w)
    node.outputs[0].shape = (n, ho, wo, c)
    b, iy, ix, ic = np.indices((n, h, w, c), dtype=np.int64)
    base_y, base_x = iy * sh - pt, ix * sw - pl

    def run(x, indices, out):
        k = np.trunc(indices).astype(np.int64)    # C's float -> int
        my, mx = np.fix(k / fw).astype(np.int64), np.fmod(k, fw)
        oy, ox = base_y + my, base_x + mx
        bad = (oy < 0) | (oy >= ho) | (ox < 0) | (ox >= wo)
        if bad.any():
            at = tuple(int(v[bad][0]) for v in (b, iy, ix, ic))
            raise node.fail(f"index {float(indices[at])} at {list(at)} points outside the "
                            f"{ho}x{wo} output")
        out.fill(0)
        out[b, oy, ox, ic] = x                      # the last write to a position wins
    return run


# -- Landmarks2TransformMatrix (v2) -------------------------------------------------------------

def _f(v) -> np.float32:
    return np.float32(v)


def _mat_mul(a, b) -> list:
    """Row-major square float32 matrices as lists; sums from 0 in k order, as MediaPipe's."""
    size = int(math.isqrt(len(a)))
    out = []
    for r in range(size):
        for col in range(size):
            s = _f(0)
            for k in range(size):
                s = _f(s + a[r * size + k] * b[k * size + col])
            out.append(s)
    return out


def _mat_vec(m, v) -> list:
    out = []
    for r in range(3):
        s = _f(0)
        for k in range(3):
            s = _f(s + m[r * 3 + k] * v[k])
        out.append(s)
    return out


def _cos(x) -> np.float32:
    return _f(math.cos(float(x)))


def _sin(x) -> np.float32:
    return _f(math.sin(float(x)))


def landmarks_to_transform_matrix(p: dict, landmarks: np.ndarray) -> np.ndarray:
    """The [4, 4] matrix of Landmarks2TransformMatrix v2 for landmarks [N, 3] (float32)."""
    lm = np.asarray(landmarks, F32)
    left, right = lm[p["left_rotation_idx"]], lm[p["right_rotation_idx"]]
    rotation = _f(math.atan2(float(_f(right[1] - left[1])), float(_f(right[0] - left[0]))))
    r = _f(p["target_rotation_radians"] - rotation)
    rot = [_cos(r), -_sin(r), _f(0), _sin(r), _cos(r), _f(0), _f(0), _f(0), _f(1)]
    rot_inv = [_cos(-r), -_sin(-r), _f(0), _sin(-r), _cos(-r), _f(0), _f(0), _f(0), _f(1)]
    points = [_mat_vec(rot, [lm[i, 0], lm[i, 1], _f(1)]) for pair in p["subset"] for i in pair]
    lo, hi = list(points[0]), list(points[0])
    for q in points[1:]:
        for d in range(2):
            hi[d] = q[d] if hi[d] < q[d] else hi[d]
            lo[d] = q[d] if lo[d] > q[d] else lo[d]
    crop_w, crop_h = _f(hi[0] - lo[0]), _f(hi[1] - lo[1])
    centre = [_f(_f(lo[0] + hi[0]) / _f(2)), _f(_f(lo[1] + hi[1]) / _f(2)), lo[2]]
    crop_x, crop_y, _ = _mat_vec(rot_inv, centre)
    one, zero = _f(1), _f(0)

    def affine(a, b_, c_, d_, tx, ty):
        return [a, b_, zero, tx, c_, d_, zero, ty, zero, zero, one, zero, zero, zero, zero, one]
    t = affine(one, zero, zero, one, zero, zero)
    t = _mat_mul(t, affine(one, zero, zero, one, crop_x, crop_y))
    rr = _f(-r)
    t = _mat_mul(t, affine(_cos(rr), -_sin(rr), _sin(rr), _cos(rr), zero, zero))
    scale_x = _f(_f(p["scale_x"] * crop_w) / _f(p["output_width"]))
    scale_y = _f(_f(p["scale_y"] * crop_h) / _f(p["output_height"]))
    t = _mat_mul(t, affine(scale_x, zero, zero, scale_y, zero, zero))
    shift_x, shift_y = _f(-(p["output_width"] / 2.0)), _f(-(p["output_height"] / 2.0))
    t = _mat_mul(t, affine(one, zero, zero, one, shift_x, shift_y))
    return np.array(t, F32).reshape(4, 4)


def _landmarks_options(node) -> dict:
    m = _flex_options(node)
    idxs = [int(v) for v in (m.get("subset_idxs") or [])]
    subset = [(idxs[2 * i], idxs[2 * i + 1]) for i in range(len(idxs) // 2)]
    if len(idxs) % 2:
        subset.append((idxs[-1], idxs[-1]))
    p = dict(subset=subset, left_rotation_idx=int(m.get("left_rotation_idx") or 0),
             right_rotation_idx=int(m.get("right_rotation_idx") or 0),
             target_rotation_radians=float(m.get("target_rotation_radians") or 0.0),
             output_height=int(m.get("output_height") or 0),
             output_width=int(m.get("output_width") or 0),
             scale_x=float(m.get("scale_x") or 0.0), scale_y=float(m.get("scale_y") or 0.0))
    _positive(node, output_height=p["output_height"], output_width=p["output_width"],
              scale_x=p["scale_x"], scale_y=p["scale_y"])
    if not subset:
        raise node.fail("subset_idxs is empty")
    return p


def landmarks_2_transform_matrix(node):
    node.expect_inputs(1)
    x = node.input(0)
    check_float(node, x, node.outputs[0])
    if len(x.shape) == 4:
        raise node.fail("a 4-D input is version 1 of this op, which MediaPipe runs on the GPU "
                        "only; the CPU op (version 2) takes landmarks [1, N, 3]")
    _check_rank(node, x, 3, "landmarks")
    if x.shape[0] != 1 or x.shape[2] != 3:
        raise node.fail(f"landmarks {list(x.shape)}: expected [1, N, 3]")
    p = _landmarks_options(node)
    count = x.shape[1]
    used = [p["left_rotation_idx"], p["right_rotation_idx"]] + [i for s in p["subset"] for i in s]
    bad = [i for i in used if not 0 <= i < count]
    if bad:
        raise node.fail(f"landmark index {bad[0]} is outside the {count} landmarks")
    node.outputs[0].shape = (1, 4, 4)

    def run(x, out):
        out[0] = landmarks_to_transform_matrix(p, x[0])
    return run


# -- TransformTensorBilinear (v2), TransformLandmarks (v2) -------------------------------------

def _rows(matrix) -> tuple:
    m = np.asarray(matrix, F32).reshape(-1)
    return m[0:4].copy(), m[4:8].copy()


def _dot(row, x, y):
    """((r0*x + r1*y) + r2*0) + r3, in float32 as MediaPipe's DotProduct with (x, y, 0, 1)."""
    t = row[0] * x
    t = t + row[1] * y
    t = t + row[2] * np.float32(0)
    return (t + row[3]).astype(F32)


def transform_tensor_bilinear(node):
    node.expect_inputs(2)
    x, m = node.input(0), node.input(1)
    check_float(node, x, m, node.outputs[0])
    _check_rank(node, x, 4, "input")
    if int(np.prod(m.shape)) < 16:
        raise node.fail(f"the matrix {list(m.shape)} has fewer than 16 values")
    opts = _flex_options(node)
    oh, ow = int(opts.get("output_height") or 0), int(opts.get("output_width") or 0)
    _positive(node, output_height=oh, output_width=ow)
    if x.shape[0] != 1:
        raise node.fail(f"input {list(x.shape)}: MediaPipe's op takes batch 1")
    _, h, w, c = x.shape
    node.outputs[0].shape = (1, oh, ow, c)
    oy, ox = np.meshgrid(np.arange(oh, dtype=F32), np.arange(ow, dtype=F32), indexing="ij")

    def run(x, matrix, out):
        rx, ry = _rows(matrix)
        # align corners: T -> S * T * A (pixel centres), in double as the source's 0.5 is
        rx[3] = np.float32(float(rx[3]) + (float(rx[0]) * 0.5 + float(rx[1]) * 0.5 - 0.5))
        ry[3] = np.float32(float(ry[3]) + (float(ry[0]) * 0.5 + float(ry[1]) * 0.5 - 0.5))
        tx, ty = _dot(rx, ox, oy), _dot(ry, ox, oy)
        inside = (tx >= 0) & (tx <= w - 1) & (ty >= 0) & (ty <= h - 1)   # NaN: outside
        out[0] = bilinear_at(x[0], np.where(inside, tx, 0), np.where(inside, ty, 0))
        out[0][~inside] = 0
    return run


def bilinear_at(img: np.ndarray, tx: np.ndarray, ty: np.ndarray) -> np.ndarray:
    """img [H, W, C] sampled at (tx, ty) (float32, in range): MediaPipe's float and double
    steps, neighbours past the edge read as 0."""
    h, w, _ = img.shape
    fx, fy = np.floor(tx), np.floor(ty)
    x0, y0 = fx.astype(np.int64), fy.astype(np.int64)

    def read(yy, xx):
        ok = (yy >= 0) & (xx >= 0) & (yy < h) & (xx < w)
        v = img[np.clip(yy, 0, h - 1), np.clip(xx, 0, w - 1)]
        return np.where(ok[..., None], v, np.float32(0))
    q11, q21, q12, q22 = read(y0, x0), read(y0, x0 + 1), read(y0 + 1, x0), read(y0 + 1, x0 + 1)
    rc = (tx - fx).astype(F32)[..., None]
    lc = (ty - fy).astype(F32)[..., None]
    upper = ((1.0 - rc.astype(F64)) * q11 + (rc * q21).astype(F64)).astype(F32)
    lower = ((1.0 - rc.astype(F64)) * q12 + (rc * q22).astype(F64)).astype(F32)
    return ((lc * lower).astype(F64) + (1.0 - lc.astype(F64)) * upper).astype(F32)


def transform_landmarks(node):
    node.expect_inputs(2)
    x, m = node.input(0), node.input(1)
    check_float(node, x, m, node.outputs[0])
    if len(x.shape) == 4:
        raise node.fail("a 4-D input is version 1 of this op, which MediaPipe runs on the GPU "
                        "only; the CPU op (version 2) takes landmarks [1, N, 2 or 3]")
    _check_rank(node, x, 3, "landmarks")
    if int(np.prod(m.shape)) < 16:
        raise node.fail(f"the matrix {list(m.shape)} has fewer than 16 values")
    dims = x.shape[2]
    if dims not in (2, 3):
        raise node.fail(f"landmarks {list(x.shape)} have {dims} coordinates; expected 2 or 3")
    node.outputs[0].shape = tuple(x.shape)

    def run(x, matrix, out):
        rx, ry = _rows(matrix)
        px, py = x[..., 0], x[..., 1]
        out[..., 0] = _dot(rx, px, py)
        out[..., 1] = _dot(ry, px, py)
        if dims == 3:
            out[..., 2] = x[..., 2]
    return run


# -- Resampler -----------------------------------------------------------------------------------

def resampler(node):
    node.expect_inputs(2)
    src, warp = node.input(0), node.input(1)
    check_float(node, src, warp, node.outputs[0])
    _check_rank(node, src, 4, "source")
    _check_rank(node, warp, 4, "warp")
    n, h, w, c = src.shape
    if tuple(warp.shape) != (n, h, w, 2):
        raise node.fail(f"warp {list(warp.shape)}: expected [{n}, {h}, {w}, 2] (an (x, y) per "
                        "source pixel)")
    node.outputs[0].shape = tuple(src.shape)
    one = np.float32(1)

    def run(src, warp, out):
        x, y = warp[..., 0], warp[..., 1]
        inside = (x > -1) & (y > -1) & (x < w) & (y < h)      # NaN: outside
        xs, ys = np.where(inside, x, 0).astype(F32), np.where(inside, y, 0).astype(F32)
        fx, fy = np.floor(xs).astype(np.int64), np.floor(ys).astype(np.int64)
        cx, cy = fx + 1, fy + 1
        dx = (cx.astype(F32) - xs)[..., None]
        dy = (cy.astype(F32) - ys)[..., None]
        bi = np.arange(n)[:, None, None]

        def at(yy, xx):
            ok = (xx >= 0) & (yy >= 0) & (xx <= w - 1) & (yy <= h - 1)
            v = src[bi, np.clip(yy, 0, h - 1), np.clip(xx, 0, w - 1)]
            return np.where(ok[..., None], v, np.float32(0))
        total = (dx * dy) * at(fy, fx)
        total = total + ((one - dx) * (one - dy)) * at(cy, cx)
        total = total + (dx * (one - dy)) * at(cy, fx)
        total = total + ((one - dx) * dy) * at(fy, cx)
        out[...] = np.where(inside[..., None], total, np.float32(0))
    return run


MEDIAPIPE_OPS = {
    "Convolution2DTransposeBias": convolution_2d_transpose_bias,
    "MaxPoolingWithArgmax2D": max_pooling_with_argmax_2d,
    "MaxUnpooling2D": max_unpooling_2d,
    "Landmarks2TransformMatrix": landmarks_2_transform_matrix,
    "TransformTensorBilinear": transform_tensor_bilinear,
    "TransformLandmarks": transform_landmarks,
    "Resampler": resampler,
}

for _name, _prepare in MEDIAPIPE_OPS.items():
    register_custom_op(_name, _prepare)
PURE_CUSTOM_OPS.update(MEDIAPIPE_OPS)
