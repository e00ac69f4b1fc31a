"""Cases for CONV_3D and CONV_3D_TRANSPOSE (see test_ops.py): strides, dilations, SAME and VALID,
fused activations, with and without bias."""
import numpy as np

from tests.opmodel import In, case

rng = np.random.default_rng(13)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


CASES = []

# (input shape, filter d/h/w, out channels, padding, strides d/h/w, dilations d/h/w, act, bias)
CONV = [((1, 4, 5, 5, 2), (2, 2, 2), 3, 1, (1, 1, 1), (1, 1, 1), 0, True),
        ((1, 4, 5, 5, 2), (3, 3, 3), 3, 0, (1, 1, 1), (1, 1, 1), 1, True),
        ((2, 5, 6, 4, 3), (3, 2, 3), 4, 0, (2, 2, 1), (1, 1, 1), 3, False),
        ((1, 6, 6, 6, 1), (2, 3, 2), 2, 1, (2, 1, 3), (1, 1, 1), 2, True),
        ((1, 6, 7, 6, 2), (2, 2, 2), 2, 1, (1, 1, 1), (2, 3, 1), 0, True),
        ((1, 5, 5, 5, 2), (3, 2, 2), 3, 0, (1, 2, 2), (2, 1, 2), 1, False),
        ((1, 3, 4, 4, 3), (1, 1, 1), 5, 0, (1, 1, 1), (1, 1, 1), 4, True)]
for k, (shape, fs, oc, pad, st, dil, act, has_bias) in enumerate(CONV):
    w = f32(*fs, shape[4], oc)
    b = f32(oc) if has_bias else None
    CASES.append(case(f"conv_3d{k}", "CONV_3D", [In(shape), w, b], [f32(*shape)],
                      options=dict(padding=pad, stride_d=st[0], stride_h=st[1], stride_w=st[2],
                                   dilation_d_factor=dil[0], dilation_h_factor=dil[1],
                                   dilation_w_factor=dil[2], fused_activation_function=act)))
CASES.append(case("conv_3d_filter_input", "CONV_3D", [In((1, 3, 3, 3, 2)), In((2, 2, 2, 2, 2))],
                  [f32(1, 3, 3, 3, 2), f32(2, 2, 2, 2, 2)],
                  options=dict(padding=1, stride_d=1, stride_h=1, stride_w=1)))

# (input shape, output shape, filter d/h/w, padding, strides, dilations, act, bias)
TRANSPOSE = [((1, 2, 3, 3, 2), (1, 4, 6, 6, 3), (2, 2, 2), 0, (2, 2, 2), (1, 1, 1), 0, True),
             ((1, 2, 2, 3, 2), (1, 5, 5, 7, 2), (3, 3, 3), 1, (2, 2, 2), (1, 1, 1), 1, True),
             ((2, 3, 3, 2, 3), (2, 3, 3, 2, 4), (3, 2, 3), 0, (1, 1, 1), (1, 1, 1), 3, False),
             ((1, 3, 2, 2, 1), (1, 5, 6, 3, 2), (2, 3, 2), 1, (1, 2, 1), (2, 1, 1), 2, True),
             ((1, 2, 3, 2, 2), (1, 3, 5, 4, 2), (2, 2, 2), 0, (2, 2, 2), (1, 1, 1), 0, False)]
for k, (shape, out, fs, pad, st, dil, act, has_bias) in enumerate(TRANSPOSE):
    w = f32(*fs, out[4], shape[4])
    b = f32(out[4]) if has_bias else None
    CASES.append(case(f"conv_3d_transpose{k}", "CONV_3D_TRANSPOSE",
                      [np.int32(out), w, In(shape), b], [f32(*shape)],
                      options=dict(padding=pad, stride_d=st[0], stride_h=st[1], stride_w=st[2],
                                   dilation_d_factor=dil[0], dilation_h_factor=dil[1],
                                   dilation_w_factor=dil[2], fused_activation_function=act)))
