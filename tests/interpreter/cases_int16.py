"""Cases for the 16x8 kernels (see test_ops.py): int16 activations with zero point 0, int8
weights, int64 bias; bit-exact to LiteRT's reference kernels (outputs compared for equality)."""
import numpy as np

from tests.interpreter.case_data import conv_form_cases, conv_options
from tests.opmodel import In, Out, case

rng = np.random.default_rng(16)
INT32, INT64 = 2, 4  # TensorType values (quantized_bias_type)


def q16(shape, limit=32768):
    return rng.integers(-limit, limit, shape).astype(np.int16)


def weights(shape, axis, per_channel=True):
    w = rng.integers(-127, 128, shape).astype(np.int8)
    n = shape[axis] if per_channel else 1
    scales = rng.uniform(0.002, 0.02, n).astype(np.float32)
    return w, (scales, np.zeros(n, np.int64), axis)


def conv_case(id, op, x_shape, w_shape, options, *, per_channel=True, bias="int64",
              xs=0.0005, os=0.002, bias_range=1 << 20, limit=32768):
    axis = 3 if op == "DEPTHWISE_CONV_2D" else 0
    cout = w_shape[axis]
    w, wq = weights(w_shape, axis, per_channel)
    inputs = [In(x_shape, "int16", (xs, 0)), w]
    const_quant = {1: wq}
    if bias:
        inputs.append(rng.integers(-bias_range, bias_range, cout).astype(bias))
        const_quant[2] = ((xs * wq[0].astype(np.float64)).astype(np.float32),
                          np.zeros(wq[0].size, np.int64), 0)
    return case(id, op, inputs, [q16(x_shape, limit)], outputs=[Out((), "int16", (os, 0))],
                options=options, const_quant=const_quant)


CASES = []

# CONV_2D 16x8: activations, strides, SAME/VALID, dilation, groups, per-tensor, int32 bias.
# Small inputs and output scales where the clamps of RELU6 / RELU_N1_TO_1 matter.
for act, os in ((0, 0.002), (1, 0.002), (2, 0.0001), (3, 0.0005)):
    CASES.append(conv_case(f"conv_2d_act{act}", "CONV_2D", (1, 7, 9, 5), (6, 3, 3, 5),
                           conv_options(act=act), os=os, limit=2000, bias_range=1 << 16))
CASES += conv_form_cases(conv_case)
CASES += [
    conv_case("conv_2d_stride2_same_relu6", "CONV_2D", (1, 10, 11, 3), (4, 3, 3, 3),
              conv_options(stride=2, act=3), limit=2000, bias_range=1 << 16, os=0.0005),
    conv_case("conv_2d_int32_bias", "CONV_2D", (1, 6, 6, 3), (4, 3, 3, 3),
              conv_options(quantized_bias_type=INT32), bias="int32"),
    conv_case("conv_2d_int64_bias_option", "CONV_2D", (1, 5, 6, 3), (4, 2, 2, 3),
              conv_options(quantized_bias_type=INT64)),
    conv_case("conv_2d_multiplier_above_1", "CONV_2D", (1, 4, 4, 2), (3, 1, 1, 2),
              conv_options(), os=0.000001, bias_range=100, limit=10),
    conv_case("conv_2d_deep", "CONV_2D", (1, 2, 2, 600), (3, 1, 1, 600), conv_options(),
              os=0.05),
]

# DEPTHWISE_CONV_2D 16x8.
CASES += [
    conv_case("depthwise_conv_2d_stride2_relu6", "DEPTHWISE_CONV_2D", (2, 9, 10, 4),
              (1, 3, 3, 4), conv_options(stride=2, act=3, depth_multiplier=1), limit=3000,
              bias_range=1 << 16, os=0.0005),
    conv_case("depthwise_conv_2d_per_tensor_relu_n1", "DEPTHWISE_CONV_2D", (1, 5, 5, 4),
              (1, 5, 5, 4), conv_options(act=2, depth_multiplier=1), per_channel=False,
              os=0.0001, limit=1000, bias_range=1 << 14),
    conv_case("depthwise_conv_2d_no_bias", "DEPTHWISE_CONV_2D", (1, 6, 5, 3), (1, 2, 2, 3),
              conv_options(stride=2, depth_multiplier=1), bias=None),
]


def fc_case(id, x_shape, units, options, *, per_channel=False, bias="int64", xs=0.0005,
            os=0.003, limit=32768):
    w, wq = weights((units, x_shape[-1]), 0, per_channel)
    inputs = [In(x_shape, "int16", (xs, 0)), w]
    const_quant = {1: wq}
    if bias:
        inputs.append(rng.integers(-1 << 20, 1 << 20, units).astype(bias))
        const_quant[2] = ((xs * wq[0].astype(np.float64)).astype(np.float32),
                          np.zeros(wq[0].size, np.int64), 0)
    return case(id, "FULLY_CONNECTED", inputs, [q16(x_shape, limit)],
                outputs=[Out((), "int16", (os, 0))], options=options, const_quant=const_quant)


CASES += [
    fc_case("fully_connected", (3, 20), 7, dict()),
    fc_case("fully_connected_per_channel_relu", (2, 33), 5, dict(fused_activation_function=1),
            per_channel=True),
    fc_case("fully_connected_relu6_no_bias", (4, 16), 6, dict(fused_activation_function=3),
            bias=None, limit=3000, os=0.0005),
    fc_case("fully_connected_keep_num_dims", (2, 3, 12), 4, dict(keep_num_dims=True)),
    fc_case("fully_connected_relu_n1", (1, 64), 9, dict(fused_activation_function=2),
            os=0.0001, limit=1000),
    fc_case("fully_connected_int32_bias", (2, 10), 3, dict(quantized_bias_type=INT32),
            bias="int32"),
    # Rounded values past int32: C's conversion gives INT32_MIN on x86, clamped to -32768.
    fc_case("fully_connected_past_int32", (2, 300), 4, dict(), os=1e-8),
]


def bmm_case(id, a_shape, b_shape, b_type="int16", const_b=False, **options):
    aq, bq, oq = (0.0005, 0), (0.0004 if b_type == "int16" else 0.02, 0), (0.003, 0)
    b = q16(b_shape) if b_type == "int16" else rng.integers(-128, 128, b_shape).astype(np.int8)
    if const_b:
        return case(id, "BATCH_MATMUL", [In(a_shape, "int16", aq), b], [q16(a_shape)],
                    outputs=[Out((), "int16", oq)], options=options, const_quant={1: bq})
    return case(id, "BATCH_MATMUL", [In(a_shape, "int16", aq), In(b_shape, b_type, bq)],
                [q16(a_shape), b], outputs=[Out((), "int16", oq)], options=options)


CASES += [
    bmm_case("batch_matmul", (2, 3, 5), (2, 5, 4)),
    bmm_case("batch_matmul_broadcast_adj", (2, 1, 5, 3), (3, 4, 5), adj_x=True, adj_y=True),
    bmm_case("batch_matmul_int8_rhs", (3, 6, 8), (8, 2), b_type="int8", const_b=True),
]


def binary_case(id, op, a_shape, b_shape, act=None, sa=0.0005, sb=0.0008, so=0.001,
                const_b=False, limit=32768, **options):
    if act is not None:
        options["fused_activation_function"] = act
    a, b = q16(a_shape, limit), q16(b_shape, limit)
    if const_b:
        return case(id, op, [In(a_shape, "int16", (sa, 0)), b], [a],
                    outputs=[Out((), "int16", (so, 0))], options=options,
                    const_quant={1: (sb, 0)})
    return case(id, op, [In(a_shape, "int16", (sa, 0)), In(b_shape, "int16", (sb, 0))],
                [a, b], outputs=[Out((), "int16", (so, 0))], options=options)


POT = dict(sa=2.0 ** -10, sb=2.0 ** -12, so=2.0 ** -10)  # power-of-two scales

# ADD SUB: general scales (broadcasting, activations), power-of-two scales (shifting either
# input), pot_scale_int16 false; MUL: broadcasting, activations, multipliers above 1.
CASES += [
    binary_case("add", "ADD", (2, 3, 4), (2, 3, 4), act=0),
    binary_case("add_broadcast_relu", "ADD", (2, 1, 4), (3, 1), act=1),
    binary_case("add_relu6_const", "ADD", (3, 4), (4,), act=3, const_b=True, so=0.0002,
                limit=8000),
    binary_case("add_relu_n1", "ADD", (5, 6), (5, 6), act=2, so=0.00005, limit=1500),
    binary_case("add_pot", "ADD", (4, 5), (4, 5), **POT),
    binary_case("add_pot_first_shifted", "ADD", (4, 5), (4, 5), sa=2.0 ** -13, sb=2.0 ** -11,
                so=2.0 ** -11, act=1),
    binary_case("add_pot_disabled", "ADD", (2, 3), (3,), pot_scale_int16=False, **POT),
    binary_case("sub", "SUB", (2, 3, 4), (2, 3, 4)),
    binary_case("sub_broadcast_relu6", "SUB", (3, 1, 2), (1, 4, 2), act=3, so=0.0002,
                limit=8000),
    binary_case("sub_pot", "SUB", (6, 7), (6, 7), **POT),
    binary_case("sub_pot_broadcast", "SUB", (2, 6), (6,), sa=2.0 ** -12, sb=2.0 ** -10,
                so=2.0 ** -10),
    binary_case("sub_narrow_output", "SUB", (4, 5), (4, 5), sa=1.0, sb=1.0, so=3e-5, limit=2),
    binary_case("mul", "MUL", (2, 3, 4), (2, 3, 4), so=0.002, limit=4000),
    binary_case("mul_broadcast_relu", "MUL", (2, 3, 1), (4,), act=1, so=0.003, limit=6000),
    binary_case("mul_relu6_const", "MUL", (3, 4), (4,), act=3, const_b=True, so=0.0002,
                limit=4000),
    binary_case("mul_multiplier_above_1", "MUL", (4, 4), (4, 4), sa=0.01, sb=0.01, so=1e-6,
                limit=10),
]


def every_int16(shape):
    """All 65536 int16 values (each once, then random), so a table is checked whole."""
    size = int(np.prod(shape))
    values = np.concatenate([np.arange(-32768, 32768), rng.integers(-32768, 32768,
                                                                    max(0, size - 65536))])
    return rng.permutation(values[:size]).reshape(shape).astype(np.int16)


def unary_case(id, op, xs=0.0005, os=0.0004, shape=(256, 256), **options):
    return case(id, op, [In(shape, "int16", (xs, 0))], [every_int16(shape)],
                outputs=[Out((), "int16", (os, 0))], options=options)


Q15 = 1 / 32768
# Activations over every int16 value.
CASES += [
    unary_case("relu", "RELU"),
    unary_case("relu_upscale", "RELU", xs=0.0001, os=0.0003),
    unary_case("relu6", "RELU6", xs=0.0004, os=0.0002),
    unary_case("leaky_relu", "LEAKY_RELU", alpha=0.2),
    unary_case("leaky_relu_negative_alpha", "LEAKY_RELU", alpha=-0.7, os=0.001),
    unary_case("logistic_pot", "LOGISTIC", xs=2.0 ** -12, os=Q15),
    unary_case("logistic_general", "LOGISTIC", xs=0.0003, os=Q15),
    unary_case("logistic_coarse", "LOGISTIC", xs=0.01, os=Q15),
    unary_case("tanh_pot", "TANH", xs=2.0 ** -12, os=Q15),
    unary_case("tanh_pot_shift1", "TANH", xs=2.0 ** -11, os=Q15),
    unary_case("tanh_general", "TANH", xs=0.00037, os=Q15),
    unary_case("tanh_fine", "TANH", xs=1e-5, os=Q15),
]


def softmax_case(id, shape, beta, xs=0.001, limit=32768):
    return case(id, "SOFTMAX", [In(shape, "int16", (xs, 0))], [q16(shape, limit)],
                outputs=[Out((), "int16", (Q15, 0))], options=dict(beta=beta))


CASES += [
    softmax_case("softmax", (3, 10), 1.0),
    softmax_case("softmax_fine", (4, 37), 1.0, xs=0.0001, limit=4000),
    softmax_case("softmax_beta", (2, 3, 17), 0.7, xs=0.0003),
    softmax_case("softmax_large_depth", (2, 1000), 1.0, xs=0.0002, limit=3000),
    softmax_case("softmax_one_class", (5, 1), 1.0),
]


def pool_case(id, op, x_shape, size, stride, padding=0, act=0, scale=0.001):
    options = dict(filter_height=size[0], filter_width=size[1], stride_h=stride,
                   stride_w=stride, padding=padding, fused_activation_function=act)
    return case(id, op, [In(x_shape, "int16", (scale, 0))], [q16(x_shape)],
                outputs=[Out((), "int16", (scale, 0))], options=options)


CASES += [
    pool_case("max_pool_2d", "MAX_POOL_2D", (1, 8, 8, 3), (2, 2), 2),
    pool_case("max_pool_2d_same_relu6", "MAX_POOL_2D", (2, 7, 9, 2), (3, 3), 2, act=3,
              scale=0.0003),
    pool_case("average_pool_2d_same", "AVERAGE_POOL_2D", (2, 7, 9, 4), (3, 3), 2),
    pool_case("average_pool_2d_valid_relu", "AVERAGE_POOL_2D", (1, 7, 7, 5), (3, 3), 2,
              padding=1, act=1),
    pool_case("average_pool_2d_global", "AVERAGE_POOL_2D", (1, 6, 6, 5), (6, 6), 1, padding=1),
]


def transpose_conv_case(id, x_shape, w_shape, out_hw, stride=1, padding=0, act=0,
                        bias="int64", os=0.003, **options):
    o = w_shape[0]
    w, wq = weights(w_shape, 0)
    inputs = [np.array([x_shape[0], *out_hw, o], np.int32), w, In(x_shape, "int16", (0.0005, 0))]
    const_quant = {1: wq}
    if bias:
        inputs.append(rng.integers(-1 << 20, 1 << 20, o).astype(bias))
        const_quant[3] = ((0.0005 * wq[0].astype(np.float64)).astype(np.float32),
                          np.zeros(o, np.int64), 0)
    options.update(stride_h=stride, stride_w=stride, padding=padding,
                   fused_activation_function=act)
    return case(id, "TRANSPOSE_CONV", inputs, [q16(x_shape)],
                outputs=[Out((), "int16", (os, 0))], options=options, const_quant=const_quant)


CASES += [
    transpose_conv_case("transpose_conv", (1, 4, 5, 3), (4, 3, 3, 3), (4, 5)),
    transpose_conv_case("transpose_conv_stride2_relu", (2, 3, 4, 2), (3, 3, 3, 2), (6, 8),
                        stride=2, act=1),
    transpose_conv_case("transpose_conv_valid_no_bias", (1, 3, 3, 4), (2, 2, 2, 4), (6, 6),
                        stride=2, padding=1, bias=None),
    transpose_conv_case("transpose_conv_int32_bias", (1, 3, 3, 2), (3, 3, 3, 2), (6, 6),
                        stride=2, bias="int32", quantized_bias_type=INT32),
]


def compare_case(id, op, a_shape, b_shape, sa=0.001, sb=0.002, quantized=True):
    a, b = q16(a_shape, 2000), q16(b_shape, 2000)
    if a_shape == b_shape:   # half the pairs represent equal real values: b = a sa / sb
        pick = rng.random(a_shape) < 0.5
        b[pick] = (a[pick].astype(np.int64) * round(sa / sb * 8) // 8).astype(np.int16)
    qa, qb = ((sa, 0), (sb, 0)) if quantized else (None, None)
    return case(id, op, [In(a_shape, "int16", qa), In(b_shape, "int16", qb)], [a, b],
                outputs=[Out((), "bool")])


# Comparisons: EQUAL / NOT_EQUAL rescale quantized inputs; the others compare raw int16 values
# (TFLite ignores the scales). Unquantized NOT_EQUAL is not compared: TFLite's kernel writes
# nothing then.
for op in ("EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL"):
    name = op.lower()
    CASES += [
        compare_case(f"{name}", op, (6, 20), (6, 20), sa=0.002, sb=0.001),
        compare_case(f"{name}_broadcast", op, (3, 1, 20), (20,)),
    ]
    if op != "NOT_EQUAL":
        CASES.append(compare_case(f"{name}_unquantized", op, (4, 5), (4, 5), sa=1, sb=1,
                                  quantized=False))


def prelu_case(id, x_shape, alpha, sa=0.01, so=0.001):
    return case(id, "PRELU", [In(x_shape, "int16", (0.0005, 0)), alpha], [q16(x_shape)],
                outputs=[Out((), "int16", (so, 0))], const_quant={1: (sa, 0)})


CASES += [
    prelu_case("prelu", (2, 4, 5, 3), rng.integers(-128, 128, 3).astype(np.int8)),
    prelu_case("prelu_full_alpha", (3, 6), rng.integers(-128, 128, (3, 6)).astype(np.int8),
               so=0.0002),
]


def resize_case(id, op, x_shape, size, **options):
    return case(id, op, [In(x_shape, "int16", (0.001, 0)), np.array(size, np.int32)],
                [q16(x_shape)], outputs=[Out((), "int16", (0.001, 0))], options=options)


CASES += [
    resize_case("resize_bilinear_up", "RESIZE_BILINEAR", (1, 4, 5, 3), (9, 7)),
    resize_case("resize_bilinear_down_align", "RESIZE_BILINEAR", (2, 9, 8, 2), (4, 3),
                align_corners=True),
    resize_case("resize_bilinear_half_pixel", "RESIZE_BILINEAR", (1, 5, 4, 3), (13, 6),
                half_pixel_centers=True),
    resize_case("resize_nearest_neighbor", "RESIZE_NEAREST_NEIGHBOR", (1, 4, 5, 3), (9, 7)),
    resize_case("resize_nearest_neighbor_half_pixel", "RESIZE_NEAREST_NEIGHBOR", (2, 5, 4, 2),
                (8, 11), half_pixel_centers=True),
]


def reduce_case(id, op, x_shape, axes, keep_dims):
    return case(id, op, [In(x_shape, "int16", (0.001, 0)), np.array(axes, np.int32)],
                [q16(x_shape)], outputs=[Out((), "int16", (0.001, 0))],
                options=dict(keep_dims=keep_dims))


CASES += [
    reduce_case("reduce_max", "REDUCE_MAX", (2, 3, 4), [1], False),
    reduce_case("reduce_min_keep", "REDUCE_MIN", (2, 3, 4), [0, -1], True),
]


def positive16(shape):
    return rng.integers(0, 32768, shape).astype(np.int16)


# Quantized unary math: TFLite's interpolated 513-entry tables (EXP LOG GELU RSQRT), ABS, NEG,
# SQRT; over every int16 value where negative inputs are allowed.
CASES += [
    unary_case("exp", "EXP", xs=0.0003, os=0.0005),
    unary_case("log", "LOG", xs=0.001, os=0.0004),
    unary_case("gelu", "GELU", xs=0.0003, os=0.0002),
    unary_case("gelu_approximate", "GELU", xs=0.0002, os=0.0002, approximate=True),
    unary_case("abs", "ABS", xs=0.0005, os=0.0005),
    unary_case("abs_rescaled", "ABS", xs=0.0005, os=0.0007),
    unary_case("neg", "NEG", xs=0.0005, os=0.0005),
    case("sqrt", "SQRT", [In((64, 64), "int16", (0.001, 0))], [positive16((64, 64))],
         outputs=[Out((), "int16", (0.0002, 0))]),
    case("rsqrt", "RSQRT", [In((64, 64), "int16", (0.001, 0))], [positive16((64, 64))],
         outputs=[Out((), "int16", (0.0003, 0))]),
    case("abs_unquantized", "ABS", [In((4, 5), "int16")], [q16((4, 5))],
         outputs=[Out((), "int16")]),
]

CASES += [
    binary_case("maximum", "MAXIMUM", (2, 3, 4), (3, 1), sa=0.001, sb=0.001, so=0.001),
    binary_case("minimum", "MINIMUM", (4, 5), (4, 5), sa=0.001, sb=0.001, so=0.001),
]


def div_case(id, a_shape, b_shape, sa=0.001, sb=0.0005, so=0.002, act=0, limit=32768):
    a, b = q16(a_shape, limit), q16(b_shape, limit)
    b[b == 0] = 1
    return case(id, "DIV", [In(a_shape, "int16", (sa, 0)), In(b_shape, "int16", (sb, 0))],
                [a, b], outputs=[Out((), "int16", (so, 0))],
                options=dict(fused_activation_function=act))


CASES += [
    div_case("div", (8, 16), (8, 16)),
    div_case("div_broadcast_relu", (3, 1, 8), (8,), act=1, so=0.05),
    div_case("div_small_divisors", (6, 7), (6, 7), limit=40, so=0.0005),
]

CASES += [
    case("reduce_prod", "REDUCE_PROD", [In((6, 5), "int16", (0.00005, 0)),
                                        np.array([1], np.int32)],
         [q16((6, 5))], outputs=[Out((), "int16", (0.00002, 0))]),
    case("reduce_prod_keep", "REDUCE_PROD", [In((2, 3, 4), "int16", (0.0003, 0)),
                                             np.array([0, 2], np.int32)],
         [q16((2, 3, 4), 10000)], outputs=[Out((), "int16", (0.01, 0))],
         options=dict(keep_dims=True)),
]
