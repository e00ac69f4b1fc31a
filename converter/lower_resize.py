"""ONNX Resize (and the old Upsample).

Where TFLite's RESIZE_NEAREST_NEIGHBOR or RESIZE_BILINEAR picks the same pixels and weights as
ONNX (4-D, spatial axes, scales known while converting, matching coordinate flags), the NHWC op
between TRANSPOSE ops; every other form as one weight matrix per resized axis
(`resize_weights.py`), applied by BATCH_MATMUL.
"""
from __future__ import annotations

import math

import numpy as np

from .errors import ConversionError
from .lower import axis_of, lowers
from .lower_nn import TO_NCHW, TO_NHWC
from .resize_weights import GraphOps, NumpyOps, axis_weights

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


@lowers("Resize")
def resize(b, n):
    """RESIZE_NEAREST_NEIGHBOR / RESIZE_BILINEAR (NHWC) where TFLite's kernels pick the same
    pixels and weights; every other form (cubic, antialias, exclude_outside, crop-and-resize,
    other axes, coordinates TFLite has no flags for, scales or sizes that arrive while
    running) as one matrix product per resized axis (`resize_weights`)."""
    x = n.input(0)
    if int(n.attr("antialias", 0)) and n.attr("mode", "nearest") == "nearest":
        raise n.fail("antialias=1 needs mode linear or cubic")
    plan = _resize_plan(b, n, x)
    if all(m == size for m, size in zip(plan["out"], b.shape(x))) and \
            all(isinstance(s, float) and s == 1.0 for s in plan["scales"].values()) and \
            n.attr("coordinate_transformation_mode", "half_pixel") != "tf_crop_and_resize":
        return x
    native = _native_resize(b, n, x, plan)
    return native if native is not None else _resize_by_weights(b, n, x, plan)


@lowers("Upsample")
def upsample(b, n):
    """Upsample (opsets 7 to 9; the importer upgrades such models, which turns it into Resize):
    Resize with asymmetric coordinates and floor rounding."""
    import dataclasses

    scales = n.input(1) if n.opset >= 9 else b.const(np.array(n.attr("scales"), np.float32))
    mode = n.attr("mode", "nearest")
    attrs = {"mode": "linear" if mode in ("linear", "bilinear") else mode,
             "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
    return resize(b, dataclasses.replace(n, inputs=[n.input(0), -1, scales], attrs=attrs,
                                         opset=max(n.opset, 11)))


def _present(b, t) -> bool:
    return t >= 0 and t not in b.empty and 0 not in b.shape(t)


def _resize_plan(b, n, x):
    """{"axes": resized axes, "out": output shape, "scales": {axis: float or scalar tensor},
    "roi": {axis: (start, end)} (tf_crop_and_resize)} by ONNX's rules; a scale or size known
    only while running takes the output shape the model declares."""
    shape = b.shape(x)
    rank = len(shape)
    axes = n.attr("axes")
    axes = list(range(rank)) if axes is None else [axis_of(n, a, rank) for a in axes]
    if n.opset < 11:
        roi_t, scales_t, sizes_t = -1, n.input(1), -1
    else:
        roi_t, scales_t, sizes_t = n.input(1), n.input(2), n.input(3)
    if _present(b, sizes_t):
        out, scales = _from_sizes(b, n, shape, axes, sizes_t)
    elif _present(b, scales_t):
        out, scales = _from_scales(b, n, shape, axes, scales_t)
    else:
        raise n.fail("needs scales or sizes")
    roi = {}
    if n.attr("coordinate_transformation_mode", "half_pixel") == "tf_crop_and_resize":
        if not _present(b, roi_t):
            raise n.fail("tf_crop_and_resize needs a roi")
        values = b.value(roi_t)
        flat = b.cast(roi_t, "float32") if values is None else None
        for k, a in enumerate(axes):
            ends = (k, len(axes) + k)
            roi[a] = tuple(float(values.reshape(-1)[j]) for j in ends) if values is not None \
                else tuple(_element(b, flat, j) for j in ends)
    return {"axes": axes, "out": out, "scales": scales, "roi": roi}


def _element(b, vector, k: int):
    """Element k of a vector tensor, as a 0-d tensor."""
    return b.reshape(b.op("GATHER", [vector, b.const(np.array([k], np.int32))], {"axis": 0}), ())


def _declared(n, what: str) -> list:
    out = n.out_shape(0)
    if out is None:
        raise n.fail(f"the {what} are known only while running and the model does not declare "
                     "the output shape")
    return list(out)


def _from_sizes(b, n, shape, axes, sizes_t):
    policy = n.attr("keep_aspect_ratio_policy", "stretch")
    # A constant, or sizes the graph computes from the SHAPE of a dynamic tensor (a world
    # value: their value at this conversion's sizes; the op reads the tensor while running).
    sizes = b.known(sizes_t)
    if sizes is not None:
        sizes = [int(v) for v in sizes.reshape(-1)]
        ratios = {a: v / shape[a] for a, v in zip(axes, sizes)}
        if policy == "stretch":
            out = [sizes[axes.index(a)] if a in axes else d for a, d in enumerate(shape)]
            return out, ratios
        scale = (min if policy == "not_larger" else max)(ratios.values())
        return [int(scale * d + 0.5) if a in axes else d for a, d in enumerate(shape)], \
            {a: scale for a in axes}
    out = _declared(n, "sizes")
    if policy == "stretch":
        return out, {a: out[a] / shape[a] for a in axes}
    # the scale is the smallest (largest) ratio of the sizes, computed while running
    ratio = b.op("DIV", [b.cast(sizes_t, "float32"),
                         b.const(np.array([shape[a] for a in axes], np.float32))])
    op = "REDUCE_MIN" if policy == "not_larger" else "REDUCE_MAX"
    scale = b.op(op, [ratio, b.const(np.array([0], np.int32))], {"keep_dims": False})
    return out, {a: scale for a in axes}


def _from_scales(b, n, shape, axes, scales_t):
    values = b.value(scales_t)
    if values is not None:
        scales = {a: float(v) for a, v in zip(axes, values.reshape(-1))}
        out = [int(np.float64(np.float32(scales[a])) * d) if a in axes else d
               for a, d in enumerate(shape)]
        return out, scales
    out = _declared(n, "scales")
    flat = b.cast(scales_t, "float32")
    return out, {a: _element(b, flat, k) for k, a in enumerate(axes)}


def _native_resize(b, n, x, plan):
    """The NHWC TFLite resize op when it computes exactly what ONNX asks, else None."""
    shape = b.shape(x)
    mode = n.attr("mode", "nearest")
    ctm = n.attr("coordinate_transformation_mode", "half_pixel")
    scales = plan["scales"]
    if len(shape) != 4 or mode not in ("nearest", "linear") or int(n.attr("antialias", 0)) \
            or any(plan["out"][a] != shape[a] or scales.get(a, 1.0) != 1.0 for a in (0, 1)) \
            or not all(isinstance(scales.get(a, 1.0), float) for a in (2, 3)) \
            or ctm == "tf_crop_and_resize" or b.dtype(x) != "float32":
        return None
    out, sizes = plan["out"][2:], shape[2:]
    ratio = [scales.get(a, 1.0) for a in (2, 3)]
    try:
        if mode == "nearest":
            op, flags = _nearest_flags(n, ctm, out, sizes, ratio)
        else:
            op, flags = "RESIZE_BILINEAR", _linear_flags(n, ctm, out, sizes, ratio)
    except ConversionError:
        return None
    xt = b.transpose(x, TO_NHWC)
    out_nhwc = tuple(int(plan["out"][a]) for a in TO_NHWC)   # when the sizes arrive running
    y = b.op(op, [xt, _out_size(b, n, x, plan)], flags, shape=out_nhwc)
    return b.transpose(y, TO_NCHW)


def _out_size(b, n, x, plan) -> int:
    """The resize op's [height, width]: a constant, or computed in the graph when they follow
    dynamic dims (sizes given by a tensor the model computes, or the input's dynamic height and
    width times constant scales: ONNX's floor(size * scale))."""
    from .runtime_params import as_int32

    out = [int(d) for d in plan["out"][2:]]
    sizes_t = n.input(3) if n.opset >= 11 else -1
    if _present(b, sizes_t) and b.value(sizes_t) is None:
        axes = plan["axes"]
        picked = b.op("GATHER", [sizes_t, b.const(np.array([axes.index(2), axes.index(3)],
                                                           np.int32))], {"axis": 0})
        return as_int32(b, picked)
    if not b.dynamic_axes(x) & {2, 3}:
        return b.const(np.array(out, np.int32))
    dims = b.op("GATHER", [b.dims_of(x, "int32"), b.const(np.array([2, 3], np.int32))],
                {"axis": 0})
    scales = [plan["scales"].get(a, 1.0) for a in (2, 3)]
    if all(float(s).is_integer() for s in scales):
        return b.op("MUL", [dims, b.const(np.array(scales, np.int32))])
    scaled = b.op("MUL", [b.cast(dims, "float32"), b.const(np.array(scales, np.float32))])
    return b.cast(b.op("FLOOR", [scaled]), "int32")


def _resize_by_weights(b, n, x, plan):
    """Per resized axis: output = W @ input along it (a BATCH_MATMUL), plus the extrapolation
    value where tf_crop_and_resize samples outside."""
    dtype = b.dtype(x)
    if dtype != "float32":
        if dtype not in ("float16", "float64"):
            raise n.fail(f"resizing {dtype} tensors is not supported")
        x = b.cast(x, "float32")
    attrs = dict(mode=n.attr("mode", "nearest"),
                 ctm=n.attr("coordinate_transformation_mode", "half_pixel"),
                 rounding=n.attr("nearest_mode", "round_prefer_floor"),
                 cubic_a=float(n.attr("cubic_coeff_a", -0.75)),
                 antialias=bool(int(n.attr("antialias", 0))),
                 exclude_outside=bool(int(n.attr("exclude_outside", 0))))
    if attrs["mode"] not in ("nearest", "linear", "cubic"):
        raise n.fail(f"mode={attrs['mode']!r} is not nearest, linear or cubic")
    value = float(n.attr("extrapolation_value", 0.0))
    for a in plan["axes"]:
        size, m = b.shape(x)[a], plan["out"][a]
        scale, roi = plan["scales"][a], plan["roi"].get(a)
        if isinstance(scale, float) and scale == 1.0 and m == size and \
                (roi is None or roi == (0.0, 1.0)):
            continue
        try:
            w, outside = _weights(b, size, m, scale, roi, attrs)
        except KeyError as e:
            raise n.fail(f"{e.args[0]!r} is not a supported coordinate_transformation_mode or "
                         "nearest_mode") from None
        x = _along(b, x, a, w)
        if outside is not None and value != 0.0:
            view = [1] * b.rank(x)
            view[a] = m
            extra = b.op("MUL", [b.reshape(outside, view), b.const(np.float32(value))])
            x = b.op("ADD", [x, extra])
    return b.cast(x, dtype)


def _weights(b, size, m, scale, roi, attrs):
    """(W [m, size], extrapolation mask or None) as tensors: constants computed in float64
    when the scale and roi are known, else ops computing them while running."""
    if isinstance(scale, float) and (roi is None or isinstance(roi[0], float)):
        w, outside = axis_weights(NumpyOps(), size, m, scale, roi=roi, **attrs)
        return b.const(np.asarray(w, np.float32)), \
            None if outside is None else b.const(np.asarray(outside, np.float32))
    ops = GraphOps(b)
    scale = ops.const(scale) if isinstance(scale, float) else scale
    roi = None if roi is None else tuple(ops.const(v) if isinstance(v, float) else v
                                         for v in roi)
    w, outside = axis_weights(ops, size, m, scale, roi=roi, scale_bound=m / size, **attrs)
    return w, None if outside is None else b.cast(outside, "float32")


def _along(b, x, axis: int, w):
    """W [m, n] applied along `axis` of x: a BATCH_MATMUL of [1, m, n] and [B, n, A]."""
    shape = b.shape(x)
    before, after = math.prod(shape[:axis]), math.prod(shape[axis + 1:])
    m = b.shape(w)[0]
    y = b.op("BATCH_MATMUL", [b.reshape(w, (1,) + b.shape(w)),
                              b.reshape(x, (before, shape[axis], after))])
    return b.reshape(y, shape[:axis] + (m,) + shape[axis + 1:])


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
