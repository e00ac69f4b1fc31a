"""Cases for the reduction kernels (see test_ops.py)."""
import numpy as np

from tests.opmodel import In, Out, case

rng = np.random.default_rng(3)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def values(dtype, shape, op):
    if dtype == "float32":
        v = f32(*shape)
        return (np.abs(v) * 0.5 + 0.6).astype(np.float32) if op == "REDUCE_PROD" else v
    if dtype == "bool":
        return rng.random(shape) < 0.5
    lo, hi = (-3, 4) if op == "REDUCE_PROD" else (-50, 50)
    return rng.integers(lo, hi, shape).astype(dtype)


# (input shape, axes): single, several, negative, duplicated, all, empty, adjacent and not.
AXES = [((2, 3, 4), [1]), ((2, 3, 4), [0, 2]), ((2, 3, 4), [-1]), ((2, 3, 4), [1, -2]),
        ((2, 3, 4), [0, 1, 2]), ((2, 3, 4), []), ((1, 5, 5, 3), [1, 2]), ((2, 1, 3, 1, 4), [1, 3]),
        ((3, 1, 4), [1]), ((2, 3, 2, 3), [0, 2])]
TYPES = {"MEAN": ("float32", "int32", "int64"), "SUM": ("float32", "int32", "int64", "bool"),
         "REDUCE_MAX": ("float32", "int32", "int64", "bool"),
         "REDUCE_MIN": ("float32", "int32", "int64", "bool"),
         "REDUCE_PROD": ("float32", "int32", "int64", "bool"),
         "REDUCE_ANY": ("bool",), "REDUCE_ALL": ("bool",)}

CASES = []
for op, dtypes in TYPES.items():
    for dt in dtypes:
        # float32 (or bool for ANY/ALL) walks every axis pattern, keep_dims alternating; the
        # other types take three patterns with both keep_dims.
        full = dt == dtypes[0]
        for k, (shape, axes) in enumerate(AXES):
            keeps = [bool(k % 2)] if full else [False, True]
            if not full and k not in (1, 3, 5):
                continue
            for keep in keeps:
                CASES.append(case(f"{op.lower()}_{dt}_axes{k}_keep{int(keep)}", op,
                                  [In(shape, dt), np.int32(axes)], [values(dt, shape, op)],
                                  outputs=[Out(dtype=dt)], options=dict(keep_dims=keep)))
CASES += [
    # MEAN over H and W of NHWC (global average pooling), the fast path.
    case("mean_global_pool", "MEAN", [In((1, 7, 7, 16)), np.int32([1, 2])], [f32(1, 7, 7, 16)],
         options=dict(keep_dims=True)),
    case("mean_global_pool_flat", "MEAN", [In((2, 7, 7, 16)), np.int32([2, 1])],
         [f32(2, 7, 7, 16)], options=dict(keep_dims=False)),
    # Integer means truncate toward zero.
    case("mean_int32_truncates", "MEAN", [In((2, 3), "int32"), np.int32([1])],
         [np.int32([[-1, -1, -2], [5, 0, 0]])], outputs=[Out(dtype="int32")]),
    # One long reduced axis sums as a matrix-vector product: last, first and middle axis.
    case("sum_long_last_axis", "SUM", [In((3, 40)), np.int32([-1])], [f32(3, 40)]),
    case("sum_long_first_axis", "SUM", [In((40, 3)), np.int32([0])], [f32(40, 3)],
         options=dict(keep_dims=True)),
    case("mean_long_middle_axes", "MEAN", [In((2, 4, 5, 3)), np.int32([1, 2])], [f32(2, 4, 5, 3)]),
    case("mean_long_all", "MEAN", [In((4, 50)), np.int32([0, 1])], [f32(4, 50)]),
    case("sum_scalar_axis", "SUM", [In((3, 4)), np.int32(1)], [f32(3, 4)]),
    case("sum_rank6", "SUM", [In((2, 1, 2, 3, 1, 2)), np.int32([0, 3, 5])],
         [f32(2, 1, 2, 3, 1, 2)], options=dict(keep_dims=True)),
]

for op in ("ARG_MAX", "ARG_MIN"):
    for out_type, code in (("int32", 2), ("int64", 4)):
        for axis in (0, 1, -1, 2):
            CASES.append(case(f"{op.lower()}_axis{axis}_{out_type}", op,
                              [In((3, 4, 5)), np.int32([axis])], [f32(3, 4, 5)],
                              outputs=[Out(dtype=out_type)], options=dict(output_type=code)))
    # Ties pick the first index.
    CASES.append(case(f"{op.lower()}_ties", op, [In((2, 4)), np.int32([1])],
                      [np.float32([[1, 3, 3, 0], [2, 2, -1, -1]])],
                      outputs=[Out(dtype="int32")], options=dict(output_type=2)))
    CASES.append(case(f"{op.lower()}_int32", op, [In((3, 4), "int32"), np.int32([0])],
                      [rng.integers(-5, 5, (3, 4)).astype(np.int32)],
                      outputs=[Out(dtype="int64")], options=dict(output_type=4)))
    CASES.append(case(f"{op.lower()}_bool", op, [In((3, 4), "bool"), np.int32([1])],
                      [rng.random((3, 4)) < 0.5], outputs=[Out(dtype="int32")],
                      options=dict(output_type=2)))
    CASES.append(case(f"{op.lower()}_int64_axis", op, [In((3, 4)), np.int64([1])], [f32(3, 4)],
                      outputs=[Out(dtype="int32")], options=dict(output_type=2)))
