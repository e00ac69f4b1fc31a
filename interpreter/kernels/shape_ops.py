"""Ops that change a tensor's shape but not its data, or make a tensor from a shape:
RESHAPE SQUEEZE EXPAND_DIMS SHAPE RANK BROADCAST_TO FILL ZEROS_LIKE RANGE (TFLite has no
ONES_LIKE builtin).

A shape given by a tensor (RESHAPE's new shape, FILL's dims, BROADCAST_TO's shape, EXPAND_DIMS'
axis, RANGE's bounds) is read at prepare when it is constant; when the model computes it (or takes
it as an input), the output shape is known only while running and the kernel is dynamic
(`node.dynamic`: `run(*inputs)` returns the outputs).
"""
from __future__ import annotations

import numpy as np

from .common import DATA_TYPES, constant_value, known_at_run_time, normalize_axis
from .registry import register


def _copy_reshaped(shape: tuple):
    """run(x, ..., out): out = x viewed with the output's shape (a plain copy)."""
    def run(x, *rest):
        np.copyto(rest[-1], x.reshape(shape))
    return run


def _one_output(node) -> None:
    """LiteRT's NumOutputs(node) == 1 (a second output no kernel writes reached a fold)."""
    if len(node.outputs) != 1:
        raise node.fail(f"has {len(node.outputs)} outputs; {node.op} writes 1")


def _known(node, value) -> None:
    """Mark output 0's value as known at prepare (then no step runs)."""
    value = np.asarray(value, node.outputs[0].dtype).reshape(node.outputs[0].shape)
    value.flags.writeable = False
    node.outputs[0].data = value


# -- RESHAPE -------------------------------------------------------------------------------------

def _reshape_request(node) -> list:
    """The requested shape (one -1 allowed): the shape tensor when it is an int32 vector known
    at prepare (int64 too when the options give no shape), else `options.new_shape`; a shape
    tensor known only at run time with no options to fall back on fails."""
    opts = node.options
    option_shape = getattr(opts, "new_shape", None) if opts is not None else None
    shape_t = node.inputs[1] if len(node.inputs) == 2 else None
    if shape_t is not None and len(shape_t.shape) == 1:
        if shape_t.type_name == "int32":
            if shape_t.data is not None:
                return [int(d) for d in shape_t.data]
            if not option_shape:
                constant_value(node, 1, "the new shape")  # raises: known only at run time
        elif shape_t.type_name == "int64" and shape_t.data is not None and not option_shape:
            return [int(d) for d in shape_t.data]  # TFLite reads only int32; we accept int64
    if option_shape is None:
        return []
    shape = [int(d) for d in option_shape]
    return [] if shape == [0] else shape  # legacy models write [0] for a scalar


def _resolve_stretch(node, in_shape: tuple, request: list) -> tuple:
    """TFLite's -1 rule: the one -1 takes the remaining element count."""
    n_in = int(np.prod(in_shape, dtype=np.int64))
    nz_in = int(np.prod([d for d in in_shape if d != 0], dtype=np.int64))
    shape, stretch, n_out, nz_out = list(request), -1, 1, 1
    for i, d in enumerate(shape):
        if d == -1:
            if stretch != -1:
                raise node.fail(f"new shape {request} has more than one -1")
            stretch = i
            continue
        if d < 0:
            raise node.fail(f"new shape {request} has a negative dimension")
        if d != 0:
            nz_out *= d
        n_out *= d
    if stretch != -1:
        shape[stretch] = 0 if (n_in == 0 and n_out != 0) else nz_in // nz_out
        n_out *= shape[stretch]
    if n_out != n_in:
        raise node.fail(f"cannot reshape {list(in_shape)} ({n_in} elements) to {request} "
                        f"({n_out} elements)")
    return tuple(shape)


@register("RESHAPE", *DATA_TYPES)
def reshape(node):
    node.expect_inputs(1, 2)
    shape_t = node.inputs[1] if len(node.inputs) == 2 else None
    if (shape_t is not None and shape_t.data is None and len(shape_t.shape) == 1
            and shape_t.shape[0] > 0 and shape_t.type_name in ("int32", "int64")):
        return _shaped_while_running(node, lambda x, new_shape: x.reshape(
            _resolve_stretch(node, x.shape, [int(d) for d in new_shape])).copy())
    shape = _resolve_stretch(node, node.input(0).shape, _reshape_request(node))
    node.outputs[0].shape = shape
    return _copy_reshaped(shape)


def _shaped_while_running(node, result):
    """The kernel of an op whose input 1 (a shape, an axis), computed by the model, sets the
    output shape: known only while running, so the plan calls `run(x, value)` and takes the
    array it returns, result(x, value)."""
    node.dynamic = True
    return lambda x, value: [result(x, value)]


# -- SQUEEZE / EXPAND_DIMS -----------------------------------------------------------------------

@register("SQUEEZE", *DATA_TYPES)
def squeeze(node):
    node.expect_inputs(1)
    in_shape = node.input(0).shape
    rank = len(in_shape)
    dims = getattr(node.options, "squeeze_dims", None) if node.options is not None else None
    if dims:
        drop = {normalize_axis(node, d, rank, "squeeze dimension") for d in dims}
        for d in sorted(drop):
            if in_shape[d] != 1:
                raise node.fail(f"cannot squeeze dimension {d} of shape {list(in_shape)}: "
                                "its size is not 1")
    else:
        drop = {d for d, n in enumerate(in_shape) if n == 1}
    shape = tuple(n for d, n in enumerate(in_shape) if d not in drop)
    node.outputs[0].shape = shape
    return _copy_reshaped(shape)


@register("EXPAND_DIMS", *DATA_TYPES)
def expand_dims(node):
    node.expect_inputs(2)
    if known_at_run_time(node, 1):
        return _shaped_while_running(
            node, lambda x, axis: x.reshape(_expanded(node, x.shape, axis)).copy())
    shape = _expanded(node, node.input(0).shape, constant_value(node, 1, "the axis"))
    node.outputs[0].shape = shape
    return _copy_reshaped(shape)


def _expanded(node, in_shape: tuple, axis) -> tuple:
    axis = np.asarray(axis).reshape(-1)
    if axis.size != 1:
        raise node.fail(f"the axis must hold one value, got {axis.size}")
    axis = normalize_axis(node, axis[0], len(in_shape) + 1)
    return tuple(in_shape[:axis]) + (1,) + tuple(in_shape[axis:])


# -- SHAPE / RANK --------------------------------------------------------------------------------

@register("SHAPE", *DATA_TYPES)
def shape(node):
    node.expect_inputs(1)
    _one_output(node)
    out = node.outputs[0]
    if out.type_name not in ("int32", "int64"):
        raise node.fail(f"the output must be int32 or int64, got {out.type_name}")
    in_shape = node.input(0).shape
    out.shape = (len(in_shape),)
    _known(node, in_shape)
    return _copy_reshaped(out.shape)  # not run: the value is known


@register("RANK", *DATA_TYPES)
def rank(node):
    node.expect_inputs(1)
    _one_output(node)
    node.outputs[0].shape = ()
    _known(node, len(node.input(0).shape))
    return _copy_reshaped(())


# -- tensors made from a shape -------------------------------------------------------------------

def _shape_vector(node, k: int, what: str, value=None) -> tuple:
    """Input k as a shape: its constant value, or `value` (its value while running)."""
    t = node.input(k)
    if t.type_name not in ("int32", "int64"):
        raise node.fail(f"{what} must be int32 or int64, got {t.type_name}")
    value = constant_value(node, k, what) if value is None else np.asarray(value)
    if value.ndim != 1:
        raise node.fail(f"{what} must be a vector, got shape {list(value.shape)}")
    if (value < 0).any():
        raise node.fail(f"{what} {value.tolist()} has a negative dimension")
    return tuple(int(d) for d in value)


def _broadcast_shape(node, in_shape: tuple, shape: tuple) -> tuple:
    ok = len(in_shape) <= len(shape) and all(
        a in (1, b) for a, b in zip(in_shape[::-1], shape[::-1]))
    if not ok:
        raise node.fail(f"cannot broadcast {list(in_shape)} to {list(shape)}")
    return shape


@register("BROADCAST_TO", *DATA_TYPES)
def broadcast_to(node):
    node.expect_inputs(2)
    if known_at_run_time(node, 1):
        def broadcast(x, shape):
            from ..budget import empty
            shape = _broadcast_shape(node, x.shape, _shape_vector(node, 1, "the shape", shape))
            out = empty(node, shape, x.dtype)
            np.copyto(out, x)
            return out
        return _shaped_while_running(node, broadcast)
    node.outputs[0].shape = _broadcast_shape(node, node.input(0).shape,
                                             _shape_vector(node, 1, "the shape"))

    def run(x, _, out):
        np.copyto(out, x)
    return run


@register("FILL", "int32", "int64")
def fill(node):
    node.expect_inputs(2)
    value = node.input(1)
    if value.shape not in ((), (1,)):
        raise node.fail(f"the value must be a scalar, got shape {list(value.shape)}")
    if value.type_name != node.outputs[0].type_name:
        raise node.fail(f"the value is {value.type_name} but the output is "
                        f"{node.outputs[0].type_name}")
    if known_at_run_time(node, 0):
        node.dynamic = True
        dtype = node.outputs[0].dtype

        def run_dynamic(dims, v):
            from ..budget import empty
            return [empty(node, _shape_vector(node, 0, "the dims", dims), dtype, v.reshape(()))]
        return run_dynamic
    node.outputs[0].shape = _shape_vector(node, 0, "the dims")

    def run(_, v, out):
        np.copyto(out, v.reshape(()))
    return run


@register("ZEROS_LIKE", *DATA_TYPES)
def zeros_like(node):
    node.expect_inputs(1)
    node.outputs[0].shape = tuple(node.input(0).shape)
    _known(node, np.zeros(node.outputs[0].shape, node.outputs[0].dtype))
    return _copy_reshaped(node.outputs[0].shape)


@register("RANGE", "int32", "int64", "float32")
def range_(node):
    node.expect_inputs(3)
    _one_output(node)
    for k, what in enumerate(("start", "limit", "delta")):   # as LiteRT: 0-d each
        if len(node.input(k).shape) != 0:
            raise node.fail(f"the {what} (input {k}) must be a scalar, got shape "
                            f"{list(node.input(k).shape)}")
    dtype = node.input(0).dtype
    if any(known_at_run_time(node, k) for k in range(3)):
        node.dynamic = True

        def run_dynamic(start, limit, delta):
            bounds = [np.asarray(v, dtype).reshape(()) for v in (start, limit, delta)]
            from ..budget import empty
            out = empty(node, (_range_size(node, dtype, *bounds),), dtype)
            _count(bounds[0], None, bounds[2], out)
            return [out]
        return run_dynamic
    start, limit, delta = (np.asarray(constant_value(node, k, what), dtype).reshape(())
                           for k, what in enumerate(("the start", "the limit", "the delta")))
    node.outputs[0].shape = (_range_size(node, dtype, start, limit, delta),)
    return _count


def _range_size(node, dtype, start, limit, delta) -> int:
    if delta == 0:
        raise node.fail("the delta must not be 0")
    if not ((start >= limit and delta < 0) or (start <= limit and delta > 0)):
        raise node.fail(f"cannot count from {start} to {limit} by {delta}")
    if np.issubdtype(dtype, np.integer):
        return (abs(int(limit) - int(start)) + abs(int(delta)) - 1) // abs(int(delta))
    # in the tensor's precision, as TFLite computes it
    return int(np.ceil(np.abs((limit - start) / delta)))


def _count(start, _, delta, out):
    # TFLite accumulates `value += delta`; a float32 cumsum adds in the same order.
    if out.size:
        out[0] = start
        out[1:] = delta
        np.cumsum(out, out=out)
