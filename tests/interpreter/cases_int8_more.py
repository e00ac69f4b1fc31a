"""Cases for the remaining int8 / uint8 kernels (see test_ops.py): TRANSPOSE_CONV, reductions,
LOG_SOFTMAX, resizing, data movement, ARG_MAX / ARG_MIN, PRELU, SQUARED_DIFFERENCE and
comparisons; bit-exact to LiteRT's reference kernels (outputs compared for equality)."""
from functools import partial

import numpy as np

from tests.interpreter import case_data
from tests.opmodel import In, Out, case

rng = np.random.default_rng(88)
q8, every_value = partial(case_data.q8, rng), partial(case_data.every_value, rng)


def shifted(q, key):
    """(scale, zero point) for int8, the same real range for uint8."""
    return q if key == "int8" else (q[0], q[1] + 128)


def transpose_conv_case(id, x_shape, w_shape, out_hw, key="int8", per_channel=True, bias=True,
                        stride=1, padding=0, act=0, xq=(0.05, 3), oq=(0.1, -6), w_zp=0):
    o = w_shape[0]
    if key == "int8":
        w = rng.integers(-127, 128, w_shape).astype(np.int8)
        scales = rng.uniform(0.002, 0.02, o if per_channel else 1).astype(np.float32)
        wq = (scales, np.zeros(scales.size, np.int64), 0)
    else:
        w = rng.integers(0, 256, w_shape).astype(np.uint8)
        scales = np.array([0.01], np.float32)
        wq = (scales, np.array([w_zp]), 0)
    xq, oq = shifted(xq, key), shifted(oq, key)
    out_shape = np.array([x_shape[0], *out_hw, o], np.int32)
    inputs = [out_shape, w, In(x_shape, key, xq)]
    const_quant = {1: wq}
    if bias:
        inputs.append(rng.integers(-3000, 3000, o).astype(np.int32))
        const_quant[3] = ((xq[0] * scales.astype(np.float64)).astype(np.float32),
                          np.zeros(scales.size, np.int64), 0)
    options = dict(stride_h=stride, stride_w=stride, padding=padding,
                   fused_activation_function=act)
    return case(id, "TRANSPOSE_CONV", inputs, [q8(x_shape, key)], outputs=[Out((), key, oq)],
                options=options, const_quant=const_quant)


CASES = [
    transpose_conv_case("transpose_conv", (1, 4, 5, 3), (4, 3, 3, 3), (4, 5)),
    transpose_conv_case("transpose_conv_stride2_same", (1, 4, 4, 3), (5, 3, 3, 3), (8, 8),
                        stride=2),
    transpose_conv_case("transpose_conv_stride2_valid_relu", (2, 3, 4, 2), (3, 3, 3, 2),
                        (7, 9), stride=2, padding=1, act=1),
    transpose_conv_case("transpose_conv_stride2_odd_relu6", (1, 4, 4, 3), (4, 2, 2, 3), (7, 7),
                        stride=2, act=3, oq=(0.03, -100)),
    transpose_conv_case("transpose_conv_per_tensor_no_bias", (1, 3, 3, 4), (2, 3, 3, 4),
                        (6, 6), stride=2, per_channel=False, bias=False),
    transpose_conv_case("transpose_conv_deep_float64", (1, 2, 2, 300), (2, 3, 3, 300), (4, 4),
                        stride=2, oq=(2.0, 0)),
    transpose_conv_case("transpose_conv_uint8", (1, 4, 4, 3), (4, 3, 3, 3), (8, 8), key="uint8",
                        stride=2, w_zp=120),
    transpose_conv_case("transpose_conv_uint8_valid_relu", (1, 3, 5, 2), (3, 2, 2, 2), (6, 10),
                        key="uint8", stride=2, padding=1, act=1, w_zp=0),
]


def reduce_case(id, op, x_shape, axes, keep_dims, key="int8", xq=(0.1, -5), oq=(0.3, 3), x=None):
    xq, oq = shifted(xq, key), shifted(oq, key)
    x = q8(x_shape, key) if x is None else x
    return case(id, op, [In(x_shape, key, xq), np.array(axes, np.int32)], [x],
                outputs=[Out((), key, oq)], options=dict(keep_dims=keep_dims))


# SUM: LiteRT's reference SUM reads int8 data as uint8 (reduce.cc passes uint8_t pointers
# whatever the type), so int8 cases against it use inputs and outputs in [0, 127], where
# both readings agree. (Its default kernels requantize in float and differ by 1 LSB.)
def nonneg(shape):
    return rng.integers(0, 20, shape).astype(np.int8)


CASES += [
    reduce_case("sum_uint8", "SUM", (2, 6, 5, 3), [1, 2], False, key="uint8"),
    reduce_case("sum_uint8_keep_negative_axis", "SUM", (3, 4, 5), [-1], True, key="uint8",
                oq=(0.5, 10)),
    reduce_case("sum_uint8_upscale", "SUM", (4, 3), [0], False, key="uint8", xq=(0.1, 3),
                oq=(0.05, 0)),
    reduce_case("sum_int8_nonnegative", "SUM", (2, 5, 4), [1], False, xq=(0.1, 2),
                oq=(0.2, 0), x=nonneg((2, 5, 4))),
    reduce_case("sum_int8_nonnegative_all_axes", "SUM", (3, 4), [0, 1], True, xq=(0.01, -3),
                oq=(0.2, 1), x=nonneg((3, 4))),
]

# REDUCE_MAX / REDUCE_MIN: raw values, input and output sharing their quantization.
for key in ("int8", "uint8"):
    CASES += [
        reduce_case(f"reduce_max_{key}", "REDUCE_MAX", (2, 3, 4), [1], False, key=key,
                    oq=(0.1, -5)),
        reduce_case(f"reduce_min_keep_{key}", "REDUCE_MIN", (2, 3, 4), [0, -1], True, key=key,
                    oq=(0.1, -5)),
    ]


def arg_case(id, op, x_shape, axis, key="int8", out="int32"):
    return case(id, op, [In(x_shape, key, shifted((0.1, 0), key)), np.array([axis], np.int32)],
                [q8(x_shape, key)], outputs=[Out((), out)],
                options=dict(output_type={"int32": 2, "int64": 4}[out]))


CASES += [
    arg_case("arg_max_int8", "ARG_MAX", (3, 4, 5), 1),
    arg_case("arg_max_uint8_last_int64", "ARG_MAX", (3, 40), -1, key="uint8", out="int64"),
    arg_case("arg_min_int8_first", "ARG_MIN", (6, 3), 0),
    arg_case("arg_min_uint8", "ARG_MIN", (2, 3, 50), 2, key="uint8"),
]


def resize_case(id, op, x_shape, size, key="int8", **options):
    q = shifted((0.1, 2), key)
    x = q8(x_shape, key)
    return case(id, op, [In(x_shape, key, q), np.array(size, np.int32)], [x],
                outputs=[Out((), key, q)], options=options)


# RESIZE_BILINEAR: up- and downscaling, align_corners, half_pixel_centers.
for key in ("int8", "uint8"):
    CASES += [
        resize_case(f"resize_bilinear_up_{key}", "RESIZE_BILINEAR", (1, 4, 5, 3), (9, 7),
                    key=key),
        resize_case(f"resize_bilinear_down_{key}", "RESIZE_BILINEAR", (2, 9, 8, 2), (4, 3),
                    key=key),
        resize_case(f"resize_bilinear_align_corners_{key}", "RESIZE_BILINEAR", (1, 5, 4, 3),
                    (8, 11), key=key, align_corners=True),
        resize_case(f"resize_bilinear_half_pixel_{key}", "RESIZE_BILINEAR", (1, 5, 4, 3),
                    (13, 6), key=key, half_pixel_centers=True),
        resize_case(f"resize_bilinear_half_pixel_down_{key}", "RESIZE_BILINEAR", (1, 9, 7, 2),
                    (4, 5), key=key, half_pixel_centers=True),
        resize_case(f"resize_nearest_neighbor_{key}", "RESIZE_NEAREST_NEIGHBOR", (1, 4, 5, 3),
                    (9, 7), key=key),
        resize_case(f"resize_nearest_neighbor_half_pixel_{key}", "RESIZE_NEAREST_NEIGHBOR",
                    (2, 5, 4, 2), (8, 11), key=key, half_pixel_centers=True),
        resize_case(f"resize_nearest_neighbor_align_{key}", "RESIZE_NEAREST_NEIGHBOR",
                    (1, 5, 4, 2), (3, 7), key=key, align_corners=True),
    ]


def block_case(id, op, x_shape, block, key):
    q = shifted((0.1, 2), key)
    return case(id, op, [In(x_shape, key, q)], [q8(x_shape, key)], outputs=[Out((), key, q)],
                options=dict(block_size=block))


# LiteRT's reference resolver has DEPTH_TO_SPACE version 1 only; int8 models state version 2.
AUTO_CASES = [block_case("depth_to_space_int8", "DEPTH_TO_SPACE", (1, 3, 4, 8), 2, "int8")]
CASES += [
    block_case("depth_to_space_uint8", "DEPTH_TO_SPACE", (2, 2, 3, 9), 3, "uint8"),
    block_case("space_to_depth_int8", "SPACE_TO_DEPTH", (1, 4, 6, 3), 2, "int8"),
    block_case("space_to_depth_uint8", "SPACE_TO_DEPTH", (2, 6, 3, 2), 3, "uint8"),
]


def log_softmax_case(id, shape, key="int8", xq=(0.1, 0), values=None):
    xq = shifted(xq, key)
    oq = (16 / 256, 127 if key == "int8" else 255)
    x = q8(shape, key) if values is None else values
    return case(id, "LOG_SOFTMAX", [In(shape, key, xq)], [x], outputs=[Out((), key, oq)])


# LOG_SOFTMAX: coarse and fine input scales (differences past the exp cut-off), one class.
for key in ("int8", "uint8"):
    CASES += [
        log_softmax_case(f"log_softmax_{key}", (3, 10), key),
        log_softmax_case(f"log_softmax_fine_{key}", (4, 37), key, xq=(0.02, 5)),
        log_softmax_case(f"log_softmax_coarse_{key}", (2, 3, 17), key, xq=(0.4, -3)),
        log_softmax_case(f"log_softmax_large_depth_{key}", (2, 500), key, xq=(0.06, 0)),
        log_softmax_case(f"log_softmax_one_class_{key}", (5, 1), key),
    ]


def binary_case(id, op, a_shape, b_shape, key="int8", aq=(0.05, 3), bq=(0.08, -10),
                oq=(0.1, 1), const_b=False, out_key=None, equal_ratio=None, **options):
    """equal_ratio r: half of b's values are set to represent a's real values (b - zb =
    r (a - za), where that fits), so that comparisons meet equal values."""
    aq, bq = shifted(aq, key), shifted(bq, key)
    out_key = out_key or key
    outputs = [Out((), out_key, shifted(oq, key) if out_key == key else None)]
    a, b = q8(a_shape, key), q8(b_shape, key)
    if equal_ratio is not None:
        lo, hi = (-128, 127) if key == "int8" else (0, 255)
        a_b = np.broadcast_to(a, np.broadcast_shapes(a.shape, b.shape))
        same = bq[1] + equal_ratio * (a_b.astype(np.int64) - aq[1])
        pick = (rng.random(same.shape) < 0.5) & (same >= lo) & (same <= hi)
        b_full = np.broadcast_to(b, same.shape).copy()
        b_full[pick] = same[pick]
        b = b_full.astype(key) if b.shape == same.shape else b
    if const_b:
        return case(id, op, [In(a_shape, key, aq), b], [a], outputs=outputs,
                    options=options, const_quant={1: bq})
    return case(id, op, [In(a_shape, key, aq), In(b_shape, key, bq)], [a, b],
                outputs=outputs, options=options)


# PRELU: per-channel alpha (constant, broadcast along the last axis), full-shape alpha, uint8.
CASES += [
    binary_case("prelu", "PRELU", (2, 4, 5, 3), (3,), const_b=True, bq=(0.01, 0)),
    binary_case("prelu_full_alpha", "PRELU", (3, 6), (3, 6), bq=(0.02, -20), oq=(0.03, -50)),
    binary_case("prelu_spatial_alpha", "PRELU", (1, 4, 4, 2), (1, 1, 2), const_b=True),
    binary_case("prelu_uint8", "PRELU", (2, 3, 4), (4,), key="uint8", const_b=True,
                bq=(0.01, -100)),
]

# SQUARED_DIFFERENCE int8: broadcasting, unequal scales.
CASES += [
    binary_case("squared_difference", "SQUARED_DIFFERENCE", (3, 4), (3, 4), oq=(0.5, -100)),
    binary_case("squared_difference_broadcast", "SQUARED_DIFFERENCE", (2, 3, 4), (4,),
                aq=(0.02, 0), bq=(0.03, 5), oq=(0.05, -128)),
]

# Comparisons: equal and unequal scales, broadcasting, scales above 1, uint8.
for op in ("EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL"):
    name = op.lower()
    CASES += [
        binary_case(f"{name}_int8", op, (4, 16), (4, 16), aq=(0.05, 3), bq=(0.05, -2),
                    out_key="bool", equal_ratio=1),
        binary_case(f"{name}_int8_rescaled", op, (6, 20), (6, 20), aq=(0.5, 3),
                    bq=(0.25, 6), out_key="bool", equal_ratio=2),
        binary_case(f"{name}_int8_broadcast", op, (3, 1, 20), (20,), aq=(0.05, 3),
                    bq=(0.1, -1), out_key="bool"),
        binary_case(f"{name}_uint8", op, (5, 12), (5, 12), key="uint8", aq=(0.04, 0),
                    bq=(0.02, 10), out_key="bool", equal_ratio=2),
    ]
CASES += [
    binary_case("less_int8_scales_above_1", "LESS", (8, 8), (8, 8), aq=(2.0, 0), bq=(3.0, 1),
                out_key="bool"),
    binary_case("equal_int8_scales_above_1", "EQUAL", (8, 8), (8, 8), aq=(2.0, 0),
                bq=(4.0, 1), out_key="bool", equal_ratio=0.5),
]


def unary_case(id, op, key="int8", xq=(0.05, 3), oq=(0.04, -20), shape=(4, 64), x=None,
               **options):
    xq, oq = shifted(xq, key), shifted(oq, key)
    x = every_value(shape, key) if x is None else x
    return case(id, op, [In(shape, key, xq)], [x], outputs=[Out((), key, oq)], options=options)


def positive(shape, zero_point, key="int8"):
    """Values >= the zero point (SQRT and RSQRT refuse smaller ones), each of them once."""
    hi = 128 if key == "int8" else 256
    values = np.arange(zero_point, hi)
    return rng.permutation(np.resize(values, int(np.prod(shape)))).reshape(shape).astype(key)


# Quantized unary math over every input value.
CASES += [
    unary_case("exp", "EXP", xq=(0.03, 10), oq=(0.05, -128)),
    unary_case("exp_wide", "EXP", xq=(0.1, 0), oq=(0.5, -128)),
    unary_case("log", "LOG", xq=(0.05, -128), oq=(0.05, 100)),
    unary_case("log_nonpositive", "LOG", xq=(0.02, 20), oq=(0.03, 60)),
    unary_case("gelu", "GELU", xq=(0.03, 5), oq=(0.02, -30)),
    unary_case("gelu_approximate", "GELU", xq=(0.05, -3), oq=(0.03, -10), approximate=True),
    unary_case("gelu_uint8", "GELU", key="uint8", xq=(0.04, 0), oq=(0.03, -20)),
    unary_case("neg", "NEG", xq=(0.05, 0), oq=(0.05, 0)),
    unary_case("abs", "ABS", xq=(0.05, 3), oq=(0.05, 3)),
    unary_case("abs_rescaled", "ABS", xq=(0.05, -7), oq=(0.03, -128)),
    unary_case("sqrt", "SQRT", xq=(0.05, -20), oq=(0.02, -128), x=positive((4, 64), -20)),
    unary_case("rsqrt", "RSQRT", xq=(0.01, -128), oq=(0.05, -128), x=positive((4, 64), -128)),
    unary_case("rsqrt_zero_point", "RSQRT", xq=(0.002, 5), oq=(0.2, -100),
               x=positive((4, 64), 5)),
]


def div_case(id, a_shape, b_shape, key="int8", aq=(0.05, 3), bq=(0.02, -10), oq=(0.1, 1),
             act=0, zero_dividends=False):
    aq, bq, oq = shifted(aq, key), shifted(bq, key), shifted(oq, key)
    a, b = q8(a_shape, key), q8(b_shape, key)
    if zero_dividends:                 # a quotient of 0 shifts right by more than 31
        a[rng.random(a.shape) < 0.5] = aq[1]
    b[b == bq[1]] += 1                 # TFLite refuses divisors equal to the zero point
    return case(id, "DIV", [In(a_shape, key, aq), In(b_shape, key, bq)], [a, b],
                outputs=[Out((), key, oq)], options=dict(fused_activation_function=act))


# DIV: broadcasting, activations, small and large quotients, uint8.
CASES += [
    div_case("div", (4, 16), (4, 16)),
    div_case("div_broadcast_relu", (3, 1, 8), (8,), act=1, oq=(0.5, -100)),
    div_case("div_relu6", (5, 7), (5, 7), aq=(0.02, 0), bq=(0.1, 0), oq=(0.03, -128),
             act=3),
    div_case("div_uint8", (6, 9), (6, 9), key="uint8", oq=(0.05, 0)),
    div_case("div_zero_dividends_relu", (4, 8), (4, 8), act=1, oq=(0.5, -100),
             zero_dividends=True),
]


def l2_case(id, shape, key="int8", xq=(0.05, 3)):
    xq = shifted(xq, key)
    oq = (1 / 128, 0 if key == "int8" else 128)
    return case(id, "L2_NORMALIZATION", [In(shape, key, xq)], [q8(shape, key)],
                outputs=[Out((), key, oq)])


CASES += [
    l2_case("l2_normalization", (3, 10)),
    l2_case("l2_normalization_deep", (2, 3, 300), xq=(0.1, -7)),
    l2_case("l2_normalization_one", (4, 1)),
    l2_case("l2_normalization_uint8", (5, 12), key="uint8"),
    l2_case("l2_normalization_uint8_deep", (2, 500), key="uint8", xq=(0.02, 0)),
]

# REDUCE_PROD int8: the running product rescaled after every factor.
CASES += [
    reduce_case("reduce_prod", "REDUCE_PROD", (6, 4), [1], False, xq=(0.012, 2),
                oq=(0.004, -3)),
    reduce_case("reduce_prod_keep_two_axes", "REDUCE_PROD", (2, 3, 4, 2), [1, -1], True,
                xq=(0.015, -5), oq=(0.002, 0)),
    reduce_case("reduce_prod_long", "REDUCE_PROD", (4, 12), [1], False, xq=(0.014, 0),
                oq=(0.0001, 0)),
]
