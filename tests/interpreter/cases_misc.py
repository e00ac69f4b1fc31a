"""Cases for ADD_N, ATAN2, BROADCAST_ARGS, FAKE_QUANT, BUCKETIZE and
LOCAL_RESPONSE_NORMALIZATION (see test_ops.py)."""
import numpy as np

from tests.opmodel import In, Out, case

rng = np.random.default_rng(7)


def f32(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


CASES = []

# ADD_N: two to four operands, float32 and int32.
for n in (2, 3, 4):
    xs = [f32(2, 3, 4) for _ in range(n)]
    CASES.append(case(f"add_n_{n}", "ADD_N", [In(x.shape) for x in xs], xs))
xs = [rng.integers(-1000, 1000, (3, 5)).astype(np.int32) for _ in range(3)]
CASES.append(case("add_n_int32", "ADD_N", [In(x.shape, "int32") for x in xs], xs,
                  outputs=[Out(dtype="int32")]))
CASES.append(case("add_n_const", "ADD_N", [In((4,)), np.float32([1, 2, 3, 4]), In((4,))],
                  [f32(4), f32(4)]))

# ATAN2: every quadrant, the axes and zeros; float32 and float64.
y = np.float32([1, 1, -1, -1, 0, 0, 0, 3, -0.0, 2.5])
x = np.float32([1, -1, 1, -1, 1, -1, 0, 0, -1, 1e-3])
CASES.append(case("atan2_quadrants", "ATAN2", [In(y.shape), In(x.shape)], [y, x]))
CASES.append(case("atan2_random", "ATAN2", [In((3, 4)), In((3, 4))], [f32(3, 4), f32(3, 4)]))
CASES.append(case("atan2_float64", "ATAN2", [In((6,), "float64"), In((6,), "float64")],
                  [rng.standard_normal(6), rng.standard_normal(6)],
                  outputs=[Out(dtype="float64")]))

# BROADCAST_ARGS: shapes of different lengths, ones on either side.
for k, (a, b) in enumerate((([2, 1, 3], [4, 1]), ([1], [5, 6]), ([3, 1, 2], [3, 4, 1]),
                            ([7], [1]))):
    for dt in ("int32", "int64"):
        a_, b_ = np.array(a, dt), np.array(b, dt)
        CASES.append(case(f"broadcast_args{k}_{dt}", "BROADCAST_ARGS",
                          [In(a_.shape, dt), In(b_.shape, dt)], [a_, b_],
                          outputs=[Out(dtype=dt)]))

# FAKE_QUANT: ranges that nudge the zero point, 4 to 16 bits, values past both ends.
for k, (lo, hi, bits) in enumerate(((-1.0, 1.0, 8), (-0.3, 5.7, 8), (0.0, 6.0, 8),
                                    (-10.0, 0.0, 4), (-2.5, 3.3, 16), (-0.1, 0.2, 3))):
    v = np.linspace(lo - 1, hi + 1, 97, dtype=np.float32)
    CASES.append(case(f"fake_quant{k}", "FAKE_QUANT", [In(v.shape)], [v],
                      options=dict(min=lo, max=hi, num_bits=bits)))

# BUCKETIZE: values on, between and past the boundaries; every input type.
bounds = [-2.0, 0.0, 0.5, 3.0, 10.0]
v = np.float32([-5, -2, -1.9, 0, 0.25, 0.5, 2.9, 3, 9.99, 10, 11])
for dt in ("float32", "float64"):
    CASES.append(case(f"bucketize_{dt}", "BUCKETIZE", [In(v.shape, dt)], [v.astype(dt)],
                      outputs=[Out(dtype="int32")], options=dict(boundaries=bounds)))
iv = np.array([[-5, -2, 0, 1], [3, 4, 10, 12]])
for dt in ("int32", "int64"):
    CASES.append(case(f"bucketize_{dt}", "BUCKETIZE", [In(iv.shape, dt)], [iv.astype(dt)],
                      outputs=[Out(dtype="int32")], options=dict(boundaries=bounds)))
CASES.append(case("bucketize_no_boundaries", "BUCKETIZE", [In((4,))], [f32(4)],
                  outputs=[Out(dtype="int32")], options=dict(boundaries=[])))

# LOCAL_RESPONSE_NORMALIZATION against LiteRT's default kernel: its reference kernel sums one
# channel fewer than TensorFlow's definition (see misc.py).
AUTO_CASES = []
for k, (radius, bias, alpha, beta) in enumerate(((2, 1.0, 1e-4, 0.75), (1, 2.0, 0.5, 1.0),
                                                 (3, 0.5, 0.2, 0.5), (0, 1.0, 1.0, 0.3),
                                                 (5, 1.0, 0.1, 0.75))):
    x = f32(1, 3, 4, 7, scale=2.0)
    AUTO_CASES.append(case(f"local_response_normalization{k}", "LOCAL_RESPONSE_NORMALIZATION",
                           [In(x.shape)], [x],
                           options=dict(radius=radius, bias=bias, alpha=alpha, beta=beta)))
