"""Cases for SEGMENT_SUM, UNSORTED_SEGMENT_SUM / PROD / MAX / MIN and UNIQUE (see test_ops.py).
SEGMENT_SUM is only in LiteRT's default resolver."""
import numpy as np

from tests.opmodel import In, Out, case

rng = np.random.default_rng(5)


def data(shape, dt):
    if dt == "float32":
        return rng.standard_normal(shape).astype(np.float32)
    return rng.integers(-50, 50, shape).astype(dt)


CASES = []
AUTO_CASES = []

# SEGMENT_SUM: constant and graph-input ids, rows of any rank, float32 and int32.
for dt in ("float32", "int32"):
    seg = np.int32([0, 0, 1, 2, 2, 2])
    x = data((6, 3, 2), dt)
    AUTO_CASES.append(case(f"segment_sum_const_ids_{dt}", "SEGMENT_SUM",
                           [In(x.shape, dt), seg], [x], outputs=[Out(dtype=dt)]))
    AUTO_CASES.append(case(f"segment_sum_input_ids_{dt}", "SEGMENT_SUM",
                           [In(x.shape, dt), In(seg.shape, "int32")], [x, seg],
                           outputs=[Out(dtype=dt)]))
x = data((5,), "float32")
AUTO_CASES.append(case("segment_sum_1d", "SEGMENT_SUM", [In((5,)), In((5,), "int32")],
                       [x, np.int32([0, 1, 1, 1, 2])]))

# UNSORTED_SEGMENT_*: ids in any order, skipped (negative) ids, empty segments (they keep the
# reduction's start value), 2-D ids, num_segments as a graph input.
for op in ("UNSORTED_SEGMENT_SUM", "UNSORTED_SEGMENT_PROD", "UNSORTED_SEGMENT_MAX",
           "UNSORTED_SEGMENT_MIN"):
    name = op.lower()
    for dt in ("float32", "int32"):
        x = data((6, 3), dt)
        if op == "UNSORTED_SEGMENT_PROD" and dt == "int32":
            x = rng.integers(-5, 6, (6, 3)).astype(np.int32)
        seg = np.int32([3, 0, 3, -1, 1, 0])
        CASES.append(case(f"{name}_{dt}", op, [In(x.shape, dt), In(seg.shape, "int32"),
                                               np.int32([5])],
                          [x, seg], outputs=[Out(dtype=dt)]))
    x = data((2, 3, 4), "float32")
    CASES.append(case(f"{name}_2d_ids", op, [In(x.shape), np.int32([[0, 2, 2], [1, 0, 2]]),
                                             np.int32(3)], [x]))
    CASES.append(case(f"{name}_count_input", op, [In((4, 2)), In((4,), "int32"),
                                                  In((1,), "int32")],
                      [data((4, 2), "float32"), np.int32([1, 1, 0, 3]), np.int32([4])],
                      outputs=[Out((4, 2))]))

# UNIQUE: first-appearance order, int32 and int64 indices, every value type.
for dt in ("float32", "int8", "uint8", "int16", "int32", "int64"):
    x = np.array([3, 1, 3, 7, 1, 0, 7, 7, 2], dt)
    for it in ("int32", "int64"):
        CASES.append(case(f"unique_{dt}_{it}", "UNIQUE", [In(x.shape, dt)], [x],
                          outputs=[Out(dtype=dt), Out(dtype=it)],
                          options=dict(idx_out_type={"int32": 2, "int64": 4}[it])))
CASES.append(case("unique_all_distinct", "UNIQUE", [In((6,))], [data((6,), "float32")],
                  outputs=[Out(), Out(dtype="int32")]))
CASES.append(case("unique_signed_zeros", "UNIQUE", [In((4,))],
                  [np.float32([-0.0, 1.0, 0.0, 1.0])], outputs=[Out(), Out(dtype="int32")]))
