"""Integer functions as lookup tables: an 8-bit or int16 input has at most 65536 values, so
prepare computes TFLite's arithmetic on every one of them and run is one `np.take`; a pair of
8-bit inputs is one 65536-entry table. Also TFLite's own tables (LUTPopulate, common.h): a float
function sampled at every 8-bit input, or at 513 points for the interpolated int16 lookup."""
from __future__ import annotations

from functools import partial

import numpy as np

from .fixed_point import f32, round_half_away
from .quant_params import TYPE_RANGE, quant_params

LO16, HI16 = TYPE_RANGE["int16"]
TINY_LOOKUP = 4   # outputs up to this many: a bound 8-bit lookup in Python ints


def all_values(type_name: str) -> np.ndarray:
    """Every value of an 8-bit type or int16 as int64, ordered by its bits (index = value viewed
    as uint8 / uint16), so that `table[x.view(np.uint8)]` looks a value up."""
    if type_name == "int16":
        return np.arange(1 << 16, dtype=np.uint16).view(np.int16).astype(np.int64)
    codes = np.arange(256, dtype=np.uint8)
    return (codes.view(np.int8) if type_name == "int8" else codes).astype(np.int64)


def lookup(table: np.ndarray):
    """run(x, out): out = table[x] for an 8-bit or int16 x (the table built over `all_values`,
    256 or 65536 entries)."""
    if table.size == 1 << 16:
        def run16(x, out):
            np.take(table, x.view(np.uint16), out=out, mode="clip")
        return run16

    def run(x, out):
        np.take(table, x.view(np.uint8), out=out, mode="wrap")

    def bind(x, out):
        """`run` on the plan's fixed arrays (plan.bind_step): the table's own take on the
        input's bytes, viewed once (1.3 -> 0.3 µs on a small tensor)."""
        if not (x.flags.c_contiguous and out.flags.c_contiguous) or out.dtype != table.dtype:
            return None
        if out.size <= TINY_LOOKUP and table.itemsize == 1:
            # A few values (a detector's score): bytes indexed through memoryviews of the
            # arrays, Python ints (a numpy call costs ~0.3 µs more); the same bytes.
            codes, dest = (memoryview(a.reshape(-1).view(np.uint8)) for a in (x, out))
            entries, k = table.view(np.uint8).tobytes(), out.size
            if k == 1:
                def one():
                    dest[0] = entries[codes[0]]
                return one

            def few():
                for i in range(k):
                    dest[i] = entries[codes[i]]
            return few
        return partial(table.take, x.view(np.uint8), None, out, "wrap")
    run.bind = bind
    return run


def pair_table(type_a: str, type_b: str, f, out_dtype) -> np.ndarray:
    """f over every pair of 8-bit values: a 65536-entry table indexed by (a_byte << 8) | b_byte."""
    a = all_values(type_a)[:, None]
    b = all_values(type_b)[None, :]
    return np.ascontiguousarray(np.broadcast_to(f(a, b), (256, 256)), dtype=out_dtype).reshape(-1)


def pair_lookup(table: np.ndarray, out_shape: tuple):
    """run(a, b, out): out = table[(a << 8) | b] with numpy broadcasting of a and b."""
    index = np.empty(out_shape, np.uint16)
    eight = np.uint16(8)

    def run(a, b, out):
        np.left_shift(a.view(np.uint8), eight, out=index, dtype=np.uint16)
        np.bitwise_or(index, b.view(np.uint8), out=index, dtype=np.uint16)
        np.take(table, index, out=out, mode="wrap")   # indices < 65536: no wrapping
    return run


# -- TFLite's tables of float functions ---------------------------------------------------------

def lut_populate_int8(node, key: str, transform) -> np.ndarray:
    """LUTPopulateInt8: the float32 function sampled at every input, quantized to the output."""
    s_in, z_in = quant_params(node, 0)
    s_out, z_out = quant_params(node, 0, output=True)
    dequantized = f32(s_in) * (all_values(key) - z_in).astype(np.float32)
    transformed = transform(dequantized.astype(np.float32))
    scaled = (transformed * (f32(1.0) / f32(s_out))).astype(np.float64)
    rescaled = np.array([round_half_away(v) for v in scaled], np.int64)
    return np.clip(rescaled + z_out, *TYPE_RANGE[key]).astype(key)


def lut_populate_int16(input_scale, input_zp, output_scale, output_zp, f,
                       ftype=np.float64) -> np.ndarray:
    """LUTPopulateInt16<FloatT> (common.h): 513 samples of f over the int16 input range, each
    biased so that interpolating between neighbours is exact at the midpoints; every step in
    `ftype` (float64 for the deprecated double overload, float32 for the float one; f takes and
    returns that type)."""
    t = ftype
    input_min = t(input_scale) * t(LO16 - input_zp)
    input_max = t(input_scale) * t(HI16 - input_zp)
    output_min = t(output_scale) * t(LO16 - output_zp)
    output_max = t(output_scale) * t(HI16 - output_zp)
    steps = 512
    step = (input_max - input_min) / t(steps)
    half_step = step / t(2)
    inv = t(HI16 - LO16 + 1) / (output_max - output_min)

    def rnd(v):
        return t(round_half_away(float(v)))

    lut = np.empty(steps + 1, np.int64)
    for i in range(steps):
        start = input_min + t(i) * step
        val, val_mid = f(start), f(start + half_step)
        val_next = f(input_min + t(i + 1) * step)
        sample = rnd(val * inv)
        interp = rnd((val_next * inv + rnd(val * inv)) / t(2))
        bias = rnd((interp - rnd(val_mid * inv)) / t(2))
        lut[i] = int(min(max(sample - bias, t(LO16)), t(HI16)))
    lut[steps] = int(min(max(rnd(f(input_max) * inv), t(LO16)), t(HI16)))
    return lut


def wrap16(x):
    return ((np.asarray(x, np.int64) + (1 << 15)) & 0xFFFF) - (1 << 15)


def lut_lookup_int16(value, lut: np.ndarray):
    """LUTLookup(int16 value, 513-entry lut): interpolation on the low 7 bits."""
    value = np.asarray(value, np.int64)
    index = 256 + (value >> 7)
    base = lut[index]
    slope = wrap16(lut[index + 1] - base)
    return wrap16(base + ((slope * (value & 0x7F) + 64) >> 7))
