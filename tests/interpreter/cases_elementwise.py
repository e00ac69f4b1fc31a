"""Cases for the binary elementwise kernels: arithmetic, comparisons, logic, SELECT (see
test_ops.py)."""
import numpy as np

from tests.opmodel import In, Out, case

rng = np.random.default_rng(0)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def ints(*shape, lo=-9, hi=10, dtype=np.int32):
    return rng.integers(lo, hi, shape).astype(dtype)


def nonzero(*shape, dtype=np.int32):
    v = ints(*shape, dtype=dtype)
    v[v == 0] = 3
    return v


x23 = f32(2, 3)

# Broadcast pairs: (shape a, shape b), up to rank 6.
BROADCASTS = [((2, 3), (2, 3)), ((2, 3), (3,)), ((4, 1, 3), (1, 5, 1)), ((1, 2, 1, 3), (2, 1, 1)),
              ((2, 1, 2, 1, 2, 3), (1, 2, 1, 3, 1, 1)), ((), (2, 2)), ((3, 1), ())]
ACTIVATIONS = {0: "none", 1: "relu", 2: "relu_n1_to_1", 3: "relu6", 4: "tanh", 6: "sigmoid",
               5: "sign_bit"}

CASES = [
    case("add_relu_broadcast", "ADD", [In((2, 3)), np.arange(3, dtype=np.float32)], [x23],
         options=dict(fused_activation_function=1)),
]

# Float arithmetic with every fused activation TFLite accepts, over the broadcasting shapes.
for op in ("ADD", "SUB", "MUL", "DIV"):
    for code, name in ACTIVATIONS.items():
        # TFLite ignores TANH, SIGN_BIT and SIGMOID here (CalculateActivationRange).
        a, b = f32(2, 1, 3) * 3, f32(4, 1) * 3
        if op == "DIV":
            b = np.where(np.abs(b) < 0.3, 1.7, b).astype(np.float32)
        CASES.append(case(f"{op.lower()}_{name}", op, [In(a.shape), In(b.shape)], [a, b],
                          options=dict(fused_activation_function=code)))
    for k, (sa, sb) in enumerate(BROADCASTS):
        # np.float32: numpy 1.x makes a 0-d float32 array times a Python int float64
        a, b = f32(*sa) * np.float32(2), f32(*sb) * np.float32(2)
        if op == "DIV":
            b = np.where(np.abs(b) < 0.3, 1.7, b).astype(np.float32)
        CASES.append(case(f"{op.lower()}_broadcast{k}", op, [In(sa), In(sb)], [a, b]))
    # A constant second operand (the common case in models).
    CASES.append(case(f"{op.lower()}_const", op, [In((2, 3, 4)), f32(4) + 3.0],
                      [f32(2, 3, 4)], options=dict(fused_activation_function=1)))

# Integer arithmetic, with the activations TFLite clamps integers by.
for op, dtypes in (("ADD", ("int32", "int64")), ("SUB", ("int32", "int64")),
                   ("MUL", ("int32", "int64")), ("DIV", ("int32",))):
    for dt in dtypes:
        for code in (0, 1, 2, 3):
            a = ints(3, 4, dtype=dt)
            b = nonzero(4, dtype=dt) if op == "DIV" else ints(4, dtype=dt)
            CASES.append(case(f"{op.lower()}_{dt}_{ACTIVATIONS[code]}", op,
                              [In(a.shape, dt), In(b.shape, dt)], [a, b], outputs=[Out(dtype=dt)],
                              options=dict(fused_activation_function=code)))

# Ops without fused activations.
for op in ("SQUARED_DIFFERENCE", "MAXIMUM", "MINIMUM", "FLOOR_DIV", "FLOOR_MOD", "POW"):
    for k, (sa, sb) in enumerate(BROADCASTS[:5]):
        a, b = f32(*sa) * 3, f32(*sb) * 3
        if op in ("FLOOR_DIV", "FLOOR_MOD"):
            b = np.where(np.abs(b) < 0.3, -1.3, b).astype(np.float32)
        if op == "POW":
            a = np.abs(a) + 0.1
        CASES.append(case(f"{op.lower()}_broadcast{k}", op, [In(sa), In(sb)], [a, b]))
    int_types = {"SQUARED_DIFFERENCE": ("int32",), "MAXIMUM": ("int32", "int64"),
                 "MINIMUM": ("int32", "int64"), "FLOOR_DIV": ("int32",),
                 "FLOOR_MOD": ("int32", "int64"), "POW": ("int32",)}[op]
    for dt in int_types:
        a = ints(2, 5, dtype=dt)
        b = nonzero(5, dtype=dt) if op.startswith("FLOOR") else ints(5, dtype=dt)
        if op == "POW":
            a, b = ints(2, 5, lo=-6, hi=7, dtype=dt), ints(5, lo=0, hi=5, dtype=dt)
        CASES.append(case(f"{op.lower()}_{dt}", op, [In(a.shape, dt), In(b.shape, dt)], [a, b],
                          outputs=[Out(dtype=dt)]))
# floor(double(x) / double(y)): 1 / 0.1 is just below 10 in double, exactly 10 in float32.
CASES.append(case("floor_div_rounding", "FLOOR_DIV", [In((4,)), In((4,))],
                  [np.float32([1, -1, 3, 0.7]), np.float32([0.1, 0.1, 0.3, -0.1])]))
CASES.append(case("floor_mod_signs", "FLOOR_MOD", [In((6,)), In((6,))],
                  [np.float32([7, -7, 7, -7, 6, 0.5]), np.float32([2, 2, -2, -2, 3, -0.3])]))
CASES.append(case("div_int32_signs", "DIV", [In((6,), "int32"), In((6,), "int32")],
                  [np.int32([7, -7, 7, -7, 6, 0]), np.int32([2, 2, -2, -2, 3, 5])],
                  outputs=[Out(dtype="int32")]))

# Comparisons: bool outputs, broadcasting, ties.
for op in ("LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "EQUAL", "NOT_EQUAL"):
    a = np.round(f32(3, 1, 4)).astype(np.float32)
    b = np.round(f32(2, 1)).astype(np.float32)
    CASES.append(case(f"{op.lower()}_float32", op, [In(a.shape), In(b.shape)], [a, b],
                      outputs=[Out(dtype="bool")]))
    for dt in ("int32", "int64"):
        a, b = ints(2, 3, 4, lo=-2, hi=3, dtype=dt), ints(4, lo=-2, hi=3, dtype=dt)
        CASES.append(case(f"{op.lower()}_{dt}", op, [In(a.shape, dt), In(b.shape, dt)], [a, b],
                          outputs=[Out(dtype="bool")]))
    CASES.append(case(f"{op.lower()}_scalar", op, [In((5,)), np.float32(0.0)], [f32(5)],
                      outputs=[Out(dtype="bool")]))
for op in ("EQUAL", "NOT_EQUAL", "LOGICAL_AND", "LOGICAL_OR"):
    a, b = rng.random((3, 4)) < 0.5, rng.random((4,)) < 0.5
    CASES.append(case(f"{op.lower()}_bool", op, [In(a.shape, "bool"), In(b.shape, "bool")],
                      [a, b], outputs=[Out(dtype="bool")]))
CASES.append(case("logical_not", "LOGICAL_NOT", [In((2, 3), "bool")], [rng.random((2, 3)) < 0.5],
                  outputs=[Out(dtype="bool")]))

# SELECT: same shape, scalar condition, rank-1 condition choosing rows; SELECT_V2 broadcasts.
c23 = rng.random((2, 3)) < 0.5
CASES += [
    case("select_same_shape", "SELECT", [In((2, 3), "bool"), In((2, 3)), In((2, 3))],
         [c23, f32(2, 3), f32(2, 3)]),
    case("select_rows", "SELECT", [In((3,), "bool"), In((3, 2, 2)), In((3, 2, 2))],
         [np.array([True, False, True]), f32(3, 2, 2), f32(3, 2, 2)]),
    case("select_scalar", "SELECT", [In((), "bool"), In((2, 2)), In((2, 2))],
         [np.array(False), f32(2, 2), f32(2, 2)]),
    case("select_int32", "SELECT", [In((2, 3), "bool"), In((2, 3), "int32"), In((2, 3), "int32")],
         [c23, ints(2, 3), ints(2, 3)], outputs=[Out(dtype="int32")]),
    case("select_v2_broadcast", "SELECT_V2", [In((3, 1), "bool"), In((1, 4)), In((2, 1, 1))],
         [rng.random((3, 1)) < 0.5, f32(1, 4), f32(2, 1, 1)]),
    case("select_v2_same", "SELECT_V2", [In((2, 3), "bool"), In((2, 3)), In((2, 3))],
         [c23, f32(2, 3), f32(2, 3)]),
    case("select_v2_scalar_values", "SELECT_V2", [In((2, 3), "bool"), In(()), In((3,))],
         [c23, np.float32(5), f32(3)]),
    case("select_v2_int64", "SELECT_V2", [In((4,), "bool"), In((2, 4), "int64"), In((4,), "int64")],
         [rng.random(4) < 0.5, ints(2, 4, dtype=np.int64), ints(4, dtype=np.int64)],
         outputs=[Out(dtype="int64")]),
    # The attention-mask pattern: -inf where masked; NaN and inf pass through unchanged.
    case("select_v2_inf_mask", "SELECT_V2",
         [In((1, 4, 4), "bool"), In((2, 4, 4)), np.float32(-np.inf)],
         [np.tril(np.ones((1, 4, 4), bool)), f32(2, 4, 4)]),
    case("select_v2_nan", "SELECT_V2", [In((4,), "bool"), In((4,)), In((4,))],
         [np.array([True, False, True, False]), np.float32([np.nan, 1, np.inf, 2]),
          np.float32([3, np.nan, 4, -np.inf])]),
    case("select_bool_values", "SELECT",
         [In((2, 3), "bool"), In((2, 3), "bool"), In((2, 3), "bool")],
         [c23, rng.random((2, 3)) < 0.5, rng.random((2, 3)) < 0.5], outputs=[Out(dtype="bool")]),
]
