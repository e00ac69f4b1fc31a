"""Activations: the ReLU family, LEAKY_RELU, PRELU, ELU, HARD_SWISH, GELU, LOGISTIC, TANH,
SOFTMAX, LOG_SOFTMAX, L2_NORMALIZATION and CUMSUM (float32; CUMSUM also int32 and int64).

The formulas are those of TFLite's float reference kernels, rearranged only where the result
stays the same to an ulp or so (and without masked writes, which are slow in numpy). Scratch
arrays are allocated in `prepare`.
"""
from __future__ import annotations

import math
import struct

import numpy as np

from . import reference_order
from .common import (activation_code, bound_on_call, bounds, broadcast_shape, clip, clip_,
                     fixed_view, raw)
from .steps import call, calls_step, source_step
from .registry import register

INF = float("inf")


def _same_shape(node):
    node.expect_inputs(1)
    x = node.input(0)
    node.outputs[0].shape = x.shape
    return x


def _clamp(lo, hi):
    lo_, hi_ = bounds(lo, hi)   # 0-d: clip converts a Python float on every call

    def prepare(node):
        _same_shape(node)

        def run(x, out):
            clip(x, lo, hi, out=out)
        run.bind = lambda x, out: calls_step(call(clip, x, lo_, hi_, out))
        return run
    return prepare


register("RELU", "float32")(_clamp(0.0, INF))
register("RELU6", "float32")(_clamp(0.0, 6.0))
register("RELU_N1_TO_1", "float32")(_clamp(-1.0, 1.0))
register("RELU_0_TO_1", "float32")(_clamp(0.0, 1.0))


@register("LEAKY_RELU", "float32")
def leaky_relu(node):
    """x > 0 ? x : alpha * x."""
    x = _same_shape(node)
    alpha = float(getattr(node.options, "alpha", 0.2))
    multiply = np.multiply
    if 0.0 <= alpha <= 1.0:  # then alpha * x <= x exactly where x > 0: one maximum
        def run(x, out):
            multiply(x, alpha, out=out)
            np.maximum(x, out, out=out)
        a = np.array(alpha, np.float32)   # (a Python float is converted to float32 so too)
        run.bind = lambda x, out: calls_step(call(multiply, x, a, out),
                                             call(np.maximum, x, out, out=out))
        return run
    part = np.empty(x.shape, np.float32)  # min(x, 0) * alpha + max(x, 0): no masked writes

    def run(x, out):
        clip(x, -INF, 0.0, out=out)
        multiply(out, alpha, out=out)
        clip(x, 0.0, INF, out=part)
        np.add(out, part, out=out)
    return run


@register("PRELU", "float32")
def prelu(node):
    """x >= 0 ? x : alpha * x, alpha broadcast against x: min(x, 0) * alpha + max(x, 0)."""
    node.expect_inputs(2)
    x, alpha = node.input(0), node.input(1)
    node.outputs[0].shape = broadcast_shape(node, x.shape, alpha.shape)
    part = np.empty(x.shape, np.float32)

    def run(x, alpha, out):
        clip(x, -INF, 0.0, out=part)
        np.multiply(part, alpha, out=out)
        clip(x, 0.0, INF, out=part)
        np.add(out, part, out=out)
    return run


@register("ELU", "float32")
def elu(node):
    """x < 0 ? expm1(x) : x, as expm1(min(x, 0)) + max(x, 0)."""
    x = _same_shape(node)
    part = np.empty(x.shape, np.float32)

    def run(x, out):
        clip(x, -INF, 0.0, out=out)
        np.expm1(out, out=out)
        clip(x, 0.0, INF, out=part)
        np.add(out, part, out=out)
    return run


@register("HARD_SWISH", "float32")
def hard_swish(node):
    """x * relu6(x + 3) / 6."""
    _same_shape(node)

    def run(x, out):
        np.add(x, 3.0, out=out)
        clip_(out, 0.0, 6.0)
        np.multiply(out, x, out=out)
        np.divide(out, 6.0, out=out)
    (three, zero), six = bounds(3.0, 0.0), np.array(6.0, np.float32)
    run.bind = lambda x, out: calls_step(call(np.add, x, three, out),
                                         call(clip, out, zero, six, out),
                                         call(np.multiply, out, x, out),
                                         call(np.divide, out, six, out))
    return run


@register("LOGISTIC", "float32")
def logistic(node):
    """1 / (1 + exp(-x)). TFLite's reference returns exp(x) below -9 and 1 above 16.6: the
    difference there is below 2e-8 absolute. -x is capped at 88 so exp does not overflow (and
    warn): 1 / (1 + e^88) is 6e-39, where TFLite's exp(x) is smaller still. Under BUILTIN_REF,
    TFLite's reference formula itself (reference_order.logistic)."""
    x = _same_shape(node)
    if getattr(getattr(node, "runtime", None), "reference", False):
        return reference_order.logistic
    (lo, cap), one = bounds(-INF, 88.0), np.array(1.0, np.float32)  # 0-d: no conversions
    negative, exp, add, reciprocal = np.negative, np.exp, np.add, np.reciprocal
    if int(np.prod(x.shape)) > 1:
        def run(x, out):
            negative(x, out)
            clip(out, lo, cap, out)
            exp(out, out)
            add(out, one, out)
            reciprocal(out, out)
        run.bind = lambda x, out: calls_step(   # run's calls, written into the plan's
            call(negative, x, out), call(clip, out, lo, cap, out), call(exp, out, out),
            call(add, out, one, out), call(reciprocal, out, out))
        return run
    # One element (a detector's score): the formula on the Python float, rounded to float32
    # once (numpy's float32 ops round after each step: within 1 ulp); 5 numpy calls were 1 µs.
    def run(x, out):
        out.reshape(-1)[0] = _sigmoid(x.reshape(-1).item())

    def bind(x, out):
        x1, o1 = fixed_view(x, (1,)), fixed_view(out, (1,))
        if x1 is None or o1 is None:
            return None
        # _sigmoid's line, written into the plan's run_steps (no frame; memoryviews store a
        # float as numpy's setitem does: rounded to float32 once)
        return source_step("v = {x}[0]; {o}[0] = 1.0 / (1.0 + {exp}(-v if -v < 88.0 else 88.0))"
                           " if v == v else v", x=memoryview(x1), o=memoryview(o1), exp=math.exp)
    run.bind = bind
    return run


def _sigmoid(v: float) -> float:
    """1 / (1 + exp(-v)) of a Python float, -v capped at 88 as the array form (NaN stays NaN)."""
    return 1.0 / (1.0 + math.exp(-v if -v < 88.0 else 88.0)) if v == v else v


@register("TANH", "float32")
def tanh(node):
    _same_shape(node)

    def run(x, out):
        np.tanh(x, out=out)
    run.bind = lambda x, out: calls_step(call(np.tanh, x, out))
    return run


# -- GELU --------------------------------------------------------------------------------------

# erfc(u) = t exp(-u^2 + P(t)), t = 1 / (1 + u/2), u >= 0: the Chebyshev fit of Numerical
# Recipes (erfcc), relative error below 1.2e-7 everywhere. Coefficients from P's t^0 upwards.
_ERFC_P = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807,
           -1.13520398, 1.48851587, -0.82215223, 0.17087277)
_SQRT_2_OVER_PI = float(np.float32(np.sqrt(2.0 / np.pi)))
_SQRT1_2 = float(np.float32(np.sqrt(0.5)))


def _gelu_erfc(shape):
    """run(x, out): out = 0.5 x erfc(-x / sqrt 2), in float32 with preallocated scratch.

    With e = erfc(|x| / sqrt 2), that is max(x, 0) - 0.5 |x| e for either sign (no masks).
    exp(-u^2) is taken as exp(-h^2) exp(-(u - h)(u + h)) with h = u rounded down to 1/64: h^2 is
    exact in float32, so the tails keep their relative accuracy (e within ~5e-7 of libm's)."""
    u, t, p, h, d = (np.empty(shape, np.float32) for _ in range(5))
    multiply, add = np.multiply, np.add
    c_last, c_next, c_rest = _ERFC_P[-1], _ERFC_P[-2], _ERFC_P[-3::-1]

    def run(x, out):
        np.absolute(x, out=u)
        multiply(u, _SQRT1_2, out=u)   # u = |x| / sqrt 2, rounded as TFLite's x * -M_SQRT1_2
        multiply(u, 0.5, out=t)
        add(t, 1.0, out=t)
        np.reciprocal(t, out=t)
        multiply(t, c_last, out=p)
        add(p, c_next, out=p)
        for c in c_rest:
            multiply(p, t, out=p)
            add(p, c, out=p)
        multiply(u, 64.0, out=h)
        np.floor(h, out=h)
        multiply(h, 1.0 / 64.0, out=h)
        add(u, h, out=out)
        np.subtract(u, h, out=d)
        multiply(d, out, out=d)
        np.subtract(p, d, out=p)        # P(t) - (u - h)(u + h)
        np.exp(p, out=p)
        multiply(h, h, out=h)
        np.negative(h, out=h)
        np.exp(h, out=h)
        multiply(p, h, out=p)
        multiply(p, t, out=p)           # e = erfc(u)
        multiply(p, u, out=p)
        multiply(p, _SQRT1_2, out=p)    # 0.5 |x| e
        clip(x, 0.0, INF, out=out)
        np.subtract(out, p, out=out)
    return run


@register("GELU", "float32")
def gelu(node):
    """0.5 x erfc(-x / sqrt 2), or with `approximate` 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715
    x^3))), as TFLite's reference kernel."""
    x = _same_shape(node)
    if not getattr(node.options, "approximate", False):
        return _gelu_erfc(x.shape)
    z = np.empty(x.shape, np.float32)

    def run(x, out):
        np.multiply(x, 0.044715, out=z)
        np.multiply(z, x, out=z)
        np.multiply(z, x, out=z)
        np.add(z, x, out=z)
        np.multiply(z, _SQRT_2_OVER_PI, out=z)
        np.tanh(z, out=z)
        np.add(z, 1.0, out=z)
        np.multiply(x, 0.5, out=out)
        np.multiply(out, z, out=out)
    return run


# -- along the last axis -----------------------------------------------------------------------

def row_sum(shape):
    """(f, rows): f(a) writes the sums of float32 `a` (of `shape`) along its last axis into
    `rows`, shaped `shape[:-1] + (1,)` to broadcast back. Long rows sum as a BLAS matrix-vector
    product (7x faster than np.add.reduce over 64-float rows), short ones with add.reduce."""
    rows = np.empty(shape[:-1] + (1,), np.float32)
    if shape[-1] < 16 or len(shape) < 2:
        add = np.add.reduce
        return (lambda a: add(a, axis=-1, keepdims=True, out=rows)), rows
    ones = np.ones(shape[-1], np.float32)
    flat = rows.reshape(shape[:-1])
    matmul = np.matmul
    return (lambda a: matmul(a, ones, out=flat)), rows


def _last_axis(node, same_type: bool = False):
    x = _same_shape(node)
    if len(x.shape) == 0:
        raise node.fail("the input must have at least one dimension")
    if same_type and node.outputs[0].type_name != x.type_name:   # as LiteRT
        raise node.fail(f"the output must be {x.type_name} (the input's type), got "
                        f"{node.outputs[0].type_name}")
    return x


def _exps(shape, beta: float = 1.0):
    """(exps, rows, row_max): exps(x, out) writes exp((x - max) * beta) along the last axis into
    out, the rows' maxima into row_max and their sums of the exps into rows ([..., 1] each)."""
    total, rows = row_sum(shape)
    row_max = np.empty_like(rows)
    maximum = np.maximum.reduce

    def exps(x, out):
        maximum(x, axis=-1, keepdims=True, out=row_max)
        np.subtract(x, row_max, out=out)
        if beta != 1.0:
            np.multiply(out, beta, out=out)
        np.exp(out, out=out)
        total(out)
    return exps, rows, row_max


@register("SOFTMAX", "float32")
def softmax(node):
    """exp((x - max) * beta) / sum, along the last axis."""
    x = _last_axis(node, same_type=True)
    beta = float(getattr(node.options, "beta", 1.0))
    if int(np.prod(x.shape[:-1])) == 1:
        return _softmax_row(x.shape, beta)
    exps, rows, _ = _exps(x.shape, beta)

    def run(x, out):
        exps(x, out)
        np.divide(out, rows, out=out)
    return run


def _softmax_row(shape, beta: float):
    """SOFTMAX of one row (a classifier's output), bound to its arrays: the maximum and the
    sum into 0-d arrays (the sum a dot product), no broadcasting: 5 numpy calls, ~1.5 µs less
    than the general form on 8 values. The unbound `run` binds too, so both give one result."""
    n = shape[-1]
    if n <= PYTHON_SOFTMAX and beta >= 0:
        return _softmax_floats(n, beta)
    top, total = np.empty((), np.float32), np.empty((), np.float32)
    ones, scale = np.ones(n, np.float32), np.array(beta, np.float32)
    reduce, subtract, multiply, exp, dot, divide = (np.maximum.reduce, np.subtract, np.multiply,
                                                    np.exp, raw(np.dot), np.divide)

    def bind(x, out):
        x1, o1 = fixed_view(x, (n,)), fixed_view(out, (n,))
        if x1 is None or o1 is None or not o1.flags.c_contiguous:
            return None

        return calls_step(call(reduce, x1, 0, None, top), call(subtract, x1, top, o1),
                          None if beta == 1.0 else call(multiply, o1, scale, o1),
                          call(exp, o1, o1), call(dot, o1, ones, total),
                          call(divide, o1, total, o1))
    return bound_on_call(bind, "SOFTMAX of one row")


# A row of at most this many values (a classifier's scores) is computed on Python floats.
PYTHON_SOFTMAX = 16


def _softmax_floats(n: int, beta: float):
    """SOFTMAX of one short row on Python floats (in double, rounded to float32 once): the row
    read as a list, exp((x - max) * beta) and the sum in Python, written back as one slice:
    ~0.4 µs less than the 5 numpy calls on 8 values. beta >= 0, so every exponent is <= 0 (no
    overflow); a NaN or an inf anywhere makes the sum NaN and every output NaN, as the array
    form does."""
    exp = math.exp
    floats = struct.Struct(f"{n}f")   # read and written through the arrays' buffers (0.35 µs
    read, write = floats.unpack_from, floats.pack_into   # less than tolist and a slice)

    def bind(x, out):
        x1, o1 = fixed_view(x, (n,)), fixed_view(out, (n,))
        if x1 is None or o1 is None:
            return None
        if not (x1.flags.c_contiguous and o1.flags.c_contiguous):
            row = x1.tolist

            def bound():
                v = row()
                top = max(v)
                e = [exp((a - top) * beta) for a in v] if beta != 1.0 else \
                    [exp(a - top) for a in v]
                scale = 1.0 / sum(e)
                o1[:] = [a * scale for a in e]
            return bound
        src, dst = memoryview(x1).cast("B"), memoryview(o1).cast("B")
        # one line of Python, written into the plan's run_steps (steps.source_step)
        power = "(a - top) * {beta}" if beta != 1.0 else "a - top"
        return source_step(f"v = {{read}}({{src}}); top = max(v); e = [{{exp}}({power}) for a in "
                           "v]; scale = 1.0 / sum(e); {write}({dst}, 0, *[a * scale for a in e])",
                           read=read, src=src, exp=exp, beta=beta, write=write, dst=dst)

    def run(x, out):
        bind(x.reshape(-1), out.reshape(-1) if out.flags.c_contiguous else out)()
    run.bind = bind
    return run


@register("LOG_SOFTMAX", "float32")
def log_softmax(node):
    """x - max - log(sum(exp(x - max))), along the last axis."""
    x = _last_axis(node, same_type=True)
    exps, rows, row_max = _exps(x.shape)

    def run(x, out):
        exps(x, out)
        np.log(rows, out=rows)
        np.subtract(x, row_max, out=out)
        np.subtract(out, rows, out=out)
    return run


L2_EPSILON = 1e-6  # TFLite's l2norm.cc: x / max(sqrt(sum(x^2)), 1e-6)


@register("L2_NORMALIZATION", "float32")
def l2_normalization(node):
    x = _last_axis(node, same_type=True)
    if activation_code(node.options):
        raise node.fail("a fused activation is not supported (TFLite refuses it too)")
    total, rows = row_sum(x.shape)

    def run(x, out):
        np.multiply(x, x, out=out)
        total(out)
        np.sqrt(rows, out=rows)
        clip_(rows, L2_EPSILON, INF)
        np.divide(x, rows, out=out)
    return run


@register("CUMSUM", "float32", "int32", "int64")
def cumsum(node):
    """Running sums along `axis` (input 1, a scalar), optionally exclusive and reversed."""
    node.expect_inputs(2)
    x, axis_t = node.input(0), node.input(1)
    rank = len(x.shape)
    node.outputs[0].shape = x.shape
    if axis_t.data is None:
        raise node.fail("the axis (input 1) must be a constant")
    axis = int(np.asarray(axis_t.data).reshape(-1)[0])
    if not -rank <= axis < rank:
        raise node.fail(f"axis {axis} is out of range for rank {rank}")
    axis %= rank
    exclusive = bool(getattr(node.options, "exclusive", False))
    reverse = bool(getattr(node.options, "reverse", False))

    def along(step, start=None, stop=None):
        return (slice(None),) * axis + (slice(start, stop, step),)
    flip = along(-1 if reverse else 1)
    head, tail, first = along(None, None, -1), along(None, 1, None), along(None, 0, 1)
    accumulate, dtype = np.add.accumulate, x.dtype
    if x.shape[axis] == 0:
        return lambda x, axis_value, out: None
    if not exclusive:
        def run(x, axis_value, out):
            accumulate(x[flip], axis=axis, dtype=dtype, out=out[flip])
        return run

    def run(x, axis_value, out):
        o = out[flip]
        o[first] = 0
        accumulate(x[flip][head], axis=axis, dtype=dtype, out=o[tail])
    return run
