"""Sparse tensors. A sparse constant (as pruned models store their weights) is made dense once,
at prepare, whichever op reads it (`densify_input`): DENSIFY's output is then a constant, and a
FULLY_CONNECTED that reads sparse weights directly (as LiteRT's can) sees ordinary weights."""
from __future__ import annotations

import numpy as np

from .registry import register

DENSE, SPARSE_CSR = 0, 1


def densify(values: np.ndarray, shape: tuple, sparsity) -> np.ndarray:
    """The dense array of `shape` that a sparse tensor's stored `values` and its
    SparsityParameters describe (TFLite's FormatConverter::SparseToDense, vectorized).

    Every index is checked: bad metadata raises ValueError saying what is wrong, never reads or
    writes out of bounds, and never builds more coordinates than the dense tensor has."""
    n, order, block_map = len(shape), list(sparsity.traversal_order), list(sparsity.block_map)
    k, dims = len(block_map), sparsity.dim_metadata
    if sorted(order[:n]) != list(range(n)) or sorted(order[n:]) != list(range(n, n + k)):
        raise ValueError(f"traversal_order {order} must order the {n} dimensions, then the "
                         f"{k} block dimensions")
    if any(not 0 <= d < n for d in block_map) or sorted(set(block_map)) != block_map:
        raise ValueError(f"block_map {block_map} must name distinct dimensions of the rank-{n} "
                         "tensor in increasing order")
    if len(dims) != n + k:
        raise ValueError(f"{len(dims)} dim_metadata entries for {n + k} dimensions")
    block = []
    for j, d in enumerate(block_map):
        size = int(dims[order[n + j]].dense_size)
        if size < 1 or shape[d] % size:
            raise ValueError(f"block size {size} does not divide dimension {d} of {list(shape)}")
        block.append(size)
    expanded = [shape[d] // (block[block_map.index(d)] if d in block_map else 1)
                for d in range(n)] + block
    total = int(np.prod(shape, dtype=np.int64))
    pos = np.zeros(1, np.int64)  # each partial coordinate's position in its level
    coords: list = []
    for level in range(n + k):
        meta, size = dims[level], expanded[order[level]]
        if meta.format == DENSE:
            if int(meta.dense_size) != size:
                raise ValueError(f"dim_metadata {level}: dense_size {meta.dense_size}, but the "
                                 f"dimension has {size}")
            if len(pos) * size > total:
                raise ValueError(f"dim_metadata {level}: more coordinates than the tensor has")
            coords = [np.repeat(c, size) for c in coords]
            inner = np.tile(np.arange(size, dtype=np.int64), len(pos))
            coords.append(inner)
            pos = np.repeat(pos, size) * size + inner
        elif meta.format == SPARSE_CSR:
            seg, ind = meta.segments, meta.indices
            if seg is None or ind is None:
                raise ValueError(f"dim_metadata {level}: SPARSE_CSR needs segments and indices")
            seg, ind = np.asarray(seg, np.int64).reshape(-1), np.asarray(ind, np.int64).reshape(-1)
            if len(pos) and int(pos.max()) + 1 >= len(seg):
                raise ValueError(f"dim_metadata {level}: {len(seg)} segments, but "
                                 f"{int(pos.max()) + 2} are needed")
            if len(seg) and (seg[0] < 0 or np.any(np.diff(seg) < 0) or seg[-1] > len(ind)):
                raise ValueError(f"dim_metadata {level}: segments must rise from 0 to at most "
                                 f"the {len(ind)} indices")
            counts = seg[pos + 1] - seg[pos]
            count = int(counts.sum())
            if count > total:
                raise ValueError(f"dim_metadata {level}: more coordinates than the tensor has")
            starts = np.repeat(seg[pos] - (np.cumsum(counts) - counts), counts)
            at = starts + np.arange(count, dtype=np.int64)
            here = ind[at]
            if count and (here.min() < 0 or here.max() >= size):
                raise ValueError(f"dim_metadata {level}: indices must lie in [0, {size})")
            coords = [np.repeat(c, counts) for c in coords]
            coords.append(here)
            pos = at
        else:
            raise ValueError(f"dim_metadata {level}: unknown format {meta.format}")
    if len(pos) != values.size:
        raise ValueError(f"the metadata describes {len(pos)} stored values, the buffer holds "
                         f"{values.size}")
    index = [None] * n
    for level in range(n):
        index[order[level]] = coords[level]
    for level in range(n, n + k):
        j = order[level] - n
        d = block_map[j]
        index[d] = index[d] * block[j] + coords[level]
    dense = np.zeros(shape, values.dtype)
    if n:
        dense.reshape(-1)[np.ravel_multi_index(index, shape)] = values
    elif values.size:
        dense[()] = values[0]
    return dense


def densify_input(node, k: int, model) -> None:
    """Make input `k` of `node`, a sparse constant, an ordinary (dense, read-only) constant:
    every op can then read sparse weights, as DENSIFY's consumers and LiteRT's sparse
    FULLY_CONNECTED do. Bad sparsity parameters, or a dense shape too large for this machine,
    fail naming the operator and the tensor."""
    x = node.inputs[k]
    tensor = model.subgraphs[node.subgraph].tensors[x.index]
    buffer = model.buffers[tensor.buffer]
    values = buffer.data.view(x.dtype).reshape(-1) if buffer.nbytes else np.zeros(0, x.dtype)
    from .. import budget  # the budget module imports the kernels' registry
    need = budget.nbytes(x.shape, x.dtype)
    held = budget.of(node)
    if held is not None:
        held.charge(("plan", node.subgraph), need,
                    f"subgraph {node.subgraph} operator {node.index} ({node.op}): densifying "
                    f"input tensor {x.index} {x.name!r} to {list(x.shape)}")
    elif need > budget.machine_limit():
        raise node.fail(f"input tensor {x.index} {x.name!r}: the dense shape {list(x.shape)} "
                        f"needs {need} bytes, more than this machine allows")
    try:
        dense = densify(values, tuple(x.shape), tensor.sparsity)
    except ValueError as e:
        raise node.fail(f"input tensor {x.index} {x.name!r} has bad sparsity parameters: "
                        f"{e}") from None
    dense.flags.writeable = False
    x.data = dense


@register("DENSIFY", "float32", "float16", "int8")
def densify_op(node):
    """The plan densifies every sparse constant an op reads (`densify_input`), once, at
    prepare: DENSIFY's output is that constant and no step runs."""
    node.expect_inputs(1)
    x = node.input(0)
    if x.data is None:
        raise node.fail(f"input tensor {x.index} {x.name!r} must be a sparse constant")
    if node.outputs[0].dtype != x.dtype:
        raise node.fail(f"the output must be {x.type_name}, got {node.outputs[0].type_name}")
    node.outputs[0].shape = tuple(x.shape)
    node.outputs[0].data = x.data
    return lambda *arrays: None


# -- SPARSE_TO_DENSE -----------------------------------------------------------------------------

SPARSE_VALUE_TYPES = ("float32", "int32", "int64", "int8", "uint8")


def _sparse_indices(node, indices: np.ndarray, shape: tuple) -> tuple:
    """Indices as TFLite reads them (a scalar, a vector of 1-D indices, or [N, rank] rows) as
    one index array per output dimension; out-of-range ones are an error."""
    rows = indices.reshape(-1, 1) if indices.ndim < 2 else indices
    if rows.shape[1] != len(shape):
        raise node.fail(f"indices of {rows.shape[1]} coordinates for an output of rank "
                        f"{len(shape)}")
    if rows.size and (rows.min() < 0 or np.any(rows.max(axis=0) >= np.asarray(shape))):
        raise node.fail(f"an index lies outside the output shape {list(shape)}")
    return tuple(rows.T.astype(np.intp))


@register("SPARSE_TO_DENSE", "int32", "int64")
def sparse_to_dense(node):
    """default_value everywhere, then values (one per index, or one for all) at the indices;
    the last of repeated indices wins."""
    node.expect_inputs(4)
    idx, shape_t, vals, default = (node.input(k) for k in range(4))
    if vals.type_name not in SPARSE_VALUE_TYPES or default.dtype != vals.dtype:
        raise node.fail(f"values and default_value must share one of {SPARSE_VALUE_TYPES}, got "
                        f"{vals.type_name} and {default.type_name}")
    if len(idx.shape) > 2 or len(shape_t.shape) != 1:
        raise node.fail("indices must have rank <= 2 and output_shape must be a vector")
    count = 1 if len(idx.shape) == 0 else idx.shape[0]
    if len(vals.shape) > 1 or (len(vals.shape) == 1 and vals.shape[0] not in (1, count)):
        raise node.fail(f"values must be a scalar or hold one value per index ({count}), got "
                        f"{list(vals.shape)}")
    if int(np.prod(default.shape)) != 1:
        raise node.fail("default_value must be a scalar")

    def fill(indices, values, fallback, out):
        out.fill(fallback.reshape(-1)[0])
        if out.size:
            out[_sparse_indices(node, indices, out.shape)] = values

    if shape_t.data is None:
        node.dynamic = True
        dtype = node.outputs[0].dtype

        def run_dynamic(indices, output_shape, values, fallback):
            out = np.empty(tuple(int(d) for d in output_shape), dtype)
            fill(indices, values, fallback, out)
            return [out]
        return run_dynamic
    shape = tuple(int(d) for d in shape_t.data)
    if any(d < 0 for d in shape):
        raise node.fail(f"output_shape {list(shape)} has a negative dimension")
    node.outputs[0].shape = shape
    return lambda indices, _shape, values, fallback, out: fill(indices, values, fallback, out)


# -- EMBEDDING_LOOKUP_SPARSE ---------------------------------------------------------------------

SUM, MEAN, SQRTN = 0, 1, 2


@register("EMBEDDING_LOOKUP_SPARSE", "int32")
def embedding_lookup_sparse(node):
    """Weighted sums of params rows: ids[i] * weights[i] goes to the output row named by
    indices[i] without its last coordinate. As TFLite's kernel, each run of consecutive
    lookups into one row is combined (MEAN: divided by its total weight, SQRTN: by the root
    of its squared weights) when the run ends."""
    node.expect_inputs(5)
    ids, indices, dense_shape, weights, params = (node.input(k) for k in range(5))
    if params.type_name != "float32" or weights.type_name != "float32":
        raise node.fail("weights and params must be float32")
    if (len(ids.shape) != 1 or len(indices.shape) != 2 or indices.shape[0] != ids.shape[0]
            or tuple(weights.shape) != tuple(ids.shape) or len(params.shape) < 1):
        raise node.fail(f"expected ids [N], indices [N, rank], weights [N], params [rows, ...]; "
                        f"got {list(ids.shape)}, {list(indices.shape)}, {list(weights.shape)}, "
                        f"{list(params.shape)}")
    if dense_shape.data is None:
        raise node.fail("dense_shape must be a constant")
    lookup_shape = [int(d) for d in dense_shape.data.reshape(-1)]
    if len(lookup_shape) != indices.shape[1] or any(d < 0 for d in lookup_shape):
        raise node.fail(f"dense_shape {lookup_shape} must have {indices.shape[1]} "
                        "non-negative dimensions (the indices' width)")
    combiner = int(node.options.combiner or 0)
    if combiner not in (SUM, MEAN, SQRTN):
        raise node.fail(f"unknown combiner {combiner}")
    rows_shape = tuple(lookup_shape[:-1])
    node.outputs[0].shape = rows_shape + tuple(params.shape[1:])
    n_rows = params.shape[0]

    def run(id_values, index_values, _shape, w, table, out):
        flat = out.reshape(int(np.prod(rows_shape, dtype=np.int64)), -1)
        flat.fill(0)
        if not id_values.size:
            return
        if id_values.min() < 0 or id_values.max() >= n_rows:
            raise node.fail(f"an id lies outside the {n_rows} rows of params")
        coords = index_values[:, :-1]
        if coords.size and (coords.min() < 0 or np.any(coords.max(axis=0) >= rows_shape)):
            raise node.fail(f"an index lies outside dense_shape {lookup_shape}")
        bucket = (np.ravel_multi_index(tuple(coords.T), rows_shape) if rows_shape
                  else np.zeros(len(id_values), np.intp))
        terms = table.reshape(n_rows, -1)[id_values] * w[:, None]
        starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
        sums = np.add.reduceat(terms, starts, axis=0)
        run_rows = bucket[starts]
        if combiner == SUM:
            np.add.at(flat, run_rows, sums)
            return
        if combiner == MEAN:
            divisors = np.add.reduceat(w, starts)
        else:
            divisors = np.sqrt(np.add.reduceat(w * w, starts))
        if len(np.unique(run_rows)) == len(run_rows):
            flat[run_rows] = sums / divisors[:, None]
            return
        for row, s, d in zip(run_rows, sums, divisors):  # a row revisited: TFLite divides again
            flat[row] = (flat[row] + s) / d
    return run
