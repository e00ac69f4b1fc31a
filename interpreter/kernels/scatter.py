"""Ops that place values at computed positions: SCATTER_ND, DYNAMIC_UPDATE_SLICE, ONE_HOT,
MATRIX_DIAG, MATRIX_SET_DIAG, REVERSE_SEQUENCE."""
from __future__ import annotations

import numpy as np

from .common import DATA_TYPES
from .errors import IndexOutOfRange
from .registry import DATA_INPUT, register

# The input whose type selects the kernel: SCATTER_ND's updates, ONE_HOT's on_value.
DATA_INPUT.setdefault("SCATTER_ND", 1)
DATA_INPUT.setdefault("ONE_HOT", 2)

INDEX_TYPES = ("int32", "int64")


def _index_input(node, k: int, what: str):
    t = node.input(k)
    if t.type_name not in INDEX_TYPES:
        raise node.fail(f"{what} (input {k}) must be int32 or int64, got {t.type_name}")
    return t


# -- SCATTER_ND ------------------------------------------------------------------------------

@register("SCATTER_ND", "float32", "int32", "int64", "int8", "uint8", "bool")
def scatter_nd(node):
    """A zero tensor of the given shape with `updates` added at `indices` (repeated indices
    add up; bool updates OR together, integers wrap, as TFLite's WrappingAdd)."""
    node.expect_inputs(3)
    indices = _index_input(node, 0, "indices")
    updates = node.input(1)
    shape_t = node.input(2)
    if shape_t.dtype != indices.dtype:
        raise node.fail("indices and shape must have the same type")
    if len(indices.shape) < 1 or len(shape_t.shape) != 1:
        raise node.fail("indices must have rank >= 1 and shape must be 1-D")
    nd = indices.shape[-1]
    outer = tuple(indices.shape[:-1])

    def check(shape, error=node.fail):
        if nd > len(shape):
            raise error(f"indices address {nd} dimensions of a rank-{len(shape)} output")
        want = outer + tuple(shape[nd:])
        if tuple(updates.shape) != want:
            raise error(f"updates have the shape {list(updates.shape)}, expected "
                            f"{list(want)} for indices {list(indices.shape)} and output "
                            f"shape {list(shape)}")

    def scatter(idx, upd, out):
        shape = out.shape
        out.fill(0)
        if out.size == 0 or upd.size == 0:
            return
        idx = idx.reshape(-1, nd).astype(np.int64, copy=False)
        bad = (idx < 0) | (idx >= np.asarray(shape[:nd], np.int64))
        if bad.any():
            raise IndexOutOfRange(f"index {idx[bad.any(axis=1)][0].tolist()} is out of bounds for "
                            f"the output shape {list(shape)}")
        flat = np.ravel_multi_index(tuple(idx.T), shape[:nd]) if nd else \
            np.zeros(len(idx), np.int64)
        np.add.at(out.reshape((-1,) + shape[nd:]), flat,
                  upd.reshape((len(idx),) + shape[nd:]))

    if shape_t.data is None:
        node.dynamic = True

        def run_dynamic(idx, upd, shape_value):
            shape = tuple(int(d) for d in shape_value)
            check(shape, ValueError)
            out = np.empty(shape, updates.dtype)
            scatter(idx, upd, out)
            return [out]
        return run_dynamic
    shape = tuple(int(d) for d in shape_t.data)
    if any(d < 0 for d in shape):
        raise node.fail(f"the output shape {list(shape)} has a negative dimension")
    check(shape)
    node.outputs[0].shape = shape
    return lambda idx, upd, _shape, out: scatter(idx, upd, out)


# -- DYNAMIC_UPDATE_SLICE --------------------------------------------------------------------

@register("DYNAMIC_UPDATE_SLICE", *DATA_TYPES)
def dynamic_update_slice(node):
    """`operand` with `update` written at `start_indices`, each start clamped so that the
    update fits (as XLA's DynamicUpdateSlice)."""
    node.expect_inputs(3)
    operand, update = node.input(0), node.input(1)
    starts = _index_input(node, 2, "start_indices")
    rank = len(operand.shape)
    if len(update.shape) != rank or update.dtype != operand.dtype:
        raise node.fail(f"update {update.type_name}{list(update.shape)} must have the rank and "
                        f"type of the operand {operand.type_name}{list(operand.shape)}")
    if tuple(starts.shape) != (rank,):
        raise node.fail(f"start_indices must have shape [{rank}], got {list(starts.shape)}")
    if any(u > o for u, o in zip(update.shape, operand.shape)):
        raise node.fail(f"update {list(update.shape)} is larger than the operand "
                        f"{list(operand.shape)}")
    node.outputs[0].shape = tuple(operand.shape)
    limits = [o - u for o, u in zip(operand.shape, update.shape)]
    sizes = tuple(update.shape)

    def run(x, upd, start, out):
        if out is not x:
            np.copyto(out, x)
        where = tuple(slice(s, s + n) for s, n in
                      ((min(max(int(v), 0), lim), n) for v, lim, n in zip(start, limits, sizes)))
        out[where] = upd
    return run


# -- ONE_HOT ---------------------------------------------------------------------------------

@register("ONE_HOT", "float32", "int32", "int64", "int8", "uint8", "bool")
def one_hot(node):
    """on_value where the position along `axis` equals the index, off_value elsewhere
    (indices outside [0, depth) give a row of off_value)."""
    node.expect_inputs(4)
    indices = _index_input(node, 0, "indices")
    on, off = node.input(2), node.input(3)
    if on.dtype != off.dtype or on.dtype != node.outputs[0].dtype:
        raise node.fail(f"on_value, off_value and the output must have one type, got "
                        f"{on.type_name}, {off.type_name} and {node.outputs[0].type_name}")
    depth_t = node.input(1)
    if depth_t.type_name != "int32":
        raise node.fail(f"depth must be int32, got {depth_t.type_name}")
    rank = len(indices.shape) + 1
    axis = int(node.options.axis)
    axis = rank - 1 if axis == -1 else axis
    if not 0 <= axis < rank:
        raise node.fail(f"axis {node.options.axis} is out of range for an output of rank {rank}")

    def expand(idx, depth):
        positions = np.arange(depth, dtype=np.int64).reshape((depth,) + (1,) * (rank - 1 - axis))
        return np.expand_dims(idx, axis) == positions

    def fill(idx, depth, on_v, off_v, out):
        np.copyto(out, np.where(expand(idx, depth), on_v.reshape(()), off_v.reshape(())))

    if depth_t.data is None:
        node.dynamic = True

        def run_dynamic(idx, depth, on_v, off_v):
            d = int(depth.reshape(-1)[0])
            if d < 0:
                raise ValueError(f"depth must be >= 0, got {d}")
            shape = tuple(idx.shape[:axis]) + (d,) + tuple(idx.shape[axis:])
            out = np.empty(shape, on.dtype)
            fill(idx, d, on_v, off_v, out)
            return [out]
        return run_dynamic
    depth = int(depth_t.data.reshape(-1)[0])
    if depth < 0:
        raise node.fail(f"depth must be >= 0, got {depth}")
    node.outputs[0].shape = tuple(indices.shape[:axis]) + (depth,) + tuple(indices.shape[axis:])
    return lambda idx, _depth, on_v, off_v, out: fill(idx, depth, on_v, off_v, out)


# -- MATRIX_DIAG / MATRIX_SET_DIAG -----------------------------------------------------------

# LiteRT's kernels treat every other type (float16, bool) as 4-byte floats, which reads and
# writes out of bounds: those types are not supported.
MATRIX_TYPES = ("float32", "int8", "uint8", "int16", "int32", "int64")


@register("MATRIX_DIAG", *MATRIX_TYPES)
def matrix_diag(node):
    """[..., N] -> [..., N, N] with the input on the diagonal and zeros elsewhere."""
    node.expect_inputs(1)
    x = node.input(0)
    if len(x.shape) < 1:
        raise node.fail("input must have rank >= 1")
    n = x.shape[-1]
    node.outputs[0].shape = tuple(x.shape) + (n,)
    k = np.arange(n)

    def run(d, out):
        out.fill(0)
        out[..., k, k] = d
    return run


@register("MATRIX_SET_DIAG", *MATRIX_TYPES)
def matrix_set_diag(node):
    """[..., M, N] with its main diagonal replaced by [..., min(M, N)]."""
    node.expect_inputs(2)
    x, diag = node.input(0), node.input(1)
    if len(x.shape) < 2:
        raise node.fail(f"input must have rank >= 2, got shape {list(x.shape)}")
    n = min(x.shape[-2:])
    want = tuple(x.shape[:-2]) + (n,)
    if tuple(diag.shape) != want or diag.dtype != x.dtype:
        raise node.fail(f"diagonal must be {x.type_name}{list(want)}, got "
                        f"{diag.type_name}{list(diag.shape)}")
    node.outputs[0].shape = tuple(x.shape)
    k = np.arange(n)

    def run(a, d, out):
        if out is not a:
            np.copyto(out, a)
        out[..., k, k] = d
    return run


# -- REVERSE_SEQUENCE ------------------------------------------------------------------------

@register("REVERSE_SEQUENCE", "float32", "uint8", "int16", "int32", "int64")
def reverse_sequence(node):
    """For each batch entry b, reverse the first seq_lengths[b] elements along seq_dim."""
    node.expect_inputs(2)
    x = node.input(0)
    lengths = _index_input(node, 1, "seq_lengths")
    rank = len(x.shape)
    seq_dim, batch_dim = int(node.options.seq_dim), int(node.options.batch_dim)
    if not (0 <= seq_dim < rank and 0 <= batch_dim < rank and seq_dim != batch_dim):
        raise node.fail(f"seq_dim {seq_dim} and batch_dim {batch_dim} must be different "
                        f"dimensions of the rank-{rank} input")
    if tuple(lengths.shape) != (x.shape[batch_dim],):
        raise node.fail(f"seq_lengths must have shape [{x.shape[batch_dim]}], got "
                        f"{list(lengths.shape)}")
    node.outputs[0].shape = tuple(x.shape)
    n = x.shape[seq_dim]
    positions = np.arange(n)

    def run(a, lens, out):
        lens = lens.astype(np.int64)
        if np.any(lens > n) or np.any(lens < 0):
            raise ValueError(f"seq_lengths {lens.tolist()} must be in [0, {n}]")
        # source position along seq_dim for each (batch, position)
        src = np.where(positions[None, :] < lens[:, None], lens[:, None] - 1 - positions, positions)
        a2 = np.moveaxis(a, (batch_dim, seq_dim), (0, 1))
        o2 = np.moveaxis(out, (batch_dim, seq_dim), (0, 1))
        o2[...] = a2[np.arange(len(lens))[:, None], src]
    return run
