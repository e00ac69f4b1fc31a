"""Each op's shapes and checks, written once for its float, int8, int16 and hybrid kernels: where
the windows of CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV and the 2-D pools fall (strides,
dilations, padding, output size), and how FULLY_CONNECTED's input splits into rows. Each function
fails naming the op when the model does not fit; those that say so set the output's shape."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .common import conv_output


@dataclass(frozen=True)
class Windows:
    """A kh x kw window sliding over an NHWC input with strides (sh, sw) and dilations (dh, dw):
    (oh, ow) outputs, (pt, pl) rows and columns of padding before the input."""

    kh: int
    kw: int
    sh: int
    sw: int
    dh: int
    dw: int
    oh: int
    ow: int
    pt: int
    pl: int

    @property
    def rows(self) -> int:
        """The rows of the padded input that the windows read."""
        return (self.oh - 1) * self.sh + (self.kh - 1) * self.dh + 1

    @property
    def cols(self) -> int:
        return (self.ow - 1) * self.sw + (self.kw - 1) * self.dw + 1

    def padded(self, h: int, w: int) -> bool:
        """Whether the windows reach outside an h x w input (a padded copy is needed)."""
        return bool(self.pt or self.pl or self.rows > h or self.cols > w)

    def inside(self, h: int, w: int) -> tuple:
        """The input rows and columns that the padded input holds (the windows may stop short
        of the input's last ones)."""
        return min(h, self.rows - self.pt), min(w, self.cols - self.pl)

    def patches(self, src: np.ndarray) -> np.ndarray:
        """Every window of the (padded) NHWC `src` as a read-only view [N, oh, ow, kh, kw, C]."""
        s0, s1, s2, s3 = src.strides
        return as_strided(src, (src.shape[0], self.oh, self.ow, self.kh, self.kw, src.shape[3]),
                          (s0, s1 * self.sh, s2 * self.sw, s1 * self.dh, s2 * self.dw, s3),
                          writeable=False)


PADDINGS = {0: "SAME", 1: "VALID"}   # the format's Padding enum
INT16_MAX = 2 ** 15 - 1
# A pool's window is bounded by nothing in the file (a convolution's by its weights); its taps
# are combined one view at a time, so a window of 16M taps would take minutes and gigabytes.
MAX_POOL_TAPS = 1 << 16


def check_padding(node, padding) -> int:
    """The format's Padding value (0 SAME, 1 VALID); any other fails, as in LiteRT (whose
    reader makes it kTfLitePaddingUnknown, which every window op refuses at prepare)."""
    if padding not in PADDINGS:
        raise node.fail(f"padding {padding} is not a Padding value (0 SAME, 1 VALID)")
    return int(padding)


def _option(o, name: str, default: int) -> int:
    """An int option; `default` only when the options do not have the field (0 stays 0)."""
    value = getattr(o, name, None)
    return default if value is None else int(value)


def windows(node, x_shape, kh: int, kw: int, sh: int, sw: int, dh: int, dw: int,
            padding: int) -> Windows:
    """The windows over input `x_shape` (NHWC) for the format's Padding value (0 SAME, 1 VALID);
    fails unless strides and dilations are positive and a window fits."""
    check_padding(node, padding)
    if sh <= 0 or sw <= 0:
        raise node.fail(f"strides must be positive, got {sh}x{sw}")
    if dh <= 0 or dw <= 0:
        raise node.fail(f"dilations must be positive, got {dh}x{dw}")
    h, w = x_shape[1], x_shape[2]
    oh, pt = conv_output(padding, h, kh, sh, dh)
    ow, pl = conv_output(padding, w, kw, sw, dw)
    if oh <= 0 or ow <= 0:
        raise node.fail(f"a {kh}x{kw} window (dilation {dh}x{dw}) does not fit the {h}x{w} input")
    return Windows(kh, kw, sh, sw, dh, dw, oh, ow, pt, pl)


def conv_windows(node, x_shape, kh: int, kw: int) -> Windows:
    """CONV_2D's and DEPTHWISE_CONV_2D's windows, from the op's options."""
    o = node.options
    sh, sw = int(o.stride_h), int(o.stride_w)
    dh, dw = _option(o, "dilation_h_factor", 1), _option(o, "dilation_w_factor", 1)
    if node.op == "DEPTHWISE_CONV_2D" and max(sh, sw, dh, dw) > INT16_MAX:
        raise node.fail(f"strides {sh}x{sw} and dilations {dh}x{dw} must be at most "
                        f"{INT16_MAX} (LiteRT's depthwise kernels hold them in 16 bits)")
    return windows(node, x_shape, kh, kw, sh, sw, dh, dw, _option(o, "padding", 0))


def pool_windows(node) -> Windows:
    """A 2-D pool's windows (one 4-D input), from its options; sets the output's shape."""
    node.expect_inputs(1)
    x = node.input(0)
    if len(x.shape) != 4:
        raise node.fail(f"input {list(x.shape)} must be 4-D (NHWC)")
    o = node.options
    fh, fw = int(o.filter_height or 0), int(o.filter_width or 0)
    sh, sw = int(o.stride_h or 0), int(o.stride_w or 0)
    if min(fh, fw, sh, sw) <= 0:
        raise node.fail(f"filter {fh}x{fw} and strides {sh}x{sw} must be positive")
    if fh * fw > MAX_POOL_TAPS:
        raise node.fail(f"a {fh}x{fw} window has {fh * fw} taps, more than edgelite pools "
                        f"({MAX_POOL_TAPS}: a 256x256 window; a pool has no weights to bound "
                        "its window, so only a hostile file has more)")
    win = windows(node, x.shape, fh, fw, sh, sw, 1, 1, _option(o, "padding", 0))
    node.outputs[0].shape = (x.shape[0], win.oh, win.ow, x.shape[3])
    return win


def conv_2d_groups(node, x_shape, w_shape) -> int:
    """CONV_2D's input [N, H, W, C] and filter [O, kh, kw, C / groups]: the number of groups."""
    if len(x_shape) != 4 or len(w_shape) != 4:
        raise node.fail(f"input {list(x_shape)} and filter {list(w_shape)} must be 4-D")
    c, (o, cg) = x_shape[3], (w_shape[0], w_shape[3])
    if cg <= 0 or c % cg or o % (c // cg):
        raise node.fail(f"input has {c} channels, filter {list(w_shape)} takes {cg}: channels "
                        f"must be a multiple of the filter's, and the {o} filters divisible "
                        "into the groups")
    return c // cg


def depthwise_multiplier(node, x_shape, w_shape) -> int:
    """DEPTHWISE_CONV_2D's input [N, H, W, C] and filter [1, kh, kw, C * multiplier]: the
    multiplier (the depth_multiplier option is redundant with the shapes; they win)."""
    if len(x_shape) != 4 or len(w_shape) != 4 or w_shape[0] != 1:
        raise node.fail(f"input {list(x_shape)} must be 4-D and the filter {list(w_shape)} "
                        "[1, kh, kw, channels]")
    if w_shape[3] % x_shape[3]:
        raise node.fail(f"filter has {w_shape[3]} channels, not a multiple of the input's "
                        f"{x_shape[3]}")
    return w_shape[3] // x_shape[3]


def transpose_conv_shape(node, x_shape, w_shape) -> tuple:
    """TRANSPOSE_CONV (inputs output_shape, filter [O, kh, kw, C], input [N, H, W, C]): sets the
    output's shape; returns it with the strides and the padding (pt, pl) of its window."""
    shape_info = node.input(0)
    if shape_info.type_name != "int32" or shape_info.data is None:
        raise node.fail("the output shape (input 0) must be a constant int32 tensor")
    out_shape = tuple(int(d) for d in np.asarray(shape_info.data).reshape(-1))
    if len(out_shape) != 4 or len(x_shape) != 4 or len(w_shape) != 4:
        raise node.fail(f"output shape {list(out_shape)}, input {list(x_shape)} and filter "
                        f"{list(w_shape)} must be 4-D")
    if w_shape[3] != x_shape[3] or out_shape[0] != x_shape[0] or out_shape[3] != w_shape[0]:
        raise node.fail(f"filter {list(w_shape)} does not fit input {list(x_shape)} and "
                        f"output shape {list(out_shape)}")
    o = node.options
    sh, sw = int(o.stride_h or 1), int(o.stride_w or 1)
    padding = check_padding(node, _option(o, "padding", 0))
    pt = transpose_padding(padding, out_shape[1], w_shape[1], sh)
    pl = transpose_padding(padding, out_shape[2], w_shape[2], sw)
    node.outputs[0].shape = out_shape
    return out_shape, (sh, sw), (pt, pl)


def transpose_padding(padding, out_size, kernel, stride):
    """TFLite's padding of a transposed convolution: that of the forward convolution from the
    output size."""
    conv_out, _ = conv_output(padding, out_size, kernel, stride)
    return max(((conv_out - 1) * stride + kernel - out_size) // 2, 0)


def fully_connected_shape(node, w_shape) -> tuple:
    """FULLY_CONNECTED's input split into rows of the weights' [units, depth]: sets the output's
    shape ([rows, units], or the input's with keep_num_dims); returns (rows, units, depth)."""
    x = node.input(0)
    opts = node.options
    if int(getattr(opts, "weights_format", 0) or 0):
        raise node.fail("shuffled weights formats are not supported (only DEFAULT is)")
    if len(w_shape) != 2:
        raise node.fail(f"weights {list(w_shape)} must be 2-D [units, inputs]")
    units, depth = w_shape
    size = int(np.prod(x.shape, dtype=np.int64))
    if depth == 0 or size % depth:
        raise node.fail(f"input {list(x.shape)} does not split into rows of {depth} values")
    if getattr(opts, "keep_num_dims", False):
        if x.shape[-1] != depth:
            raise node.fail(f"keep_num_dims needs the input's last dimension {x.shape[-1]} "
                            f"to be the weights' {depth}")
        node.outputs[0].shape = tuple(x.shape[:-1]) + (units,)
    else:
        node.outputs[0].shape = (size // depth, units)
    return size // depth, units, depth


def sequence_input(node, k: int = 0) -> tuple:
    """A sequence op's input k, [batch, time, input] ([time, batch, input] under time_major):
    (the input, time_major, batch)."""
    x = node.input(k)
    if len(x.shape) != 3:
        raise node.fail(f"input must be rank 3, got shape {list(x.shape)}")
    time_major = bool(node.options.time_major)
    return x, time_major, x.shape[1] if time_major else x.shape[0]


def batch_major(a: np.ndarray, time_major: bool) -> np.ndarray:
    """A sequence array as [batch, time, ...] (a view)."""
    return a.transpose(1, 0, 2) if time_major else a
