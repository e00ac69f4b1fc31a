"""Cases for DENSIFY: sparse constants (CSR levels, dense levels, blocks, index vector types,
traversal orders) made dense, alone and feeding a FULLY_CONNECTED (see test_ops.py)."""
import numpy as np

from tests.interpreter.sparse_models import DENSE, SPARSE_CSR, densify_model, encode
from tests.opmodel import Case, In, Out, case

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

# SPARSE_TO_DENSE: [N, rank] rows, a vector of 1-D indices, a scalar index; one value per index
# or one for all; index and value types; output_shape known only while running.
for it in ("int32", "int64"):
    for vt in ("float32", "int32", "int64", "int8", "uint8"):
        vals = np.array([5, -3, 7], vt) if vt != "uint8" else np.array([5, 3, 7], vt)
        CASES.append(case(f"sparse_to_dense_{it}_{vt}", "SPARSE_TO_DENSE",
                          [np.array([[0, 1], [1, 2], [2, 0]], it), np.array([3, 4], it),
                           In((3,), vt), np.array(9, vt)], [vals], outputs=[Out(dtype=vt)]))
CASES += [
    case("sparse_to_dense_vector_indices", "SPARSE_TO_DENSE",
         [In((3,), "int32"), np.array([6], np.int32), np.array([1.5, 2, 3], np.float32),
          np.array(0, np.float32)], [np.array([5, 0, 2], np.int32)]),
    case("sparse_to_dense_scalar_index_and_value", "SPARSE_TO_DENSE",
         [np.array(2, np.int32), np.array([4], np.int32), In(()), np.array(-1, np.float32)],
         [np.array(8, np.float32)]),
    case("sparse_to_dense_scalar_value_3d", "SPARSE_TO_DENSE",
         [In((2, 3), "int32"), np.array([2, 3, 2], np.int32), np.array(4, np.float32),
          np.array(0.5, np.float32)], [np.array([[1, 2, 1], [0, 0, 0]], np.int32)],
         options=dict(validate_indices=True)),
    case("sparse_to_dense_4d", "SPARSE_TO_DENSE",
         [np.array([[0, 1, 0, 1], [1, 0, 2, 0]], np.int32), np.array([2, 2, 3, 2], np.int32),
          In((2,)), np.array(0, np.float32)], [np.array([1.25, -2], np.float32)]),
    case("sparse_to_dense_shape_at_run_time", "SPARSE_TO_DENSE",
         [np.array([[0, 1], [2, 2]], np.int32), In((2,), "int32"),
          np.array([3, 4], np.float32), np.array(0, np.float32)],
         [np.array([3, 5], np.int32)]),
]

# EMBEDDING_LOOKUP_SPARSE: every combiner, 2-D and 3-D lookups, rows without ids, rows of
# params with more dimensions, and a row revisited after another (TFLite combines runs).
table = rng.standard_normal((5, 3)).astype(np.float32)
table3 = rng.standard_normal((4, 2, 3)).astype(np.float32)
LOOKUPS = [
    ("2d", np.array([0, 2, 1, 4], np.int32), np.array([[0, 0], [0, 1], [2, 0], [2, 3]], np.int32),
     np.array([3, 4], np.int32), np.array([1.0, 2.0, 0.5, 1.5], np.float32), table),
    ("3d", np.array([1, 3, 0], np.int32), np.array([[0, 0, 0], [1, 1, 2], [1, 1, 3]], np.int32),
     np.array([2, 2, 4], np.int32), np.array([0.5, 1.0, 2.0], np.float32), table3),
    ("revisited", np.array([0, 1, 2, 3], np.int32), np.array([[1, 0], [0, 0], [1, 1], [1, 2]],
                                                             np.int32),
     np.array([2, 3], np.int32), np.array([2.0, 1.0, 3.0, 0.5], np.float32), table),
    ("1d", np.array([4, 4, 1], np.int32), np.array([[0], [1], [2]], np.int32),
     np.array([3], np.int32), np.array([1.0, -1.0, 2.0], np.float32), table),
]
for combiner, cname in ((0, "sum"), (1, "mean"), (2, "sqrtn")):
    for name, ids, idx, dense_shape, w, params in LOOKUPS:
        CASES.append(case(f"embedding_lookup_sparse_{cname}_{name}", "EMBEDDING_LOOKUP_SPARSE",
                          [In(ids.shape, "int32"), idx, dense_shape, In(w.shape), params],
                          [ids, w], options=dict(combiner=combiner)))
