"""Cases for the integer kernels (see test_ops.py): int8 / uint8 arithmetic, bit-exact to LiteRT's
reference kernels (outputs compared for equality)."""
from functools import partial

import numpy as np

from tests.interpreter import case_data
from tests.interpreter.case_data import conv_form_cases, conv_options
from tests.opmodel import In, Out, case

rng = np.random.default_rng(8)
q8, every_value = partial(case_data.q8, rng), partial(case_data.every_value, rng)


def conv_weights(shape, axis, per_channel=True):
    """Symmetric int8 weights with per-channel scales along `axis` (or one scale)."""
    w = rng.integers(-127, 128, shape).astype(np.int8)
    n = shape[axis]
    scales = rng.uniform(0.002, 0.02, n if per_channel else 1).astype(np.float32)
    return w, (scales, np.zeros(scales.size, np.int64), axis)


def conv_case(id, op, x_shape, w_shape, options, *, key="int8", per_channel=True, bias=True,
              xq=(0.05, 3), oq=(0.2, -7), w_zp=0):
    axis = 3 if op == "DEPTHWISE_CONV_2D" else 0
    cout = w_shape[axis]
    if key == "int8":
        w, wq = conv_weights(w_shape, axis, per_channel)
    else:
        w = rng.integers(0, 256, w_shape).astype(np.uint8)
        wq = (np.float32(0.01), w_zp)
        xq, oq = (xq[0], xq[1] + 128), (oq[0], oq[1] + 128)
    inputs = [In(x_shape, key, xq), w]
    const_quant = {1: wq}
    if bias:
        s_w = wq[0] if key == "int8" else np.array([wq[0]])
        inputs.append(rng.integers(-3000, 3000, cout).astype(np.int32))
        const_quant[2] = ((xq[0] * np.asarray(s_w, np.float64)).astype(np.float32),
                          np.zeros(np.size(s_w), np.int64), 0)
    return case(id, op, inputs, [q8(x_shape, key)], outputs=[Out((), key, oq)],
                options=options, const_quant=const_quant)


CASES = []

# CONV_2D: strides, SAME/VALID, every fused activation, dilation, groups, batch, uint8.
for act in (0, 1, 2, 3):
    CASES.append(conv_case(f"conv_2d_act{act}", "CONV_2D", (1, 7, 9, 5), (6, 3, 3, 5),
                           conv_options(act=act)))
CASES += conv_form_cases(conv_case)
CASES += [
    conv_case("conv_2d_stride2_same", "CONV_2D", (1, 10, 11, 3), (4, 3, 3, 3),
              conv_options(stride=2, padding=0, act=3)),
    conv_case("conv_2d_uint8", "CONV_2D", (1, 7, 7, 3), (4, 3, 3, 3), conv_options(act=1),
              key="uint8", w_zp=120),
    conv_case("conv_2d_uint8_valid", "CONV_2D", (2, 6, 7, 2), (3, 2, 3, 2),
              conv_options(stride=2, padding=1), key="uint8", w_zp=0),
    # Sums past float32's exact range (float64 GEMM); multipliers near and above 1, where the
    # requantization takes its exact integer path.
    conv_case("conv_2d_deep_float64", "CONV_2D", (1, 2, 2, 2100), (3, 1, 1, 2100),
              conv_options(), oq=(2.0, 0)),
    conv_case("conv_2d_multiplier_near_1", "CONV_2D", (1, 5, 5, 3), (4, 3, 3, 3),
              conv_options(), oq=(0.004, 0)),
    conv_case("conv_2d_multiplier_above_1", "CONV_2D", (1, 4, 4, 2), (3, 1, 1, 2),
              conv_options(), oq=(0.00005, 0)),
]

# DEPTHWISE_CONV_2D: multiplier, strides, dilation, activations, uint8.
CASES += [
    conv_case("depthwise_conv_2d_stride2_relu6", "DEPTHWISE_CONV_2D", (2, 9, 10, 4),
              (1, 3, 3, 4), conv_options(stride=2, act=3, depth_multiplier=1)),
    conv_case("depthwise_conv_2d_relu_n1", "DEPTHWISE_CONV_2D", (1, 5, 5, 4), (1, 5, 5, 4),
              conv_options(act=2, depth_multiplier=1), per_channel=False),
    conv_case("depthwise_conv_2d_uint8", "DEPTHWISE_CONV_2D", (1, 6, 6, 3), (1, 3, 3, 3),
              conv_options(act=3, depth_multiplier=1), key="uint8", w_zp=128),
    conv_case("depthwise_conv_2d_multiplier_near_1", "DEPTHWISE_CONV_2D", (1, 5, 5, 3),
              (1, 3, 3, 3), conv_options(stride=2, depth_multiplier=1), oq=(0.003, 1)),
    # One output pixel of the whole input, as a streaming wake-word model's steps: the
    # default resolver's folded offset (conv_int8.depthwise_conv_2d), no activation, lo < zp.
    conv_case("depthwise_conv_2d_one_pixel", "DEPTHWISE_CONV_2D", (1, 9, 1, 32),
              (1, 9, 1, 32), conv_options(depth_multiplier=1), oq=(0.05, 9)),
]


def fc_case(id, x_shape, units, options, *, key="int8", per_channel=False, bias=True,
            xq=(0.05, 3), oq=(0.3, -5), w_zp=0):
    depth = x_shape[-1]
    if key == "int8":
        w, wq = conv_weights((units, depth), 0, per_channel)
    else:
        w = rng.integers(0, 256, (units, depth)).astype(np.uint8)
        wq = (np.float32(0.01), w_zp)
        xq, oq = (xq[0], xq[1] + 128), (oq[0], oq[1] + 128)
    inputs = [In(x_shape, key, xq), w]
    const_quant = {1: wq}
    if bias:
        s_w = np.atleast_1d(np.asarray(wq[0], np.float64))
        inputs.append(rng.integers(-3000, 3000, units).astype(np.int32))
        const_quant[2] = ((xq[0] * s_w).astype(np.float32), np.zeros(s_w.size, np.int64), 0)
    return case(id, "FULLY_CONNECTED", inputs, [q8(x_shape, key)], outputs=[Out((), key, oq)],
                options=options, const_quant=const_quant)


# FULLY_CONNECTED: per-tensor and per-channel, activations, keep_num_dims, no bias, uint8.
CASES += [
    fc_case("fully_connected", (3, 20), 7, dict()),
    fc_case("fully_connected_per_channel_relu", (2, 33), 5, dict(fused_activation_function=1),
            per_channel=True),
    fc_case("fully_connected_relu6_no_bias", (4, 16), 6, dict(fused_activation_function=3),
            bias=False),
    fc_case("fully_connected_keep_num_dims", (2, 3, 12), 4, dict(keep_num_dims=True)),
    fc_case("fully_connected_flatten", (2, 3, 12), 4, dict(keep_num_dims=False)),
    fc_case("fully_connected_relu_n1", (1, 64), 9, dict(fused_activation_function=2),
            oq=(0.02, 0)),
    fc_case("fully_connected_uint8", (2, 24), 5, dict(fused_activation_function=1),
            key="uint8", w_zp=131),
    fc_case("fully_connected_deep_float64", (2, 2100), 3, dict(), oq=(2.0, 0)),
]


def bmm_case(id, a_shape, b_shape, const_b=False, **options):
    aq, bq, oq = (0.05, 4), (0.04, -3), (0.5, 2)
    b = q8(b_shape)
    if const_b:
        return case(id, "BATCH_MATMUL", [In(a_shape, "int8", aq), b], [q8(a_shape)],
                    outputs=[Out((), "int8", oq)], options=options, const_quant={1: bq})
    return case(id, "BATCH_MATMUL", [In(a_shape, "int8", aq), In(b_shape, "int8", bq)],
                [q8(a_shape), b], outputs=[Out((), "int8", oq)], options=options)


CASES += [
    bmm_case("batch_matmul", (2, 3, 5), (2, 5, 4)),
    bmm_case("batch_matmul_broadcast_adj", (2, 1, 5, 3), (3, 4, 5), adj_x=True, adj_y=True),
    bmm_case("batch_matmul_const_rhs", (3, 6, 8), (8, 2), const_b=True),
]


def pool_options(size, stride, padding=0, act=0):
    return dict(filter_height=size[0], filter_width=size[1], stride_h=stride, stride_w=stride,
                padding=padding, fused_activation_function=act)


def pool_case(id, op, x_shape, options, key="int8", q=(0.1, -5)):
    if key == "uint8":
        q = (q[0], q[1] + 128)
    return case(id, op, [In(x_shape, key, q)], [q8(x_shape, key)], outputs=[Out((), key, q)],
                options=options)


# Pools: SAME/VALID, strides, windows over the padding, fused activations, uint8.
CASES += [
    pool_case("max_pool_2d", "MAX_POOL_2D", (1, 8, 8, 3), pool_options((2, 2), 2)),
    pool_case("max_pool_2d_same_relu6", "MAX_POOL_2D", (2, 7, 9, 2),
              pool_options((3, 3), 2, padding=0, act=3)),
    pool_case("max_pool_2d_valid_relu_uint8", "MAX_POOL_2D", (1, 7, 7, 2),
              pool_options((3, 2), 2, padding=1, act=1), key="uint8"),
    pool_case("average_pool_2d", "AVERAGE_POOL_2D", (1, 8, 8, 3), pool_options((2, 2), 2)),
    pool_case("average_pool_2d_same", "AVERAGE_POOL_2D", (2, 7, 9, 4),
              pool_options((3, 3), 2, padding=0)),
    pool_case("average_pool_2d_same_stride1_relu", "AVERAGE_POOL_2D", (1, 5, 6, 3),
              pool_options((3, 3), 1, padding=0, act=1)),
    pool_case("average_pool_2d_global_uint8", "AVERAGE_POOL_2D", (1, 7, 7, 5),
              pool_options((7, 7), 1, padding=1, act=2), key="uint8"),
]


def mean_case(id, x_shape, axes, keep_dims, key="int8", xq=(0.1, -5), oq=(0.07, 3)):
    if key == "uint8":
        xq, oq = (xq[0], xq[1] + 128), (oq[0], oq[1] + 128)
    return case(id, "MEAN", [In(x_shape, key, xq), np.array(axes, np.int32)],
                [q8(x_shape, key)], outputs=[Out((), key, oq)], options=dict(keep_dims=keep_dims))


# MEAN: spatial (the global pool of classifiers), negative and repeated axes, keep_dims, uint8.
CASES += [
    mean_case("mean_spatial_keep", (2, 7, 7, 6), [1, 2], True),
    mean_case("mean_spatial", (1, 5, 3, 4), [1, 2], False),
    mean_case("mean_negative_axes", (2, 3, 4, 5), [-1, -3], False),
    mean_case("mean_repeated_axis_keep", (3, 10), [1, -1], True),
    mean_case("mean_same_scale", (4, 6), [1], False, oq=(0.1, -5)),
    mean_case("mean_uint8", (2, 6, 5, 3), [2], True, key="uint8"),
]


def binary_case(id, op, a_shape, b_shape, key="int8", act=None, aq=(0.05, 3), bq=(0.08, -10),
                oq=(0.1, 1), const_b=False):
    if key == "uint8":
        aq, bq, oq = ((s, z + 128) for s, z in (aq, bq, oq))
    options = {} if act is None else dict(fused_activation_function=act)
    b = q8(b_shape, key)
    if const_b:
        return case(id, op, [In(a_shape, key, aq), b], [q8(a_shape, key)],
                    outputs=[Out((), key, oq)], options=options, const_quant={1: bq})
    return case(id, op, [In(a_shape, key, aq), In(b_shape, key, bq)], [q8(a_shape, key), b],
                outputs=[Out((), key, oq)], options=options)


# ADD SUB MUL: broadcasting, every fused activation, equal and unequal scales, uint8, constants.
CASES += [
    binary_case("add", "ADD", (2, 3, 4), (2, 3, 4), act=0),
    binary_case("add_broadcast_relu", "ADD", (2, 1, 4), (3, 1), act=1),
    binary_case("add_relu6_same_scales", "ADD", (4, 5), (4, 5), act=3, aq=(0.05, 3),
                bq=(0.05, 3), oq=(0.05, 3)),
    binary_case("add_relu_n1_const", "ADD", (3, 4), (4,), act=2, const_b=True, oq=(0.01, -2)),
    binary_case("add_uint8", "ADD", (2, 5), (1, 5), key="uint8", act=1),
    binary_case("sub", "SUB", (2, 3, 4), (2, 3, 4), act=0),
    binary_case("sub_broadcast_relu6", "SUB", (3, 1, 2), (1, 4, 2), act=3),
    binary_case("sub_uint8", "SUB", (6,), (6,), key="uint8"),
    binary_case("sub_narrow_output", "SUB", (5,), (5,), aq=(1.0, 0), bq=(1.0, 0),
                oq=(1.5e-6, 0)),
    binary_case("mul", "MUL", (2, 3, 4), (2, 3, 4), act=0, oq=(0.004, -1)),
    binary_case("mul_broadcast_relu", "MUL", (2, 3, 1), (4,), act=1, oq=(0.003, 5)),
    binary_case("mul_relu6_uint8", "MUL", (3, 4), (3, 4), key="uint8", act=3, oq=(0.003, 0)),
    binary_case("mul_const", "MUL", (2, 6), (6,), const_b=True, oq=(0.01, 0)),
    binary_case("maximum", "MAXIMUM", (2, 3), (3,), aq=(0.05, 3), bq=(0.05, 3), oq=(0.05, 3)),
    binary_case("minimum_uint8", "MINIMUM", (2, 3), (2, 3), key="uint8", aq=(0.05, 3),
                bq=(0.05, 3), oq=(0.05, 3)),
]


def unary_case(id, op, key="int8", xq=(0.05, 3), oq=(0.04, -20), shape=(4, 64), **options):
    if key == "uint8":
        xq, oq = (xq[0], xq[1] + 128), (oq[0], oq[1] + 128)
    return case(id, op, [In(shape, key, xq)], [every_value(shape, key)],
                outputs=[Out((), key, oq)], options=options)


SIGMOID_OUT = (1 / 256, -128)  # zero point 0 for uint8 (unary_case adds 128)

# Activations over every input value: RELU family, LEAKY_RELU, HARD_SWISH, LOGISTIC, TANH.
for key in ("int8", "uint8"):
    CASES += [
        unary_case(f"relu_{key}", "RELU", key),
        unary_case(f"relu6_{key}", "RELU6", key, oq=(0.03, -100)),
        unary_case(f"relu_n1_to_1_{key}", "RELU_N1_TO_1", key, oq=(0.01, 0)),
        unary_case(f"relu_0_to_1_{key}", "RELU_0_TO_1", key, oq=(0.005, -128)),
        unary_case(f"leaky_relu_{key}", "LEAKY_RELU", key, alpha=0.2),
        unary_case(f"hard_swish_{key}", "HARD_SWISH", key, xq=(0.04, -10), oq=(0.03, -30)),
        unary_case(f"hard_swish_wide_{key}", "HARD_SWISH", key, xq=(0.2, 0), oq=(0.05, -100)),
        unary_case(f"logistic_{key}", "LOGISTIC", key, oq=SIGMOID_OUT),
        unary_case(f"logistic_wide_{key}", "LOGISTIC", key, xq=(0.3, 10), oq=SIGMOID_OUT),
        # exp(-x) past float32's range (x < -88.7): 0 from the table, with no overflow warning
        unary_case(f"logistic_saturating_{key}", "LOGISTIC", key, xq=(1.0, 0), oq=SIGMOID_OUT),
        unary_case(f"logistic_huge_scale_{key}", "LOGISTIC", key, xq=(300.0, 0), oq=SIGMOID_OUT),
        unary_case(f"tanh_{key}", "TANH", key, oq=(1 / 128, 0)),
        unary_case(f"tanh_narrow_{key}", "TANH", key, xq=(0.011, -7), oq=(0.009, 4)),
    ]
CASES += [
    unary_case("relu_same_scale", "RELU", xq=(0.05, 3), oq=(0.05, 3)),
    unary_case("leaky_relu_alpha_above_1", "LEAKY_RELU", alpha=1.7, oq=(0.2, 0)),
    unary_case("leaky_relu_negative_alpha", "LEAKY_RELU", alpha=-0.3),
]


def softmax_case(id, shape, beta, key="int8", xq=(0.1, 0), oq=None, values=None, out_key=None):
    if key == "uint8":
        xq = (xq[0], xq[1] + 128)
    oq = oq or ((1 / 256, -128) if key == "int8" else (1 / 256, 0))
    x = q8(shape, key) if values is None else values
    return case(id, "SOFTMAX", [In(shape, key, xq)], [x], outputs=[Out((), out_key or key, oq)],
                options=dict(beta=beta))


# SOFTMAX: wide and narrow input ranges (differences past the exp cut-off), beta, rows, uint8.
CASES += [
    softmax_case("softmax", (3, 10), 1.0),
    softmax_case("softmax_fine_scale", (4, 37), 1.0, xq=(0.02, 5)),
    softmax_case("softmax_coarse_scale_beta", (2, 3, 17), 0.7, xq=(0.4, -3)),
    softmax_case("softmax_large_depth", (2, 1000), 1.0, xq=(0.06, 0)),
    softmax_case("softmax_one_class", (5, 1), 1.0),
    softmax_case("softmax_near_uniform", (3, 20), 1.0, xq=(0.01, 0)),
    softmax_case("softmax_uint8", (3, 12), 1.3, key="uint8", xq=(0.08, 0)),
    softmax_case("softmax_int16_output", (3, 12), 1.0, oq=(1 / 32768, 0), out_key="int16"),
]


WIDE_RANGES = {"int16": (-32768, 32768), "int32": (-(1 << 20), 1 << 20)}


def quantize_case(id, key, out_key, xq, oq, shape=(3, 100)):
    x = every_value(shape, key) if key in ("int8", "uint8") else \
        rng.integers(*WIDE_RANGES[key], shape).astype(key)
    return case(id, "QUANTIZE", [In(shape, key, xq)], [x], outputs=[Out((), out_key, oq)])

# QUANTIZE between integer types (requantization).
CASES += [
    quantize_case("quantize_int8_int8", "int8", "int8", (0.05, 3), (0.07, -9)),
    quantize_case("quantize_int8_int8_upscale", "int8", "int8", (0.05, 3), (0.02, 1)),
    quantize_case("quantize_int8_uint8_flip", "int8", "uint8", (0.05, 3), (0.05, 131)),
    quantize_case("quantize_int8_uint8", "int8", "uint8", (0.05, 3), (0.03, 120)),
    quantize_case("quantize_uint8_int8", "uint8", "int8", (0.05, 130), (0.05, 2)),
    quantize_case("quantize_int8_int16", "int8", "int16", (0.05, 3), (0.001, 0)),
    quantize_case("quantize_int16_int8", "int16", "int8", (0.001, 0), (0.2, -4)),
    quantize_case("quantize_int16_int16", "int16", "int16", (0.001, 0), (0.0007, 0)),
    quantize_case("quantize_int16_int32", "int16", "int32", (0.001, 0), (0.0001, 0)),
    quantize_case("quantize_int32_int8", "int32", "int8", (0.0001, 0), (0.5, 3)),
]
