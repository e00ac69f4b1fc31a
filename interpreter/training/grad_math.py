"""Gradient rules of arithmetic, activations and reductions: ADD SUB MUL DIV RELU RELU6
LEAKY_RELU LOGISTIC TANH GELU HARD_SWISH SOFTMAX LOG_SOFTMAX MEAN SUM, and fused activations.

`rule(em, op, dys, needs) -> grads`, as in grad_nn.py. Broadcast inputs get their gradient summed
back to their own shape (`Emitter.unbroadcast`).
"""
from __future__ import annotations

import math

import numpy as np

from edgelite.schema.ops import Activation

from ..kernels.common import activation_code
from .emit import Emitter, GradientError


def fused_activation_grad(em: Emitter, op, dy: int) -> int:
    """dy through the op's fused activation, from its output y. Only the clamps act: TFLite's
    float kernels ignore a fused TANH, SIGN_BIT or SIGMOID, so their gradient is dy too."""
    code = activation_code(op.options)
    y = op.outputs[0]
    if code == Activation.RELU:
        return em.mul(dy, em.mask("GREATER", y, 0.0))
    if code == Activation.RELU6:
        return em.mul(dy, em.mul(em.mask("GREATER", y, 0.0), em.mask("LESS", y, 6.0)))
    if code == Activation.RELU_N1_TO_1:
        return em.mul(dy, em.mask("LESS", em.op("ABS", [y]), 1.0))
    return dy


# -- elementwise arithmetic ------------------------------------------------------------------

def add(em: Emitter, op, dys, needs):
    dy = fused_activation_grad(em, op, dys[0])
    return [em.unbroadcast(dy, t) if need else None for t, need in zip(op.inputs, needs)]


def sub(em: Emitter, op, dys, needs):
    dy = fused_activation_grad(em, op, dys[0])
    a, b = op.inputs
    return [em.unbroadcast(dy, a) if needs[0] else None,
            em.unbroadcast(em.op("NEG", [dy]), b) if needs[1] else None]


def mul(em: Emitter, op, dys, needs):
    dy = fused_activation_grad(em, op, dys[0])
    a, b = op.inputs
    return [em.unbroadcast(em.mul(dy, b), a) if needs[0] else None,
            em.unbroadcast(em.mul(dy, a), b) if needs[1] else None]


def div(em: Emitter, op, dys, needs):
    dy = fused_activation_grad(em, op, dys[0])
    a, b = op.inputs
    dy_b = em.div(dy, b)
    grads = [em.unbroadcast(dy_b, a) if needs[0] else None, None]
    if needs[1]:  # d(a/b)/db = -(a/b)/b, with the quotient before any fused clamp
        q = em.div(a, b) if activation_code(op.options) else op.outputs[0]
        grads[1] = em.unbroadcast(em.op("NEG", [em.mul(dy_b, q)]), b)
    return grads


# -- activations -----------------------------------------------------------------------------

def relu(em: Emitter, op, dys, needs):
    return [em.mul(dys[0], em.mask("GREATER", op.inputs[0], 0.0))]


def relu6(em: Emitter, op, dys, needs):
    x = op.inputs[0]
    inside = em.mul(em.mask("GREATER", x, 0.0), em.mask("LESS", x, 6.0))
    return [em.mul(dys[0], inside)]


def leaky_relu(em: Emitter, op, dys, needs):
    alpha = float(op.options.alpha)
    positive = em.mask("GREATER", op.inputs[0], 0.0)
    slope = em.add(em.scale(positive, 1.0 - alpha), em.scalar(alpha))  # 1 or alpha
    return [em.mul(dys[0], slope)]


def logistic(em: Emitter, op, dys, needs):
    y = op.outputs[0]
    return [em.mul(dys[0], em.mul(y, em.sub(em.scalar(1.0), y)))]


def tanh(em: Emitter, op, dys, needs):
    y = op.outputs[0]
    return [em.mul(dys[0], em.sub(em.scalar(1.0), em.mul(y, y)))]


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_GELU_CUBIC = 0.044715


def gelu(em: Emitter, op, dys, needs):
    """Exact GELU: d/dx x*Phi(x) = Phi(x) + x*phi(x). TFLite has no erf, but GELU itself gives
    x*Phi(x), so Phi(x) = GELU(x)/x (0.5 at x = 0). The tanh form differentiates its formula."""
    x, y = op.inputs[0], op.outputs[0]
    if bool(getattr(op.options, "approximate", False)):
        x2 = em.mul(x, x)
        inner = em.scale(em.mul(x, em.add(em.scale(x2, _GELU_CUBIC), em.scalar(1.0))),
                         _SQRT_2_OVER_PI)
        t = em.op("TANH", [inner])
        du = em.scale(em.add(em.scale(x2, 3 * _GELU_CUBIC), em.scalar(1.0)), _SQRT_2_OVER_PI)
        sech2 = em.sub(em.scalar(1.0), em.mul(t, t))
        slope = em.scale(em.add(em.add(t, em.scalar(1.0)), em.mul(em.mul(x, sech2), du)), 0.5)
        return [em.mul(dys[0], slope)]
    zero = em.op("EQUAL", [x, em.scalar(0.0)], dtype="bool")
    cdf = em.op("SELECT_V2", [zero, em.scalar(0.5), em.div(y, x)], dtype="float32")
    pdf = em.scale(em.op("EXP", [em.scale(em.mul(x, x), -0.5)]), _INV_SQRT_2PI)
    return [em.mul(dys[0], em.add(cdf, em.mul(x, pdf)))]


def hard_swish(em: Emitter, op, dys, needs):
    """y = x * relu6(x + 3) / 6: slope (2x + 3) / 6 inside (-3, 3), 1 above, 0 below."""
    x = op.inputs[0]
    inside = em.mask("LESS", em.op("ABS", [x]), 3.0)
    above = em.mask("GREATER_EQUAL", x, 3.0)
    ramp = em.add(em.scale(x, 1.0 / 3.0), em.scalar(0.5))
    return [em.mul(dys[0], em.add(em.mul(inside, ramp), above))]


def softmax(em: Emitter, op, dys, needs):
    y, dy = op.outputs[0], dys[0]
    rank = len(em.sig(y))
    dot = em.sum(em.mul(dy, y), [rank - 1], keep=True)
    dx = em.mul(y, em.sub(dy, dot))
    return [em.scale(dx, float(op.options.beta))]


def log_softmax(em: Emitter, op, dys, needs):
    y, dy = op.outputs[0], dys[0]
    rank = len(em.sig(y))
    total = em.sum(dy, [rank - 1], keep=True)
    return [em.sub(dy, em.mul(em.op("EXP", [y]), total))]


# -- reductions ------------------------------------------------------------------------------

def _axes(em: Emitter, op) -> list:
    x = op.inputs[0]
    value = em.value(op.inputs[1])
    if value is None:
        raise GradientError(f"{em.scope}: {op.op} needs constant axes for its gradient")
    rank = len(em.sig(x))
    return sorted({int(a) % rank for a in np.asarray(value).reshape(-1)})


def _spread(em: Emitter, op, g: int, axes: list) -> int:
    """The reduced gradient g broadcast back over x's shape."""
    x = op.inputs[0]
    xs = em.sig(x)
    g = em.reshape_to(g, tuple(1 if i in axes else d for i, d in enumerate(xs)), x)
    if em.sig(g) == xs:
        return g
    target = em.i32(xs) if -1 not in xs else em.shape_of(x)
    return em.op("BROADCAST_TO", [g, target])


def sum_(em: Emitter, op, dys, needs):
    return [_spread(em, op, dys[0], _axes(em, op)), None]


def mean(em: Emitter, op, dys, needs):
    axes = _axes(em, op)
    g = em.divide_by(dys[0], em.count(op.inputs[0], axes))
    return [_spread(em, op, g, axes), None]
