"""MediaPipe's custom op Convolution2DTransposeBias (its selfie segmenter and a few other models
end with it), as an edgelite custom-op kernel: a transposed convolution plus bias.

    import edgelite.tasks.mediapipe_ops  # registers it; then load the model as usual

Inputs: data [N, H, W, Cin], weights [Cout, kh, kw, Cin], bias [Cout], float32. Options: the
raw bytes of TfLiteTransposeConvParams (int32 padding (1 SAME, 2 VALID), stride_width,
stride_height), as MediaPipe's transpose_conv_bias.cc reads them.
"""
from __future__ import annotations

import struct

import numpy as np

from edgelite.interpreter import register_custom_op

NAME = "Convolution2DTransposeBias"
SAME, VALID = 1, 2


def _prepare(node):
    if len(node.inputs) != 3 or len(node.outputs) != 1:
        raise node.fail(f"expected 3 inputs and 1 output, got {len(node.inputs)} and "
                        f"{len(node.outputs)}")
    data, weights, bias = (node.input(k) for k in range(3))
    options = bytes(node.custom_options or b"")
    if len(options) < 12:
        raise node.fail(f"custom options are {len(options)} bytes; 12 (padding, stride_width, "
                        "stride_height as int32) expected")
    padding, stride_w, stride_h = struct.unpack("<iii", options[:12])
    if len(data.shape) != 4 or len(weights.shape) != 4 or data.shape[3] != weights.shape[3]:
        raise node.fail(f"data {list(data.shape)} and weights {list(weights.shape)}: "
                        "[N, H, W, C] and [O, kh, kw, C] expected")
    if stride_w < 1 or stride_h < 1 or padding not in (SAME, VALID):
        raise node.fail(f"strides {stride_w}x{stride_h}, padding {padding}: positive strides "
                        "and padding 1 (SAME) or 2 (VALID) expected")
    n, h, w, _ = data.shape
    cout, kh, kw, _ = weights.shape
    if padding == SAME:
        out_h, out_w = h * stride_h, w * stride_w
    else:
        out_h, out_w = (h - 1) * stride_h + kh, (w - 1) * stride_w + kw
    full_h, full_w = (h - 1) * stride_h + kh, (w - 1) * stride_w + kw
    top, left = max(full_h - out_h, 0) // 2, max(full_w - out_w, 0) // 2
    node.outputs[0].shape = (n, out_h, out_w, cout)

    def run(x, wts, b, out):
        # every input pixel scatters a kh x kw x Cout patch: one product, then kh*kw adds
        patches = np.einsum("nhwc,oyxc->nhwyxo", x, wts, optimize=True)
        full = np.zeros((n, max(full_h, top + out_h), max(full_w, left + out_w), cout),
                        np.float32)
        for y in range(kh):
            for xx in range(kw):
                full[:, y:y + (h - 1) * stride_h + 1:stride_h,
                     xx:xx + (w - 1) * stride_w + 1:stride_w] += patches[:, :, :, y, xx]
        out[...] = full[:, top:top + out_h, left:left + out_w] + b
    return run


register_custom_op(NAME, _prepare, replace=True)
