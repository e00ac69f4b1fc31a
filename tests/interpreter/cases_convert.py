"""Cases for CAST, DEQUANTIZE and QUANTIZE (see test_ops.py)."""
import numpy as np

from tests.opmodel import In, Out, case

rng = np.random.default_rng(4)

TYPES = ["float32", "float16", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32",
         "int64", "bool"]
# Values every type holds (unsigned ones take the absolute values): truncation toward zero,
# zeros (-> false), fractions below one (-> 0 but true).
SOURCE = np.float32([0, 1.7, -2.6, 3.2, 100.9, -0.4, 0.0, 5.5, -7.0, 0.25])


def source(dtype):
    x = np.abs(SOURCE) if np.dtype(dtype).kind == "u" else SOURCE
    return x.astype(dtype)


CASES = []
for a in TYPES:
    for b in TYPES:
        if a == b and a not in ("float32", "int32"):
            continue
        x = source(a)
        if np.dtype(b).kind == "u":
            x = np.abs(x) if np.dtype(a).kind != "b" else x
        CASES.append(case(f"cast_{a}_to_{b}", "CAST", [In(x.shape, a)], [x],
                          outputs=[Out(dtype=b)]))
CASES.append(case("cast_float32_to_int32_4d", "CAST", [In((2, 2, 2, 3))],
                  [(rng.standard_normal((2, 2, 2, 3)) * 50).astype(np.float32)],
                  outputs=[Out(dtype="int32")]))


def q_values(dtype, shape):
    info = np.iinfo(dtype)
    return rng.integers(info.min, int(info.max) + 1, shape).astype(dtype)


# DEQUANTIZE: float16, and int8/uint8/int16 per tensor (graph input and constant) and per
# channel along each dimension.
h = rng.standard_normal((3, 4)).astype(np.float16)
CASES += [
    case("dequantize_float16", "DEQUANTIZE", [In((3, 4), "float16")], [h]),
    case("dequantize_float16_const", "DEQUANTIZE", [h], []),  # folded at prepare
]
for dt, zp in (("int8", -3), ("uint8", 128), ("int16", 0)):
    v = q_values(dt, (2, 3, 4))
    CASES.append(case(f"dequantize_{dt}", "DEQUANTIZE", [In(v.shape, dt, (0.0473, zp))], [v]))
    if dt != "int16":  # LiteRT requires int16 zero points to be 0
        CASES.append(case(f"dequantize_{dt}_zero_point_5", "DEQUANTIZE",
                          [In(v.shape, dt, (1.5, 5 if dt == "int8" else 250))], [v]))
for axis in (0, 1, 3):
    shape = (3, 2, 2, 4)
    n = shape[axis]
    v = q_values("int8", shape)
    scales = list((rng.random(n) * 0.1 + 0.01).astype(np.float32))
    CASES.append(case(f"dequantize_int8_per_channel_axis{axis}", "DEQUANTIZE",
                      [In(shape, "int8", (scales, [0] * n, axis))], [v]))
    zps = list(rng.integers(-5, 5, n))
    CASES.append(case(f"dequantize_int8_per_channel_zp_axis{axis}", "DEQUANTIZE",
                      [In(shape, "int8", (scales, zps, axis))], [v]))
# LiteRT dequantizes per channel only int8 (edgelite does int16 and uint8 the same way).
v = q_values("int8", (4, 3))
CASES.append(case("dequantize_int8_per_channel_const", "DEQUANTIZE", [v], [],
                  const_quant={0: ([0.001, 0.002, 0.0005], [1, 0, -2], 1)}))

# QUANTIZE float32 -> int8/uint8/int16: exact halves (scale a power of two) round away from
# zero; values beyond the range clamp.
halves = np.float32([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.0, -0.0, 1000.0, -1000.0, 0.49999997,
                     126.5, -127.5, 3.25]) * np.float32(0.25)
for dt, zp in (("int8", 0), ("int8", -7), ("uint8", 128), ("uint8", 0), ("int16", 0)):
    CASES.append(case(f"quantize_{dt}_zp{zp}_halves", "QUANTIZE", [In(halves.shape)], [halves],
                      outputs=[Out(dtype=dt, quant=(0.25, zp))]))
    x = (rng.standard_normal((2, 3, 5)) * 3).astype(np.float32)
    CASES.append(case(f"quantize_{dt}_zp{zp}", "QUANTIZE", [In(x.shape)], [x],
                      outputs=[Out(dtype=dt, quant=(0.0371, zp))]))
for axis in (0, 2):
    shape = (3, 2, 4)
    n = shape[axis]
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    scales = list((rng.random(n) * 0.1 + 0.01).astype(np.float32))
    CASES.append(case(f"quantize_int8_per_channel_axis{axis}", "QUANTIZE", [In(shape)], [x],
                      outputs=[Out(shape, "int8", (scales, [0] * n, axis))]))
