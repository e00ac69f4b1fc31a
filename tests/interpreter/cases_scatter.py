"""Cases for SCATTER_ND, DYNAMIC_UPDATE_SLICE, ONE_HOT, MATRIX_DIAG, MATRIX_SET_DIAG and
REVERSE_SEQUENCE (see test_ops.py)."""
from functools import partial

import numpy as np

from tests.interpreter import case_data
from tests.opmodel import In, Out, case

rng = np.random.default_rng(11)
values = partial(case_data.random_values, rng)


ALL = ("float32", "float16", "int8", "uint8", "int16", "int32", "int64", "bool")
CASES = []

# SCATTER_ND: element and slice updates, repeated indices (they add up), a graph-input shape.
for dt in ("float32", "int32", "int64", "int8", "uint8", "bool"):
    idx = np.int32([[0, 1], [2, 3], [0, 1], [1, 0]])
    upd = values((4,), dt)
    CASES.append(case(f"scatter_nd_elements_{dt}", "SCATTER_ND",
                      [In(idx.shape, "int32"), In(upd.shape, dt), np.int32([3, 4])],
                      [idx, upd], outputs=[Out(dtype=dt)]))
idx = np.int32([[1], [3], [1]])
upd = values((3, 2, 3), "float32")
CASES.append(case("scatter_nd_slices", "SCATTER_ND",
                  [In(idx.shape, "int32"), In(upd.shape), np.int32([5, 2, 3])], [idx, upd]))
idx = np.int32([[[0, 0], [1, 1]], [[2, 0], [0, 0]]])
upd = values((2, 2, 4), "float32")
CASES.append(case("scatter_nd_batched_indices", "SCATTER_ND",
                  [In(idx.shape, "int32"), In(upd.shape), np.int32([3, 2, 4])], [idx, upd]))
CASES.append(case("scatter_nd_shape_input", "SCATTER_ND",
                  [In((2, 1), "int32"), In((2, 3)), In((2,), "int32")],
                  [np.int32([[3], [0]]), values((2, 3), "float32"), np.int32([4, 3])],
                  outputs=[Out((4, 3))]))

# DYNAMIC_UPDATE_SLICE: in range, clamped at both ends, int32 and int64 starts, every type.
for k, start in enumerate(([1, 1], [0, 0], [3, 2], [-2, 7])):
    for it in ("int32", "int64"):
        s = np.array(start, it)
        CASES.append(case(f"dynamic_update_slice{k}_{it}", "DYNAMIC_UPDATE_SLICE",
                          [In((4, 5)), In((2, 3)), In((2,), it)],
                          [values((4, 5), "float32"), values((2, 3), "float32"), s]))
for dt in ALL:
    CASES.append(case(f"dynamic_update_slice_{dt}", "DYNAMIC_UPDATE_SLICE",
                      [In((2, 3, 4), dt), In((1, 2, 2), dt), np.int32([1, 0, 1])],
                      [values((2, 3, 4), dt), values((1, 2, 2), dt)], outputs=[Out(dtype=dt)]))

# ONE_HOT: every axis, out-of-range and negative indices, int64 indices, every value type.
ind = np.int32([[0, 2, -1], [5, 1, 3]])
for axis in (-1, 0, 1, 2):
    CASES.append(case(f"one_hot_axis{axis}", "ONE_HOT",
                      [In(ind.shape, "int32"), np.int32(4), np.float32(2.5), np.float32(-1)],
                      [ind], options=dict(axis=axis)))
CASES.append(case("one_hot_int64_indices", "ONE_HOT",
                  [In((5,), "int64"), np.int32(3), np.float32(1), np.float32(0)],
                  [np.int64([0, 1, 2, 3, -3])]))
for dt in ("int32", "int64", "int8", "uint8", "bool"):
    on, off = (np.array(True), np.array(False)) if dt == "bool" else \
        (np.array(7, dt), np.array(1, dt))
    CASES.append(case(f"one_hot_{dt}", "ONE_HOT", [In((4,), "int32"), np.int32(3), on, off],
                      [np.int32([2, 0, 1, 9])], outputs=[Out(dtype=dt)]))
CASES.append(case("one_hot_value_inputs", "ONE_HOT",
                  [In((3,), "int32"), np.int32(4), In((), "float32"), In((), "float32")],
                  [np.int32([1, 3, 0]), np.float32(5), np.float32(-2)]))

# MATRIX_DIAG and MATRIX_SET_DIAG: ranks 1 to 3, wide and tall matrices, every type LiteRT
# computes correctly (float16 and bool it handles as 4-byte floats).
for dt in ("float32", "int8", "uint8", "int16", "int32", "int64"):
    CASES.append(case(f"matrix_diag_{dt}", "MATRIX_DIAG", [In((2, 3), dt)],
                      [values((2, 3), dt)], outputs=[Out(dtype=dt)]))
    CASES.append(case(f"matrix_set_diag_{dt}", "MATRIX_SET_DIAG",
                      [In((2, 3, 3), dt), In((2, 3), dt)],
                      [values((2, 3, 3), dt), values((2, 3), dt)], outputs=[Out(dtype=dt)]))
CASES.append(case("matrix_diag_rank1", "MATRIX_DIAG", [In((4,))], [values((4,), "float32")]))
CASES.append(case("matrix_diag_rank3", "MATRIX_DIAG", [In((2, 2, 3))],
                  [values((2, 2, 3), "float32")]))
for m, n in ((2, 4), (4, 2)):
    CASES.append(case(f"matrix_set_diag_{m}x{n}", "MATRIX_SET_DIAG", [In((m, n)), In((2,))],
                      [values((m, n), "float32"), values((2,), "float32")]))

# REVERSE_SEQUENCE: seq/batch dims in either order, lengths 0 to full, int64 lengths.
x = values((3, 5, 2), "float32")
for k, (seq_dim, batch_dim, lens) in enumerate(((1, 0, [5, 2, 0]), (0, 1, [1, 3, 2, 3, 0]),
                                                (2, 0, [2, 1, 0]), (1, 2, [4, 5]))):
    shape_b = x.shape[batch_dim]
    lens = np.int32(lens[:shape_b])
    CASES.append(case(f"reverse_sequence{k}", "REVERSE_SEQUENCE",
                      [In(x.shape), In(lens.shape, "int32")], [x, lens],
                      options=dict(seq_dim=seq_dim, batch_dim=batch_dim)))
CASES.append(case("reverse_sequence_int64_lengths", "REVERSE_SEQUENCE",
                  [In((2, 4)), np.int64([3, 4])], [values((2, 4), "float32")],
                  options=dict(seq_dim=1, batch_dim=0)))
for dt in ("uint8", "int16", "int32", "int64"):
    CASES.append(case(f"reverse_sequence_{dt}", "REVERSE_SEQUENCE",
                      [In((2, 4), dt), np.int32([3, 2])], [values((2, 4), dt)],
                      outputs=[Out(dtype=dt)], options=dict(seq_dim=1, batch_dim=0)))
