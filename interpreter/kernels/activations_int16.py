"""Activations on int16 (zero points 0), bit-exact to TFLite's reference kernels.

An int16 elementwise function has 65536 inputs: prepare evaluates TFLite's arithmetic on all of
them and run is one lookup. RELU / RELU6 / LEAKY_RELU requantize as their 8-bit kernels do.
LOGISTIC and TANH are reference_integer_ops' fixed-point routines: the input rescaled to
1/(3*4096) units (by a shift for power-of-two scales, else by an integer multiplier), then a
linear interpolation in TFLite's 256-entry table of sigmoid(i/24) (tanh(x) = 2 sigmoid(2x) - 1).
SOFTMAX is reference_ops::SoftmaxInt16: exp of the difference to the row max and 1/(1+x) of the
normalized sum from two 513-entry interpolated tables that prepare builds as TFLite does
(LUTPopulate in double). The int16 pools are pool_int8.py's.
"""
from __future__ import annotations

import math

import numpy as np

from .activations_int8 import INF
from .elementwise_int16 import checked_log2
from .fixed_point import f32, mbqm, quantize_multiplier, round_half_away
from .lut import HI16, LO16, all_values, lookup, lut_lookup_int16, lut_populate_int16
from .quant_params import quant_params
from .registry import register

# TFLite's sigmoid(i / 24) in unsigned Q0.16, i = 0..255 (common.h's sigmoid_table_uint16: a
# table of its own, not reproducible by rounding the function).
SIGMOID_TABLE = np.array([
    32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498, 40149, 40794,
    41432, 42064, 42688, 43304, 43912, 44511, 45102, 45683, 46255, 46817, 47369, 47911, 48443,
    48964, 49475, 49975, 50464, 50942, 51409, 51865, 52311, 52745, 53169, 53581, 53983, 54374,
    54755, 55125, 55485, 55834, 56174, 56503, 56823, 57133, 57433, 57724, 58007, 58280, 58544,
    58800, 59048, 59288, 59519, 59743, 59959, 60168, 60370, 60565, 60753, 60935, 61110, 61279,
    61441, 61599, 61750, 61896, 62036, 62172, 62302, 62428, 62549, 62666, 62778, 62886, 62990,
    63090, 63186, 63279, 63368, 63454, 63536, 63615, 63691, 63765, 63835, 63903, 63968, 64030,
    64090, 64148, 64204, 64257, 64308, 64357, 64405, 64450, 64494, 64536, 64576, 64614, 64652,
    64687, 64721, 64754, 64786, 64816, 64845, 64873, 64900, 64926, 64950, 64974, 64997, 65019,
    65039, 65060, 65079, 65097, 65115, 65132, 65149, 65164, 65179, 65194, 65208, 65221, 65234,
    65246, 65258, 65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337, 65345, 65352, 65360,
    65367, 65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425, 65429, 65433,
    65438, 65442, 65445, 65449, 65453, 65456, 65459, 65462, 65465, 65468, 65471, 65474, 65476,
    65479, 65481, 65483, 65485, 65488, 65489, 65491, 65493, 65495, 65497, 65498, 65500, 65501,
    65503, 65504, 65505, 65507, 65508, 65509, 65510, 65511, 65512, 65513, 65514, 65515, 65516,
    65517, 65517, 65518, 65519, 65520, 65520, 65521, 65522, 65522, 65523, 65523, 65524, 65524,
    65525, 65525, 65526, 65526, 65526, 65527, 65527, 65528, 65528, 65528, 65529, 65529, 65529,
    65529, 65530, 65530, 65530, 65530, 65531, 65531, 65531, 65531, 65531, 65532, 65532, 65532,
    65532, 65532, 65532, 65533, 65533, 65533, 65533, 65533, 65533, 65533, 65533, 65534, 65534,
    65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65535], np.int64)


def _unary(node):
    node.expect_inputs(1)
    x, out = node.input(0), node.outputs[0]
    if out.type_name != "int16":
        raise node.fail(f"output is {out.type_name}; expected int16")
    out.shape = tuple(x.shape)
    s_in, z_in = quant_params(node, 0)
    s_out, z_out = quant_params(node, 0, output=True)
    if z_in or z_out:
        raise node.fail(f"int16 input and output need zero point 0, got {z_in} and {z_out}")
    return s_in, s_out


def _table(values) -> callable:
    return lookup(np.clip(values, LO16, HI16).astype(np.int16))


def _relu_x(act_min: float, act_max: float):
    def prepare(node):
        s_in, s_out = _unary(node)
        m, s = quantize_multiplier(float(f32(s_in) / f32(s_out)))
        lo = max(LO16, round_half_away(float(f32(act_min) / f32(s_out))))
        hi = HI16 if act_max == INF else \
            min(HI16, round_half_away(float(f32(act_max) / f32(s_out))))
        return _table(np.clip(mbqm(all_values("int16"), m, s), lo, hi))
    return prepare


register("RELU", "int16")(_relu_x(0.0, INF))
register("RELU6", "int16")(_relu_x(0.0, 6.0))


@register("LEAKY_RELU", "int16")
def leaky_relu(node):
    s_in, s_out = _unary(node)
    alpha = f32(getattr(node.options, "alpha", 0.0))
    m_alpha, s_alpha = quantize_multiplier(float(f32(s_in) * alpha / f32(s_out)))
    m_id, s_id = quantize_multiplier(float(f32(s_in) / f32(s_out)))
    v = all_values("int16")
    scaled_alpha = np.sign(m_alpha) * mbqm(v, abs(m_alpha), s_alpha)
    return _table(np.where(v >= 0, mbqm(v, m_id, s_id), scaled_alpha))


# -- LOGISTIC and TANH -------------------------------------------------------------------------

def _input_rescaling(node, s_in: float, pot_shifts: tuple) -> tuple:
    """(multiplier, left shift) of the input to 1/(3*4096) units (TanhPrepare/SigmoidPrepare):
    a power-of-two scale whose shift is in `pot_shifts` multiplies by 3 << shift; any other
    scale by int(s * 3 * 4096 * 2^k) >> k, doubled while it stays within 32767 / 2."""
    pot, log2 = checked_log2(s_in)
    shift = 12 + log2
    if pot and shift in pot_shifts:
        return 3 << shift, 0
    multiplier = float(f32(s_in)) * 4096.0 * 3.0
    shift = 0
    while multiplier <= 32767.0 / 2.0 and shift <= 30:
        shift += 1
        multiplier *= 2.0
    return int(multiplier), shift


def _check_q15_output(node, exact: bool) -> None:
    s_out, _ = quant_params(node, 0, output=True)
    ok, log2 = checked_log2(s_out)
    if (exact and s_out != 1.0 / 32768) or not ok or log2 != -15:
        raise node.fail(f"the output scale must be 1/32768, got {s_out:g}")


def _rescaled_input(multiplier: int, shift: int) -> np.ndarray:
    rounding = (1 << (shift - 1)) if shift > 0 else 0
    return (all_values("int16") * multiplier + rounding) >> shift


@register("LOGISTIC", "int16")
def logistic(node):
    s_in, _ = _unary(node)
    _check_q15_output(node, exact=True)
    v = _rescaled_input(*_input_rescaling(node, s_in, (0,)))
    a = np.abs(v)
    uh = a >> 9
    i = np.minimum(uh, 254)
    ua, ub = SIGMOID_TABLE[i], SIGMOID_TABLE[i + 1]
    result = np.where(uh >= 255, 0x7FFF << 10, (ua << 9) + (a & 0x1FF) * (ub - ua))
    result = np.where(v >= 0, result + (1 << 9), (1 << 25) - result + (1 << 9) - 1)
    return _table(result >> 10)


@register("TANH", "int16")
def tanh(node):
    s_in, _ = _unary(node)
    _check_q15_output(node, exact=False)
    v = _rescaled_input(*_input_rescaling(node, s_in, (0, 1)))
    a = np.abs(v)
    uh = a >> 8
    i = np.minimum(uh, 254)
    ua, ub = SIGMOID_TABLE[i], SIGMOID_TABLE[i + 1]
    result = np.where(uh >= 255, 0xFFFF << 8, (ua << 8) + (a & 0xFF) * (ub - ua))
    result = np.where(v >= 0, result - (1 << 23) + (1 << 7), -result + (1 << 23) + (1 << 7) - 1)
    return _table(result >> 8)


# -- SOFTMAX -----------------------------------------------------------------------------------

@register("SOFTMAX", "int16")
def softmax(node):
    s_in, _ = _unary(node)
    if len(node.input(0).shape) < 1:
        raise node.fail("the input must have at least one dimension")
    span = HI16 - LO16
    exp_lut = lut_populate_int16(10.0 / span, HI16, 2.0 / span, 0,
                                 lambda v: np.float64(math.exp(v)))
    recip_lut = lut_populate_int16(1.0 / span, LO16, 2.0 / span, 0, lambda v: 1.0 / (1.0 + v))
    beta = f32(getattr(node.options, "beta", 1.0))
    m, s = quantize_multiplier(float(f32(s_in) * beta) / (10.0 / 65535.0))
    # exp of every difference to the row max (0, -1, ..., -65535), in Q0.15.
    diffs = -np.arange(1 << 16, dtype=np.int64)
    exps = lut_lookup_int16(np.clip(mbqm(diffs, m, s) + HI16, LO16, HI16), exp_lut)
    shape = tuple(node.input(0).shape)
    depth = shape[-1]
    rows = int(np.prod(shape[:-1], dtype=np.int64))

    def run(x, out):
        v = x.reshape(rows, depth).astype(np.int64)
        e = exps[v.max(axis=1, keepdims=True) - v]
        total = e.sum(axis=1)
        headroom_plus_one = 32 - np.frexp(total)[1].astype(np.int64)   # clz of the sum
        shifted = ((total << (headroom_plus_one - 1)) + (1 << 13)) >> 14
        sym = np.clip(shifted - ((1 << 15) + (1 << 16)), LO16, HI16)
        recip = lut_lookup_int16(sym, recip_lut)[:, None]
        right = (31 - headroom_plus_one)[:, None]
        y = (e * recip + (np.int64(1) << (right - 1))) >> right
        np.copyto(out.reshape(rows, depth), np.clip(y, 0, HI16), casting="unsafe")
    return run
