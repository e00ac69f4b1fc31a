"""int8 models on the OpenCL delegate with integer arithmetic: "int8": "integer".

Every int8 / uint8 tensor of a partition is stored on the device as q - zero_point (TFLite's
`input_offset + q`: integers of at most 255 in magnitude, exact in float32 and in half), weights
as w - weight zero point. A convolution's products and sums are exact integers in float32
accumulators: prepare checks that no sum can reach 2^24 (sum |w| x the largest |q - zp|), else
the node stays on the CPU. Its epilogue is TFLite's integer requantization (int32 bias, the
per-channel fixed-point multiplier and shift, MultiplyByQuantizedMultiplier with its two
roundings, the fused activation's integer range) in OpenCL C integers (common.cl: requantN);
ADD is add.cc's arithmetic (integer.cl). So the outputs are BUILTIN_REF's, bit for bit, in
fp32 and fp16 storage alike. Padding taps read 0 = the zero point, as TFLite's kernels skip them.
On x86 CPUs with AVX2 the 1x1 convolutions and FULLY_CONNECTED are integer products instead
(gemm_int.cl, build_conv): int16 pairs of activations and weights through pmaddwd into int32
accumulators, or with VNNI u8 quads through vpdpbusd (u8_offset: the rows made unsigned, the
weight sums folded into the bias). What fuse.py folds in runs inside the product's launch: a
depthwise convolution before it (DW_FUSED), and for the largest blocks the expansion before
that (plan_blocks, BLOCK_FUSED); a residual ADD of its output runs in its epilogue
(plan_residuals, RES_ADD). EDGELITE_OPENCL_U8=0, EDGELITE_OPENCL_INT_DW=split,
EDGELITE_OPENCL_INT_BLOCK=0 and EDGELITE_OPENCL_INT_RES=0 turn each off (for A/B:
benchmarks/bench_opencl_int8.py).

`reason(node)`: why a node cannot (None: it can); `requant(node)`: its integer parameters;
`IntViews`: the float views the builders see (the float kernels, with REQUANT epilogues).
"""
from __future__ import annotations

import dataclasses
import os
from typing import NamedTuple

import numpy as np

from edgelite.interpreter.kernels.conv_integer import conv_setup, integer_bias
from edgelite.interpreter.kernels.fixed_point import EXACT_F32, f32, quantize_multiplier
from edgelite.interpreter.kernels.quant_params import activation_range, channel_scales, \
    quant_params
from edgelite.interpreter.kernels.reduce_int8 import quantized_reduction
from edgelite.interpreter.kernels.registry import KernelError

from .pocl_cpu import AVX512
from .quant import ACTIVATION_TYPES, Views, _quantized
from .quant import reason as quantized_reason

CONVS = {"CONV_2D": False, "DEPTHWISE_CONV_2D": True}  # op -> depthwise
ALIASES = {"RESHAPE", "SQUEEZE", "EXPAND_DIMS"}
POOLS = {"MAX_POOL_2D"}  # max of q - zero point = max of q, less it: the float kernel as is
INTEGER_OPS = frozenset(set(CONVS) | ALIASES | POOLS | {"ADD", "MEAN", "FULLY_CONNECTED"})
PARAMETRIZED = INTEGER_OPS - ALIASES  # ops with parameters(node)
LEFT_SHIFT = 20  # add.cc's headroom for 8-bit inputs


class Requant(NamedTuple):
    """A convolution's integer epilogue: per output channel the int32 bias, multiplier and
    shift; the clamp on stored values (the output's integer range minus its zero point)."""
    bias: np.ndarray
    multiplier: np.ndarray
    shift: np.ndarray
    lo: float
    hi: float

    kind = 1  # the REQUANT define: common.cl's requantN

    def rows(self, width: int, step: int = 0) -> np.ndarray:
        """[3, width] float32 lanes holding the int32 bits of bias, multiplier and shift
        (zeros past the channels)."""
        out = np.zeros((3, width), np.int32)
        n = self.bias.size
        out[0, :n], out[1, :n], out[2, :n] = self.bias, self.multiplier, self.shift
        return out.view(np.float32)


class FcRequant(NamedTuple):
    """A FULLY_CONNECTED's epilogue: TFLite's reference rounds in double (since 2025),
    round(double(acc + bias) * input_scale * filter_scale / output_scale), halves away from
    zero; the stored range."""
    bias: np.ndarray
    effective: np.ndarray
    lo: float
    hi: float
    kind = 2  # the REQUANT define: common.cl's requant_fcN

    def rows(self, width: int, step: int) -> np.ndarray:
        """[3, width] float32 lanes: the int32 bias bits, then per panel of `step` channels
        its `step` float64 multipliers (2 x step lanes: rows 1 and 2 of the panel)."""
        n = self.bias.size
        bias = np.zeros(width, np.int32)
        bias[:n] = self.bias
        eff = np.zeros(width, np.float64)
        eff[:n] = self.effective
        halves = eff.reshape(-1, step).view(np.float32)  # [panels, 2 x step]
        return np.stack([bias.view(np.float32), halves[:, :step].reshape(-1),
                         halves[:, step:].reshape(-1)])


class Range(NamedTuple):
    """A max pool's clamp on stored values (its fused activation's integer range)."""
    lo: float
    hi: float


class MeanParams(NamedTuple):
    """reduce.h's MEAN: the multiplier and shift with 1 / count folded in; the stored range."""
    multiplier: int
    shift: int
    lo: float
    hi: float


class AddParams(NamedTuple):
    """add.cc's integer parameters (inputs' and output's multipliers and shifts)."""
    m1: int
    e1: int
    m2: int
    e2: int
    mo: int
    eo: int
    lo: float
    hi: float


def _zero(t) -> int:
    """An int8 / uint8 tensor's (first) zero point, 0 without one."""
    z = np.asarray(t.quantization.zero_point).reshape(-1)
    return int(z[0]) if z.size else 0


def _offset_range(t) -> int:
    """The largest |q - zero_point| of an int8 / uint8 tensor."""
    lo, hi = ACTIVATION_TYPES[t.type_name]
    z = _zero(t)
    return max(abs(lo - z), abs(hi - z))


def _device_range(lo: int, hi: int, out) -> tuple:
    """The integer range [lo, hi] of `out` as the device stores it (less its zero point)."""
    z = _zero(out)
    return float(lo - z), float(hi - z)


def reason(node, dev=None) -> str | None:
    """Why `node` cannot run with integer kernels on `dev` (None: it can)."""
    if node.op not in INTEGER_OPS:
        return f"int8 {node.op} has no integer OpenCL kernel"
    why = quantized_reason(node)
    if why is not None:
        return why
    try:
        if node.op in CONVS:
            return _conv_reason(node)
        if node.op == "ADD":
            return _add_reason(node)
        if node.op == "MEAN":
            return _mean_reason(node)
        if node.op == "FULLY_CONNECTED":
            return _fc_reason(node, _fc_on_gemm_int(node, dev))
    except KernelError as e:
        return str(e)
    return _same_quantization(node)


def _same_quantization(node) -> str | None:
    x, out = node.inputs[0], node.outputs[0]
    if x.type_name != out.type_name or not np.array_equal(x.quantization.scale,
                                                          out.quantization.scale) \
            or not np.array_equal(x.quantization.zero_point, out.quantization.zero_point):
        return f"{node.op} changes the quantization"
    return None


def _conv_reason(node) -> str | None:
    s = conv_setup(node, node.inputs[0].type_name, CONVS[node.op])
    if s.groups != 1 and node.op == "CONV_2D":
        return "grouped convolution"
    if len(node.inputs) > 2 and node.inputs[2] is not None and node.inputs[2].data is None:
        return "the bias must be a constant"
    bias = np.abs(integer_bias(node, 2, s.cout))
    axes = (1, 2, 3) if node.op == "CONV_2D" else (0, 1, 2)
    sums = np.abs(s.w).sum(axis=axes) * _offset_range(node.inputs[0])
    if sums.max(initial=0) >= EXACT_F32:
        return f"its sums may reach {int(sums.max())}, beyond float32's exact integers (2^24)"
    left = np.maximum(np.asarray(s.shift, np.int64), 0)
    if ((sums + bias) * np.exp2(left)).max(initial=0) >= 2.0 ** 30:
        return "its requantization input may reach 2^30 (common.cl's mbqm needs less)"
    return None


def _add_reason(node) -> str | None:
    a, b, out = node.inputs[0], node.inputs[1], node.outputs[0]
    if a.data is not None or b.data is not None:
        return "a constant input"
    if tuple(a.shape) != tuple(out.shape) or tuple(b.shape) != tuple(out.shape):
        return "integer ADD takes inputs of the output's shape (no broadcast)"
    if a.type_name != out.type_name or b.type_name != out.type_name:
        return "mixed integer types"
    add_params(node)
    return None


def _fc_reason(node, int32: bool = False) -> str | None:
    """`int32`: the device sums in int32 (gemm_int.cl), else in float32."""
    w = node.inputs[1]
    if w.data is None or len(node.inputs) > 2 and node.inputs[2] is not None \
            and node.inputs[2].data is None:
        return "the weights and the bias must be constants"
    zeros = np.asarray(w.quantization.zero_point).reshape(-1)
    if zeros.size and np.any(zeros != zeros[0]):
        return "weight zero points that differ between channels"
    fc_requant(node)
    z = int(zeros[0]) if zeros.size else 0
    sums = np.abs(np.asarray(w.data, np.int64) - z).sum(axis=1) * _offset_range(node.inputs[0])
    if int32:
        bias = np.abs(fc_requant(node).bias.astype(np.int64))
        if (sums + bias).max(initial=0) >= 2 ** 31:
            return f"its sums may reach {int((sums + bias).max())}, beyond int32"
    elif sums.max(initial=0) >= EXACT_F32:
        return f"its sums may reach {int(sums.max())}, beyond float32's exact integers (2^24)"
    return None


def _fc_on_gemm_int(node, dev) -> bool:
    """A FULLY_CONNECTED runs on gemm_int.cl (int32 sums) where the CPU has pmaddwd and its
    depth fits a work-item's private rows (KMAX); deeper ones take the float kernel and its
    2^24 bound (a depth past KMAX overran the rows: ConvNeXt-Tiny's 3072 crashed PoCL)."""
    return int_dot(dev) is not None and node.inputs[1].shape[1] <= KMAX


def fc_requant(node) -> FcRequant:
    """fully_connected_int8's Prepare: per-channel effective multipliers in double."""
    units = node.inputs[1].shape[0]
    s_in, _ = quant_params(node, 0)
    s_out, _ = quant_params(node, 0, output=True)
    effective = float(s_in) * channel_scales(node, 1, units, 0).astype(np.float64) \
        / float(s_out)
    out = node.outputs[0]
    lo, hi = activation_range(getattr(node.options, "fused_activation_function", 0), out, node)
    return FcRequant(integer_bias(node, 2, units).astype(np.int32), effective,
                     *_device_range(lo, hi, out))


def _mean_reason(node) -> str | None:
    if node.inputs[1] is None or node.inputs[1].data is None:
        return "the axes must be a constant"
    p = mean_params(node)
    count = quantized_reduction(node, "MEAN").count
    top = count * _offset_range(node.inputs[0])
    if top >= EXACT_F32 or top * 2.0 ** max(p.shift, 0) >= 2.0 ** 30:
        return f"a mean of {count} values: its sums may exceed what the integer kernel holds"
    return None


def mean_params(node) -> MeanParams:
    """reduce_int8.mean's Prepare (reduce.h: 1 / count folded into the multiplier)."""
    r = quantized_reduction(node, "MEAN")
    multiplier, shift = quantize_multiplier(float(r.s_in) / float(r.s_out))
    if r.count > 0:
        k = max(0, min(r.count.bit_length() - 1, 32, 31 + shift))
        multiplier = (multiplier << k) // r.count
        shift -= k
    return MeanParams(int(multiplier), int(shift), *_device_range(r.lo, r.hi, node.outputs[0]))


def add_params(node) -> AddParams:
    """add.cc's Prepare for 8-bit ADD (as interpreter/kernels/elementwise_int8.py)."""
    s1, _ = quant_params(node, 0)
    s2, _ = quant_params(node, 1)
    so, _ = quant_params(node, 0, output=True)
    twice_max = 2.0 * float(max(f32(s1), f32(s2)))
    pairs = []
    for real in (float(s1) / twice_max, float(s2) / twice_max,
                 twice_max / float(f32(1 << LEFT_SHIFT) * f32(so))):
        m, e = quantize_multiplier(real)
        if e > 0:
            raise node.fail(f"rescaling multiplier {real:g} must be below 1")
        pairs += [int(m), int(e)]
    out = node.outputs[0]
    lo, hi = activation_range(getattr(node.options, "fused_activation_function", 0), out, node)
    return AddParams(*pairs, *_device_range(lo, hi, out))


def parameters(node):
    """What an integer node's kernel needs: Requant, AddParams or (a max pool) Range."""
    if node.op == "ADD":
        return add_params(node)
    if node.op == "MEAN":
        return mean_params(node)
    if node.op == "FULLY_CONNECTED":
        return fc_requant(node)
    if node.op in POOLS:
        out = node.outputs[0]
        code = getattr(node.options, "fused_activation_function", 0)
        return Range(*_device_range(*activation_range(code, out, node), out))
    return requant(node)


def requant(node) -> Requant:
    """A convolution's integer epilogue (PopulateConvolutionQuantizationParams)."""
    s = conv_setup(node, node.inputs[0].type_name, CONVS[node.op])
    lo, hi = _device_range(s.lo, s.hi, node.outputs[0])
    return Requant(integer_bias(node, 2, s.cout).astype(np.int32),
                   np.asarray(s.multiplier).astype(np.int32),
                   np.asarray(s.shift).astype(np.int32), lo, hi)


def _no_activation(options):
    """Options with the fused activation off: the integer epilogue clamps instead."""
    if options is None or not getattr(options, "fused_activation_function", 0):
        return options
    return options.replace(fused_activation_function=0)  # schema.model.Options


class IntViews(Views):
    """Float views of a partition's int8 tensors as the integer kernels store them: q - zero
    point (scale 1), constant weights as w - zero point; `host` the model's tensor."""

    def tensor(self, t):
        if t is None or not _quantized(t) or t.type_name == "float32":
            return t
        v = self.of.get(t.index)
        if v is None:
            q = t.quantization
            zero = np.asarray(q.zero_point).reshape(-1)
            data = None
            if t.data is not None:  # weights, less their zero point (one for all channels,
                # as reason() checks for FULLY_CONNECTED; 0 in int8 convolutions)
                z = np.float32(zero[0]) if zero.size and np.all(zero == zero[0]) else 0
                data = np.asarray(t.data).astype(np.float32) - z
            unit = dataclasses.replace(q, scale=np.ones(1, np.float32),
                                       zero_point=zero[:1].astype(np.int64))
            v = dataclasses.replace(t, dtype=np.dtype(np.float32), type_name="float32",
                                    data=data, quantization=unit)
            v.host = t
            v.qrange = None
            self.of[t.index] = v
        return v

    def node(self, n):
        view = super().node(n)
        if view is n:
            return n
        return dataclasses.replace(view, options=_no_activation(view.options))


def build_add(node, g) -> None:
    """An integer ADD: integer.cl's add_integer over the flat tensors."""
    from .helpers import elements, nd, vector_width
    p = g.requant[node.index]
    n = elements(node.outputs[0].shape)
    vw = vector_width(n)
    i32, f32_ = np.int32, np.float32
    gsize, lsize = nd(g, (n // vw,))
    g.launch("integer", "add_integer", gsize, lsize,
             [g.value(node.inputs[0]), g.value(node.inputs[1]), g.tensor(node.outputs[0]),
              i32(n), i32(p.m1), i32(p.e1), i32(p.m2), i32(p.e2), i32(p.mo), i32(p.eo),
              f32_(p.lo), f32_(p.hi)], {"VW": vw})


def build_mean(node, g) -> None:
    """An integer MEAN over contiguous axes: integer.cl's mean_integer."""
    from .helpers import elements, nd, vector_width
    from .ops import _reduce_axes
    p, x = g.requant[node.index], node.inputs[0]
    axes = _reduce_axes(node)
    outer = elements(x.shape[:axes[0]])
    r = elements(x.shape[axes[0]:axes[-1] + 1])
    inner = elements(x.shape[axes[-1] + 1:])
    vw = vector_width(inner)
    i32 = np.int32
    gsize, lsize = nd(g, (inner // vw, outer))
    g.launch("integer", "mean_integer", gsize, lsize,
             [g.value(x), g.tensor(node.outputs[0]), i32(outer), i32(r), i32(inner),
              i32(p.multiplier), i32(p.shift), np.float32(p.lo), np.float32(p.hi)],
             {"VW": vw})


# -- 1x1 convolutions as integer matrix products (gemm_int.cl) ----------------------------------

# LLVM CPU names (the `arch=` of the device's TARGET, pocl_cpu.py) with AVX-512 (pocl_cpu.AVX512,
# BW included): 512-bit pmaddwd; with AVX2: 256-bit. Other CPUs keep the float kernels (exact
# sums in float32).
AVX2 = AVX512 | {"haswell", "broadwell", "skylake", "alderlake", "raptorlake", "meteorlake",
                 "arrowlake", "arrowlake-s", "lunarlake", "gracemont", "znver1", "znver2",
                 "znver3", "bdver4", "x86-64-v3"}
SPLIT_DEPTHWISE = True  # a folded depthwise convolution on its own, then the integer product
KMAX = 2048  # gemm_int.cl's KMAX2 pairs
GEMM_TM = {512: 8, 256: 6}  # rows a work-item: its accumulators fill 16 / 12 vector registers


def int_dot(dev) -> int | None:
    """gemm_int.cl's INT_DOT for `dev`: 512 or 256 (pmaddwd's width on its CPU), None where
    the integer product is not used (GPUs, CPUs without AVX2, a device without a TARGET)."""
    if not getattr(dev, "is_cpu", False):
        return None
    target = getattr(dev, "target", "") or ""
    arch = target.partition('arch=')[2].partition('"')[0]
    return 512 if arch in AVX512 else 256 if arch in AVX2 else None


VNNI_FLAGS = {512: "avx512_vnni", 256: "avx_vnni"}  # /proc/cpuinfo's name of each width's


def vnni(dev, dot: int | None = None) -> int:
    """gemm_int.cl's INT_VNNI for `dev`: 1 where its CPU (the host: PoCL's CPU device) has the
    VNNI of pmaddwd's width (AVX512-VNNI for 512, AVX-VNNI for 256): the product and its add
    as one vpdpwssd, the same int32 sums. EDGELITE_OPENCL_VNNI=0 keeps pmaddwd + add."""
    from .pocl_cpu import _host_flags
    dot = int_dot(dev) if dot is None else dot
    if dot not in VNNI_FLAGS or os.environ.get("EDGELITE_OPENCL_VNNI", "1") == "0":
        return 0
    return int(VNNI_FLAGS[dot] in _host_flags())


def _defines(dev, dot: int, tm: int, u8: bool = False) -> dict:
    return {"VW": 16, "TM": tm, "INT_DOT": dot, "INT_VNNI": vnni(dev, dot), "INT_U8": int(u8)}


def u8_offset(dev, dot: int, x, w_kn: np.ndarray) -> int | None:
    """gemm_int.cl's `off` where the product can be vpdpbusd (INT_U8: u8 activations x s8
    weights, four products a lane): the input's zero point less its type's lowest value, so
    that the stored q - zero point + off is q - lowest (0 .. 255); None where it cannot (no
    VNNI of pmaddwd's width, weights beyond int8, EDGELITE_OPENCL_U8=0)."""
    if not vnni(dev, dot) or os.environ.get("EDGELITE_OPENCL_U8", "1") == "0":
        return None
    if w_kn.size and (w_kn.min() < -128 or w_kn.max() > 127):
        return None
    host = getattr(x, "host", x)
    if host.type_name not in ACTIVATION_TYPES:
        return None
    return _zero(host) - ACTIVATION_TYPES[host.type_name][0]


def _u8_rq(rq, w_kn: np.ndarray, off: int):
    """`rq` with its bias less off x each channel's weight sum (the unsigned rows' excess)."""
    sums = np.rint(w_kn).astype(np.int64).sum(axis=0)
    return rq._replace(bias=(rq.bias.astype(np.int64) - off * sums).astype(np.int32))


def _quads_packed(w_kn: np.ndarray, rq, lanes: int, off: int):
    """Weights [K, N] (int8 values) as int8 quads per panel of 2 x lanes channels, [panels,
    K4, PANEL, 4] (zeros beyond K and N), and the panels' epilogue rows (as _pairs_packed)
    with the bias less off x the weight sums (gemm_int.cl's INT_U8)."""
    return _panel_groups(w_kn, lanes, 4, np.int8), \
        _epilogue_rows(_u8_rq(rq, w_kn, off), w_kn.shape[1], lanes)


def _packed(g, node, x, w_kn, rq, dot: int, source):
    """(weights, epilogue rows, off, u8): the node's packed product operands, u8 quads where
    u8_offset allows, else int16 pairs (off 0)."""
    lanes = dot // 32
    off = u8_offset(g.dev, dot, x, w_kn)
    if off is None:
        bufs = g.packed(node, "int_pairs", (lanes,), source, lambda: tuple(
            g.const(a) for a in _pairs_packed(w_kn, rq, lanes)))
        return (*bufs, 0, False)
    bufs = g.packed(node, "int_quads", (lanes, off), source, lambda: tuple(
        g.const(a) for a in _quads_packed(w_kn, rq, lanes, off)))
    return (*bufs, off, True)


def _pairs_packed(w_kn: np.ndarray, rq, lanes: int):
    """Weights [K, N] (exact integers) as int16 pairs per panel of 2 x lanes channels,
    [panels, K2, PANEL, 2] (zeros beyond K and N), and the panels' epilogue rows."""
    return _panel_groups(w_kn, lanes, 2, np.int16), _epilogue_rows(rq, w_kn.shape[1], lanes)


def _panel_groups(w_kn: np.ndarray, lanes: int, per: int, dtype) -> np.ndarray:
    """Weights [K, N] in groups of `per` consecutive k per channel, per panel of 2 x lanes
    channels: [panels, ceil(K / per), PANEL, per] of `dtype`, zeros beyond K and N."""
    k, n = w_kn.shape
    step, groups = 2 * lanes, -(-k // per)
    panels = -(-n // step)
    w = np.zeros((per * groups, panels * step), dtype)
    w[:k, :n] = np.rint(w_kn)
    return np.ascontiguousarray(w.reshape(groups, per, panels, step).transpose(2, 0, 3, 1))


def _epilogue_rows(rq, n: int, lanes: int) -> np.ndarray:
    """The epilogue rows of n channels per panel of 2 x lanes: a convolution's (Requant) int32
    bias, multiplier and shift [panels, 3, PANEL], a FULLY_CONNECTED's (FcRequant) as
    _fc_rows."""
    if isinstance(rq, FcRequant):
        return _fc_rows(rq, lanes)
    step = 2 * lanes
    panels = -(-n // step)
    rows = np.zeros((3, panels * step), np.int32)
    rows[0, :n], rows[1, :n], rows[2, :n] = rq.bias, rq.multiplier, rq.shift
    return np.ascontiguousarray(rows.reshape(3, panels, step).transpose(1, 0, 2))


def _fc_rows(rq: FcRequant, lanes: int) -> np.ndarray:
    """A FULLY_CONNECTED's epilogue rows for gemm_int.cl (FC_EPI), per panel of 2 x lanes
    channels [panels, 3 x PANEL] int32: the biases, then the float64 multipliers' bits."""
    step = 2 * lanes
    panels = -(-rq.bias.size // step)
    bias = np.zeros(panels * step, np.int32)
    bias[:rq.bias.size] = rq.bias
    eff = np.zeros(panels * step, np.float64)
    eff[:rq.effective.size] = rq.effective
    return np.ascontiguousarray(np.concatenate(
        [bias.reshape(panels, step), eff.reshape(panels, step).view(np.int32)], axis=1))


def build_fc(node, g) -> None:
    """An integer FULLY_CONNECTED: gemm_int.cl's product with the reference's double rounding
    (FC_EPI) where the CPU has pmaddwd (int32 sums: no 2^24 bound), else the float kernel."""
    from .helpers import nd
    from .ops_conv import build_fully_connected
    dot = int_dot(g.dev)
    if not _fc_on_gemm_int(node, g.dev):
        build_fully_connected(node, g)
        return
    lanes = dot // 32
    x, w, out = node.inputs[0], node.inputs[1], node.outputs[0]
    rq = g.requant[node.index]
    units, depth = w.shape
    m = int(np.prod(x.shape)) // depth
    wbuf, rbuf, off, u8 = _packed(g, node, x, np.asarray(w.data, np.float32).T, rq, dot,
                                  w.data)
    tm = min(GEMM_TM[dot], m)
    panels = -(-units // (2 * lanes))
    groups = max(1, min(panels, -(-32 // -(-m // tm))))
    per_item = -(-panels // groups)
    gsize, lsize = nd(g, (-(-m // tm), -(-panels // per_item)), (1, 1))
    i32 = np.int32
    g.launch("gemm_int", "gemm_integer", gsize, lsize,
             [g.value(x), wbuf, rbuf, g.tensor(out), i32(m), i32(depth), i32(units),
              i32(per_item), np.float32(rq.lo), np.float32(rq.hi), i32(off)],
             _defines(g.dev, dot, tm, u8))


def gemm_int_plan(node, g):
    """(INT_DOT, K) where `node` (a CONV_2D view) runs on gemm_int.cl, else None: a 1x1
    convolution with stride 1, no fused input padding or residual, K <= KMAX, on a CPU with
    pmaddwd."""
    dot = int_dot(g.dev)
    rq = g.requant.get(node.index)
    if dot is None or not isinstance(rq, Requant) or node.op != "CONV_2D":
        return None
    x, w, o = node.inputs[0], node.inputs[1], node.options
    co, kh, kw, c = w.shape
    if (kh, kw) != (1, 1) or int(o.stride_h or 1) != 1 or int(o.stride_w or 1) != 1 \
            or c > KMAX or node.index in g.fusion.input_pad \
            or node.index in g.fusion.residual or tuple(node.outputs[0].shape[:3]) \
            != tuple(x.shape[:3]):
        return None
    return dot, c


def build_conv(node, g) -> None:
    """An integer CONV_2D: 1x1 ones (gemm_int_plan) as gemm_int.cl's integer product, a
    depthwise convolution folded into it (fuse.py) launched on its own before it; the others
    on the float kernels (ops_conv) with REQUANT epilogues."""
    from .helpers import nd
    from .ops_conv import build_conv_2d, build_depthwise_conv_2d
    plan = gemm_int_plan(node, g)
    ex = g.fusion.expand.get(node.index)  # plan_blocks' (fuse.py plans no integer block)
    if ex is not None:
        _build_block(ex, node, g, *plan)
        return
    if plan is None:
        build_conv_2d(node, g)
        return
    dw = g.fusion.depthwise.get(node.index)
    if dw is not None and not SPLIT_DEPTHWISE:
        build_conv_2d(node, g)
        return
    fused = dw is not None and _fused_depthwise(dw, plan[1])
    if dw is not None and not fused:
        build_depthwise_conv_2d(dw, g)
    dot, k = plan
    lanes = dot // 32
    rq, w = g.requant[node.index], node.inputs[1]
    n = w.shape[0]
    x, out = node.inputs[0], g.fusion.output.get(node.index, node.outputs[0])
    wbuf, rbuf, off, u8 = _packed(g, node, x, np.asarray(w.data, np.float32).reshape(n, k).T,
                                  rq, dot, w.data)
    m = int(np.prod(x.shape[:3]))
    tm = GEMM_TM[dot]
    tiles, panels = -(-m // tm), -(-n // (2 * lanes))
    res, rdef = _residual(node, g)
    defines = {**_defines(g.dev, dot, tm, u8), **rdef}
    i32 = np.int32
    if fused:  # DW_FUSED: one work-item a row tile (panel groups would redo the depthwise)
        from .ops_conv import _DepthwiseConv2D
        d = _DepthwiseConv2D(dw, g, 16)
        gsize, lsize = nd(g, (tiles, 1), (1, 1))
        g.launch("gemm_int", "depthwise_conv_2d_then_gemm_integer", gsize, lsize,
                 [g.value(d.src), wbuf, rbuf, g.tensor(out), i32(m), i32(k), i32(n),
                  i32(panels), np.float32(rq.lo), np.float32(rq.hi), i32(off), d.wbuf, d.bbuf,
                  i32(d.h), i32(d.w), i32(d.ho), i32(d.wo), i32(d.pt), i32(d.pl), i32(d.lo),
                  i32(d.hi), *res], {**defines, **d.defines, "DW_FUSED": 1})
        return
    # a second dimension of panel groups where the rows alone give few work-items
    groups = max(1, min(panels, -(-32 // tiles)))
    per_item = -(-panels // groups)
    gsize, lsize = nd(g, (tiles, -(-panels // per_item)), (1, 1))
    g.launch("gemm_int", "gemm_integer", gsize, lsize,
             [g.value(x), wbuf, rbuf, g.tensor(out), i32(m), i32(k), i32(n), i32(per_item),
              np.float32(rq.lo), np.float32(rq.hi), i32(off), *res], defines)


def _fused_depthwise(dw, k: int) -> bool:
    """Whether gemm_int.cl's DW_FUSED takes the depthwise `dw` folded into a 1x1 product of
    depth k: depth multiplier 1, whole vectors of 16 channels (EDGELITE_OPENCL_INT_DW=split
    launches it on its own)."""
    if os.environ.get("EDGELITE_OPENCL_INT_DW", "fused") == "split":
        return False
    return dw.inputs[1].shape[3] == dw.inputs[0].shape[3] == k and k % 16 == 0


# The smallest expanded tensor (elements a batch) whose block plan_blocks makes one launch.
BLOCK_MIN = 56 * 56 * 144
RING_BYTES = 32 << 10  # gemm_int.cl BLOCK_FUSED's private ring of three expanded rows


def plan_residuals(g, nodes: list, outputs: list) -> None:
    """On a CPU with pmaddwd, an integer ADD of a 1x1 product's output (its one reader) and a
    tensor written before that product, same shapes: the ADD in the product's epilogue
    (gemm_int.cl's RES_ADD), skipped; g.fusion.residual_int[product] = (the other tensor,
    the product's and its multipliers and shifts in AddParams' order).
    EDGELITE_OPENCL_INT_RES=0 keeps the ADD's launch."""
    from .fuse import _Graph
    if int_dot(g.dev) is None or os.environ.get("EDGELITE_OPENCL_INT_RES", "1") == "0":
        return
    graph, f = _Graph(nodes, outputs), g.fusion
    for add in nodes:
        p = g.requant.get(add.index)
        if add.op != "ADD" or not isinstance(p, AddParams) or add.index in f.skipped:
            continue
        for mine, other, swap in ((0, 1, False), (1, 0, True)):
            t, o = add.inputs[mine], add.inputs[other]
            conv = graph.producer.get(t.index)
            if conv is None or conv.index in f.residual_int or conv.index in f.skipped \
                    or not isinstance(g.requant.get(conv.index), Requant) \
                    or len(conv.outputs) != 1 or not graph.only_reader(t, add) \
                    or not graph.written_before(o, conv) \
                    or tuple(t.shape) != tuple(add.outputs[0].shape) \
                    or gemm_int_plan(conv, g) is None:
                continue
            m = (p.m2, p.e2, p.m1, p.e1) if swap else (p.m1, p.e1, p.m2, p.e2)
            f.residual_int[conv.index] = (o, AddParams(*m, p.mo, p.eo, p.lo, p.hi))
            f.output[conv.index] = add.outputs[0]
            f.skipped.add(add.index)
            break


def _residual(node, g) -> tuple:
    """(extra kernel arguments, defines) of gemm_int.cl's RES_ADD for `node`: none without."""
    r = g.fusion.residual_int.get(node.index)
    if r is None:
        return [], {}
    other, p = r
    i32 = np.int32
    return [g.value(other), i32(p.m1), i32(p.e1), i32(p.m2), i32(p.e2), i32(p.mo), i32(p.eo),
            np.float32(p.lo), np.float32(p.hi)], {"RES_ADD": 1}


def plan_integer(g, nodes: list, outputs: list) -> None:
    """The integer fusions of a partition after fuse.py's plan: whole blocks, then residual
    ADDs into the products that write them."""
    plan_blocks(g, nodes, outputs)
    plan_residuals(g, nodes, outputs)


def plan_blocks(g, nodes: list, outputs: list) -> None:
    """On a CPU with pmaddwd, a large integer inverted-residual block (fuse.block_expansion:
    an expanded tensor of BLOCK_MIN elements or more, 16-channel vectors, the expansion's
    depth within KMAX, the ring of three expanded rows within RING_BYTES, both products u8
    quads or both int16 pairs) as one launch (gemm_int.cl's BLOCK_FUSED):
    g.fusion.expand[projection] = the expansion, skipped. EDGELITE_OPENCL_INT_BLOCK=0 keeps
    two launches."""
    from .fuse import _Graph, block_expansion
    dot = int_dot(g.dev)
    if dot is None or os.environ.get("EDGELITE_OPENCL_INT_BLOCK", "1") == "0":
        return
    graph, f = _Graph(nodes, outputs), g.fusion
    by_index = {n.index: n for n in nodes}
    smallest = int(os.environ.get("EDGELITE_OPENCL_INT_BLOCK_MIN", BLOCK_MIN))
    panel, tm = dot // 16, GEMM_TM[dot]
    for conv, dw in list(f.depthwise.items()):
        ex = block_expansion(graph, f, dw, smallest)
        node = by_index[conv]
        if ex is None or not {conv, dw.index, ex.index} <= set(g.requant) \
                or dw.inputs[0].shape[3] % 16 or ex.inputs[0].shape[3] > KMAX \
                or gemm_int_plan(node, g) is None:
            continue
        e, px = ex.inputs[1].shape[0], (tm - 1) * int(dw.options.stride_h or 1) + 3
        if 3 * px * -(-e // panel) * panel * 4 > RING_BYTES:
            continue
        we, w = ex.inputs[1], node.inputs[1]
        offx = u8_offset(g.dev, dot, ex.inputs[0],
                         np.asarray(we.data, np.float32).reshape(e, -1).T)
        offd = u8_offset(g.dev, dot, node.inputs[0],
                         np.asarray(w.data, np.float32).reshape(w.shape[0], -1).T)
        if (offx is None) != (offd is None):
            continue
        f.expand[conv] = ex
        f.skipped.add(ex.index)


def _build_block(ex, node, g, dot: int, k: int) -> None:
    """The expansion `ex`, the depthwise folded into `node` and `node` as one launch
    (gemm_int.cl's BLOCK_FUSED), as plan_blocks checked it fits."""
    from .helpers import nd
    from .ops_conv import _DepthwiseConv2D
    dw = g.fusion.depthwise[node.index]
    d = _DepthwiseConv2D(dw, g, 16)
    s = d.defines["SH"]
    lanes, tm = dot // 32, GEMM_TM[dot]
    panel = 2 * lanes
    x, we, rqe = ex.inputs[0], ex.inputs[1], g.requant[ex.index]
    e, k0 = we.shape[0], we.shape[3]
    px, ep = (tm - 1) * s + 3, -(-e // panel) * panel
    rq, w = g.requant[node.index], node.inputs[1]
    n = w.shape[0]
    we_kn = np.asarray(we.data, np.float32).reshape(e, k0).T
    w_kn = np.asarray(w.data, np.float32).reshape(n, k).T
    webuf, rebuf, offx, u8 = _packed(g, ex, x, we_kn, rqe, dot, we.data)
    wbuf, rbuf, offd, _ = _packed(g, node, node.inputs[0], w_kn, rq, dot, w.data)
    out = g.fusion.output.get(node.index, node.outputs[0])
    batches, ho, wo = out.shape[0], out.shape[1], out.shape[2]
    strips = -(-wo // tm)
    parts = max(1, min(ho // 4, -(-16 // strips)))  # row parts: work-items for 2 threads
    rpi = -(-ho // parts)
    parts = -(-ho // rpi)
    gsize, lsize = nd(g, (strips, batches * parts), (1, 1))
    i32 = np.int32
    kper = 4 if u8 else 2
    res, rdef = _residual(node, g)
    defines = {**_defines(g.dev, dot, tm, u8), "BLOCK_FUSED": 1, "SH": s, "SW": s, "PX": px,
               "EP": ep, "K0P": -(-k0 // kper)}
    g.launch("gemm_int", "expand_depthwise_then_gemm_integer", gsize, lsize,
             [g.value(x), webuf, rebuf, d.wbuf, d.bbuf, wbuf, rbuf, g.tensor(out), i32(d.h),
              i32(d.w), i32(k0), i32(e), i32(ho), i32(wo), i32(n), i32(d.pt), i32(d.pl),
              i32(offx), i32(rqe.lo), i32(rqe.hi), i32(d.lo), i32(d.hi), i32(offd),
              np.float32(rq.lo), np.float32(rq.hi), i32(parts), i32(rpi), i32(batches), *res],
             {**defines, **rdef})


# integer builders of their own; the others are the float ones' (with REQUANT epilogues)
BUILDS = {"ADD": build_add, "MEAN": build_mean, "CONV_2D": build_conv,
          "FULLY_CONNECTED": build_fc}
