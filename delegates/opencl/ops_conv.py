"""CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV, FULLY_CONNECTED, BATCH_MATMUL and the 2-D pools
on the OpenCL device: weights packed and uploaded once, tiled kernels of gemm.cl / depthwise.cl."""
from __future__ import annotations

import struct

import numpy as np

from edgelite.interpreter.kernels.common import conv_output
from edgelite.interpreter.kernels.geometry import transpose_padding

from .helpers import clamp, elements, float_io, nd, rank4

# -- convolutions and matrix products ----------------------------------------------------------

def _tiles(n: int, rows: int, cpu: bool) -> tuple:
    """(VW, NV, TM) of the gemm/conv_2d kernels for n output columns and `rows` rows (output
    pixels of a row for conv_2d). Measured on PoCL (AVX-512): two 16-wide vectors of columns
    beat one or three even where the second is partly padding (24, 28 channels); one for 9-16
    columns; TM rows as many as the registers hold, the count that wastes fewest rows."""
    if n > 16:
        vw, nv, tms = 16, 2, range(10, 5, -1) if cpu else (4,)
    else:
        vw, nv, tms = 16 if n > 8 else 8 if n > 4 else 4, 1, range(12, 7, -1) if cpu else (8,)
    tm = min(tms, key=lambda t: -(-rows // t) * t)
    return vw, nv, min(tm, max(rows, 1))


def _launch_gemm(g, args: list, defines: dict, m: int, panels: int) -> None:
    """The gemm kernel over m rows and `panels` weight panels. On a CPU a work-item takes `mt`
    row tiles, so that its fixed costs (ids, row pointers, the panel's first misses) are paid
    less often (at least 32 items remain); where the weights outweigh the input the items of
    one panel run back to back (`panel_major`), so each panel leaves memory once, not once per
    row tile. Both are arguments: a define would be one more program to compile."""
    cpu = g.dev.is_cpu
    tiles = -(-m // defines["TM"])
    mt = 1
    while cpu and mt < 16 and tiles // (mt * 2) >= 32:
        mt *= 2
    dims = (panels, -(-tiles // mt))
    panel_major = cpu and panels * defines["VW"] * defines["NV"] > m and panels > 1 \
        and dims[1] > 1
    if panel_major:
        dims = dims[::-1]
    gsize, lsize = nd(g, dims, (1, 1) if cpu else None)
    g.launch("gemm", "gemm", gsize, lsize, args + [np.int32(mt), np.int32(panel_major)],
             defines)


def _packed(g, w_kn: np.ndarray, bias, n: int, vw: int, nv: int, rq=None):
    """Weights [K, n] as panels of vw * nv columns, each [K, vw * nv] contiguous (zeros beyond
    n), divided by their columns' scales (helpers.half_scales; 1 unless weights are half), and
    per panel the float32 scales then biases ([panels, 2, vw * nv]; 1 and 0 beyond n), or for
    an integer node (`rq`, quant_int.Requant) its biases, multipliers and shifts
    ([panels, 3, vw * nv])."""
    step = vw * nv
    panels = -(-n // step)
    scale = g.weight_scales(w_kn)
    wp = np.zeros((w_kn.shape[0], panels * step), np.float32)
    wp[:, :n] = w_kn / scale
    wp = wp.reshape(w_kn.shape[0], panels, step).transpose(1, 0, 2)
    if rq is not None:
        sb = rq.rows(panels * step, step)
    else:
        sb = np.zeros((2, panels * step), np.float32)
        sb[0] = 1.0
        sb[0, :n] = scale
        if bias is not None:
            sb[1, :n] = np.asarray(bias, np.float32).reshape(-1)
    rows = sb.shape[0]
    return g.weights(wp), g.const(sb.reshape(rows, panels, step).transpose(1, 0, 2),
                                  np.float32)


def _epilogue(node, g, args: list):
    """The output tensor a conv writes; adds the residual operand of its launch (a fused
    residual ADD's tensor and its channels, or none: channels 0)."""
    fused = g.fusion.residual.get(node.index)
    if fused is not None:
        res, channels = fused
        args += [g.value(res), np.int32(channels)]
    else:
        args += [g.nothing(), np.int32(0)]
    return g.fusion.output.get(node.index, node.outputs[0])


def _input(node, g):
    """(tensor read, extra top padding, extra left padding): a fused zero PAD's input."""
    return g.fusion.input_pad.get(node.index, (node.inputs[0], 0, 0))


def support_conv_2d(node):
    if len(node.inputs) > 2 and node.inputs[2] is not None and node.inputs[2].data is None:
        return "the bias must be a constant"
    reason = float_io(node, const_inputs=(1,)) or rank4(node)
    if reason is None and node.inputs[1].shape[3] != node.inputs[0].shape[3]:
        return "grouped convolution"
    return reason


def build_conv_2d(node, g):
    dw_node = g.fusion.depthwise.get(node.index)
    ex_node = g.fusion.expand.get(node.index)
    if ex_node is not None:
        if _build_block(ex_node, dw_node, node, g):
            return
        build_conv_2d(ex_node, g)  # not fused after all: its launch goes here
    if dw_node is not None:
        if _build_depthwise_conv_2d_then_conv_2d(dw_node, node, g):
            return
        build_depthwise_conv_2d(dw_node, g)  # not fused after all: its launch goes here
    x, w = node.inputs[0], node.inputs[1]
    b = node.inputs[2] if len(node.inputs) > 2 else None
    o = node.options
    n, h, wd, c = x.shape
    co, kh, kw, _ = w.shape
    sh, sw = int(o.stride_h or 1), int(o.stride_w or 1)
    dh, dw = int(o.dilation_h_factor or 1), int(o.dilation_w_factor or 1)
    ho, pt = conv_output(int(o.padding or 0), h, kh, sh, dh)
    wo, pl = conv_output(int(o.padding or 0), wd, kw, sw, dw)
    src, top, left = _input(node, g)
    h, wd, pt, pl = src.shape[1], src.shape[2], pt + top, pl + left
    lo, hi = clamp(node, g)
    gemm = kh == kw == 1 and sh == sw == 1 and pt == pl == 0 and (h, wd) == (ho, wo)
    vw, nv, tm = _tiles(co, n * ho * wo if gemm else wo, g.dev.is_cpu)
    wbuf, bbuf = g.packed(node, "panels", (vw, nv), w.data, lambda: _packed(
        g, np.asarray(w.data, np.float32).transpose(1, 2, 3, 0).reshape(kh * kw * c, co),
        None if b is None else b.data, co, vw, nv, g.requant.get(node.index)))
    defines = {"VW": vw, "NV": nv, "TM": tm}
    i32, f32 = np.int32, np.float32
    panels = -(-co // (vw * nv))
    if gemm:
        m = n * ho * wo
        args = [g.value(src, True), wbuf, bbuf, None, i32(m), i32(c), i32(co), i32(c),
                f32(lo), f32(hi)]
        args[3] = g.tensor(_epilogue(node, g, args))
        _launch_gemm(g, args, defines, m, panels)
        return
    args = [g.value(src, True), wbuf, bbuf, None, i32(h), i32(wd), i32(c), i32(ho), i32(wo),
            i32(kh), i32(kw), i32(sh), i32(sw), i32(dh), i32(dw), i32(pt), i32(pl), i32(co),
            f32(lo), f32(hi)]
    args[3] = g.tensor(_epilogue(node, g, args))
    gsize, lsize = nd(g, (panels, -(-wo // tm), n * ho), (1, 1, 1) if g.dev.is_cpu else None)
    g.launch("gemm", "conv_2d", gsize, lsize, args, defines)


def support_fully_connected(node):
    if int(getattr(node.options, "weights_format", 0) or 0) != 0:
        return "only the DEFAULT weights format"
    if len(node.inputs) > 2 and node.inputs[2] is not None and node.inputs[2].data is None:
        return "the bias must be a constant"
    return float_io(node, const_inputs=(1,))


def build_fully_connected(node, g):
    x, w, out = node.inputs[0], node.inputs[1], node.outputs[0]
    b = node.inputs[2] if len(node.inputs) > 2 else None
    units, depth = w.shape
    rows = elements(x.shape) // depth
    lo, hi = clamp(node, g)
    vw, nv, tm = _tiles(units, rows, g.dev.is_cpu)
    wbuf, bbuf = g.packed(node, "panels", (vw, nv), w.data, lambda: _packed(
        g, np.asarray(w.data, np.float32).T, None if b is None else b.data, units, vw, nv,
        g.requant.get(node.index)))
    panels = -(-units // (vw * nv))
    i32, f32 = np.int32, np.float32
    _launch_gemm(g, [g.value(x, True), wbuf, bbuf, g.tensor(out), i32(rows), i32(depth),
                     i32(units), i32(depth), f32(lo), f32(hi), g.nothing(), i32(0)],
                 {"VW": vw, "NV": nv, "TM": tm}, rows, panels)


def support_depthwise_conv_2d(node):
    if len(node.inputs) > 2 and node.inputs[2] is not None and node.inputs[2].data is None:
        return "the bias must be a constant"
    return float_io(node, const_inputs=(1,)) or rank4(node)


def _channel_width(c: int) -> int:
    """Channels per work-item of the depthwise and pool kernels: 16 from 16 channels on (a
    partial last vector is cheaper than narrow ones), else the widest power of two <= c."""
    return 16 if c >= 16 else 8 if c >= 8 else 4 if c >= 4 else 2 if c >= 2 else 1


def _pad_to(a: np.ndarray, n: int) -> np.ndarray:
    """`a` with its last axis zero-padded to n."""
    out = np.zeros(a.shape[:-1] + (n,), np.float32)
    out[..., :a.shape[-1]] = a
    return out


class _DepthwiseConv2D:
    """A DEPTHWISE_CONV_2D's geometry (a fused zero PAD's input read in place), its packed
    weights and scales and biases ([KH * KW, CP] and [2, CP], CP = channels rounded up to
    `vw`) and its compile-time defines."""

    def __init__(self, node, g, vw: int):
        x, w = node.inputs[0], node.inputs[1]
        b = node.inputs[2] if len(node.inputs) > 2 else None
        o = node.options
        n, h, wd, self.cin = x.shape
        _, kh, kw, co = w.shape
        sh, sw = int(o.stride_h or 1), int(o.stride_w or 1)
        dh, dw = int(o.dilation_h_factor or 1), int(o.dilation_w_factor or 1)
        self.ho, pt = conv_output(int(o.padding or 0), h, kh, sh, dh)
        self.wo, pl = conv_output(int(o.padding or 0), wd, kw, sw, dw)
        self.src, top, left = _input(node, g)
        self.h, self.w, self.pt, self.pl = self.src.shape[1], self.src.shape[2], pt + top, \
            pl + left
        self.n, self.co, self.cp = n, co, -(-co // vw) * vw
        self.lo, self.hi = clamp(node, g)
        self.rq = g.requant.get(node.index)
        self.wbuf, self.bbuf = g.packed(node, "depthwise", (self.cp,), w.data,
                                        lambda: self._pack(g, w.data, b, kh * kw, co))
        self.defines = {"KH": kh, "KW": kw, "SH": sh, "SW": sw, "DH": dh, "DW": dw}

    def _pack(self, g, w, b, taps: int, co: int):
        """Weights [taps, CP] over their channels' scales, and [scales | biases] [2 * CP]
        (an integer node's: [biases | multipliers | shifts] [3 * CP], quant_int.py)."""
        w = np.asarray(w, np.float32).reshape(taps, co)
        if self.rq is not None:
            return g.weights(_pad_to(w, self.cp)), g.const(self.rq.rows(self.cp), np.float32)
        scale = g.weight_scales(w)
        sb = np.zeros((2, self.cp), np.float32)
        sb[0] = 1.0
        sb[0, :co] = scale
        if b is not None:
            sb[1, :co] = np.asarray(b.data, np.float32).reshape(-1)
        return g.weights(_pad_to(w / scale, self.cp)), g.const(sb, np.float32)


def build_depthwise_conv_2d(node, g):
    co, cin = node.inputs[1].shape[3], node.inputs[0].shape[3]
    dm = co // cin
    vw = _channel_width(co) if dm == 1 else 1
    d = _DepthwiseConv2D(node, g, vw)
    tw = 4
    i32, f32 = np.int32, np.float32
    gsize, lsize = nd(g, (d.cp // vw, -(-d.wo // tw), d.n * d.ho))
    g.launch("depthwise", "depthwise_conv_2d", gsize, lsize,
             [g.value(d.src), d.wbuf, d.bbuf, g.tensor(node.outputs[0]), i32(d.h), i32(d.w),
              i32(co), i32(cin), i32(d.ho), i32(d.wo), i32(d.pt), i32(d.pl), f32(d.lo),
              f32(d.hi)], {"VW": vw, "TW": tw, "DM": dm, **d.defines})


def _build_depthwise_conv_2d_then_conv_2d(dw_node, node, g) -> bool:
    """The depthwise node `dw_node` and the 1x1 conv `node` reading its output as one launch
    (fuse.py); False when its scratch would not fit the device's local memory."""
    w, b = node.inputs[1], node.inputs[2] if len(node.inputs) > 2 else None
    co, c = w.shape[0], w.shape[3]
    d = _DepthwiseConv2D(dw_node, g, 16)
    vw, nv, tm = _tiles(co, d.wo, True)
    scratch = tm * d.cp * 4
    if vw != 16 or scratch > g.dev.device.local_mem_size // 2:
        return False
    wbuf, bbuf = g.packed(node, "panels", (vw, nv), w.data, lambda: _packed(
        g, np.asarray(w.data, np.float32).reshape(co, c).T, None if b is None else b.data,
        co, vw, nv, g.requant.get(node.index)))
    lo, hi = clamp(node, g)
    defines = {"VW": vw, "NV": nv, "TM": tm, "KH": d.defines["KH"], "KW": d.defines["KW"]}
    i32, f32 = np.int32, np.float32
    strides = [i32(d.defines[k]) for k in ("SH", "SW", "DH", "DW")]
    args = [g.value(d.src), d.wbuf, d.bbuf, wbuf, bbuf, None, g.cl.LocalMemory(scratch),
            i32(d.h), i32(d.w), i32(c), i32(d.ho), i32(d.wo), *strides, i32(d.pt), i32(d.pl),
            f32(d.lo), f32(d.hi), i32(co), f32(lo), f32(hi)]
    args[5] = g.tensor(_epilogue(node, g, args))
    gsize, lsize = nd(g, (-(-d.wo // tm), d.n * d.ho), (1, 1))
    g.launch("gemm", "depthwise_conv_2d_then_conv_2d", gsize, lsize, args, defines)
    return True


def _build_block(ex_node, dw_node, node, g) -> bool:
    """The expanding 1x1 conv `ex_node`, the 3x3 depthwise `dw_node` reading it and the 1x1
    conv `node` reading that as one launch (fuse.py's `expand`); False when the scratch of a
    work-item would not fit the device's local memory. With half tensors the expanded values
    stay float (local memory), not rounded to half as the two launches store them."""
    stride = int(dw_node.options.stride_h or 1)
    tm = 8 if stride == 1 else 4  # measured: P pixels x NVE vectors of accumulators fit
    x, we = ex_node.inputs[0], ex_node.inputs[1]
    be = ex_node.inputs[2] if len(ex_node.inputs) > 2 else None
    e, c = we.shape[0], we.shape[3]
    nve = 2 if e > 16 else 1
    ep = -(-e // (16 * nve)) * 16 * nve
    d = _DepthwiseConv2D(dw_node, g, 16)
    p = (tm - 1) * stride + 3
    scratch = (3 * p * ep + tm * d.cp) * 4
    if scratch > g.dev.device.local_mem_size // 2:
        return False

    def pack_expand():
        w = np.zeros((c, ep), np.float32)
        w[:, :e] = np.asarray(we.data, np.float32).reshape(e, c).T
        scale = np.ones(ep, np.float32)
        scale[:e] = g.weight_scales(w[:, :e])
        sb = np.zeros((2, ep), np.float32)
        sb[0] = scale
        if be is not None:
            sb[1, :e] = np.asarray(be.data, np.float32).reshape(-1)
        return g.weights(w / scale), g.const(sb, np.float32)

    webuf, sbebuf = g.packed(ex_node, "expand", (ep,), we.data, pack_expand)
    w, b = node.inputs[1], node.inputs[2] if len(node.inputs) > 2 else None
    co = w.shape[0]
    vw, nv, _ = _tiles(co, d.wo, True)
    wbuf, bbuf = g.packed(node, "panels", (vw, nv), w.data, lambda: _packed(
        g, np.asarray(w.data, np.float32).reshape(co, e).T, None if b is None else b.data,
        co, vw, nv))
    elo, ehi = clamp(ex_node, g)
    lo, hi = clamp(node, g)
    i32, f32 = np.int32, np.float32
    args = [g.value(x), webuf, sbebuf, d.wbuf, d.bbuf, wbuf, bbuf, None,
            g.cl.LocalMemory(scratch), i32(d.h), i32(d.w), i32(c), i32(e), i32(ep), i32(d.cp),
            i32(d.ho), i32(d.wo), i32(d.pt), i32(d.pl), f32(elo), f32(ehi), f32(d.lo),
            f32(d.hi), i32(co), f32(lo), f32(hi)]
    args[7] = g.tensor(_epilogue(node, g, args))
    defines = {"VW": vw, "NV": nv, "TM": tm, "KH": 3, "KW": 3, "EXPAND": stride, "NVE": nve}
    gsize, lsize = nd(g, (-(-d.wo // tm), d.n), (1, 1))
    g.launch("gemm", "expand_depthwise_then_conv_2d", gsize, lsize, args, defines)
    return True


def support_pool(node):
    return float_io(node) or rank4(node)


def build_max_pool_2d(node, g):
    _pool_2d(node, g, "max_pool_2d", is_max=True)


def build_average_pool_2d(node, g):
    _pool_2d(node, g, "average_pool_2d", is_max=False)


def _pool_2d(node, g, kernel: str, is_max: bool) -> None:
    x, out = node.inputs[0], node.outputs[0]
    o = node.options
    n, h, wd, c = x.shape
    kh, kw = int(o.filter_height), int(o.filter_width)
    sh, sw = int(o.stride_h or 1), int(o.stride_w or 1)
    ho, pt = conv_output(int(o.padding or 0), h, kh, sh)
    wo, pl = conv_output(int(o.padding or 0), wd, kw, sw)
    vw, tw = _channel_width(c), 4
    lo, hi = clamp(node, g)
    i32, f32 = np.int32, np.float32
    gsize, lsize = nd(g, (-(-c // vw), -(-wo // tw), n * ho))
    g.launch("depthwise", kernel, gsize, lsize,
             [g.value(x), g.tensor(out), i32(h), i32(wd), i32(c), i32(ho), i32(wo), i32(pt),
              i32(pl), f32(lo), f32(hi)],
             {"VW": vw, "TW": tw, "IS_MAX": int(is_max), "KH": kh, "KW": kw, "SH": sh,
              "SW": sw})


def support_transpose_conv(node):
    if node.inputs[1].data is None:
        return "the filter must be a constant"
    if len(node.inputs) > 3 and node.inputs[3] is not None and node.inputs[3].data is None:
        return "the bias must be a constant"
    return float_io(node, data_inputs=(1, 2, 3))


def build_transpose_conv(node, g):
    w, x, out = node.inputs[1], node.inputs[2], node.outputs[0]
    b = node.inputs[3] if len(node.inputs) > 3 else None
    o = node.options
    n, h, wd, c = x.shape
    co, kh, kw, _ = w.shape
    _, ho, wo, _ = out.shape
    sh, sw, padding = int(o.stride_h or 1), int(o.stride_w or 1), int(o.padding or 0)
    pt, pl = transpose_padding(padding, ho, kh, sh), transpose_padding(padding, wo, kw, sw)
    bias = np.zeros(co, np.float32) if b is None else np.asarray(b.data, np.float32)
    lo, hi = clamp(node, g)
    i32, f32 = np.int32, np.float32
    gsize, lsize = nd(g, (co, wo, n * ho))
    g.launch("data", "transpose_conv", gsize, lsize,
             [g.value(x), g.weights(w.data), g.const(bias, np.float32), g.tensor(out), i32(h),
              i32(wd), i32(c), i32(ho), i32(wo), i32(co), i32(kh), i32(kw), i32(sh), i32(sw),
              i32(pt), i32(pl), f32(lo), f32(hi)])


def support_convolution_2d_transpose_bias(node):
    """MediaPipe's Convolution2DTransposeBias (a custom op): TRANSPOSE_CONV's kernel, with the
    op's own inputs (input, filter, bias), options (the C struct TfLiteTransposeConvParams) and
    padding (MediaPipe's: interpreter/kernels/mediapipe_ops.py)."""
    if len(node.inputs) != 3 or any(t is None for t in node.inputs):
        return "expected 3 inputs (input, filter, bias)"
    if node.inputs[1].data is None or node.inputs[2].data is None:
        return "the filter and the bias must be constants"
    if len(bytes(node.custom_options or b"")) < 12:
        return "custom options shorter than TfLiteTransposeConvParams"
    return float_io(node)


def build_convolution_2d_transpose_bias(node, g):
    x, w, b, out = node.inputs[0], node.inputs[1], node.inputs[2], node.outputs[0]
    padding, sw, sh = struct.unpack_from("<3i", bytes(node.custom_options))
    n, h, wd, c = x.shape
    co, kh, kw, _ = w.shape
    _, ho, wo, _ = out.shape
    pt = pl = 0
    if padding == 1:    # TfLitePadding SAME
        pt = max(0, kh - (h - 1) % sh - 1) // 2
        pl = max(0, kw - (wd - 1) % sw - 1) // 2
    lo, hi = clamp(node, g)
    i32, f32 = np.int32, np.float32
    gsize, lsize = nd(g, (co, wo, n * ho))
    g.launch("data", "transpose_conv", gsize, lsize,
             [g.value(x), g.weights(w.data), g.const(np.asarray(b.data, np.float32), np.float32),
              g.tensor(out), i32(h), i32(wd), i32(c), i32(ho), i32(wo), i32(co), i32(kh),
              i32(kw), i32(sh), i32(sw), i32(pt), i32(pl), f32(lo), f32(hi)])


def _batch_stride(shape, batch):
    """The stride between batches of an operand whose batch dims broadcast to `batch`: one
    matrix per batch, or one shared by all; None for a partial broadcast."""
    own = tuple(shape[:-2])
    if elements(own) == 1:
        return 0
    if (1,) * (len(batch) - len(own)) + own == tuple(batch):
        return shape[-2] * shape[-1]
    return None


def support_batch_matmul(node):
    reason = float_io(node)
    if reason:
        return reason
    x, y, out = node.inputs[0], node.inputs[1], node.outputs[0]
    batch = out.shape[:-2]
    if _batch_stride(x.shape, batch) is None or _batch_stride(y.shape, batch) is None:
        return "batch dimensions must match or be all 1 (no partial broadcast)"
    return None


def build_batch_matmul(node, g):
    x, y, out = node.inputs[0], node.inputs[1], node.outputs[0]
    adj_x = bool(getattr(node.options, "adj_x", False))
    adj_y = bool(getattr(node.options, "adj_y", False))
    m, n = out.shape[-2], out.shape[-1]
    k = x.shape[-2] if adj_x else x.shape[-1]
    batch = out.shape[:-2]
    batches = elements(batch)
    xsm, xsk = (1, m) if adj_x else (k, 1)
    ysk, ysn = (1, k) if adj_y else (n, 1)
    i32 = np.int32
    gsize, lsize = nd(g, (n, m, batches))
    g.launch("data", "batch_matmul", gsize, lsize,
             [g.value(x), g.value(y), g.tensor(out), i32(m), i32(n), i32(k), i32(batches),
              i32(_batch_stride(x.shape, batch)), i32(xsm), i32(xsk),
              i32(_batch_stride(y.shape, batch)), i32(ysk), i32(ysn), i32(max(batches, 1)),
              i32(0), i32(0)])


