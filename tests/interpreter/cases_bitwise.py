"""Cases for BITWISE_XOR, RIGHT_SHIFT and BITCAST (see test_ops.py)."""
import numpy as np

from tests.opmodel import In, Out, case

rng = np.random.default_rng(7)
TYPES = ("int8", "uint8", "int16", "uint16", "int32", "uint32")
BROADCASTS = [((2, 3), (2, 3)), ((2, 3), (3,)), ((4, 1, 3), (1, 5, 1)), ((), (2, 2)),
              ((2, 1, 2, 1, 3), (1, 2, 1, 3, 1))]


def full_range(shape, dt):
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, shape, dtype=np.int64, endpoint=True).astype(dt)


CASES = []
for dt in TYPES:
    for k, (sa, sb) in enumerate(BROADCASTS):
        a, b = full_range(sa, dt), full_range(sb, dt)
        CASES.append(case(f"bitwise_xor_{dt}_{k}", "BITWISE_XOR", [In(sa, dt), In(sb, dt)],
                          [a, b], outputs=[Out(dtype=dt)]))
    bits = np.iinfo(dt).bits
    for k, (sa, sb) in enumerate(BROADCASTS[:3] + BROADCASTS[4:]):
        a = full_range(sa, dt)
        # Shift amounts beyond the width and, for signed types, negative ones (clamped).
        b = rng.integers(-3 if dt[0] == "i" else 0, bits + 4, sb).astype(dt)
        CASES.append(case(f"right_shift_{dt}_{k}", "RIGHT_SHIFT", [In(sa, dt), In(sb, dt)],
                          [a, b], outputs=[Out(dtype=dt)]))
    a = full_range((3, 4), dt)
    CASES.append(case(f"right_shift_{dt}_const", "RIGHT_SHIFT",
                      [In((3, 4), dt), np.array([0, 1, bits - 1, bits + 5], dt)], [a],
                      outputs=[Out(dtype=dt)]))

# BITCAST between sizes: same size keeps the shape, wider -> narrower adds a dimension,
# narrower -> wider drops the last one.
BITCASTS = [("float32", "int32", (2, 3)), ("int32", "float32", (2, 3)), ("uint32", "int32", (4,)),
            ("float32", "uint8", (2, 3)), ("int32", "int16", (5,)), ("int64", "int8", (2,)),
            ("float64", "uint32", (3,)), ("uint8", "float32", (2, 4)), ("int16", "int32", (3, 2)),
            ("int8", "int64", (8,)), ("uint16", "float16", (2, 2)), ("float16", "int8", (3,)),
            ("int8", "uint8", (2, 2, 2)), ("int32", "uint64", (2,)), ("float32", "int64", (1, 2)),
            ("int64", "float64", (3,)), ("uint8", "int16", (1, 2))]
for src, dst, shape in BITCASTS:
    if np.dtype(dst).kind == "f":  # bytes of real floats (NaN payloads may not survive a copy)
        n = int(np.prod(shape)) * np.dtype(src).itemsize // np.dtype(dst).itemsize
        x = np.frombuffer(rng.standard_normal(n).astype(dst).tobytes(), src).reshape(shape)
    elif np.dtype(src).kind == "f":
        x = rng.standard_normal(shape).astype(src)
    else:
        x = full_range(shape, src)
    CASES.append(case(f"bitcast_{src}_to_{dst}", "BITCAST", [In(shape, src)], [x],
                      outputs=[Out(dtype=dst)]))
