"""Cases for the remaining int8 / uint8 kernels (see test_ops.py): TRANSPOSE_CONV, reductions,
LOG_SOFTMAX, resizing, data movement, ARG_MAX / ARG_MIN, PRELU, SQUARED_DIFFERENCE and
comparisons; bit-exact to LiteRT's reference kernels (outputs compared for equality)."""
import numpy as np

from tests.opmodel import In, Out, case

rng = np.random.default_rng(88)


def q8(shape, dtype="int8"):
    lo, hi = (-128, 128) if dtype == "int8" else (0, 256)
    return rng.integers(lo, hi, shape).astype(dtype)


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
