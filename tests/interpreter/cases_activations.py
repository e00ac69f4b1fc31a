"""Cases for the activation kernels (see test_ops.py).

LiteRT's reference resolver (BUILTIN_REF) has no ELU kernel: its cases are in `AUTO_CASES`, to
be run against LiteRT's default resolver (`run_litert(..., reference=False)`).
"""
import numpy as np

from tests.opmodel import In, Out, case

rng = np.random.default_rng(2)


def f32(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


x = f32(2, 3, 8, scale=4.0)
EDGES = np.float32([-7.0, -6.0, -3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0, 6.0, 7.0, -0.0])
# Wide range for GELU: far tails (tiny negative outputs, erfc underflow) and the middle.
WIDE = np.concatenate([np.linspace(-12, 12, 241), np.linspace(-0.05, 0.05, 21),
                       [-30.0, -13.5, 20.0, 1e-6, -1e-6]]).astype(np.float32)

CASES = []
for op in ("RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", "HARD_SWISH", "LOGISTIC", "TANH"):
    CASES.append(case(op.lower(), op, [In(x.shape)], [x]))
    CASES.append(case(f"{op.lower()}_edges", op, [In(EDGES.shape)], [EDGES]))
CASES += [
    case("logistic_tails", "LOGISTIC", [In((8,))],
         [np.float32([-20, -12, -9.5, -8.9, 16, 17, 30, -100])]),
    case("leaky_relu", "LEAKY_RELU", [In(x.shape)], [x], options=dict(alpha=0.2)),
    case("leaky_relu_alpha_0", "LEAKY_RELU", [In(EDGES.shape)], [EDGES], options=dict(alpha=0.0)),
    case("leaky_relu_alpha_1", "LEAKY_RELU", [In(EDGES.shape)], [EDGES], options=dict(alpha=1.0)),
    case("leaky_relu_alpha_big", "LEAKY_RELU", [In(x.shape)], [x], options=dict(alpha=2.5)),
    case("leaky_relu_alpha_negative", "LEAKY_RELU", [In(x.shape)], [x],
         options=dict(alpha=-0.3)),
    case("prelu_per_channel", "PRELU", [In((1, 3, 3, 4)), f32(4) * 0.3], [f32(1, 3, 3, 4)]),
    case("prelu_shared_axes", "PRELU", [In((2, 3, 3, 4)), f32(1, 1, 4) * 0.3], [f32(2, 3, 3, 4)]),
    case("prelu_full", "PRELU", [In((2, 3)), f32(2, 3)], [f32(2, 3)]),
    case("prelu_alpha_input", "PRELU", [In((2, 5)), In((5,))], [f32(2, 5), f32(5)]),
    case("prelu_scalar", "PRELU", [In((2, 5)), np.float32(0.25)], [f32(2, 5)]),
    # erfc form: our float32 erfc is within ~5e-7 relative of libm's; the tails (|x| > 5,
    # outputs below 1e-6) are checked by atol.
    case("gelu", "GELU", [In(x.shape)], [x]),
    case("gelu_wide", "GELU", [In(WIDE.shape)], [WIDE]),
    case("gelu_approximate", "GELU", [In(x.shape)], [x], options=dict(approximate=True)),
    case("gelu_approximate_wide", "GELU", [In(WIDE.shape)], [WIDE],
         options=dict(approximate=True)),
    case("tanh_rank1", "TANH", [In((5,))], [f32(5, scale=3.0)]),
]

# SOFTMAX and LOG_SOFTMAX along the last axis, ranks 1 to 4, several betas.
for shape in ((7,), (3, 5), (2, 3, 6), (1, 2, 2, 10), (2, 3, 40)):
    v = f32(*shape, scale=3.0)
    name = "x".join(map(str, shape))
    for beta in (1.0, 0.5, 2.0):
        CASES.append(case(f"softmax_{name}_beta{beta}", "SOFTMAX", [In(shape)], [v],
                          options=dict(beta=beta)))
    CASES.append(case(f"log_softmax_{name}", "LOG_SOFTMAX", [In(shape)], [v]))
CASES.append(case("softmax_large", "SOFTMAX", [In((2, 4))],
                  [np.float32([[1000, 1001, 999, 1000], [-1000, -1001, -999, -2000]])],
                  options=dict(beta=1.0)))
CASES.append(case("log_softmax_large", "LOG_SOFTMAX", [In((2, 4))],
                  [np.float32([[1000, 1001, 999, 1000], [-1000, -1001, -999, -2000]])]))

# L2_NORMALIZATION along the last axis; zero and tiny rows hit epsilon.
CASES += [
    case("l2_normalization", "L2_NORMALIZATION", [In((2, 3, 8))], [x]),
    case("l2_normalization_rank1", "L2_NORMALIZATION", [In((6,))], [f32(6)]),
    case("l2_normalization_epsilon", "L2_NORMALIZATION", [In((3, 3))],
         [np.float32([[0, 0, 0], [1e-7, -2e-7, 0], [3, 4, 0]])]),
    case("l2_normalization_4d", "L2_NORMALIZATION", [In((1, 2, 2, 5))], [f32(1, 2, 2, 5)]),
    case("l2_normalization_long_rows", "L2_NORMALIZATION", [In((3, 64))], [f32(3, 64)]),
]

# CUMSUM over each axis, negative axes, exclusive and reverse, float and integers.
for dt in ("float32", "int32", "int64"):
    v = f32(2, 3, 4) if dt == "float32" else rng.integers(-9, 10, (2, 3, 4)).astype(dt)
    for axis in (0, 1, 2, -1):
        for exclusive in (False, True):
            for reverse in (False, True):
                if dt != "float32" and axis in (0, 1):
                    continue
                name = f"cumsum_{dt}_axis{axis}" + ("_exclusive" * exclusive) + \
                    ("_reverse" * reverse)
                CASES.append(case(name, "CUMSUM", [In(v.shape, dt), np.int32(axis)], [v],
                                  outputs=[Out(dtype=dt)],
                                  options=dict(exclusive=exclusive, reverse=reverse)))

AUTO_CASES = [
    case("elu", "ELU", [In(x.shape)], [x]),
    case("elu_edges", "ELU", [In(EDGES.shape)], [EDGES]),
]
