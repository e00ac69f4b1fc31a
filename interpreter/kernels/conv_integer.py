"""What the integer convolutions share at prepare (int8, uint8 and 16x8; CONV_2D,
DEPTHWISE_CONV_2D, TRANSPOSE_CONV, and the integer FULLY_CONNECTED's weights): constant integer
weights and biases, PopulateConvolutionQuantizationParams' per-channel multipliers, and the
padded input and row blocks the GEMM kernels run in."""
from __future__ import annotations

import numpy as np

from typing import NamedTuple

from .fixed_point import f32, quantize_multiplier, quantize_multipliers
from .geometry import Windows, conv_2d_groups, conv_windows, depthwise_multiplier
from .quant_params import activation_range, channel_scales, expect_output_type, quant_params

CHUNK_BYTES = 1 << 23
INT32_TYPE, INT64_TYPE = 2, 4  # TensorType values of quantized_bias_type


def integer_weights(node, k: int, dtype_name: str, what: str = "weights") -> np.ndarray:
    """Constant weights of `dtype_name`; int8 kernels also take int4 weights (the plan unpacks
    them to int8 values, as TFLite does before its int8 arithmetic)."""
    w = node.input(k)
    int4 = w.type_name == "int4" and dtype_name == "int8" and node.input(0).type_name == "int8"
    if w.type_name != dtype_name and not int4:
        raise node.fail(f"{what} are {w.type_name}; {dtype_name} inputs need {dtype_name} {what}")
    if w.data is None:
        raise node.fail(f"{what} (input {k}, {w.name!r}) must be constant for integer kernels")
    return w.data


def conv_inputs(node, weight_type: str) -> tuple:
    """(x, weights) of a CONV_2D / DEPTHWISE_CONV_2D: both 4-D, the weights a constant array of
    `weight_type`; fails naming the op otherwise."""
    node.expect_inputs(2, 3)
    x = node.input(0)
    if len(x.shape) != 4 or len(node.input(1).shape) != 4:
        raise node.fail(f"expected 4-D input and weights, got {list(x.shape)} and "
                        f"{list(node.input(1).shape)}")
    return x, integer_weights(node, 1, weight_type)


class ConvSetup(NamedTuple):
    """What an integer CONV_2D or DEPTHWISE_CONV_2D reads at prepare: the input, the weights as
    int64 less their zero point, the windows, the groups (CONV_2D) or channel multiplier
    (DEPTHWISE_CONV_2D), the output channels, the input and output zero points, per-channel
    multipliers and the fused activation's integer range."""

    x: object
    w: np.ndarray
    win: Windows
    groups: int
    cout: int
    zx: int
    zo: int
    multiplier: np.ndarray
    shift: np.ndarray
    lo: int
    hi: int


def conv_setup(node, key: str, depthwise: bool) -> ConvSetup:
    """The checks and parameters integer convolutions share; `key` is the arithmetic: int8 and
    uint8 (weights of the input's type), or int16 (16x8: int8 weights, symmetric int16 data).
    Sets the output's shape."""
    weight_key = "int8" if key == "int16" else key
    x, w = conv_inputs(node, weight_key)
    if depthwise:
        groups, cout, axis = depthwise_multiplier(node, x.shape, w.shape), w.shape[3], 3
    else:
        groups, cout, axis = conv_2d_groups(node, x.shape, w.shape), w.shape[0], 0
    win = conv_windows(node, x.shape, w.shape[1], w.shape[2])
    out = node.outputs[0]
    out.shape = (x.shape[0], win.oh, win.ow, cout)
    expect_output_type(node, key)
    if key == "int16":
        check_symmetric(node, 0)
    wc = w.astype(np.int64) - weight_zero_point(node)
    _, zx = quant_params(node, 0)
    _, zo = quant_params(node, 0, output=True)
    multiplier, shift = conv_multipliers(node, weight_key, cout, axis)
    lo, hi = activation_range(node.options.fused_activation_function, out, node)
    return ConvSetup(x, wc, win, groups, cout, zx, zo, multiplier, shift, lo, hi)


def check_symmetric(node, *inputs: int) -> None:
    """int16 activations are symmetric: the given inputs and output 0 have zero point 0."""
    for k in inputs:
        if quant_params(node, k)[1] != 0:
            raise node.fail(f"int16 input {k} needs zero point 0")
    if quant_params(node, 0, output=True)[1] != 0:
        raise node.fail("the int16 output needs zero point 0")


def integer_bias(node, k: int, channels: int, dtype_name: str = "int32") -> np.ndarray:
    """The constant bias (input k) as int64, zeros when it is omitted."""
    b = node.optional_input(k)
    if b is None:
        return np.zeros(channels, np.int64)
    if b.type_name != dtype_name:
        raise node.fail(f"bias is {b.type_name}; these integer kernels need an {dtype_name} "
                        "bias" + (" (int32 only with quantized_bias_type INT32)"
                                  if dtype_name == "int64" else ""))
    if b.data is None:
        raise node.fail(f"bias (input {k}, {b.name!r}) must be constant for integer kernels")
    if b.data.size != channels:
        raise node.fail(f"bias has {b.data.size} values for {channels} output channels")
    return b.data.astype(np.int64).reshape(-1)


def bias_16x8(node, k: int, channels: int, option: bool = True) -> tuple:
    """(int64 bias, wide): the bias of a 16x8 kernel and whether it accumulates in int64.

    TFLite reads the bias as int64 unless the options' quantized_bias_type says INT32."""
    want = int(getattr(node.options, "quantized_bias_type", 0) or 0) if option else 0
    if want not in (0, INT32_TYPE, INT64_TYPE):
        raise node.fail(f"quantized_bias_type {want} must be INT32 or INT64")
    wide = want != INT32_TYPE
    return integer_bias(node, k, channels, "int64" if wide else "int32"), wide


def weight_zero_point(node, k: int = 1) -> int:
    """The weights' zero point: 0 for int8 (symmetric, or refused), uint8's own."""
    q = node.input(k).quantization
    zp = q.zero_point if q is not None else np.zeros(0, np.int64)
    if node.input(k).type_name != "uint8" and np.any(zp != 0):
        raise node.fail("int8 weights must be symmetric (zero point 0)")
    return int(zp[0]) if zp.size else 0


def conv_multipliers(node, key: str, channels: int, axis: int, data: int = 0) -> tuple:
    """Per-channel (multiplier, shift) as PopulateConvolutionQuantizationParams: int8 in double
    per channel; uint8 per tensor with the float32 product input_scale * filter_scale. `data`:
    the input the convolution slides over (TRANSPOSE_CONV's is 2)."""
    in_scale, _ = quant_params(node, data)
    out_scale, _ = quant_params(node, 0, output=True)
    scales = channel_scales(node, 1, channels, axis)
    if key == "uint8":
        if node.input(1).quantization.scale.size > 1:
            raise node.fail("uint8 convolutions take per-tensor weight scales only")
        m, s = quantize_multiplier(float(f32(in_scale) * scales[0]) / float(out_scale))
        return np.full(channels, m, np.int64), np.full(channels, s, np.int64)
    return quantize_multipliers(float(in_scale) * scales.astype(np.float64) / float(out_scale))


class RowBlocks:
    """(batch, first row, end row) blocks of about CHUNK_BYTES of float32 work each, iterated
    as they are needed (a batch of millions makes millions of them: none at prepare)."""

    def __init__(self, n: int, rows: int, row_elems: int):
        self.n, self.rows = n, rows
        self.per = max(1, CHUNK_BYTES // max(1, 4 * row_elems))
        self.count = n * -(-rows // self.per)

    def __iter__(self):
        n, rows, per = self.n, self.rows, self.per
        return ((b, r, min(r + per, rows)) for b in range(n) for r in range(0, rows, per))

    def __len__(self) -> int:
        return self.count

    @property
    def most_rows(self) -> int:
        """The rows of the largest block."""
        return min(self.per, self.rows)


class PaddedSource:
    """The input as the windows see it: the input itself when no padding is needed, else a
    buffer whose border holds `fill` (the input zero point) and whose interior is refreshed.
    The buffer is made at the first run, not at prepare (a later op may still refuse the model;
    filling a large buffer first would only delay the error)."""

    def __init__(self, x_shape, dtype, g: Windows, fill):
        n, h, w, c = x_shape
        self.direct = not g.padded(h, w)
        self.rows, self.cols = g.inside(h, w)
        self.size = (n * g.rows * g.cols * c, n * h * w * c)     # padded, input values
        self._make = (n, g.rows, g.cols, c), fill, dtype, (g.pt, g.pl)
        self._buffer = self.interior = None

    @property
    def buffer(self) -> np.ndarray:
        if self._buffer is None:
            shape, fill, dtype, pad = self._make
            self._buffer = np.full(shape, fill, dtype)
            self.interior = self._buffer[:, pad[0]:pad[0] + self.rows, pad[1]:pad[1] + self.cols]
        return self._buffer

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if self.direct:
            return x
        buffer = self.buffer
        np.copyto(self.interior, x[:, :self.rows, :self.cols], casting="unsafe")
        return buffer
