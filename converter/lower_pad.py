"""ONNX Pad in every mode: constant (PAD, PADV2), reflect (MIRROR_PAD), edge and wrap (a GATHER
of clamped or wrapped indices per padded axis); negative pads crop first. Pads and axes known only
while running become a paddings tensor, or run-time gather indices for edge and wrap."""
from __future__ import annotations

import numpy as np

from .lower import axis_of, const_input, lowers, optional_const
from .runtime_params import as_int32, is_runtime, scalar, scatter_to_axes


@lowers("Pad")
def pad(b, n):
    """constant -> PAD / PADV2, reflect -> MIRROR_PAD, edge and wrap -> a GATHER per padded axis
    (indices clamped or wrapped); negative pads crop first. Pads known only while running become
    a paddings tensor (constant, reflect) or run-time gather indices (edge, wrap)."""
    x = n.input(0)
    rank = b.rank(x)
    mode = n.attr("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise n.fail(f"mode={mode!r} is not supported (constant, reflect, edge and wrap are)")
    axes_t = n.input(3) if n.opset >= 18 else -1
    runtime_axes = is_runtime(b, axes_t)
    if n.opset >= 11 and (is_runtime(b, n.input(1)) or runtime_axes):
        return _pad_at_run_time(b, n, x, mode, runtime_axes)
    pads = [int(p) for p in (const_input(b, n, 1, "pads") if n.opset >= 11
                             else np.asarray(n.attr("pads"))).reshape(-1)]
    axes = optional_const(b, n, 3, "axes") if n.opset >= 18 else None
    axes = list(range(rank)) if axes is None else [axis_of(n, a, rank) for a in axes.reshape(-1)]
    if len(pads) != 2 * len(axes):
        raise n.fail(f"pads {pads} must hold {2 * len(axes)} values")
    paddings = np.zeros((rank, 2), np.int64)
    for k, a in enumerate(axes):
        paddings[a] = (pads[k], pads[k + len(axes)])
    if (paddings < 0).any():  # crop first
        shape = b.shape(x)
        crop = np.maximum(-paddings, 0)
        x = b.op("STRIDED_SLICE", [x, b.const(crop[:, 0].astype(np.int32)),
                                   b.const((np.array(shape) - crop[:, 1]).astype(np.int32)),
                                   b.const(np.ones(rank, np.int32))])
        paddings = np.maximum(paddings, 0)
    if not paddings.any():
        return x
    if mode in ("edge", "wrap"):
        for a in range(rank):
            if paddings[a].any():
                size = b.shape(x)[a]
                out = np.arange(-paddings[a, 0], size + paddings[a, 1])
                index = np.clip(out, 0, size - 1) if mode == "edge" else np.mod(out, size)
                x = b.op("GATHER", [x, b.const(index.astype(np.int32))], {"axis": a})
        return x
    pads_t = b.const(paddings.astype(np.int32))
    if mode == "reflect":
        return b.op("MIRROR_PAD", [x, pads_t], {"mode": 0})
    value = _pad_value(b, n, x)
    if value is None:
        return b.op("PAD", [x, pads_t])
    return b.op("PADV2", [x, pads_t, value])


def _pad_value(b, n, x):
    """The constant mode's fill as a scalar tensor of x's type, or None for zeros."""
    if n.opset < 11:
        value = np.array(n.attr("value", 0.0))
    elif is_runtime(b, n.input(2)):
        return b.cast(scalar(b, n.input(2)), b.dtype(x))
    else:
        value = optional_const(b, n, 2, "constant_value")
    if value is None or not value.any():
        return None
    return b.const(np.asarray(value, b.sg.tensors[x].np_dtype).reshape(()))


def _pad_at_run_time(b, n, x, mode, runtime_axes):
    rank = b.rank(x)
    pads = n.input(1)
    dtype = b.sg.tensors[pads].np_dtype
    if n.input(3) >= 0 and n.opset >= 18 and n.input(3) not in b.empty:
        axes = n.input(3) if runtime_axes else \
            [axis_of(n, a, rank) for a in b.value(n.input(3)).reshape(-1)]
    else:
        axes = list(range(rank))
    count = b.shape(pads)[0] // 2
    if count * 2 != b.shape(pads)[0]:
        raise n.fail(f"pads of shape {list(b.shape(pads))} must hold an even count")
    half = [b.op("STRIDED_SLICE", [pads, b.const(np.array([k * count], np.int32)),
                                   b.const(np.array([(k + 1) * count], np.int32)),
                                   b.const(np.ones(1, np.int32))]) for k in range(2)]
    begins, ends = (scatter_to_axes(b, h, axes, rank, np.zeros(rank, dtype)) for h in half)
    if mode in ("edge", "wrap"):
        return _gather_pad(b, n, x, begins, mode)
    paddings = as_int32(b, b.op("PACK", [begins, ends], {"axis": 1, "values_count": 2}))
    out = n.out_shape(0)
    if mode == "reflect":
        return b.op("MIRROR_PAD", [x, paddings], {"mode": 0}, shape=out)
    value = _pad_value(b, n, x)
    if value is None:
        return b.op("PAD", [x, paddings], shape=out)
    return b.op("PADV2", [x, paddings, value], shape=out)


def _gather_pad(b, n, x, begins, mode):
    """Edge and wrap padding by pads known only while running, to the declared output shape:
    along each axis, GATHER the source indices (out index - begin pad, clamped or wrapped)."""
    out = n.out_shape(0)
    if out is None:
        raise n.fail(f"{mode} padding by pads known only while running needs the output shape, "
                     "which the model does not declare")
    dtype = b.sg.tensors[begins].np_dtype
    for a, (size, want) in enumerate(zip(b.shape(x), out)):
        begin = b.op("GATHER", [begins, b.const(np.array(a, np.int32))], {"axis": 0})
        index = b.op("SUB", [b.const(np.arange(want, dtype=dtype)), begin])
        if mode == "edge":
            index = b.op("MINIMUM", [b.op("MAXIMUM", [index, b.const(np.zeros((), dtype))]),
                                     b.const(np.array(size - 1, dtype))])
        else:
            index = b.op("FLOOR_MOD", [index, b.const(np.array(size, dtype))])
        x = b.op("GATHER", [x, as_int32(b, index)], {"axis": a})
    return x
