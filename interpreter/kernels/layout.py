"""Ops that rearrange data: TRANSPOSE CONCATENATION PACK UNPACK SPLIT SPLIT_V TILE REVERSE_V2.

Each prepare computes the index tuples of the pieces it copies, so run is one numpy copy per
piece. Only uint8 CONCATENATION does arithmetic: TFLite requantizes inputs whose scale or zero
point differ from the output's. TILE's multiples and SPLIT_V's sizes may arrive while running:
then the output shapes are known only then (`node.dynamic`).
"""
from __future__ import annotations

import numpy as np

from .common import DATA_TYPES, int_vector, known_at_run_time, normalize_axis
from .fixed_point import round_half_away
from .registry import register


def _same_quantization(a, b) -> bool:
    return a.scale == b.scale and a.zero_point == b.zero_point


def _int_scalar(node, k: int, what: str) -> int:
    values = int_vector(node, k, what)
    if len(values) != 1:
        raise node.fail(f"{what} must hold one value, got {len(values)}")
    return values[0]


# -- TRANSPOSE -----------------------------------------------------------------------------------

@register("TRANSPOSE", *DATA_TYPES)
def transpose(node):
    node.expect_inputs(2)
    in_shape = node.input(0).shape
    rank = len(in_shape)
    perm = [p + rank if -rank <= p < 0 else p for p in int_vector(node, 1, "the permutation")]
    if sorted(perm) != list(range(rank)):
        raise node.fail(f"{perm} is not a permutation of the {len(in_shape)} input dimensions")
    perm = tuple(perm)
    node.outputs[0].shape = tuple(in_shape[p] for p in perm)
    if rank >= 2 and perm[-2] == rank - 1 and in_shape[perm[-1]] <= 8 and \
            int(np.prod(in_shape)) >= 1024:
        # (..., a, b) -> (..., b, a) with a small (NHWC channel shuffle): numpy's one copy
        # walks the output's short last axis innermost; one copy per index of it runs on rows.
        n = in_shape[perm[-1]]

        def run_rows(x, _, out):
            xt = x.transpose(perm)
            for i in range(n):
                np.copyto(out[..., i], xt[..., i])
        return run_rows

    def run(x, _, out):
        np.copyto(out, x.transpose(perm))
    return run


# -- CONCATENATION / PACK ------------------------------------------------------------------------

def _pieces(axis: int, sizes: list, rank: int) -> list:
    """Index tuples of consecutive blocks of `sizes` along `axis`."""
    pieces, at = [], 0
    for n in sizes:
        pieces.append((slice(None),) * axis + (slice(at, at + n),)
                      + (slice(None),) * (rank - axis - 1))
        at += n
    return pieces


def _requantize_uint8(x, out, in_scale, in_zp, out_scale, out_zp):
    """TFLite's ConcatenationWithScaling: round(q * s + b) + zp_out in float32, s = in_scale /
    out_scale, b = -in_zp * s; round half away from zero; clamped to uint8."""
    s = np.float32(in_scale) * (np.float32(1.0) / np.float32(out_scale))
    b = np.float32(-in_zp) * s
    v = x.astype(np.float32) * s + b
    r = round_half_away(v.astype(np.float64))
    np.clip(r + out_zp, 0, 255, out=r)
    np.copyto(out, r, casting="unsafe")


@register("CONCATENATION", *DATA_TYPES)
def concatenation(node):
    if not node.inputs:
        raise node.fail("expected at least one input")
    ins = [node.input(k) for k in range(len(node.inputs))]
    out_info = node.outputs[0]
    if int(node.options.fused_activation_function or 0) != 0:
        raise node.fail("a fused activation is not supported (TFLite rejects it too)")
    first = ins[0]
    rank = len(first.shape)
    if rank == 0:  # TFLite concatenates scalars into a vector
        if any(t.shape != () for t in ins):
            raise node.fail("inputs mix scalars and tensors")
        rank, shapes = 1, [(1,)] * len(ins)
    else:
        shapes = [t.shape for t in ins]
    axis = normalize_axis(node, node.options.axis, rank)
    for k, (t, s) in enumerate(zip(ins, shapes)):
        if t.type_name != first.type_name:
            raise node.fail(f"input {k} is {t.type_name}, input 0 is {first.type_name}")
        if len(s) != rank or any(a != b for d, (a, b) in enumerate(zip(s, shapes[0]))
                                 if d != axis):
            raise node.fail(f"input {k} has shape {list(t.shape)}, which does not match input 0 "
                            f"{list(first.shape)} outside axis {axis}")
    out_shape = list(shapes[0])
    out_shape[axis] = sum(s[axis] for s in shapes)
    out_info.shape = tuple(out_shape)
    pieces = _pieces(axis, [s[axis] for s in shapes], rank)
    views = shapes

    key = first.type_name
    if key == "int8" and not all(_same_quantization(t, out_info) for t in ins):
        raise node.fail("int8 inputs must have the output's scale and zero point "
                        "(TFLite's int8 CONCATENATION does not requantize)")
    if key == "int16" and (out_info.zero_point or any(t.zero_point for t in ins)):
        raise node.fail("int16 inputs and output must have zero point 0")
    requant = {}
    if key == "uint8":
        requant = {k: (t.scale, t.zero_point, out_info.scale, out_info.zero_point)
                   for k, t in enumerate(ins) if not _same_quantization(t, out_info)}
    if requant:
        def run(*arrays):
            out = arrays[-1]
            for k, (x, piece, shape) in enumerate(zip(arrays[:-1], pieces, views)):
                if k in requant:
                    _requantize_uint8(x.reshape(shape), out[piece], *requant[k])
                else:
                    out[piece] = x.reshape(shape)
        return run
    items = list(zip(pieces, views))

    def run(*arrays):
        out = arrays[-1]
        for x, (piece, shape) in zip(arrays, items):
            out[piece] = x.reshape(shape)
    return run


@register("PACK", *DATA_TYPES)
def pack(node):
    ins = [node.input(k) for k in range(len(node.inputs))]
    count = int(node.options.values_count)
    if count != len(ins):
        raise node.fail(f"values_count is {count} but the op has {len(ins)} inputs")
    if not ins:
        raise node.fail("expected at least one input")
    first, out_info = ins[0], node.outputs[0]
    for k, t in enumerate(ins):
        if t.shape != first.shape or t.type_name != first.type_name:
            raise node.fail(f"input {k} ({t.type_name} {list(t.shape)}) differs from input 0 "
                            f"({first.type_name} {list(first.shape)})")
        if not _same_quantization(t, out_info):
            raise node.fail(f"input {k} must have the output's scale and zero point "
                            "(TFLite's PACK does not requantize)")
    rank = len(first.shape) + 1
    axis = normalize_axis(node, node.options.axis, rank)
    out_info.shape = tuple(first.shape[:axis]) + (count,) + tuple(first.shape[axis:])
    places = [(slice(None),) * axis + (k,) for k in range(count)]

    def run(*arrays):
        out = arrays[-1]
        for x, place in zip(arrays, places):
            out[place] = x
    return run


# -- UNPACK / SPLIT / SPLIT_V --------------------------------------------------------------------

def _copy_pieces(pieces: list, data: int = 0, inputs: int = 1):
    """run(*inputs, *outs): out k = inputs[data][pieces[k]]."""
    def run(*args):
        x = args[data]
        for out, piece in zip(args[inputs:], pieces):
            np.copyto(out, x[piece])
    run.views = data, lambda x: [x[piece] for piece in pieces]   # the plan's views (views.py)
    return run


@register("UNPACK", *DATA_TYPES)
def unpack(node):
    node.expect_inputs(1)
    in_shape = node.input(0).shape
    axis = normalize_axis(node, node.options.axis, len(in_shape))
    num = int(node.options.num) or in_shape[axis]
    if num != in_shape[axis] or num != len(node.outputs):
        raise node.fail(f"num is {num}, dimension {axis} is {in_shape[axis]}, and the op has "
                        f"{len(node.outputs)} outputs: they must agree")
    shape = tuple(in_shape[:axis]) + tuple(in_shape[axis + 1:])
    for out in node.outputs:
        out.shape = shape
    pieces = [(slice(None),) * axis + (k,) for k in range(num)]
    return _copy_pieces(pieces)


def _split_into(node, in_shape: tuple, axis: int, sizes: list):
    if len(sizes) != len(node.outputs):
        raise node.fail(f"{len(sizes)} pieces but {len(node.outputs)} outputs")
    for out, n in zip(node.outputs, sizes):
        out.shape = tuple(in_shape[:axis]) + (n,) + tuple(in_shape[axis + 1:])
    return _pieces(axis, sizes, len(in_shape))


@register("SPLIT", *DATA_TYPES)  # keyed by the data (input 1; input 0 is the axis)
def split(node):
    node.expect_inputs(2)
    in_shape = node.input(1).shape
    axis = normalize_axis(node, _int_scalar(node, 0, "the axis"), len(in_shape))
    num = int(node.options.num_splits)
    if num <= 0 or in_shape[axis] % num:
        raise node.fail(f"cannot split dimension {axis} of size {in_shape[axis]} into {num} "
                        "equal pieces")
    return _copy_pieces(_split_into(node, in_shape, axis, [in_shape[axis] // num] * num),
                        data=1, inputs=2)


@register("SPLIT_V", *DATA_TYPES)
def split_v(node):
    node.expect_inputs(3)
    in_shape = node.input(0).shape
    axis = normalize_axis(node, _int_scalar(node, 2, "the axis"), len(in_shape))
    if known_at_run_time(node, 1):
        node.dynamic = True  # the output shapes depend on the sizes

        def run_values(x, size_splits, _):
            sizes = _split_sizes(node, x.shape[axis], axis,
                                 int_vector(node, 1, "the size_splits", size_splits))
            if len(sizes) != len(node.outputs):
                raise node.fail(f"{len(sizes)} pieces but {len(node.outputs)} outputs")
            return [x[piece].copy() for piece in _pieces(axis, sizes, x.ndim)]
        return run_values
    sizes = _split_sizes(node, in_shape[axis], axis, int_vector(node, 1, "the size_splits"))
    return _copy_pieces(_split_into(node, in_shape, axis, sizes), inputs=3)


def _split_sizes(node, dim: int, axis: int, sizes: list) -> list:
    """The sizes with TFLite's one -1 resolved; fails unless they cover the axis."""
    unknown = [k for k, n in enumerate(sizes) if n == -1]
    if len(unknown) > 1 or any(n < -1 for n in sizes):
        raise node.fail(f"size_splits {sizes}: sizes must be >= 0, with at most one -1")
    if unknown:
        sizes[unknown[0]] = dim - (sum(sizes) + 1)
        if sizes[unknown[0]] < 0:
            raise node.fail(f"size_splits {sizes} exceed dimension {axis} of size {dim}")
    if sum(sizes) != dim:
        raise node.fail(f"size_splits {sizes} do not add up to dimension {axis} of size {dim}")
    return sizes


# -- TILE / REVERSE_V2 ---------------------------------------------------------------------------

@register("TILE", *DATA_TYPES)
def tile(node):
    node.expect_inputs(2)
    in_shape = tuple(node.input(0).shape)
    if known_at_run_time(node, 1):
        node.dynamic = True  # the output shape depends on the multiples

        def run_values(x, multiples):
            reps = _multiples(node, x.shape, int_vector(node, 1, "the multiples", multiples))
            from ..budget import empty
            out = empty(node, tuple(d * r for d, r in zip(x.shape, reps)), x.dtype)
            _tile_into(x, reps, out)
            return [out]
        return run_values
    reps = _multiples(node, in_shape, int_vector(node, 1, "the multiples"))
    node.outputs[0].shape = tuple(d * r for d, r in zip(in_shape, reps))
    out_view, in_view = _tile_views(in_shape, reps)

    def run(x, _, out):
        np.copyto(out.reshape(out_view), x.reshape(in_view))
    return run


def _multiples(node, in_shape: tuple, reps: list) -> list:
    if len(reps) != len(in_shape) or any(r < 0 for r in reps):
        raise node.fail(f"multiples {reps} must be {len(in_shape)} non-negative values")
    return reps


def _tile_views(in_shape: tuple, reps: list) -> tuple:
    """out viewed as (r0, d0, r1, d1, ...) is x viewed as (1, d0, 1, d1, ...) broadcast."""
    return (tuple(v for r, d in zip(reps, in_shape) for v in (r, d)),
            tuple(v for d in in_shape for v in (1, d)))


def _tile_into(x, reps: list, out) -> None:
    out_view, in_view = _tile_views(x.shape, reps)
    np.copyto(out.reshape(out_view), x.reshape(in_view))


@register("REVERSE_V2", *DATA_TYPES)
def reverse_v2(node):
    node.expect_inputs(2)
    in_shape = node.input(0).shape
    axes = {normalize_axis(node, a, len(in_shape)) for a in int_vector(node, 1, "the axis")}
    node.outputs[0].shape = tuple(in_shape)
    flip = tuple(slice(None, None, -1) if d in axes else slice(None) for d in range(len(in_shape)))

    def run(x, _, out):
        np.copyto(out, x[flip])
    return run
