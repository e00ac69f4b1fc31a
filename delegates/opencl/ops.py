"""What the OpenCL delegate runs: per op, `support(node) -> reason | None` and `build(node, g)`.

`build` turns one prepared node (shapes, options and constants known) into kernel launches on
the Builder `g` (see graph.py). Weights are packed and uploaded here, once. Each op's name is
the builtin's, lower-case, as everywhere in edgelite.
"""
from __future__ import annotations

import numpy as np

from edgelite.interpreter.kernels.common import RELU, RELU6, RELU_N1_TO_1, conv_output

INF = float("inf")
_CLAMPS = {RELU: (0.0, INF), RELU6: (0.0, 6.0), RELU_N1_TO_1: (-1.0, 1.0)}
MAX_INDEX = 1 << 24  # gather tables are computed in float32: positions must be exact


def clamp(node, g=None) -> tuple:
    """(lo, hi) of the node's fused activation (TFLite's float kernels only clamp), narrowed
    by a RELU-family node the delegate fused into it."""
    code = int(getattr(node.options, "fused_activation_function", 0) or 0) \
        if node.options is not None else 0
    lo, hi = _CLAMPS.get(code, (-INF, INF))
    if g is not None and node.index in g.fused:
        flo, fhi = g.fused[node.index]
        lo, hi = max(lo, flo), min(hi, fhi)
    return lo, hi


# Ops whose kernels end in a clamp, and the RELU family a following node can fold into it.
CLAMPING = {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV", "MAX_POOL_2D",
            "AVERAGE_POOL_2D", "CONCATENATION", "ADD", "SUB", "MUL", "DIV", "MAXIMUM",
            "MINIMUM", "PRELU", "SQUARED_DIFFERENCE", "POW"}
RELUS = {"RELU": (0.0, INF), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0),
         "RELU_0_TO_1": (0.0, 1.0)}


def fuse_activations(nodes: list, outputs: list) -> tuple:
    """({producer node index: (lo, hi)}, {relu node index}) for each RELU-family node whose
    input only it reads, written by a clamping node of the same partition (and not needed
    outside it): the producer clamps, the RELU becomes an alias of its output."""
    producer = {t.index: n for n in nodes for t in n.outputs}
    readers: dict = {}
    for n in nodes:
        for t in n.inputs:
            if t is not None:
                readers[t.index] = readers.get(t.index, 0) + 1
    needed = {t.index for t in outputs}
    fused, aliased = {}, set()
    for n in nodes:
        if n.op not in RELUS or n.inputs[0] is None:
            continue
        t = n.inputs[0].index
        p = producer.get(t)
        if p is None or p.op not in CLAMPING or readers.get(t) != 1 or t in needed \
                or p.index in fused or len(p.outputs) != 1:
            continue
        fused[p.index] = RELUS[n.op]
        aliased.add(n.index)
    return fused, aliased


def _size(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


def _width(n: int, widest: int = 16) -> int:
    """The widest vector width <= `widest` dividing n."""
    w = widest
    while w > 1 and n % w:
        w //= 2
    return w


def nd(g, dims, local=None):
    """(global, local) sizes. The default local size divides every dimension (powers of two up
    to a budget), so the global size is exact; a given `local` rounds the global size up (the
    kernel must then ignore items past the end)."""
    dims = [max(int(d), 1) for d in dims]
    if local is None:
        local, budget = [1] * len(dims), 64 if not g.dev.is_cpu else 16
        for k in range(len(dims)):
            while dims[k] % (local[k] * 2) == 0 and int(np.prod(local)) * 2 <= budget:
                local[k] *= 2
    local = [min(max(int(v), 1), d) for v, d in zip(local, dims)]
    return tuple(-(-d // v) * v for d, v in zip(dims, local)), tuple(local)


# -- support checks ----------------------------------------------------------------------------

def _float_io(node, const_inputs=(), data_inputs=None) -> str | None:
    """Inputs and outputs float32; inputs in `const_inputs` must be constants."""
    for k, t in enumerate(node.inputs):
        if t is None:
            continue
        if k in const_inputs and t.data is None:
            return f"input {k} ({t.name!r}) must be a constant"
        if data_inputs is not None and k not in data_inputs:
            continue
        if t.type_name != "float32":
            return f"input {k} ({t.name!r}) is {t.type_name}; the delegate computes float32"
    for t in node.outputs:
        if t.type_name != "float32":
            return f"output {t.name!r} is {t.type_name}; the delegate computes float32"
    return None


def _rank4(node) -> str | None:
    for t in list(node.inputs[:1]) + node.outputs:
        if t is not None and len(t.shape) != 4:
            return f"{t.name!r} is {list(t.shape)}; 4-D NHWC expected"
    return None


# -- convolutions and matrix products ----------------------------------------------------------

def _tiles(n: int, rows: int, cpu: bool) -> tuple:
    """(VW, NV, TM) of the gemm/conv2d kernels for n output columns."""
    if n >= 32:
        return 16, 2, 6 if cpu else 4
    if n >= 16:
        return 16, 1, 8
    if n >= 8:
        return 8, 1, 8
    return 4, 1, 8


def _packed(g, w_kn: np.ndarray, bias, n: int, vw: int, nv: int):
    step = vw * nv
    np_ = -(-n // step) * step
    wp = np.zeros((w_kn.shape[0], np_), np.float32)
    wp[:, :n] = w_kn
    bp = np.zeros(np_, np.float32)
    if bias is not None:
        bp[:n] = np.asarray(bias, np.float32).reshape(-1)
    return g.weights(wp), g.weights(bp), np_


def support_conv_2d(node):
    if len(node.inputs) > 2 and node.inputs[2] is not None and node.inputs[2].data is None:
        return "the bias must be a constant"
    reason = _float_io(node, const_inputs=(1,)) or _rank4(node)
    if reason is None and node.inputs[1].shape[3] != node.inputs[0].shape[3]:
        return "grouped convolution"
    return reason


def build_conv_2d(node, g):
    x, w, out = node.inputs[0], node.inputs[1], node.outputs[0]
    b = node.inputs[2] if len(node.inputs) > 2 else None
    o = node.options
    n, h, wd, c = x.shape
    co, kh, kw, _ = w.shape
    sh, sw = int(o.stride_h or 1), int(o.stride_w or 1)
    dh, dw = int(o.dilation_h_factor or 1), int(o.dilation_w_factor or 1)
    ho, pt = conv_output(int(o.padding or 0), h, kh, sh, dh)
    wo, pl = conv_output(int(o.padding or 0), wd, kw, sw, dw)
    lo, hi = clamp(node, g)
    m = n * ho * wo
    vw, nv, tm = _tiles(co, m, g.dev.is_cpu)
    w_kn = np.asarray(w.data, np.float32).transpose(1, 2, 3, 0).reshape(kh * kw * c, co)
    wbuf, bbuf, np_ = _packed(g, w_kn, None if b is None else b.data, co, vw, nv)
    defines = {"VW": vw, "NV": nv, "TM": tm}
    gsize, lsize = nd(g, (np_ // (vw * nv), -(-m // tm)), (1, 1) if g.dev.is_cpu else None)
    i32, f32 = np.int32, np.float32
    if kh == kw == 1 and sh == sw == 1 and pt == pl == 0:
        g.launch("gemm", "gemm", gsize, lsize,
                 [g.value(x), wbuf, bbuf, g.tensor(out), i32(m), i32(c), i32(co), i32(np_),
                  i32(c), f32(lo), f32(hi)], defines)
    else:
        g.launch("gemm", "conv2d", gsize, lsize,
                 [g.value(x), wbuf, bbuf, g.tensor(out), i32(h), i32(wd), i32(c), i32(ho),
                  i32(wo), i32(kh), i32(kw), i32(sh), i32(sw), i32(dh), i32(dw), i32(pt),
                  i32(pl), i32(m), i32(co), i32(np_), f32(lo), f32(hi)], defines)


def support_fully_connected(node):
    if int(getattr(node.options, "weights_format", 0) or 0) != 0:
        return "only the DEFAULT weights format"
    if len(node.inputs) > 2 and node.inputs[2] is not None and node.inputs[2].data is None:
        return "the bias must be a constant"
    return _float_io(node, const_inputs=(1,))


def build_fully_connected(node, g):
    x, w, out = node.inputs[0], node.inputs[1], node.outputs[0]
    b = node.inputs[2] if len(node.inputs) > 2 else None
    units, depth = w.shape
    rows = _size(x.shape) // depth
    lo, hi = clamp(node, g)
    vw, nv, tm = _tiles(units, rows, g.dev.is_cpu)
    if rows < tm:
        tm = max(rows, 1)
    wbuf, bbuf, np_ = _packed(g, np.asarray(w.data, np.float32).T, None if b is None else b.data,
                              units, vw, nv)
    gsize, lsize = nd(g, (np_ // (vw * nv), -(-rows // tm)), (1, 1) if g.dev.is_cpu else None)
    i32, f32 = np.int32, np.float32
    g.launch("gemm", "gemm", gsize, lsize,
             [g.value(x), wbuf, bbuf, g.tensor(out), i32(rows), i32(depth), i32(units),
              i32(np_), i32(depth), f32(lo), f32(hi)], {"VW": vw, "NV": nv, "TM": tm})


def support_depthwise_conv_2d(node):
    if len(node.inputs) > 2 and node.inputs[2] is not None and node.inputs[2].data is None:
        return "the bias must be a constant"
    return _float_io(node, const_inputs=(1,)) or _rank4(node)


def build_depthwise_conv_2d(node, g):
    x, w, out = node.inputs[0], node.inputs[1], node.outputs[0]
    b = node.inputs[2] if len(node.inputs) > 2 else None
    o = node.options
    n, h, wd, cin = x.shape
    _, kh, kw, co = w.shape
    sh, sw = int(o.stride_h or 1), int(o.stride_w or 1)
    dh, dw = int(o.dilation_h_factor or 1), int(o.dilation_w_factor or 1)
    ho, pt = conv_output(int(o.padding or 0), h, kh, sh, dh)
    wo, pl = conv_output(int(o.padding or 0), wd, kw, sw, dw)
    dm = co // cin
    vw = _width(co) if dm == 1 else 1
    tw = 4
    lo, hi = clamp(node, g)
    bias = np.zeros(co, np.float32) if b is None else np.asarray(b.data, np.float32)
    i32, f32 = np.int32, np.float32
    gsize, lsize = nd(g, (co // vw, -(-wo // tw), n * ho))
    g.launch("depthwise", "depthwise", gsize, lsize,
             [g.value(x), g.weights(np.asarray(w.data, np.float32).reshape(kh * kw, co)),
              g.weights(bias), g.tensor(out), i32(h), i32(wd), i32(co), i32(cin), i32(ho),
              i32(wo), i32(kh), i32(kw), i32(sh), i32(sw), i32(dh), i32(dw), i32(pt), i32(pl),
              f32(lo), f32(hi)], {"VW": vw, "TW": tw, "DM": dm})


def support_pool(node):
    return _float_io(node) or _rank4(node)


def _build_pool(is_max):
    def build(node, g):
        x, out = node.inputs[0], node.outputs[0]
        o = node.options
        n, h, wd, c = x.shape
        kh, kw = int(o.filter_height), int(o.filter_width)
        sh, sw = int(o.stride_h or 1), int(o.stride_w or 1)
        ho, pt = conv_output(int(o.padding or 0), h, kh, sh)
        wo, pl = conv_output(int(o.padding or 0), wd, kw, sw)
        vw, tw = _width(c), 4
        lo, hi = clamp(node, g)
        i32, f32 = np.int32, np.float32
        gsize, lsize = nd(g, (c // vw, -(-wo // tw), n * ho))
        g.launch("depthwise", "pool", gsize, lsize,
                 [g.value(x), g.tensor(out), i32(h), i32(wd), i32(c), i32(ho), i32(wo), i32(kh),
                  i32(kw), i32(sh), i32(sw), i32(pt), i32(pl), f32(lo), f32(hi)],
                 {"VW": vw, "TW": tw, "IS_MAX": int(is_max)})
    return build


def support_transpose_conv(node):
    if node.inputs[1].data is None:
        return "the filter must be a constant"
    if len(node.inputs) > 3 and node.inputs[3] is not None and node.inputs[3].data is None:
        return "the bias must be a constant"
    return _float_io(node, data_inputs=(1, 2, 3))


def build_transpose_conv(node, g):
    from edgelite.interpreter.kernels.conv import _transpose_padding
    w, x, out = node.inputs[1], node.inputs[2], node.outputs[0]
    b = node.inputs[3] if len(node.inputs) > 3 else None
    o = node.options
    n, h, wd, c = x.shape
    co, kh, kw, _ = w.shape
    _, ho, wo, _ = out.shape
    sh, sw, padding = int(o.stride_h or 1), int(o.stride_w or 1), int(o.padding or 0)
    pt, pl = _transpose_padding(padding, ho, kh, sh), _transpose_padding(padding, wo, kw, sw)
    bias = np.zeros(co, np.float32) if b is None else np.asarray(b.data, np.float32)
    lo, hi = clamp(node, g)
    i32, f32 = np.int32, np.float32
    gsize, lsize = nd(g, (co, wo, n * ho))
    g.launch("data", "transpose_conv", gsize, lsize,
             [g.value(x), g.weights(w.data), g.weights(bias), g.tensor(out), i32(h), i32(wd), i32(c),
              i32(ho), i32(wo), i32(co), i32(kh), i32(kw), i32(sh), i32(sw), i32(pt), i32(pl),
              f32(lo), f32(hi)])


def _batch_stride(shape, batch):
    """The stride between batches of an operand whose batch dims broadcast to `batch`: one
    matrix per batch, or one shared by all; None for a partial broadcast."""
    own = tuple(shape[:-2])
    if _size(own) == 1:
        return 0
    if (1,) * (len(batch) - len(own)) + own == tuple(batch):
        return shape[-2] * shape[-1]
    return None


def support_batch_matmul(node):
    reason = _float_io(node)
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
    batches = _size(batch)
    xsm, xsk = (1, m) if adj_x else (k, 1)
    ysk, ysn = (1, k) if adj_y else (n, 1)
    i32 = np.int32
    gsize, lsize = nd(g, (n, m, batches))
    g.launch("data", "batch_matmul", gsize, lsize,
             [g.value(x), g.value(y), g.tensor(out), i32(m), i32(n), i32(k), i32(batches),
              i32(_batch_stride(x.shape, batch)), i32(xsm), i32(xsk),
              i32(_batch_stride(y.shape, batch)), i32(ysk), i32(ysn), i32(max(batches, 1)),
              i32(0), i32(0)])


# -- elementwise -------------------------------------------------------------------------------

BINARY = {"ADD": 0, "SUB": 1, "MUL": 2, "DIV": 3, "MAXIMUM": 4, "MINIMUM": 5, "PRELU": 6,
          "SQUARED_DIFFERENCE": 7, "POW": 8}
COMMUTATIVE = {"ADD", "MUL", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE"}


def support_binary(node):
    reason = _float_io(node)
    if reason:
        return reason
    if len(node.outputs[0].shape) > 4:
        return f"rank {len(node.outputs[0].shape)} > 4"
    return None


def _strip(shape) -> tuple:
    shape = tuple(shape)
    while shape and shape[0] == 1:
        shape = shape[1:]
    return shape


def build_binary(node, g):
    a, b, out = node.inputs[0], node.inputs[1], node.outputs[0]
    op = node.op
    shape = tuple(out.shape)
    if tuple(b.shape) == shape and tuple(a.shape) != shape and op in COMMUTATIVE:
        a, b = b, a
    lo, hi = clamp(node, g)
    i32, f32 = np.int32, np.float32
    total = _size(shape)
    bs = _strip(b.shape)
    if tuple(a.shape) == shape and (tuple(b.shape) == shape or _size(b.shape) == 1
                                    or (len(bs) == 1 and shape and bs[0] == shape[-1])):
        bsize = _size(b.shape)
        vw = _width(total) if bsize == 1 else _width(np.gcd(total, bsize))
        if bsize == 1:
            vw = 1 if g.dev.is_cpu else vw  # a broadcast scalar: PoCL vectorizes across items
        gsize, lsize = nd(g, (total // vw,))
        g.launch("elementwise", "binary_flat", gsize, lsize,
                 [g.value(a), g.value(b), g.tensor(out), i32(total), i32(bsize),
                  i32(BINARY[op]), f32(lo), f32(hi)], {"VW": vw})
        return
    d = (1,) * (4 - len(shape)) + shape

    def strides(s):
        s = (1,) * (4 - len(s)) + tuple(s)
        full = np.cumprod((1,) + s[::-1])[:4][::-1]
        return np.array([0 if s[k] == 1 and d[k] != 1 else full[k] for k in range(4)], np.int32)
    gsize, lsize = nd(g, (d[3], d[2], d[0] * d[1]))
    g.launch("elementwise", "binary_4d", gsize, lsize,
             [g.value(a), g.value(b), g.tensor(out), np.array(d, np.int32), strides(a.shape),
              strides(b.shape), i32(BINARY[op]), f32(lo), f32(hi)])


UNARY = {"RELU": 0, "RELU6": 1, "RELU_N1_TO_1": 2, "LEAKY_RELU": 3, "LOGISTIC": 4, "TANH": 5,
         "HARD_SWISH": 6, "GELU": 7, "ELU": 9, "ABS": 10, "NEG": 11, "EXP": 12, "SQRT": 13,
         "RSQRT": 14, "SQUARE": 15, "LOG": 16, "RELU_0_TO_1": 17}


def support_unary(node):
    return _float_io(node)


def build_unary(node, g):
    x, out = node.inputs[0], node.outputs[0]
    code = UNARY[node.op]
    if node.op == "GELU" and getattr(node.options, "approximate", False):
        code = 8
    alpha = float(getattr(node.options, "alpha", 0.0) or 0.0) if node.op == "LEAKY_RELU" else 0.0
    total = _size(out.shape)
    vw = _width(total)
    gsize, lsize = nd(g, (total // vw,))
    g.launch("elementwise", "unary", gsize, lsize,
             [g.value(x), g.tensor(out), np.int32(total), np.int32(code), np.float32(alpha)],
             {"VW": vw})


# -- reductions, softmax -----------------------------------------------------------------------

def _reduce_axes(node):
    from edgelite.interpreter.kernels.reduce import _axes
    return sorted(_axes(node, len(node.inputs[0].shape)))


def support_reduce(node):
    if node.inputs[1].data is None:
        return "the axes must be a constant"
    reason = _float_io(node, data_inputs=(0,))
    if reason:
        return reason
    axes = _reduce_axes(node)
    if axes and axes != list(range(axes[0], axes[-1] + 1)):
        return f"axes {axes} are not contiguous"
    return None


def build_reduce(node, g):
    x, out = node.inputs[0], node.outputs[0]
    axes = _reduce_axes(node)
    shape = x.shape
    if not axes:
        g.alias(out, x)
        return
    outer = _size(shape[:axes[0]])
    r = _size(shape[axes[0]:axes[-1] + 1])
    inner = _size(shape[axes[-1] + 1:])
    scale = 1.0 / max(r, 1) if node.op == "MEAN" else 1.0
    vw = _width(inner)
    gsize, lsize = nd(g, (inner // vw, outer))
    g.launch("data", "reduce_mid", gsize, lsize,
             [g.value(x), g.tensor(out), np.int32(outer), np.int32(r), np.int32(inner),
              np.float32(scale)], {"VW": vw})


def build_softmax(node, g):
    x, out = node.inputs[0], node.outputs[0]
    length = x.shape[-1] if x.shape else 1
    rows = _size(x.shape) // max(length, 1)
    gsize, lsize = nd(g, (rows,))
    g.launch("data", "softmax", gsize, lsize,
             [g.value(x), g.tensor(out), np.int32(rows), np.int32(length),
              np.float32(float(node.options.beta))])


# -- data movement -----------------------------------------------------------------------------

def support_alias(node):
    if node.inputs[0].data is not None:
        return "a constant input (folded on the CPU)"
    return _float_io(node, data_inputs=(0,))


def build_alias(node, g):
    g.alias(node.outputs[0], node.inputs[0])


def support_concatenation(node):
    reason = _float_io(node)
    if reason:
        return reason
    return None


def build_concatenation(node, g):
    out = node.outputs[0]
    rank = len(out.shape)
    axis = int(node.options.axis)
    axis = axis + rank if axis < 0 else axis
    lo, hi = clamp(node, g)
    outer = _size(out.shape[:axis])
    total = _size(out.shape[axis:])
    offset = 0
    ref = g.tensor(out)
    for t in node.inputs:
        inner = _size(t.shape[axis:])
        if inner * outer:
            gsize, lsize = nd(g, (inner, outer))
            g.launch("data", "concat_part", gsize, lsize,
                     [g.value(t), ref, np.int32(outer), np.int32(inner), np.int32(total),
                      np.int32(offset), np.float32(lo), np.float32(hi)])
        offset += inner


GATHERED = ("PAD", "PADV2", "MIRROR_PAD", "TRANSPOSE", "SLICE", "STRIDED_SLICE",
            "RESIZE_NEAREST_NEIGHBOR", "DEPTH_TO_SPACE", "SPACE_TO_DEPTH", "TILE", "BROADCAST_TO",
            "REVERSE_V2", "GATHER")


def support_gathered(node):
    if node.inputs[0].data is not None:
        return "a constant input (folded on the CPU)"
    for k, t in enumerate(node.inputs[1:], 1):
        if t is not None and t.data is None:
            return f"input {k} ({t.name!r}) must be a constant"
    if _size(node.inputs[0].shape) >= MAX_INDEX:
        return f"more than {MAX_INDEX} input values"
    return _float_io(node, data_inputs=(0,))


def gather_table(node, run) -> tuple:
    """(index per output value into the flat input or -1, fill value): the op's CPU kernel run
    once on the input's positions +1 and once on their negatives; where both agree it wrote
    the fill value, elsewhere the position."""
    x, out = node.inputs[0], node.outputs[0]
    pos = np.arange(1, _size(x.shape) + 1, dtype=np.float32).reshape(x.shape)
    outs = []
    for sign in (1.0, -1.0):
        args = [sign * pos] + [None if t is None else t.data for t in node.inputs[1:]]
        o = np.zeros(out.shape, np.float32)
        run(*args, o)
        outs.append(o)
    moved = outs[0] != outs[1]
    index = np.where(moved, outs[0] - 1, -1).astype(np.int32).reshape(-1)
    fill = float(outs[0][~moved].reshape(-1)[0]) if (~moved).any() else 0.0
    return index, fill


def build_gathered(node, g, run):
    index, fill = gather_table(node, run)
    total = index.size
    gsize, lsize = nd(g, (total,))
    g.launch("data", "gather", gsize, lsize,
             [g.value(node.inputs[0]), g.const(index, np.int32), g.tensor(node.outputs[0]),
              np.int32(total), np.float32(fill)])


def support_resize_bilinear(node):
    if node.inputs[1].data is None:
        return "the size must be a constant"
    return _float_io(node, data_inputs=(0,)) or _rank4(node)


def build_resize_bilinear(node, g):
    from edgelite.interpreter.kernels.resize import _bilinear_axis
    x, out = node.inputs[0], node.outputs[0]
    n, h, w, c = x.shape
    _, ho, wo, _ = out.shape
    align = bool(node.options.align_corners)
    half = bool(node.options.half_pixel_centers)
    y0, y1, fy = _bilinear_axis(h, ho, align, half)
    x0, x1, fx = _bilinear_axis(w, wo, align, half)
    i32 = np.int32
    gsize, lsize = nd(g, (c, wo, n * ho))
    g.launch("data", "resize_bilinear", gsize, lsize,
             [g.value(x), g.tensor(out), g.const(np.stack([y0, y1], 1), np.int32),
              g.const(fy, np.float32), g.const(np.stack([x0, x1], 1), np.int32),
              g.const(fx, np.float32), i32(h), i32(w), i32(c), i32(ho), i32(wo)])


def support_dequantize(node):
    x = node.inputs[0]
    if x.data is not None:
        return "a constant input (folded on the CPU)"
    if node.outputs[0].type_name != "float32":
        return f"output is {node.outputs[0].type_name}"
    if x.type_name == "float16":
        return None
    if x.type_name in ("int8", "uint8"):
        q = x.quantization
        if q is None or np.size(q.scale) != 1:
            return "per-channel quantized input"
        return None
    return f"input is {x.type_name}"


def build_dequantize(node, g):
    x, out = node.inputs[0], node.outputs[0]
    total = _size(x.shape)
    gsize, lsize = nd(g, (total,))
    args = [g.value(x), g.tensor(out), np.int32(total)]
    if x.type_name == "float16":
        g.launch("data", "dequantize_f16", gsize, lsize, args)
        return
    kernel = "dequantize_i8" if x.type_name == "int8" else "dequantize_u8"
    g.launch("data", kernel, gsize, lsize, args + [np.float32(x.scale), np.int32(x.zero_point)])


# -- the table ---------------------------------------------------------------------------------

OPS = {
    "CONV_2D": (support_conv_2d, build_conv_2d),
    "DEPTHWISE_CONV_2D": (support_depthwise_conv_2d, build_depthwise_conv_2d),
    "TRANSPOSE_CONV": (support_transpose_conv, build_transpose_conv),
    "FULLY_CONNECTED": (support_fully_connected, build_fully_connected),
    "BATCH_MATMUL": (support_batch_matmul, build_batch_matmul),
    "MAX_POOL_2D": (support_pool, _build_pool(True)),
    "AVERAGE_POOL_2D": (support_pool, _build_pool(False)),
    "MEAN": (support_reduce, build_reduce),
    "SUM": (support_reduce, build_reduce),
    "SOFTMAX": (support_unary, build_softmax),
    "CONCATENATION": (support_concatenation, build_concatenation),
    "RESHAPE": (support_alias, build_alias),
    "SQUEEZE": (support_alias, build_alias),
    "EXPAND_DIMS": (support_alias, build_alias),
    "RESIZE_BILINEAR": (support_resize_bilinear, build_resize_bilinear),
    "DEQUANTIZE": (support_dequantize, build_dequantize),
}
OPS.update({op: (support_binary, build_binary) for op in BINARY})
OPS.update({op: (support_unary, build_unary) for op in UNARY})
OPS.update({op: (support_gathered, build_gathered) for op in GATHERED})
