"""Cases for CONV_2D, DEPTHWISE_CONV_2D and TRANSPOSE_CONV (see test_ops.py)."""
import numpy as np

from tests.opmodel import In, case

rng = np.random.default_rng(1)
# TFLite's float conv kernels clamp to the range of the activation: TANH (4), SIGN_BIT (5) and
# SIGMOID (6) fused into them do nothing.
ACTS = {"none": 0, "relu": 1, "relu_n1": 2, "relu6": 3, "tanh": 4, "sign_bit": 5, "sigmoid": 6}
TOL = dict(rtol=1e-5, atol=1e-5)  # sums of products: different accumulation orders


def f32(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


# LiteRT's CONV_2D and DEPTHWISE_CONV_2D require the bias input (edgelite also runs them
# without one); TRANSPOSE_CONV and FULLY_CONNECTED cases cover the bias-less path.
def conv(id, x_shape, w_shape, bias=True, **options):
    x, w = f32(*x_shape), f32(*w_shape, scale=0.5)
    inputs = [In(x_shape), w, f32(w_shape[0]) if bias else None]
    opts = dict(stride_w=1, stride_h=1, padding=0)
    opts.update(options)
    return case(f"conv_2d_{id}", "CONV_2D", inputs, [x], options=opts, **TOL)


def depthwise(id, x_shape, w_shape, bias=True, **options):
    x, w = f32(*x_shape), f32(*w_shape, scale=0.5)
    inputs = [In(x_shape), w, f32(w_shape[3]) if bias else None]
    opts = dict(stride_w=1, stride_h=1, padding=0, depth_multiplier=w_shape[3] // x_shape[3])
    opts.update(options)
    return case(f"depthwise_conv_2d_{id}", "DEPTHWISE_CONV_2D", inputs, [x], options=opts, **TOL)


def transpose(id, out_shape, w_shape, x_shape, bias=True, **options):
    x, w = f32(*x_shape), f32(*w_shape, scale=0.5)
    inputs = [np.array(out_shape, np.int32), w, In(x_shape)] + ([f32(w_shape[0])] if bias else [])
    opts = dict(stride_w=1, stride_h=1, padding=0)
    opts.update(options)
    return case(f"transpose_conv_{id}", "TRANSPOSE_CONV", inputs, [x], options=opts, **TOL)


CASES = [
    conv("1x1", (1, 5, 6, 8), (4, 1, 1, 8)),
    conv("1x1_stride2_batch2", (2, 7, 6, 3), (5, 1, 1, 3), stride_w=2, stride_h=2, padding=1),
    case("conv_2d_1x1_stride2_bias_as_input", "CONV_2D",
         [In((1, 7, 6, 3)), f32(5, 1, 1, 3, scale=0.5), In((5,))], [f32(1, 7, 6, 3), f32(5)],
         options=dict(stride_w=2, stride_h=2, fused_activation_function=1), **TOL),
    conv("3x3_same", (1, 6, 7, 3), (4, 3, 3, 3)),
    conv("3x3_valid", (1, 6, 7, 3), (4, 3, 3, 3), padding=1),
    conv("3x3_same_stride2", (1, 7, 8, 3), (4, 3, 3, 3), stride_w=2, stride_h=2),
    conv("5x5_same_stride2_even", (1, 8, 8, 3), (6, 5, 5, 3), stride_w=2, stride_h=2),
    conv("3x2_stride_2x1_valid", (2, 7, 6, 2), (3, 3, 2, 2), stride_h=2, padding=1),
    conv("dilated_same", (1, 9, 8, 2), (3, 3, 3, 2), dilation_w_factor=2, dilation_h_factor=3),
    conv("dilated_valid", (1, 9, 8, 2), (3, 3, 2, 2), padding=1, dilation_w_factor=2),
    conv("grouped", (1, 6, 6, 6), (4, 3, 3, 3)),
    conv("grouped_1x1", (1, 4, 5, 8), (8, 1, 1, 2)),
    conv("grouped_1x1_stride2", (1, 7, 6, 8), (6, 1, 1, 4), stride_w=2, stride_h=2),
    # Large enough (P * O >= 2^18) for the bias to ride in the matmul (a column of ones).
    conv("1x1_expansion_relu6_batch2", (2, 32, 64, 8), (64, 1, 1, 8),
         fused_activation_function=3),
    *[conv(f"act_{name}", (1, 5, 5, 3), (4, 3, 3, 3), fused_activation_function=code)
      for name, code in ACTS.items()],
    *[conv(f"1x1_act_{name}", (1, 4, 4, 3), (4, 1, 1, 3), fused_activation_function=code)
      for name, code in ACTS.items()],
    case("conv_2d_weights_as_input", "CONV_2D", [In((1, 5, 5, 3)), In((4, 3, 3, 3)), In((4,))],
         [f32(1, 5, 5, 3), f32(4, 3, 3, 3), f32(4)], options=dict(stride_w=1, stride_h=1),
         **TOL),
    case("conv_2d_1x1_weights_as_input", "CONV_2D", [In((1, 5, 5, 3)), In((4, 1, 1, 3)),
                                                      In((4,))],
         [f32(1, 5, 5, 3), f32(4, 1, 1, 3), f32(4)],
         options=dict(stride_w=1, stride_h=1, fused_activation_function=3), **TOL),

    depthwise("3x3_same", (1, 6, 7, 4), (1, 3, 3, 4)),
    depthwise("3x3_valid", (1, 6, 7, 4), (1, 3, 3, 4), padding=1),
    depthwise("3x3_same_stride2", (1, 7, 8, 5), (1, 3, 3, 5), stride_w=2, stride_h=2),
    depthwise("5x5_same_stride2_batch2", (2, 8, 8, 3), (1, 5, 5, 3), stride_w=2, stride_h=2),
    depthwise("3x3_same_batch2", (2, 5, 6, 3), (1, 3, 3, 3)),
    depthwise("3x3_valid_batch2", (2, 5, 6, 3), (1, 3, 3, 3), padding=1),
    depthwise("5x5_stride3_same", (1, 11, 10, 4), (1, 5, 5, 4), stride_w=3, stride_h=3),
    depthwise("dilated_stride2", (1, 11, 10, 2), (1, 3, 3, 2), stride_w=2, stride_h=2,
              dilation_w_factor=2, dilation_h_factor=2),
    depthwise("stride_1x2", (1, 6, 7, 3), (1, 3, 3, 3), stride_w=2),
    depthwise("stride_2x1", (1, 6, 7, 3), (1, 3, 3, 3), stride_h=2),
    depthwise("multiplier3", (1, 5, 6, 2), (1, 3, 3, 6)),
    depthwise("multiplier2_valid_stride2", (1, 7, 6, 3), (1, 3, 2, 6), padding=1,
              stride_w=2, stride_h=2),
    depthwise("dilated", (1, 9, 9, 3), (1, 3, 3, 3), dilation_w_factor=2, dilation_h_factor=3),
    depthwise("dilated_valid", (1, 9, 9, 3), (1, 2, 3, 3), padding=1, dilation_w_factor=2),
    depthwise("1x1", (1, 4, 4, 3), (1, 1, 1, 3)),
    *[depthwise(f"act_{name}", (1, 5, 5, 3), (1, 3, 3, 3), fused_activation_function=code)
      for name, code in ACTS.items()],
    case("depthwise_conv_2d_weights_as_input", "DEPTHWISE_CONV_2D",
         [In((1, 5, 5, 3)), In((1, 3, 3, 3)), In((3,))], [f32(1, 5, 5, 3), f32(1, 3, 3, 3), f32(3)],
         options=dict(stride_w=1, stride_h=1, depth_multiplier=1), **TOL),
    case("depthwise_conv_2d_weights_as_input_stride2", "DEPTHWISE_CONV_2D",
         [In((1, 6, 6, 2)), In((1, 3, 3, 4)), f32(4)], [f32(1, 6, 6, 2), f32(1, 3, 3, 4)],
         options=dict(stride_w=2, stride_h=2, depth_multiplier=2), **TOL),

    transpose("2x2_stride2_valid", (1, 8, 6, 4), (4, 2, 2, 3), (1, 4, 3, 3), padding=1,
              stride_w=2, stride_h=2),
    transpose("3x3_stride2_same", (1, 8, 6, 4), (4, 3, 3, 3), (1, 4, 3, 3),
              stride_w=2, stride_h=2),
    transpose("3x3_stride2_same_odd", (2, 7, 5, 2), (2, 3, 3, 3), (2, 4, 3, 3),
              stride_w=2, stride_h=2),
    transpose("3x3_stride1_valid", (1, 6, 7, 2), (2, 3, 3, 3), (1, 4, 5, 3), padding=1),
    transpose("4x4_stride2_same_no_bias", (1, 8, 8, 3), (3, 4, 4, 2), (1, 4, 4, 2),
              bias=False, stride_w=2, stride_h=2),
    *[transpose(f"act_{name}", (1, 6, 6, 2), (2, 3, 3, 3), (1, 3, 3, 3), stride_w=2,
                stride_h=2, fused_activation_function=code) for name, code in ACTS.items()],
    transpose("stride_3x1", (1, 9, 4, 2), (2, 3, 2, 2), (1, 3, 4, 2), stride_h=3),
    case("transpose_conv_weights_as_input", "TRANSPOSE_CONV",
         [np.array((1, 6, 6, 2), np.int32), In((2, 3, 3, 3)), In((1, 3, 3, 3))],
         [f32(2, 3, 3, 3), f32(1, 3, 3, 3)], options=dict(stride_w=2, stride_h=2), **TOL),
]
