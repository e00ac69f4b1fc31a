"""Layout-sensitive ONNX ops beyond convolution and pooling: ConvTranspose, DepthToSpace,
SpaceToDepth. Each becomes its NHWC TFLite op between TRANSPOSE ops (Resize: `lower_resize.py`)."""
from __future__ import annotations

import numpy as np

from .lower import lowers
from .lower_nn import TO_NCHW, TO_NHWC, VALID

# -- ConvTranspose -------------------------------------------------------------------------------


@lowers("ConvTranspose")
def conv_transpose(b, n):
    """TRANSPOSE_CONV with VALID padding over the full output, then a crop to ONNX's pads;
    output_padding rows get only the bias, as in ONNX. 1-D runs as 2-D with a height of 1, 3-D
    as CONV_3D_TRANSPOSE, dilations as a kernel with zeros between its taps, groups as one
    transposed convolution each."""
    x, w, bias = n.input(0), n.input(1), n.input(2)
    rank = b.rank(x)
    if rank not in (3, 4, 5):
        raise n.fail(f"only 1-D, 2-D and 3-D ConvTranspose are supported, the input has "
                     f"rank {rank}")
    nd = rank - 2
    lift = (lambda v, fill: [fill] + list(v)) if nd == 1 else (lambda v, fill: list(v))
    strides = lift(n.attr("strides", [1] * nd), 1)
    dilations = lift(n.attr("dilations", [1] * nd), 1)
    out_pad = lift(n.attr("output_padding", [0] * nd), 0)
    pads = n.attr("pads", [0] * 2 * nd)
    pads = lift([(pads[i], pads[i + nd]) for i in range(nd)], (0, 0))
    out_shape = n.attr("output_shape")
    out_shape = None if out_shape is None else lift(list(out_shape)[-nd:], 1)
    if nd == 1:
        x = b.reshape(x, b.shape(x)[:2] + (1,) + b.shape(x)[2:])
        w = b.reshape(w, b.shape(w)[:2] + (1,) + b.shape(w)[2:])
    if any(d != 1 for d in dilations):
        w = _dilated(b, n, w, dilations)
    group = int(n.attr("group", 1))
    c_in, c_part = b.shape(w)[:2]
    if bias < 0 or bias in b.empty:
        bias = b.const(np.zeros(c_part * group, b.sg.tensors[x].np_dtype))
    attrs = (strides, out_pad, pads, out_shape, n.attr("auto_pad", "NOTSET"))
    if group == 1:
        y = _conv_transpose_2d(b, n, x, w, bias, *attrs)
    else:
        if c_in % group or b.shape(x)[1] != c_in:
            raise n.fail(f"{c_in} input channels do not split into {group} groups")
        split = lambda t, axis: b.ops("SPLIT", [b.const(np.array(axis, np.int32)), t],  # noqa
                                      {"num_splits": group}, n_out=group)
        parts = [_conv_transpose_2d(b, n, xg, wg, bg, *attrs) for xg, wg, bg in
                 zip(split(x, 1), split(w, 0), split(bias, 0))]
        y = b.op("CONCATENATION", parts, {"axis": 1})
    if nd == 1:
        y = b.reshape(y, b.shape(y)[:2] + b.shape(y)[3:])
    return y


def _dilated(b, n, w, dilations):
    """Weights [C_in, C_out, *kernel] with zeros between the taps: per kernel axis, a GATHER
    from the taps and one appended zero slice (folded when the weights are constant)."""
    for axis, d in enumerate(dilations, start=2):
        if d == 1:
            continue
        shape = b.shape(w)
        k = shape[axis]
        zero = b.const(np.zeros(shape[:axis] + (1,) + shape[axis + 1:], b.sg.tensors[w].np_dtype))
        padded = b.op("CONCATENATION", [w, zero], {"axis": axis})
        index = [p // d if p % d == 0 else k for p in range((k - 1) * d + 1)]
        w = b.op("GATHER", [padded, b.const(np.array(index, np.int32))], {"axis": axis})
    return w


def _conv_transpose_2d(b, n, x, w, bias, strides, out_pad, pads, out_shape, auto_pad):
    """TRANSPOSE_CONV (2-D) or CONV_3D_TRANSPOSE (3-D) on channels-last data."""
    c_in, c_out, *kernel = b.shape(w)
    sizes = b.shape(x)[2:]
    nd = len(sizes)
    full = [(size - 1) * s + k for size, s, k in zip(sizes, strides, kernel)]
    if out_shape is not None:
        out = list(out_shape)
        pads = _transpose_pads(full, out_pad, out, auto_pad)
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = [size * s for size, s in zip(sizes, strides)]
        pads = _transpose_pads(full, out_pad, out, auto_pad)
    else:
        if auto_pad == "VALID":
            pads = [(0, 0)] * nd
        out = [f + op - pb - pe for f, op, (pb, pe) in zip(full, out_pad, pads)]
    if any(begin < 0 for begin, _ in pads):   # a negative end only asks for more output
        raise n.fail(f"pads {pads} are negative")
    size = [max(f, pb + o) for f, (pb, _), o in zip(full, pads, out)]
    last = tuple(range(nd + 2))
    last = (0,) + last[2:] + (1,)                      # channels last
    xt = b.transpose(x, last)
    dynamic = bool(b.dynamic_axes(x))
    if dynamic:   # size = input size * stride + a constant, per axis: computed from SHAPE
        offset = [sz - i * st for sz, i, st in zip(size, sizes, strides)]
        shape = b.op("ADD", [b.op("MUL", [b.dims_of(xt, "int32"), b.const(np.array(
            [1, *strides, 0], np.int32))]), b.const(np.array([0, *offset, c_out], np.int32))])
    else:
        shape = b.const(np.array([b.shape(x)[0], *size, c_out], np.int32))
    if nd == 2:
        wt = b.transpose(w, (1, 2, 3, 0))              # [C_out, kH, kW, C_in]
        y = b.op("TRANSPOSE_CONV", [shape, wt, xt, bias],
                 {"padding": VALID, "stride_h": strides[0], "stride_w": strides[1]},
                 dtype=b.dtype(x))
    else:
        wt = b.transpose(w, (2, 3, 4, 1, 0))           # [kD, kH, kW, C_out, C_in]
        y = b.op("CONV_3D_TRANSPOSE", [shape, wt, xt, bias],
                 {"padding": VALID, "stride_d": strides[0], "stride_h": strides[1],
                  "stride_w": strides[2]}, dtype=b.dtype(x))
    if any(pb for pb, _ in pads) or size != out:
        begin = [0] + [pb for pb, _ in pads] + [0]
        end = [b.shape(y)[0]] + [pb + o for (pb, _), o in zip(pads, out)] + [c_out]
        mask = 0
        if dynamic:   # the crop's ends counted from the end: the same at every size
            end = [0] + [pb + o - sz for (pb, _), o, sz in zip(pads, out, size)] + [0]
            mask = sum(1 << k for k, e in enumerate(end) if e == 0)
        y = b.op("STRIDED_SLICE", [y, b.const(np.array(begin, np.int32)),
                                   b.const(np.array(end, np.int32)),
                                   b.const(np.ones(nd + 2, np.int32))], {"end_mask": mask})
    return b.transpose(y, tuple(int(i) for i in np.argsort(last)))


def _transpose_pads(full, out_pad, out, auto_pad) -> list:
    """ONNX's pads for a requested output size: SAME_UPPER puts the odd one at the end."""
    pads = []
    for f, op, o in zip(full, out_pad, out):
        total = f + op - o
        small, large = total // 2, total - total // 2
        pads.append((small, large) if auto_pad == "SAME_UPPER" else (large, small))
    return pads


# -- DepthToSpace / SpaceToDepth -----------------------------------------------------------------

@lowers("DepthToSpace")
def depth_to_space(b, n):
    x = n.input(0)
    bs = int(n.attr("blocksize"))
    c = b.shape(x)[1]
    if n.attr("mode", "DCR") == "CRD":  # TFLite's order is DCR: reorder the channels first
        c_out = c // (bs * bs)
        order = np.array([ch * bs * bs + k for k in range(bs * bs) for ch in range(c_out)],
                         np.int32)
        x = b.op("GATHER", [x, b.const(order)], {"axis": 1})
    y = b.op("DEPTH_TO_SPACE", [b.transpose(x, TO_NHWC)], {"block_size": bs})
    return b.transpose(y, TO_NCHW)


@lowers("SpaceToDepth")
def space_to_depth(b, n):
    x = n.input(0)
    bs = int(n.attr("blocksize"))
    y = b.op("SPACE_TO_DEPTH", [b.transpose(x, TO_NHWC)], {"block_size": bs})
    y = b.transpose(y, TO_NCHW)
    if n.attr("mode", "DCR") == "CRD":  # TFLite's order is DCR: reorder the channels after
        c = b.shape(x)[1]
        order = np.array([k * c + ch for ch in range(c) for k in range(bs * bs)], np.int32)
        y = b.op("GATHER", [y, b.const(order)], {"axis": 1})
    return y
