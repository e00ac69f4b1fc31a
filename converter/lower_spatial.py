"""Layout-sensitive ONNX ops beyond convolution and pooling: ConvTranspose, Resize, DepthToSpace,
SpaceToDepth. Each becomes its NHWC TFLite op between TRANSPOSE ops."""
from __future__ import annotations

import math

import numpy as np

from .lower import lowers, optional_const
from .lower_nn import TO_NCHW, TO_NHWC, VALID, explicit_pads

# -- ConvTranspose -------------------------------------------------------------------------------


@lowers("ConvTranspose")
def conv_transpose(b, n):
    """TRANSPOSE_CONV with VALID padding over the full output, then a crop to ONNX's pads;
    output_padding rows get only the bias, as in ONNX."""
    x, w, bias = n.input(0), n.input(1), n.input(2)
    if b.rank(x) != 4:
        raise n.fail(f"only 2-D ConvTranspose is supported, the input has rank {b.rank(x)}")
    if int(n.attr("group", 1)) != 1:
        raise n.fail("group > 1 is not supported")
    if any(d != 1 for d in n.attr("dilations", [1, 1])):
        raise n.fail("dilations are not supported")
    c_in, c_out, kh, kw = b.shape(w)
    _, _, h, wd = b.shape(x)
    strides = list(n.attr("strides", [1, 1]))
    out_pad = list(n.attr("output_padding", [0, 0]))
    full = [(size - 1) * s + k for size, s, k in zip((h, wd), strides, (kh, kw))]
    out_shape = n.attr("output_shape")
    if out_shape is not None:
        out = list(out_shape)[-2:]
        pads = _transpose_pads(full, out_pad, out, n.attr("auto_pad", "NOTSET"))
    else:
        if n.attr("auto_pad", "NOTSET") not in ("NOTSET", "", "VALID"):
            out = [size * s for size, s in zip((h, wd), strides)]
            pads = _transpose_pads(full, out_pad, out, n.attr("auto_pad"))
        else:
            pads = explicit_pads(n, (h, wd), (kh, kw), strides, [1, 1]) \
                if n.attr("auto_pad", "NOTSET") in ("NOTSET", "") else [(0, 0), (0, 0)]
            out = [f + op - pb - pe for f, op, (pb, pe) in zip(full, out_pad, pads)]
    if any(begin < 0 for begin, _ in pads):   # a negative end only asks for more output
        raise n.fail(f"pads {pads} are negative")
    size = [max(f, pb + o) for f, (pb, _), o in zip(full, pads, out)]
    if bias < 0:
        bias = b.const(np.zeros(c_out, b.sg.tensors[x].np_dtype))
    xt = b.transpose(x, TO_NHWC)
    wt = b.transpose(w, (1, 2, 3, 0))                  # [C_out, kH, kW, C_in]
    shape = b.const(np.array([b.shape(x)[0], size[0], size[1], c_out], np.int32))
    y = b.op("TRANSPOSE_CONV", [shape, wt, xt, bias],
             {"padding": VALID, "stride_h": strides[0], "stride_w": strides[1]},
             dtype=b.dtype(x))
    if [pb for pb, _ in pads] != [0, 0] or size != out:
        begin = [0, pads[0][0], pads[1][0], 0]
        end = [b.shape(y)[0], pads[0][0] + out[0], pads[1][0] + out[1], c_out]
        y = b.op("STRIDED_SLICE", [y, b.const(np.array(begin, np.int32)),
                                   b.const(np.array(end, np.int32)),
                                   b.const(np.ones(4, np.int32))])
    return b.transpose(y, TO_NCHW)


def _transpose_pads(full, out_pad, out, auto_pad) -> list:
    """ONNX's pads for a requested output size: SAME_UPPER puts the odd one at the end."""
    pads = []
    for f, op, o in zip(full, out_pad, out):
        total = f + op - o
        small, large = total // 2, total - total // 2
        pads.append((small, large) if auto_pad == "SAME_UPPER" else (large, small))
    return pads


# -- Resize --------------------------------------------------------------------------------------

def _onnx_source(mode: str, out: int, size: int, scale: float) -> np.ndarray:
    """ONNX's source coordinate of each output index along one axis."""
    x = np.arange(out, dtype=np.float64)
    if mode == "half_pixel":
        return (x + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (x + 0.5) / scale - 0.5 if out > 1 else np.zeros(out)
    if mode == "align_corners":
        return x * (size - 1) / (out - 1) if out > 1 else np.zeros(out)
    if mode == "asymmetric":
        return x / scale
    if mode == "tf_half_pixel_for_nn":
        return (x + 0.5) / scale
    raise KeyError(mode)


_ROUND = {"round_prefer_floor": lambda v: np.ceil(v - 0.5), "round_prefer_ceil":
          lambda v: np.floor(v + 0.5), "floor": np.floor, "ceil": np.ceil}


def _tflite_nearest(out: int, size: int, align: bool, half: bool) -> np.ndarray:
    """TFLite's RESIZE_NEAREST_NEIGHBOR source index along one axis."""
    x = np.arange(out, dtype=np.float64)
    scale = (size - 1) / (out - 1) if align and out > 1 else size / out
    offset = 0.5 if half else 0.0
    idx = np.floor(x * scale + 0.5) if align else np.floor((x + offset) * scale)
    return np.clip(idx, 0, size - 1)


def _resize_sizes(b, n, x):
    shape = b.shape(x)
    sizes = optional_const(b, n, 3, "sizes")
    scales = optional_const(b, n, 2, "scales")
    if n.attr("axes") is not None:
        raise n.fail("the axes attribute is not supported")
    if sizes is not None:
        out = [int(s) for s in sizes.reshape(-1)]
        ratio = [o / i for o, i in zip(out, shape)]
    elif scales is not None:
        ratio = [float(s) for s in scales.reshape(-1)]
        out = [int(math.floor(i * s)) for i, s in zip(shape, ratio)]
    else:
        raise n.fail("needs constant scales or sizes")
    if len(out) != len(shape) or out[:2] != list(shape[:2]):
        raise n.fail(f"only the spatial dims may be resized ({list(shape)} -> {out})")
    return out, ratio


@lowers("Resize")
def resize(b, n):
    x = n.input(0)
    if b.rank(x) != 4:
        raise n.fail(f"only 4-D (NCHW) inputs are supported, the input has rank {b.rank(x)}")
    out, ratio = _resize_sizes(b, n, x)
    mode = n.attr("mode", "nearest")
    ctm = n.attr("coordinate_transformation_mode", "half_pixel")
    if int(n.attr("antialias", 0)):
        raise n.fail("antialias=1 is not supported")
    sizes = b.shape(x)[2:]
    if out[2:] == list(sizes):
        return x
    if mode == "nearest":
        op, flags = _nearest_flags(n, ctm, out[2:], sizes, ratio[2:])
    elif mode == "linear":
        op, flags = "RESIZE_BILINEAR", _linear_flags(n, ctm, out[2:], sizes, ratio[2:])
    else:
        raise n.fail(f"mode={mode!r} is not supported (nearest and linear are)")
    xt = b.transpose(x, TO_NHWC)
    y = b.op(op, [xt, b.const(np.array(out[2:], np.int32))], flags)
    return b.transpose(y, TO_NCHW)


def _nearest_flags(n, ctm, out, sizes, ratio):
    nearest = n.attr("nearest_mode", "round_prefer_floor")
    try:
        want = [np.clip(_ROUND[nearest](_onnx_source(ctm, o, s, r)), 0, s - 1)
                for o, s, r in zip(out, sizes, ratio)]
    except KeyError:
        raise n.fail(f"coordinate_transformation_mode={ctm!r} with nearest_mode={nearest!r} "
                     "is not supported") from None
    for align, half in ((False, False), (False, True), (True, False)):
        got = [_tflite_nearest(o, s, align, half) for o, s in zip(out, sizes)]
        if all(np.array_equal(g, w_) for g, w_ in zip(got, want)):
            return "RESIZE_NEAREST_NEIGHBOR", {"align_corners": align, "half_pixel_centers": half}
    raise n.fail(f"nearest resize with coordinate_transformation_mode={ctm!r} and "
                 f"nearest_mode={nearest!r} picks pixels no TFLite resize picks")


def _linear_flags(n, ctm, out, sizes, ratio):
    if any(abs(r - o / s) > 1e-6 * r for r, o, s in zip(ratio, out, sizes)):
        raise n.fail(f"scales {ratio} differ from output/input sizes: TFLite resizes by sizes")
    if ctm == "half_pixel" or (ctm == "pytorch_half_pixel" and min(out) > 1):
        return {"align_corners": False, "half_pixel_centers": True}
    if ctm == "align_corners":
        return {"align_corners": True, "half_pixel_centers": False}
    if ctm == "asymmetric":
        return {"align_corners": False, "half_pixel_centers": False}
    raise n.fail(f"linear resize with coordinate_transformation_mode={ctm!r} is not supported")


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
