"""Cases for DENSIFY: sparse constants (CSR levels, dense levels, blocks, index vector types,
traversal orders) made dense, alone and feeding a FULLY_CONNECTED (see test_ops.py)."""
import numpy as np

from tests.interpreter.sparse_models import DENSE, SPARSE_CSR, densify_model, encode
from tests.opmodel import Case

rng = np.random.default_rng(5)


def pruned(shape, dtype=np.float32, keep=0.3):
    x = rng.standard_normal(shape) * 3
    x[rng.random(shape) > keep] = 0
    return x.astype(dtype)


def block_pruned(shape, block, keep=0.4):
    """Zero whole blocks of (1, block) along the last dimension."""
    x = rng.standard_normal(shape).astype(np.float32)
    mask = rng.random((shape[0], shape[1] // block)) < keep
    return x * np.repeat(mask, block, axis=1)


CASES = []
# (id, dense, traversal order, formats, block map, block size, index dtype)
LAYOUTS = [
    ("csr_2d", pruned((4, 6)), (0, 1), (DENSE, SPARSE_CSR), (), (), np.int32),
    ("csr_2d_uint8", pruned((5, 7)), (0, 1), (DENSE, SPARSE_CSR), (), (), np.uint8),
    ("csr_2d_uint16", pruned((3, 8)), (0, 1), (DENSE, SPARSE_CSR), (), (), np.uint16),
    ("csr_both", pruned((6, 5), keep=0.15), (0, 1), (SPARSE_CSR, SPARSE_CSR), (), (), np.int32),
    ("column_major", pruned((4, 6)), (1, 0), (DENSE, SPARSE_CSR), (), (), np.int32),
    ("all_dense", pruned((3, 4)), (0, 1), (DENSE, DENSE), (), (), np.int32),
    ("csr_1d", pruned((9,)), (0,), (SPARSE_CSR,), (), (), np.uint8),
    ("csr_3d", pruned((2, 3, 4)), (0, 1, 2), (DENSE, SPARSE_CSR, SPARSE_CSR), (), (), np.int32),
    ("csr_3d_order", pruned((2, 3, 4)), (2, 0, 1), (DENSE, DENSE, SPARSE_CSR), (), (), np.uint16),
    ("block_1x4", block_pruned((4, 8), 4), (0, 1, 2), (DENSE, SPARSE_CSR, DENSE), (1,), (4,),
     np.uint8),
    ("block_2x2", pruned((4, 6), keep=0.2), (0, 1, 2, 3), (DENSE, SPARSE_CSR, DENSE, DENSE),
     (0, 1), (2, 2), np.int32),
    ("int8", pruned((4, 6), np.int8), (0, 1), (DENSE, SPARSE_CSR), (), (), np.int32),
    ("float16", pruned((4, 6), np.float16), (0, 1), (DENSE, SPARSE_CSR), (), (), np.int32),
]
for name, dense, order, formats, block_map, block_size, index_dtype in LAYOUTS:
    values, sparsity = encode(dense, order, formats, block_map, block_size, index_dtype)
    CASES.append(Case(f"densify_{name}", densify_model(values, dense.shape, sparsity), []))

# FULLY_CONNECTED on densified weights, as pruned models run it.
for name, weights, formats, block_map, block_size in (
        ("csr", pruned((8, 12)), (DENSE, SPARSE_CSR), (), ()),
        ("block_1x4", block_pruned((8, 16), 4), (DENSE, SPARSE_CSR, DENSE), (1,), (4,))):
    order = tuple(range(len(formats)))
    values, sparsity = encode(weights, order, formats, block_map, block_size, np.uint8)
    x = rng.standard_normal((3, weights.shape[1])).astype(np.float32)
    model = densify_model(values, weights.shape, sparsity, "FULLY_CONNECTED", x.shape,
                          dict(fused_activation_function=1))
    CASES.append(Case(f"densify_fully_connected_{name}", model, [x]))
