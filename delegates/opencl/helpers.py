"""Helpers shared by the OpenCL delegate's op builders: fused clamps, launch sizes, checks."""
from __future__ import annotations

import numpy as np

from edgelite.interpreter.kernels.common import RELU, RELU6, RELU_N1_TO_1

INF = float("inf")
_CLAMPS = {RELU: (0.0, INF), RELU6: (0.0, 6.0), RELU_N1_TO_1: (-1.0, 1.0)}
MAX_INDEX = 1 << 24  # gather tables are computed in float32: positions must be exact


def clamp(node, g=None) -> tuple:
    """(lo, hi) of the node's fused activation (TFLite's float kernels only clamp), narrowed
    by what the delegate fused into it (fuse.py: a RELU-family node, a residual ADD's clamp);
    an integer node's stored range (quant_int.py)."""
    rq = None if g is None else g.requant.get(node.index)
    if rq is not None:
        return rq.lo, rq.hi
    code = int(getattr(node.options, "fused_activation_function", 0) or 0) \
        if node.options is not None else 0
    lo, hi = _CLAMPS.get(code, (-INF, INF))
    if g is not None and node.index in g.fused:
        flo, fhi = g.fused[node.index]
        lo, hi = max(lo, flo), min(hi, fhi)
    if g is not None and node.outputs:
        # an int8 output's range (quant.py): the tensor the node writes, a fused ADD's if any
        written = g.fusion.output.get(node.index, node.outputs[0])
        qrange = getattr(written, "qrange", None)
        if qrange is not None:
            lo, hi = max(lo, qrange[0]), min(hi, qrange[1])
    return lo, hi


def elements(shape) -> int:
    """How many values a tensor of `shape` holds."""
    return int(np.prod(shape, dtype=np.int64))


def vector_width(n: int, widest: int = 16) -> int:
    """The widest vector width <= `widest` dividing n."""
    w = widest
    while w > 1 and n % w:
        w //= 2
    return w


def nd(g, dims, local=None):
    """(global, local) sizes. The default local size divides every dimension (powers of two up
    to a budget), so the global size is exact; a given `local` rounds the global size up (the
    kernel must then ignore items past the end)."""
    dims = [max(int(d), 1) for d in dims]
    if local is None:
        local, budget = [1] * len(dims), 64 if not g.dev.is_cpu else 16
        for k in range(len(dims)):
            while dims[k] % (local[k] * 2) == 0 and int(np.prod(local)) * 2 <= budget:
                local[k] *= 2
    local = [min(max(int(v), 1), d) for v, d in zip(local, dims)]
    return tuple(-(-d // v) * v for d, v in zip(dims, local)), tuple(local)


# -- support checks ----------------------------------------------------------------------------

def float_io(node, const_inputs=(), data_inputs=None) -> str | None:
    """Inputs and outputs float32; inputs in `const_inputs` must be constants."""
    for k, t in enumerate(node.inputs):
        if t is None:
            continue
        if k in const_inputs and t.data is None:
            return f"input {k} ({t.name!r}) must be a constant"
        if data_inputs is not None and k not in data_inputs:
            continue
        if t.type_name != "float32":
            return f"input {k} ({t.name!r}) is {t.type_name}; the delegate computes float32"
    for t in node.outputs:
        if t.type_name != "float32":
            return f"output {t.name!r} is {t.type_name}; the delegate computes float32"
    return None


def rank4(node) -> str | None:
    for t in list(node.inputs[:1]) + node.outputs:
        if t is not None and len(t.shape) != 4:
            return f"{t.name!r} is {list(t.shape)}; 4-D NHWC expected"
    return None


# -- half weights ------------------------------------------------------------------------------

SCALE_BUDGET = 1 << 18  # weights x candidate scales tried per layer (~1 ms of numpy)


def half_scales(w_kn: np.ndarray) -> np.ndarray:
    """Per column of `w_kn` [K, N] (an output channel's weights), the scale s that the kernels
    multiply back after summing half(w / s) products. s is a power of two near the column's
    largest |w| (tiny weights, as BN folding can leave, then use half's normal range, not its
    subnormals or zero) times the 2^(j/n) under which w / s rounds to half with the least
    squared error. Half keeps 11 significant bits wherever a value lies, so the fraction only
    moves where a channel's values fall between half's steps: it pays for channels of few
    weights (depthwise taps, a first convolution's), where the best of n placements is much
    better than the average one. n shrinks as the layer grows, from 256 down to 1 (the power
    of two alone) for layers of SCALE_BUDGET weights or more."""
    w = np.asarray(w_kn, np.float32).reshape(-1, np.shape(w_kn)[-1])
    top = np.max(np.abs(w), axis=0) if w.size else np.zeros(w.shape[1], np.float32)
    base = np.exp2(np.floor(np.log2(np.where((top > 0) & np.isfinite(top), top, 1.0))))
    w = w / base.astype(np.float32)
    n = int(min(256, max(1, SCALE_BUDGET // max(w.size, 1))))
    scales = 2.0 ** (np.arange(n) / n)
    errors = np.empty((n, w.shape[1]), np.float32)
    chunk = max(1, (1 << 20) // max(w.size, 1))  # candidates per numpy pass
    for j in range(0, n, chunk):
        s = scales[j:j + chunk, None, None].astype(np.float32)
        d = (w * (1.0 / s)).astype(np.float16).astype(np.float32) * s - w
        errors[j:j + chunk] = np.einsum("ckn,ckn->cn", d, d)
    return (scales[np.argmin(errors, axis=0)] * base).astype(np.float32)
