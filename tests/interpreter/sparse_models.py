"""Models holding sparse constants (the format's SparsityParameters), written with the schema
writer: a test-side encoder from a dense array to the stored values and index vectors."""
from __future__ import annotations

import numpy as np

from edgelite.schema import (DimensionMetadata, Model, Operator, OperatorCode, SparsityParameters,
                             Subgraph, Tensor, default_options, dtype_name, save)

DENSE, SPARSE_CSR = 0, 1


def expanded_view(dense: np.ndarray, order, block_map, block_size) -> np.ndarray:
    """`dense` with each blocked dimension split in (blocks, block) and the n + k axes in
    traversal order."""
    n = dense.ndim
    shape, axis_of = [], {}
    for d in range(n):
        if d in block_map:
            size = block_size[block_map.index(d)]
            axis_of[d], axis_of[n + block_map.index(d)] = len(shape), len(shape) + 1
            shape += [dense.shape[d] // size, size]
        else:
            axis_of[d] = len(shape)
            shape.append(dense.shape[d])
    return dense.reshape(shape).transpose([axis_of[e] for e in order])


def encode(dense: np.ndarray, order, formats, block_map=(), block_size=(), index_dtype=np.int32):
    """(stored values, SparsityParameters) of `dense`: SPARSE_CSR levels keep the children
    whose subtree holds a nonzero; DENSE levels keep every child."""
    order, block_map = list(order), list(block_map)
    x = expanded_view(dense, order, block_map, list(block_size))
    levels = x.ndim
    segments = [[0] for _ in range(levels)]
    indices = [[] for _ in range(levels)]
    values = []

    def visit(level, prefix):
        if level == levels:
            values.append(x[tuple(prefix)])
            return
        for i in range(x.shape[level]):
            if formats[level] == DENSE:
                visit(level + 1, prefix + [i])
            elif np.any(x[tuple(prefix + [i])] != 0):
                indices[level].append(i)
                visit(level + 1, prefix + [i])
        if formats[level] == SPARSE_CSR:
            segments[level].append(len(indices[level]))

    visit(0, [])
    dims = [DimensionMetadata(DENSE, x.shape[lv]) if formats[lv] == DENSE else
            DimensionMetadata(SPARSE_CSR, x.shape[lv], np.array(segments[lv], index_dtype),
                              np.array(indices[lv], index_dtype)) for lv in range(levels)]
    return (np.array(values, dense.dtype),
            SparsityParameters(traversal_order=order, block_map=block_map, dim_metadata=dims))


def densify_model(values: np.ndarray, shape, sparsity, consumer: str | None = None,
                  input_shape=None, options: dict | None = None) -> bytes:
    """DENSIFY of a sparse constant; with `consumer` ("FULLY_CONNECTED"), that op reading a
    graph input and the densified weights."""
    model = Model()
    sg = Subgraph(name="main")
    name = dtype_name(values.dtype)
    sparse = sg.add_tensor(Tensor("sparse_weights", shape, name, buffer=model.add_buffer(values),
                                  sparsity=sparsity))
    dense = sg.add_tensor(Tensor("dense_weights", shape, name))
    sg.operators.append(Operator(OperatorCode("DENSIFY", 0), [sparse], [dense],
                                 default_options("DENSIFY")))
    if consumer is None:
        sg.outputs.append(dense)
    else:
        x = sg.add_tensor(Tensor("input", input_shape, name))
        y = sg.add_tensor(Tensor("output", (), name))
        sg.inputs.append(x)
        sg.outputs.append(y)
        sg.operators.append(Operator(OperatorCode(consumer, 0), [x, dense, -1], [y],
                                     default_options(consumer, **(options or {}))))
    model.subgraphs.append(sg)
    return save(model)
