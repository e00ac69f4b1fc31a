"""MediaPipe's custom ops (interpreter/kernels/mediapipe_ops.py).

Convolution2DTransposeBias, MaxPoolingWithArgmax2D and MaxUnpooling2D are checked against
LiteRT, whose Python wheel runs them in its XNNPACK delegate only (its reference resolver does
not have them; the models declare their output shapes, as XNNPACK needs), and against plain
loops of MediaPipe's kernels. The landmark ops and
Resampler, which LiteRT lacks, are checked against float64 loops written from MediaPipe's
formulas here, and against what the geometry must give (an integer shift crops, an identity
warp copies)."""
from __future__ import annotations

import math
import struct

import numpy as np
import pytest
from flatbuffers import flexbuffers

from edgelite.interpreter import KernelError, UnsupportedOpsError
from tests.opmodel import In, Out, op_model, run_edgelite, run_litert

SAME, VALID = 1, 2   # TfLitePadding


def _pool_options(padding, stride, filt, act=0):
    return struct.pack("<8i", padding, stride[1], stride[0], filt[1], filt[0], act, 0, 0)


def _litert_xnnpack(model, feeds):
    pytest.importorskip("ai_edge_litert", reason="LiteRT (ai-edge-litert) is the oracle")
    return run_litert(model, feeds, reference=False)


# -- Convolution2DTransposeBias ----------------------------------------------------------------

def _transpose_out(padding, size, k, s):
    pad = max(0, k - (size - 1) % s - 1) if padding == SAME else 0
    return s * (size - 1) + k - pad


def _transpose_loops(x, w, b, padding, s):
    """MediaPipe's reference loop (scatter each input pixel's products), in float64."""
    n, h, wd, c = x.shape
    o, kh, kw, _ = w.shape
    ho, wo = _transpose_out(padding, h, kh, s[0]), _transpose_out(padding, wd, kw, s[1])
    ph = (max(0, kh - (h - 1) % s[0] - 1) if padding == SAME else 0) // 2
    pw = (max(0, kw - (wd - 1) % s[1] - 1) if padding == SAME else 0) // 2
    out = np.zeros((n, ho, wo, o)) + b.astype(np.float64)
    for iy in range(h):
        for ix in range(wd):
            for fy in range(kh):
                for fx in range(kw):
                    oy, ox = iy * s[0] - ph + fy, ix * s[1] - pw + fx
                    if 0 <= oy < ho and 0 <= ox < wo:
                        out[:, oy, ox] += x[:, iy, ix].astype(np.float64) @ \
                            w[:, fy, fx].astype(np.float64).T
    return out


TRANSPOSE_CASES = {
    "selfie_2x2_s2_same": ((1, 8, 8, 16), (1, 2, 2, 16), SAME, (2, 2)),
    "k3_s2_same_odd": ((1, 7, 5, 4), (3, 3, 3, 4), SAME, (2, 2)),
    "k4_s2_same": ((2, 6, 6, 3), (5, 4, 4, 3), SAME, (2, 2)),
    "k3_s1_valid": ((1, 5, 6, 2), (4, 3, 3, 2), VALID, (1, 1)),
    "k3_s3_valid_rect": ((1, 4, 3, 5), (2, 3, 2, 5), VALID, (3, 2)),
    "k5_s2_same": ((1, 6, 7, 3), (2, 5, 5, 3), SAME, (2, 2)),
}


@pytest.mark.parametrize("name", list(TRANSPOSE_CASES))
def test_convolution_2d_transpose_bias(name):
    xs, ws, padding, s = TRANSPOSE_CASES[name]
    rng = np.random.default_rng(len(name))
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    b = rng.standard_normal(ws[0]).astype(np.float32)
    out = (xs[0], _transpose_out(padding, xs[1], ws[1], s[0]),
           _transpose_out(padding, xs[2], ws[2], s[1]), ws[0])
    model = op_model("CUSTOM", [In(xs), w, b], [Out(out)], custom_code="Convolution2DTransposeBias",
                     custom_options=struct.pack("<3i", padding, s[1], s[0]))
    ours = run_edgelite(model, [x])[0]
    assert ours.shape == out
    exact = _transpose_loops(x, w, b, padding, s)
    np.testing.assert_allclose(ours, exact, rtol=1e-5, atol=1e-5 * np.abs(exact).max())
    theirs = _litert_xnnpack(model, [x])[0]
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5 * np.abs(theirs).max())


def test_convolution_2d_transpose_bias_short_options():
    model = op_model("CUSTOM", [In((1, 4, 4, 2)), np.ones((3, 2, 2, 2), np.float32),
                                np.zeros(3, np.float32)], custom_code="Convolution2DTransposeBias",
                     custom_options=struct.pack("<2i", SAME, 2))
    with pytest.raises(KernelError, match="Convolution2DTransposeBias.*8 bytes.*12"):
        run_edgelite(model, [np.zeros((1, 4, 4, 2), np.float32)])


# -- MaxPoolingWithArgmax2D, MaxUnpooling2D -----------------------------------------------------

POOL_CASES = {
    "2x2_s2_valid": ((1, 8, 8, 3), VALID, (2, 2), (2, 2), 0),
    "2x2_s2_same_odd": ((1, 7, 9, 2), SAME, (2, 2), (2, 2), 0),
    "3x3_s2_same": ((2, 9, 8, 4), SAME, (2, 2), (3, 3), 0),
    "3x2_s1_valid_relu6": ((1, 6, 5, 3), VALID, (1, 1), (3, 2), 3),
}


def _pool_out(padding, size, f, s):
    return (size + s - 1) // s if padding == SAME else (size - f + s) // s


@pytest.mark.parametrize("name", list(POOL_CASES))
def test_max_pooling_with_argmax_2d(name):
    xs, padding, s, f, act = POOL_CASES[name]
    rng = np.random.default_rng(len(name))
    x = (rng.standard_normal(xs) * 4).astype(np.float32)
    x[0, 0, :2, 0] = 5.0                               # a tie: the first tap wins
    out = (xs[0], _pool_out(padding, xs[1], f[0], s[0]), _pool_out(padding, xs[2], f[1], s[1]),
           xs[3])
    model = op_model("CUSTOM", [In(xs)], [Out(out), Out(out)],
                     custom_code="MaxPoolingWithArgmax2D",
                     custom_options=_pool_options(padding, s, f, act))
    values, indices = run_edgelite(model, [x])
    assert values.shape == indices.shape == out
    # the window of each output, with MediaPipe's padding (ComputePadding), in plain loops
    pt = max(0, ((out[1] - 1) * s[0] + f[0] - xs[1]) // 2)
    pl = max(0, ((out[2] - 1) * s[1] + f[1] - xs[2]) // 2)
    for b_, oy, ox, ch in np.ndindex(*out):
        best, at = -np.inf, 0
        for fy in range(f[0]):
            for fx in range(f[1]):
                iy, ix = oy * s[0] - pt + fy, ox * s[1] - pl + fx
                if 0 <= iy < xs[1] and 0 <= ix < xs[2] and x[b_, iy, ix, ch] > best:
                    best, at = x[b_, iy, ix, ch], fy * f[1] + fx
        want = min(max(best, 0), 6) if act == 3 else best
        assert values[b_, oy, ox, ch] == np.float32(want)
        assert indices[b_, oy, ox, ch] == np.float32(at) + np.float32(0.1)
    if f != s:
        return   # XNNPACK (LiteRT's only kernel of the op) takes windows that tile the input
    theirs = _litert_xnnpack(model, [x])
    np.testing.assert_array_equal(values, theirs[0])
    # LiteRT's XNNPACK writes each index as uint32 bits, column-major in the window
    # (fx * filter_h + fy); MediaPipe's kernel, the spec, as a float fy * filter_w + fx + 0.1.
    k = theirs[1].view(np.uint32).astype(np.int64)
    np.testing.assert_array_equal(np.floor(indices), (k % f[0]) * f[1] + k // f[0])


def _pool_unpool_model(shape, s, f) -> bytes:
    """MaxPoolingWithArgmax2D then MaxUnpooling2D in one graph (LiteRT's XNNPACK reads its
    own index form only: the pair is compared end to end)."""
    from edgelite.schema import Model, Operator, OperatorCode, Subgraph, Tensor, save
    pooled = (shape[0], shape[1] // f[0], shape[2] // f[1], shape[3])
    model, sg = Model(), Subgraph(name="main")
    x = sg.add_tensor(Tensor("x", shape))
    v, i = sg.add_tensor(Tensor("values", pooled)), sg.add_tensor(Tensor("indices", pooled))
    y = sg.add_tensor(Tensor("y", (shape[0], pooled[1] * f[0], pooled[2] * f[1], shape[3])))
    opts = _pool_options(VALID, s, f)
    sg.operators += [
        Operator(OperatorCode("CUSTOM", 1, "MaxPoolingWithArgmax2D"), [x], [v, i],
                 custom_options=opts),
        Operator(OperatorCode("CUSTOM", 1, "MaxUnpooling2D"), [v, i], [y], custom_options=opts)]
    sg.inputs, sg.outputs = [x], [y, v]
    model.subgraphs.append(sg)
    return save(model)


@pytest.mark.parametrize("shape,f", [((1, 8, 8, 3), (2, 2)), ((2, 9, 6, 4), (3, 3)),
                                     ((1, 6, 8, 2), (3, 2))])
def test_max_unpooling_2d_inverts_the_pooling(shape, f):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape).astype(np.float32)
    model = _pool_unpool_model(shape, f, f)
    ours, pooled = run_edgelite(model, [x])
    # every window keeps its maximum where it was and zeros elsewhere
    n, ph, pw, c = pooled.shape
    crop = x[:, :ph * f[0], :pw * f[1]]
    windows = crop.reshape(n, ph, f[0], pw, f[1], c)
    is_max = windows == windows.max(axis=(2, 4), keepdims=True)
    want = np.where(is_max, windows, 0).reshape(crop.shape)
    np.testing.assert_array_equal(ours, want)
    theirs = _litert_xnnpack(model, [x])
    np.testing.assert_array_equal(ours, theirs[0])
    np.testing.assert_array_equal(pooled, theirs[1])


def test_max_unpooling_2d_index_outside_the_output():
    shape = (1, 2, 2, 1)
    model = op_model("CUSTOM", [In(shape), In(shape)], [Out((1, 4, 4, 1))],
                     custom_code="MaxUnpooling2D",
                     custom_options=_pool_options(VALID, (2, 2), (2, 2)))
    with pytest.raises(KernelError, match="MaxUnpooling2D.*index 9.0.*outside the 4x4 output"):
        run_edgelite(model, [np.ones(shape, np.float32), np.full(shape, 9.0, np.float32)])


# -- Landmarks2TransformMatrix, TransformTensorBilinear, TransformLandmarks --------------------

def _l2tm_float64(p, lm):
    """The op's geometry in float64: rotate so the two landmarks lie level, take the subset's
    bounding box there, map the output grid (centred, scaled) onto it."""
    left, right = lm[p["left_rotation_idx"]], lm[p["right_rotation_idx"]]
    r = p["target_rotation_radians"] - math.atan2(right[1] - left[1], right[0] - left[0])
    rot = np.array([[math.cos(r), -math.sin(r)], [math.sin(r), math.cos(r)]])
    pts = lm[np.array(p["subset_idxs"]), :2] @ rot.T
    lo, hi = pts.min(0), pts.max(0)
    centre = rot.T @ ((lo + hi) / 2)
    size = hi - lo
    sx = p["scale_x"] * size[0] / p["output_width"]
    sy = p["scale_y"] * size[1] / p["output_height"]

    def affine(a):
        m = np.eye(4)
        m[:2, :2], m[:2, 3] = a[0], a[1]
        return m
    t = affine((np.eye(2), centre)) @ affine((rot.T, (0, 0))) @ \
        affine((np.diag([sx, sy]), (0, 0))) @ \
        affine((np.eye(2), (-p["output_width"] / 2, -p["output_height"] / 2)))
    return t


L2TM = dict(left_rotation_idx=1, right_rotation_idx=4, target_rotation_radians=0.25,
            output_height=12, output_width=16, scale_x=1.5, scale_y=1.25,
            subset_idxs=[0, 1, 2, 3, 4, 5, 6])


def _l2tm_model(options, n):
    return op_model("CUSTOM", [In((1, n, 3))], [Out((1, 4, 4))],
                    custom_code="Landmarks2TransformMatrix",
                    custom_options=flexbuffers.Dumps(options))


def test_landmarks_2_transform_matrix():
    rng = np.random.default_rng(3)
    lm = (rng.random((1, 9, 3)) * 100).astype(np.float32)
    ours = run_edgelite(_l2tm_model(L2TM, 9), [lm])[0]
    assert ours.shape == (1, 4, 4)
    want = _l2tm_float64(L2TM, lm[0].astype(np.float64))
    np.testing.assert_allclose(ours[0], want, rtol=1e-5, atol=1e-4)
    # the output's corners land on the rotated, scaled bounding box of the subset
    corner = ours[0].astype(np.float64) @ [L2TM["output_width"], L2TM["output_height"], 0, 1]
    assert np.isfinite(corner).all()


def test_landmarks_2_transform_matrix_axis_aligned_square():
    """Landmarks on a level square: the matrix is a plain scale and shift (known by hand)."""
    lm = np.zeros((1, 4, 3), np.float32)
    lm[0, :, :2] = [[10, 20], [30, 20], [30, 40], [10, 40]]
    p = dict(left_rotation_idx=0, right_rotation_idx=1, target_rotation_radians=0.0,
             output_height=10, output_width=10, scale_x=1.0, scale_y=1.0,
             subset_idxs=[0, 1, 2, 3])
    m = run_edgelite(_l2tm_model(p, 4), [lm])[0][0]
    want = np.array([[2, 0, 0, 10], [0, 2, 0, 20], [0, 0, 1, 0], [0, 0, 0, 1]], np.float32)
    np.testing.assert_allclose(m, want, atol=1e-5)


def test_landmarks_2_transform_matrix_version_1_input():
    model = op_model("CUSTOM", [In((1, 1, 1, 12))], [Out((1, 4, 4))],
                     custom_code="Landmarks2TransformMatrix",
                     custom_options=flexbuffers.Dumps(L2TM))
    with pytest.raises(KernelError, match="version 1 of this op.*GPU"):
        run_edgelite(model, [np.zeros((1, 1, 1, 12), np.float32)])


def test_landmarks_2_transform_matrix_index_out_of_range():
    with pytest.raises(KernelError, match="landmark index 5 is outside the 5 landmarks"):
        run_edgelite(_l2tm_model(L2TM, 5), [np.zeros((1, 5, 3), np.float32)])


def _bilinear_loops(img, m, oh, ow):
    """TransformTensorBilinear v2 in float64 loops: pixel-centre correction, zero outside."""
    h, w, c = img.shape
    m = m.astype(np.float64)
    rx, ry = m[0].copy(), m[1].copy()
    rx[3] += rx[0] * 0.5 + rx[1] * 0.5 - 0.5
    ry[3] += ry[0] * 0.5 + ry[1] * 0.5 - 0.5
    out = np.zeros((oh, ow, c))
    for y in range(oh):
        for x in range(ow):
            tx, ty = rx[0] * x + rx[1] * y + rx[3], ry[0] * x + ry[1] * y + ry[3]
            if tx < 0 or ty < 0 or tx > w - 1 or ty > h - 1:
                continue
            x0, y0 = int(math.floor(tx)), int(math.floor(ty))
            ax, ay = tx - x0, ty - y0

            def at(yy, xx):
                return img[yy, xx].astype(np.float64) if yy < h and xx < w else 0.0
            upper = (1 - ax) * at(y0, x0) + ax * at(y0, x0 + 1)
            lower = (1 - ax) * at(y0 + 1, x0) + ax * at(y0 + 1, x0 + 1)
            out[y, x] = ay * lower + (1 - ay) * upper
    return out


def _ttb_model(shape, oh, ow):
    return op_model("CUSTOM", [In(shape), In((1, 4, 4))], [Out((1, oh, ow, shape[3]))],
                    custom_code="TransformTensorBilinear",
                    custom_options=flexbuffers.Dumps(dict(output_height=oh, output_width=ow)))


def test_transform_tensor_bilinear_rotated_crop():
    rng = np.random.default_rng(4)
    img = rng.standard_normal((1, 20, 24, 5)).astype(np.float32)
    a = 0.4
    m = np.array([[1.3 * math.cos(a), -1.1 * math.sin(a), 0, 6.2],
                  [1.3 * math.sin(a), 1.1 * math.cos(a), 0, 1.7],
                  [0, 0, 1, 0], [0, 0, 0, 1]], np.float32)[None]
    ours = run_edgelite(_ttb_model(img.shape, 16, 16), [img, m])[0]
    want = _bilinear_loops(img[0], m[0], 16, 16)
    assert (want == 0).any() and (want != 0).any()      # partly outside, partly inside
    np.testing.assert_allclose(ours[0], want, rtol=1e-5, atol=1e-5)


def test_transform_tensor_bilinear_integer_shift_is_a_crop():
    img = np.arange(1 * 10 * 12 * 2, dtype=np.float32).reshape(1, 10, 12, 2)
    m = np.eye(4, dtype=np.float32)[None].copy()
    m[0, 0, 3], m[0, 1, 3] = 3, 2
    ours = run_edgelite(_ttb_model(img.shape, 6, 7), [img, m])[0]
    np.testing.assert_array_equal(ours[0], img[0, 2:8, 3:10])


@pytest.mark.parametrize("dims", [2, 3])
def test_transform_landmarks(dims):
    rng = np.random.default_rng(dims)
    lm = rng.standard_normal((1, 11, dims)).astype(np.float32)
    m = rng.standard_normal((1, 4, 4)).astype(np.float32)
    model = op_model("CUSTOM", [In(lm.shape), In(m.shape)], [Out(lm.shape)],
                     custom_code="TransformLandmarks")
    ours = run_edgelite(model, [lm, m])[0]
    xy1 = np.concatenate([lm[0, :, :2], np.zeros((11, 1)), np.ones((11, 1))], 1)
    want = xy1.astype(np.float64) @ m[0, :2].astype(np.float64).T
    np.testing.assert_allclose(ours[0, :, :2], want, rtol=1e-5, atol=1e-5)
    if dims == 3:
        np.testing.assert_array_equal(ours[0, :, 2], lm[0, :, 2])


def test_transform_landmarks_four_coordinates():
    model = op_model("CUSTOM", [In((1, 5, 4)), In((1, 4, 4))], [Out((1, 5, 4))],
                     custom_code="TransformLandmarks")
    with pytest.raises(KernelError, match="4 coordinates; expected 2 or 3"):
        run_edgelite(model, [np.zeros((1, 5, 4), np.float32), np.zeros((1, 4, 4), np.float32)])


# -- Resampler ------------------------------------------------------------------------------------

def _resampler_loops(src, warp):
    n, h, w, c = src.shape
    out = np.zeros(src.shape)

    def at(b, yy, xx):
        return src[b, yy, xx].astype(np.float64) if 0 <= xx < w and 0 <= yy < h else 0.0
    for b, y, x in np.ndindex(n, h, w):
        px, py = float(warp[b, y, x, 0]), float(warp[b, y, x, 1])
        if not (-1 < px < w and -1 < py < h):
            continue
        fx, fy = math.floor(px), math.floor(py)
        dx, dy = fx + 1 - px, fy + 1 - py
        out[b, y, x] = (dx * dy * at(b, fy, fx) + (1 - dx) * (1 - dy) * at(b, fy + 1, fx + 1)
                        + dx * (1 - dy) * at(b, fy + 1, fx) + (1 - dx) * dy * at(b, fy, fx + 1))
    return out


def test_resampler():
    rng = np.random.default_rng(5)
    src = rng.standard_normal((2, 6, 7, 3)).astype(np.float32)
    warp = np.stack(np.meshgrid(np.arange(7), np.arange(6)), -1)[None].repeat(2, 0)
    model = op_model("CUSTOM", [In(src.shape), In(warp.shape)], [Out(src.shape)],
                     custom_code="Resampler")
    same = run_edgelite(model, [src, warp.astype(np.float32)])[0]
    np.testing.assert_array_equal(same, src)               # the identity warp copies
    moved = (warp + rng.uniform(-1.5, 1.5, warp.shape)).astype(np.float32)
    ours = run_edgelite(model, [src, moved])[0]
    np.testing.assert_allclose(ours, _resampler_loops(src, moved), rtol=1e-5, atol=1e-5)


# -- the Edge TPU ------------------------------------------------------------------------------

def test_edgetpu_custom_op_names_the_edge_tpu():
    model = op_model("CUSTOM", [In((1, 8), "uint8")], [Out((1, 4), "uint8")],
                     custom_code="edgetpu-custom-op", custom_options=b"\x00" * 16)
    with pytest.raises(UnsupportedOpsError, match="edgetpu-custom-op.*Coral Edge TPU"):
        run_edgelite(model, [np.zeros((1, 8), np.uint8)])
