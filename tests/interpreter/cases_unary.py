"""Cases for the unary math kernels (see test_ops.py).

LiteRT's reference resolver (BUILTIN_REF) has no CEIL or ROUND kernel: their cases are in
`AUTO_CASES`, to be run against LiteRT's default resolver (`run_litert(..., reference=False)`).
"""
import numpy as np

from tests.opmodel import In, Out, case

rng = np.random.default_rng(1)


def f32(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


# Halves, to check rounding direction; negative zeros and exact integers.
EDGES = np.float32([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -0.0, 0.0, 3.0, -3.0, 0.49999997, -7.25])
positive = np.abs(f32(3, 4, scale=3.0)) + 0.01

CASES = [
    case("abs_float32", "ABS", [In((3, 4))], [f32(3, 4)]),
    case("abs_int32", "ABS", [In((2, 5), "int32")], [rng.integers(-50, 50, (2, 5), dtype=np.int32)],
         outputs=[Out(dtype="int32")]),
    case("neg_float32", "NEG", [In((3, 4))], [f32(3, 4)]),
    case("neg_int32", "NEG", [In((7,), "int32")], [rng.integers(-50, 50, 7, dtype=np.int32)],
         outputs=[Out(dtype="int32")]),
    case("neg_int64", "NEG", [In((7,), "int64")], [rng.integers(-50, 50, 7, dtype=np.int64)],
         outputs=[Out(dtype="int64")]),
    # Transcendentals: numpy's SIMD float32 exp/log/sin/cos are within an ulp or two of libm's.
    case("exp", "EXP", [In((3, 4))], [f32(3, 4, scale=3.0)]),
    case("log", "LOG", [In((3, 4))], [positive]),
    case("sqrt", "SQRT", [In((3, 4))], [positive]),
    case("sqrt_zero", "SQRT", [In((2,))], [np.float32([0.0, 4.0])]),
    case("rsqrt", "RSQRT", [In((3, 4))], [positive]),
    case("square", "SQUARE", [In((3, 4))], [f32(3, 4, scale=5.0)]),
    case("sin", "SIN", [In((3, 4))], [f32(3, 4, scale=4.0)]),
    case("cos", "COS", [In((3, 4))], [f32(3, 4, scale=4.0)]),
    case("floor", "FLOOR", [In((12,))], [EDGES]),
    case("floor_random", "FLOOR", [In((2, 3, 4))], [f32(2, 3, 4, scale=5.0)]),
    case("sign_float32", "SIGN", [In((12,))], [EDGES]),
    case("sign_int32", "SIGN", [In((5,), "int32")], [np.int32([-3, 0, 2, -1, 7])],
         outputs=[Out(dtype="int32")]),
    case("sign_float64", "SIGN", [In((12,), "float64")], [EDGES.astype(np.float64)],
         outputs=[Out(dtype="float64")]),
    case("exp_rank5", "EXP", [In((1, 2, 1, 2, 3))], [f32(1, 2, 1, 2, 3)]),
]

AUTO_CASES = [
    case("ceil", "CEIL", [In((12,))], [EDGES]),
    case("ceil_random", "CEIL", [In((2, 3, 4))], [f32(2, 3, 4, scale=5.0)]),
    case("round_half_even", "ROUND", [In((12,))], [EDGES]),
    case("round_random", "ROUND", [In((2, 3, 4))], [f32(2, 3, 4, scale=5.0)]),
]
