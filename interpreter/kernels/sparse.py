"""Sparse tensors: DENSIFY (a sparse constant, as pruned models store their weights, made
dense once at prepare: its consumers then see an ordinary constant)."""
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


@register("DENSIFY", "float32", "float16", "int8")
def densify_op(node):
    """Densified at prepare: the output becomes a constant and no step runs."""
    node.expect_inputs(1)
    x = node.input(0)
    model = getattr(node.runtime, "model", None)
    tensor = (model.subgraphs[node.subgraph].tensors[x.index] if model is not None else None)
    if tensor is None or tensor.sparsity is None:
        raise node.fail(f"input tensor {x.index} {x.name!r} must be a sparse constant")
    if node.outputs[0].dtype != x.dtype:
        raise node.fail(f"the output must be {x.type_name}, got {node.outputs[0].type_name}")
    buffer = model.buffers[tensor.buffer]
    values = buffer.data.view(x.dtype).reshape(-1) if buffer.nbytes else np.zeros(0, x.dtype)
    need = int(np.prod(x.shape, dtype=np.int64)) * x.dtype.itemsize
    from ..plan import memory_limit  # plan imports the kernels: import it only here
    if need > memory_limit():
        raise node.fail(f"input tensor {x.index} {x.name!r}: the dense shape {list(x.shape)} "
                        f"needs {need} bytes, more than this machine allows")
    try:
        dense = densify(values, tuple(x.shape), tensor.sparsity)
    except ValueError as e:
        raise node.fail(f"input tensor {x.index} {x.name!r} has bad sparsity parameters: "
                        f"{e}") from None
    dense.flags.writeable = False
    node.outputs[0].shape = tuple(x.shape)
    node.outputs[0].data = dense
    return lambda *arrays: None
