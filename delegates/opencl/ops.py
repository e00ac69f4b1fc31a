"""What the OpenCL delegate runs: per op, `support(node) -> reason | None` and `build(node, g)`.

`build` turns one prepared node (shapes, options and constants known) into kernel launches on
the Builder `g` (see graph.py; `g.cpu_run` is the node's CPU kernel, which gather tables are
derived from). Weights are packed and uploaded here, once. Each op's name is the builtin's,
lower-case, as everywhere in edgelite, and so is the .cl kernel of an op that has its own
(`depthwise_conv_2d`, `conv_2d`, ...); ops that share a kernel select theirs by an op code,
generated into the .cl source from the tables here (device.define_codes). Convolutions, matrix
products and pools are in ops_conv.py; the rest here, and the table of all of them at the end.
"""
from __future__ import annotations

import numpy as np

from edgelite.interpreter.kernels.reduce import constant_axes
from edgelite.interpreter.kernels.resize import bilinear_axis

from .device import define_codes
from .helpers import MAX_INDEX, clamp, elements, float_io, nd, rank4, vector_width
from .ops_conv import (build_convolution_2d_transpose_bias,
                       support_convolution_2d_transpose_bias)
from .ops_conv import (build_average_pool_2d, build_batch_matmul, build_conv_2d,
                       build_depthwise_conv_2d, build_fully_connected, build_max_pool_2d,
                       build_transpose_conv, support_batch_matmul, support_conv_2d,
                       support_depthwise_conv_2d, support_fully_connected, support_pool,
                       support_transpose_conv)

# -- elementwise -------------------------------------------------------------------------------

# The op codes of elementwise.cl's binary kernels, #define OP_<op> there.
BINARY = {op: code for code, op in enumerate(
    ("ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "PRELU", "SQUARED_DIFFERENCE", "POW"))}
define_codes("elementwise", "OP_", BINARY)
COMMUTATIVE = {"ADD", "MUL", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE"}


def support_binary(node):
    reason = float_io(node)
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
    total = elements(shape)
    bs = _strip(b.shape)
    if tuple(a.shape) == shape and (tuple(b.shape) == shape or elements(b.shape) == 1
                                    or (len(bs) == 1 and shape and bs[0] == shape[-1])):
        bsize = elements(b.shape)
        vw = vector_width(total) if bsize == 1 else vector_width(np.gcd(total, bsize))
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


# The builtins elementwise.cl's unary kernel computes; its op codes, #define UN_<op> there, add
# GELU_TANH (GELU with `approximate`).
UNARY_OPS = ("RELU", "RELU6", "RELU_N1_TO_1", "LEAKY_RELU", "LOGISTIC", "TANH", "HARD_SWISH",
             "GELU", "ELU", "ABS", "NEG", "EXP", "SQRT", "RSQRT", "SQUARE", "LOG", "RELU_0_TO_1")
UNARY = {op: code for code, op in enumerate(UNARY_OPS + ("GELU_TANH",))}
define_codes("elementwise", "UN_", UNARY)


def support_unary(node):
    return float_io(node)


def build_unary(node, g):
    x, out = node.inputs[0], node.outputs[0]
    code = UNARY[node.op]
    if node.op == "GELU" and getattr(node.options, "approximate", False):
        code = UNARY["GELU_TANH"]
    alpha = float(getattr(node.options, "alpha", 0.0) or 0.0) if node.op == "LEAKY_RELU" else 0.0
    total = elements(out.shape)
    vw = vector_width(total)
    gsize, lsize = nd(g, (total // vw,))
    g.launch("elementwise", "unary", gsize, lsize,
             [g.value(x), g.tensor(out), np.int32(total), np.int32(code), np.float32(alpha)],
             {"VW": vw})


# -- reductions, softmax -----------------------------------------------------------------------

def _reduce_axes(node):
    return sorted(constant_axes(node, len(node.inputs[0].shape)))


def support_reduce(node):
    if node.inputs[1].data is None:
        return "the axes must be a constant"
    reason = float_io(node, data_inputs=(0,))
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
    outer = elements(shape[:axes[0]])
    r = elements(shape[axes[0]:axes[-1] + 1])
    inner = elements(shape[axes[-1] + 1:])
    scale = 1.0 / max(r, 1) if node.op == "MEAN" else 1.0
    vw = vector_width(inner)
    gsize, lsize = nd(g, (inner // vw, outer))
    g.launch("data", "reduce_mid", gsize, lsize,
             [g.value(x), g.tensor(out), np.int32(outer), np.int32(r), np.int32(inner),
              np.float32(scale)], {"VW": vw})


def build_softmax(node, g):
    x, out = node.inputs[0], node.outputs[0]
    length = x.shape[-1] if x.shape else 1
    rows = elements(x.shape) // max(length, 1)
    gsize, lsize = nd(g, (rows,))
    g.launch("data", "softmax", gsize, lsize,
             [g.value(x), g.tensor(out), np.int32(rows), np.int32(length),
              np.float32(float(node.options.beta))])


# -- data movement -----------------------------------------------------------------------------

def support_alias(node):
    if node.inputs[0].data is not None:
        return "a constant input (folded on the CPU)"
    return float_io(node, data_inputs=(0,))


def build_alias(node, g):
    g.alias(node.outputs[0], node.inputs[0])


def support_concatenation(node):
    reason = float_io(node)
    if reason:
        return reason
    return None


def build_concatenation(node, g):
    out = node.outputs[0]
    rank = len(out.shape)
    axis = int(node.options.axis)
    axis = axis + rank if axis < 0 else axis
    lo, hi = clamp(node, g)
    outer = elements(out.shape[:axis])
    total = elements(out.shape[axis:])
    offset = 0
    ref = g.tensor(out)
    for t in node.inputs:
        inner = elements(t.shape[axis:])
        if inner * outer:
            gsize, lsize = nd(g, (inner, outer))
            g.launch("data", "concatenation", gsize, lsize,
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
    if elements(node.inputs[0].shape) >= MAX_INDEX:
        return f"more than {MAX_INDEX} input values"
    return float_io(node, data_inputs=(0,))


def gather_table(node, run) -> tuple:
    """(index per output value into the flat input or -1, fill value): the op's CPU kernel run
    once on the input's positions +1 and once on their negatives; where both agree it wrote
    the fill value, elsewhere the position."""
    x, out = node.inputs[0], node.outputs[0]
    pos = np.arange(1, elements(x.shape) + 1, dtype=np.float32).reshape(x.shape)
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


def build_gathered(node, g):
    index, fill = gather_table(node, g.cpu_run)
    total = index.size
    gsize, lsize = nd(g, (total,))
    g.launch("data", "gather", gsize, lsize,
             [g.value(node.inputs[0]), g.const(index, np.int32), g.tensor(node.outputs[0]),
              np.int32(total), np.float32(fill)])


def support_resize_bilinear(node):
    if node.inputs[1].data is None:
        return "the size must be a constant"
    return float_io(node, data_inputs=(0,)) or rank4(node)


def build_resize_bilinear(node, g):
    x, out = node.inputs[0], node.outputs[0]
    n, h, w, c = x.shape
    _, ho, wo, _ = out.shape
    align = bool(node.options.align_corners)
    half = bool(node.options.half_pixel_centers)
    y0, y1, fy = bilinear_axis(h, ho, align, half)
    x0, x1, fx = bilinear_axis(w, wo, align, half)
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
    if x.type_name in ("float16", "float32"):  # float32: an int8 tensor's view (quant.py)
        return None
    if x.type_name in ("int8", "uint8"):
        q = x.quantization
        if q is None or np.size(q.scale) != 1:
            return "per-channel quantized input"
        return None
    return f"input is {x.type_name}"


def build_dequantize(node, g):
    x, out = node.inputs[0], node.outputs[0]
    total = elements(x.shape)
    gsize, lsize = nd(g, (total,))
    if x.type_name == "float32":  # already real values: "int8": "dequantize" (quant.py)
        g.alias(out, x)
        return
    args = [g.value(x), g.tensor(out), np.int32(total)]
    if x.type_name == "float16":
        g.launch("data", "dequantize_float16", gsize, lsize, args)
        return
    kernel = "dequantize_int8" if x.type_name == "int8" else "dequantize_uint8"
    g.launch("data", kernel, gsize, lsize, args + [np.float32(x.scale), np.int32(x.zero_point)])


# -- the table ---------------------------------------------------------------------------------

OPS = {
    "CONV_2D": (support_conv_2d, build_conv_2d),
    "DEPTHWISE_CONV_2D": (support_depthwise_conv_2d, build_depthwise_conv_2d),
    "TRANSPOSE_CONV": (support_transpose_conv, build_transpose_conv),
    "FULLY_CONNECTED": (support_fully_connected, build_fully_connected),
    "BATCH_MATMUL": (support_batch_matmul, build_batch_matmul),
    "MAX_POOL_2D": (support_pool, build_max_pool_2d),
    "AVERAGE_POOL_2D": (support_pool, build_average_pool_2d),
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
OPS.update({op: (support_unary, build_unary) for op in UNARY_OPS})
OPS.update({op: (support_gathered, build_gathered) for op in GATHERED})

# Custom ops, by custom code (MediaPipe's)
CUSTOM_OPS = {"Convolution2DTransposeBias": (support_convolution_2d_transpose_bias,
                                             build_convolution_2d_transpose_bias)}
