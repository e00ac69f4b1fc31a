"""Cases for the hybrid kernels (see test_ops.py): float32 activations with int8 weights, as
dynamic-range models hold them. The float inputs are quantized on the fly, so the integer sums
match LiteRT's exactly; the float results agree to float32 rounding."""
import numpy as np

from tests.interpreter.case_data import conv_options
from tests.opmodel import In, case

rng = np.random.default_rng(55)


def int8_weights(shape, axis, per_channel=True, same_scales=False):
    w = rng.integers(-127, 128, shape).astype(np.int8)
    n = shape[axis] if per_channel else 1
    scales = rng.uniform(0.002, 0.02, n).astype(np.float32)
    if same_scales:
        scales[:] = scales[0]
    return w, (scales, np.zeros(n, np.int64), axis)


def hybrid_case(id, op, x_shape, w_shape, options, *, axis=0, per_channel=True, bias=True,
                same_scales=False, x_scale=1.0, x_shift=0.0, **kwargs):
    w, wq = int8_weights(w_shape, axis, per_channel, same_scales)
    inputs = [In(x_shape), w]
    if bias:
        inputs.append(rng.normal(0, 0.5, w_shape[axis]).astype(np.float32))
    x = (rng.normal(x_shift, x_scale, x_shape)).astype(np.float32)
    return case(id, op, inputs, [x], options=options, const_quant={1: wq}, rtol=2e-5,
                atol=2e-5 * x_scale * max(1, x_shift), **kwargs)


def fc_options(act=0, asymmetric=False, keep_num_dims=False):
    return dict(fused_activation_function=act, asymmetric_quantize_inputs=asymmetric,
                keep_num_dims=keep_num_dims)


CASES = [
    # CONV_2D: distinct per-channel scales take the asymmetric per-channel path; one scale (or
    # equal ones) the symmetric one.
    hybrid_case("conv_2d_per_channel", "CONV_2D", (1, 7, 9, 5), (6, 3, 3, 5), conv_options()),
    hybrid_case("conv_2d_per_channel_relu6_stride2", "CONV_2D", (2, 9, 8, 4), (5, 3, 3, 4),
                conv_options(stride=2, act=3), x_shift=1.0),
    hybrid_case("conv_2d_per_channel_valid_dilated", "CONV_2D", (1, 10, 10, 3), (4, 3, 3, 3),
                conv_options(padding=1, dilation=2, act=1)),
    hybrid_case("conv_2d_per_tensor", "CONV_2D", (1, 7, 7, 3), (4, 3, 3, 3), conv_options(),
                per_channel=False),
    hybrid_case("conv_2d_per_tensor_batch2_relu", "CONV_2D", (2, 6, 5, 8), (7, 1, 1, 8),
                conv_options(act=1), per_channel=False),
    hybrid_case("conv_2d_equal_scales_symmetric", "CONV_2D", (1, 6, 6, 4), (3, 3, 3, 4),
                conv_options(stride=2), same_scales=True),
    hybrid_case("conv_2d_positive_input", "CONV_2D", (1, 6, 6, 3), (4, 3, 3, 3),
                conv_options(), x_shift=3.0),
    # Sums past float32's exact range: the input channels split into groups whose sums are
    # exact (two: added in float32; seven: in float64), or the weights run as base-16 digits
    # (701 channels: no equal split).
    hybrid_case("conv_2d_deep", "CONV_2D", (1, 3, 3, 700), (3, 3, 3, 700), conv_options()),
    hybrid_case("conv_2d_deep_two_groups", "CONV_2D", (1, 5, 4, 128), (6, 3, 3, 128),
                conv_options()),
    # 1x1 at batch 1 (the default resolver's own GEMM, hybrid_conv.pointwise_run; "1x1" in the
    # id): a projection (fewer outputs than inputs: the row scale on the output), an
    # expansion (on the input), symmetric or asymmetric, with or without a clamp.
    hybrid_case("conv_2d_1x1_projection_relu6", "CONV_2D", (1, 5, 6, 24), (8, 1, 1, 24),
                conv_options(act=3), x_shift=0.5),
    hybrid_case("conv_2d_1x1_expansion_relu", "CONV_2D", (1, 4, 7, 6), (20, 1, 1, 6),
                conv_options(act=1)),
    hybrid_case("conv_2d_1x1_projection_per_tensor", "CONV_2D", (1, 3, 3, 16), (4, 1, 1, 16),
                conv_options(act=1), per_channel=False),
    hybrid_case("conv_2d_1x1_expansion_per_tensor", "CONV_2D", (1, 3, 5, 4), (12, 1, 1, 4),
                conv_options(), per_channel=False, x_scale=30.0),
    # kxk at batch 1, stride 1, on at least 28x28 pixels of 8+ channels (hybrid.
    # _shifted_conv_run: one GEMM of the padded rows by every tap's weights, then shifted
    # adds): SAME and VALID, 3x3, 5x5, 3x1, per-channel (asymmetric inputs) and per-tensor, a
    # clamp, a wide input; 3 channels keep im2col.
    hybrid_case("conv_2d_shifted_3x3_relu6", "CONV_2D", (1, 28, 30, 8), (6, 3, 3, 8),
                conv_options(act=3), x_shift=0.2),
    hybrid_case("conv_2d_shifted_valid_5x5_per_tensor", "CONV_2D", (1, 30, 29, 8),
                (5, 5, 5, 8), conv_options(padding=1), per_channel=False),
    hybrid_case("conv_2d_shifted_3x1", "CONV_2D", (1, 40, 24, 12), (4, 3, 1, 12),
                conv_options(act=1), x_shift=1.0),
    hybrid_case("conv_2d_3x3_narrow_input_im2col", "CONV_2D", (1, 30, 30, 3), (8, 3, 3, 3),
                conv_options()),
    hybrid_case("conv_2d_shifted_wide_input", "CONV_2D", (1, 28, 28, 16), (8, 3, 3, 16),
                conv_options(), x_scale=50.0),
    # one pixel (squeeze-excite): the one-row FULLY_CONNECTED path
    hybrid_case("conv_2d_one_pixel_reduce", "CONV_2D", (1, 1, 1, 40), (6, 1, 1, 40),
                conv_options()),
    hybrid_case("conv_2d_one_pixel_expand_relu6", "CONV_2D", (1, 1, 1, 6), (40, 1, 1, 6),
                conv_options(act=3), x_shift=0.5),
    hybrid_case("conv_2d_one_pixel_per_tensor", "CONV_2D", (1, 1, 1, 12), (12, 1, 1, 12),
                conv_options(act=1), per_channel=False),
    hybrid_case("conv_2d_deep_1x1_two_groups", "CONV_2D", (1, 4, 4, 1200), (5, 1, 1, 1200),
                conv_options(), x_shift=0.5),
    hybrid_case("conv_2d_deep_digits", "CONV_2D", (1, 3, 3, 701), (3, 3, 3, 701),
                conv_options()),
    # DEPTHWISE_CONV_2D: per-channel, asymmetric inputs, channel multiplier, strides, dilation.
    hybrid_case("depthwise_conv_2d", "DEPTHWISE_CONV_2D", (1, 8, 8, 6), (1, 3, 3, 6),
                conv_options(depth_multiplier=1), axis=3),
    hybrid_case("depthwise_conv_2d_multiplier_stride2", "DEPTHWISE_CONV_2D", (2, 9, 7, 3),
                (1, 3, 3, 6), conv_options(stride=2, act=3, depth_multiplier=2), axis=3),
    hybrid_case("depthwise_conv_2d_valid_dilated", "DEPTHWISE_CONV_2D", (1, 9, 9, 4),
                (1, 3, 3, 4), conv_options(padding=1, dilation=2, act=1, depth_multiplier=1),
                axis=3, bias=False),
    # Batch 1: depthwise tiles smaller and larger than the input (kernels/taps.py's TapGrid),
    # stride 2's column phases, a multiplier, VALID (no padded buffer), 5x5.
    hybrid_case("depthwise_conv_2d_small_tiles_relu6", "DEPTHWISE_CONV_2D", (1, 24, 24, 8),
                (1, 3, 3, 8), conv_options(act=3, depth_multiplier=1), axis=3, x_shift=0.3),
    hybrid_case("depthwise_conv_2d_small_tiles_stride2", "DEPTHWISE_CONV_2D",
                (1, 32, 30, 4), (1, 3, 3, 4), conv_options(stride=2, depth_multiplier=1),
                axis=3),
    hybrid_case("depthwise_conv_2d_small_tiles_multiplier", "DEPTHWISE_CONV_2D",
                (1, 40, 12, 3), (1, 3, 3, 6), conv_options(depth_multiplier=2), axis=3),
    hybrid_case("depthwise_conv_2d_large_tiles_multiplier", "DEPTHWISE_CONV_2D",
                (1, 20, 20, 3), (1, 3, 3, 6), conv_options(depth_multiplier=2), axis=3),
    hybrid_case("depthwise_conv_2d_small_tiles_valid", "DEPTHWISE_CONV_2D", (1, 30, 30, 4),
                (1, 3, 3, 4), conv_options(padding=1, act=1, depth_multiplier=1), axis=3),
    hybrid_case("depthwise_conv_2d_5x5_large_tiles", "DEPTHWISE_CONV_2D", (1, 10, 10, 16),
                (1, 5, 5, 16), conv_options(depth_multiplier=1), axis=3, x_scale=20.0),
    hybrid_case("depthwise_conv_2d_5x5_stride2_positive", "DEPTHWISE_CONV_2D", (1, 14, 14, 8),
                (1, 5, 5, 8), conv_options(stride=2, depth_multiplier=1), axis=3, x_shift=4.0),
    # FULLY_CONNECTED: per-tensor and per-channel, symmetric and asymmetric inputs.
    hybrid_case("fully_connected", "FULLY_CONNECTED", (3, 20), (7, 20), fc_options(),
                per_channel=False),
    hybrid_case("fully_connected_asymmetric_relu", "FULLY_CONNECTED", (4, 33), (9, 33),
                fc_options(act=1, asymmetric=True), per_channel=False, x_shift=0.7),
    hybrid_case("fully_connected_per_channel", "FULLY_CONNECTED", (2, 16), (5, 16),
                fc_options()),
    hybrid_case("fully_connected_per_channel_asymmetric", "FULLY_CONNECTED", (2, 40), (6, 40),
                fc_options(asymmetric=True), x_shift=-0.5),
    hybrid_case("fully_connected_keep_num_dims_no_bias", "FULLY_CONNECTED", (2, 3, 12),
                (4, 12), fc_options(keep_num_dims=True), per_channel=False, bias=False),
    hybrid_case("fully_connected_deep_float64", "FULLY_CONNECTED", (2, 1500), (3, 1500),
                fc_options(asymmetric=True), per_channel=False),
    hybrid_case("fully_connected_tanh", "FULLY_CONNECTED", (2, 10), (3, 10),
                fc_options(act=4), per_channel=False, x_scale=0.1),
    # BATCH_MATMUL: rows of the left-hand side quantized one by one.
    hybrid_case("batch_matmul", "BATCH_MATMUL", (2, 3, 8), (8, 5),
                dict(adj_x=False, adj_y=False, asymmetric_quantize_inputs=False), axis=1,
                per_channel=False, bias=False),
    hybrid_case("batch_matmul_asymmetric_adj_y", "BATCH_MATMUL", (3, 4, 6), (5, 6),
                dict(adj_x=False, adj_y=True, asymmetric_quantize_inputs=True), axis=0,
                per_channel=False, bias=False, x_shift=0.4),
    hybrid_case("batch_matmul_per_channel", "BATCH_MATMUL", (2, 4, 7), (7, 6),
                dict(adj_x=False, adj_y=False, asymmetric_quantize_inputs=False), axis=1,
                bias=False),
]
