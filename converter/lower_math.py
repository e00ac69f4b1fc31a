"""Elementwise ONNX ops: arithmetic, activations, comparisons, logic, Cast.

All are layout-agnostic: they lower to one or a few TFLite ops on the tensors as they come, and
the layout pass later moves transposes through them.
"""
from __future__ import annotations

import numpy as np

from .lower import axis_of, const_input, lowers, optional_const  # noqa: F401

# -- binary arithmetic, comparisons, logic -------------------------------------------------------

_BINARY = {"Add": "ADD", "Sub": "SUB", "Mul": "MUL", "Div": "DIV", "Max": "MAXIMUM",
           "Min": "MINIMUM", "Sum": "ADD", "Equal": "EQUAL", "Less": "LESS",
           "Greater": "GREATER", "LessOrEqual": "LESS_EQUAL",
           "GreaterOrEqual": "GREATER_EQUAL", "And": "LOGICAL_AND", "Or": "LOGICAL_OR",
           "Xor": "NOT_EQUAL"}
_COMPARISONS = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor"}


@lowers(*_BINARY)
def binary(b, n):
    """Two or more inputs (Max, Min, Sum are variadic) folded left to right."""
    op = _BINARY[n.op_type]
    inputs = [t for t in n.inputs if t >= 0]
    if not inputs:
        raise n.fail("needs at least one input")
    if len({b.dtype(t) for t in inputs}) > 1:
        raise n.fail(f"input types differ: {', '.join(b.dtype(t) for t in inputs)}")
    dtype = "bool" if n.op_type in _COMPARISONS else None
    if op == "DIV" and b.dtype(inputs[0]) == "int64":
        # dynamo's floordiv of shape values; int32 DIV truncates, as ONNX's
        return in_int32(b, "DIV", inputs)
    y = inputs[0]
    for t in inputs[1:]:
        y = b.op(op, [y, t], dtype=dtype)
    return y


def in_int32(b, op: str, inputs: list) -> int:
    """An int64 `op` that TFLite has no int64 kernel for (POW, DIV: LiteRT refuses the file)
    computed in int32 between casts: exact below 2^31, as shape arithmetic is."""
    return b.cast(b.op(op, [b.cast(t, "int32") for t in inputs]), "int64")


@lowers("Mean")
def mean(b, n):
    inputs = [t for t in n.inputs if t >= 0]
    total = inputs[0]
    for t in inputs[1:]:
        total = b.op("ADD", [total, t])
    if len(inputs) == 1:
        return total
    return b.op("DIV", [total, b.const(np.array(len(inputs), b.sg.tensors[total].np_dtype))])


@lowers("Pow")
def pow_(b, n):
    x, e = n.input(0), n.input(1)
    exponent = b.value(e)
    if exponent is not None and exponent.size == 1 and b.dtype(x) == "float32":
        k = float(exponent.reshape(()))
        out_shape = np.broadcast_shapes(b.shape(x), exponent.shape)
        if out_shape == b.shape(x):
            if k == 1.0:
                return x
            if k == 2.0:
                return b.op("MUL", [x, x])
            if k == 0.5:
                return b.op("SQRT", [x])
    if b.dtype(x) == "int64":
        return in_int32(b, "POW", [x, e])
    if b.dtype(e) != b.dtype(x):  # POW takes one type: the exponent follows the base
        e = b.cast(e, b.dtype(x))
    return b.op("POW", [x, e])


@lowers("Not")
def not_(b, n):
    return b.op("LOGICAL_NOT", [n.input(0)])


@lowers("Where")
def where(b, n):
    return b.op("SELECT_V2", [n.input(0), n.input(1), n.input(2)], dtype=b.dtype(n.input(1)))


# -- unary math and activations ------------------------------------------------------------------

_UNARY = {"Sqrt": "SQRT", "Neg": "NEG", "Abs": "ABS", "Exp": "EXP", "Log": "LOG", "Sin": "SIN",
          "Cos": "COS", "Tanh": "TANH", "Sigmoid": "LOGISTIC", "Relu": "RELU", "Floor": "FLOOR",
          "Ceil": "CEIL", "Round": "ROUND", "Sign": "SIGN", "HardSwish": "HARD_SWISH"}


@lowers(*_UNARY)
def unary(b, n):
    if n.op_type == "Abs" and b.dtype(n.input(0)) == "int64":
        return abs_int64(b, n.input(0))
    return b.op(_UNARY[n.op_type], [n.input(0)])


def abs_int64(b, x):
    """MAXIMUM(x, -x): TFLite's ABS has no int64 kernel (LiteRT refuses one; T5's
    relative-position buckets take |i - j| in int64)."""
    return b.op("MAXIMUM", [x, b.op("NEG", [x])])


@lowers("IsNaN")
def is_nan(b, n):
    """x != x (transformers' attention masks rows that are all masked out through it)."""
    x = n.input(0)
    return b.op("NOT_EQUAL", [x, x], dtype="bool")


@lowers("IsInf")
def is_inf(b, n):
    x = n.input(0)
    dtype = b.sg.tensors[x].np_dtype
    if dtype.kind != "f":
        raise n.fail(f"takes a float input, not {b.dtype(x)}")
    inf = b.const(np.array(np.inf, dtype))
    positive, negative = int(n.attr("detect_positive", 1)), int(n.attr("detect_negative", 1))
    if positive and negative:
        return b.op("EQUAL", [b.op("ABS", [x]), inf], dtype="bool")
    if positive:
        return b.op("EQUAL", [x, inf], dtype="bool")
    if negative:
        return b.op("EQUAL", [x, b.const(np.array(-np.inf, dtype))], dtype="bool")
    return b.op("LESS", [x, b.const(np.array(-np.inf, dtype))], dtype="bool")  # all false


@lowers("Mod")
def mod(b, n):
    """fmod=0 (the remainder takes the divisor's sign): FLOOR_MOD. fmod=1 (the dividend's
    sign, C's fmod): FLOOR_MOD minus the divisor where a nonzero remainder's sign differs from
    the dividend's (the two differ by exactly one divisor there)."""
    x, y = n.input(0), n.input(1)
    if b.dtype(x) != b.dtype(y):
        raise n.fail(f"input types differ: {b.dtype(x)}, {b.dtype(y)}")
    r = b.op("FLOOR_MOD", [x, y])
    if not int(n.attr("fmod", 0)):
        return r
    if b.dtype(x).startswith("uint"):
        return r                      # no signs: the two remainders agree
    zero = b.const(np.array(0, b.sg.tensors[x].np_dtype))
    sign_differs = b.op("NOT_EQUAL", [b.op("LESS", [r, zero], dtype="bool"),
                                      b.op("LESS", [x, zero], dtype="bool")], dtype="bool")
    fix = b.op("LOGICAL_AND", [sign_differs, b.op("NOT_EQUAL", [r, zero], dtype="bool")],
               dtype="bool")
    return b.op("SELECT_V2", [fix, b.op("SUB", [r, y]), r], dtype=b.dtype(r))


@lowers("Reciprocal")
def reciprocal(b, n):
    x = n.input(0)
    return b.op("DIV", [b.const(np.array(1, b.sg.tensors[x].np_dtype)), x])


@lowers("LeakyRelu")
def leaky_relu(b, n):
    return b.op("LEAKY_RELU", [n.input(0)], {"alpha": float(n.attr("alpha", 0.01))})


@lowers("PRelu")
def prelu(b, n):
    x, slope = n.input(0), n.input(1)
    rank = b.rank(x)
    if b.rank(slope) < rank:  # unidirectional broadcast: give alpha x's rank
        slope = b.reshape(slope, (1,) * (rank - b.rank(slope)) + b.shape(slope))
    return b.op("PRELU", [x, slope])


@lowers("Elu")
def elu(b, n):
    return _scaled_elu(b, n.input(0), float(n.attr("alpha", 1.0)))


@lowers("Selu")
def selu(b, n):
    alpha = float(n.attr("alpha", 1.67326319217681884765625))
    gamma = float(n.attr("gamma", 1.05070102214813232421875))
    y = _scaled_elu(b, n.input(0), alpha)
    return b.op("MUL", [y, b.const(np.float32(gamma))])


def _scaled_elu(b, x, alpha: float):
    """x where x > 0, else alpha * (exp(x) - 1): TFLite's ELU has alpha 1."""
    y = b.op("ELU", [x])
    if alpha == 1.0:
        return y
    negative = b.op("MUL", [y, b.const(np.float32(alpha))])
    positive = b.op("GREATER", [x, b.const(np.float32(0))], dtype="bool")
    return b.op("SELECT_V2", [positive, x, negative], dtype=b.dtype(x))


@lowers("Gelu")
def gelu(b, n):
    approximate = n.attr("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise n.fail(f"approximate={approximate!r} is not 'none' or 'tanh'")
    return b.op("GELU", [n.input(0)], {"approximate": approximate == "tanh"})


@lowers("Softplus")
def softplus(b, n):
    return softplus_of(b, n.input(0))


def softplus_of(b, x):
    """log(1 + exp(x)) as max(x, 0) + log(1 + exp(-|x|)): no overflow for large x."""
    one = b.const(np.float32(1))
    tail = b.op("LOG", [b.op("ADD", [b.op("EXP", [b.op("NEG", [b.op("ABS", [x])])]), one])])
    return b.op("ADD", [b.op("RELU", [x]), tail])


_CLAMPS = {(0.0, 6.0): "RELU6", (-1.0, 1.0): "RELU_N1_TO_1", (0.0, 1.0): "RELU_0_TO_1",
           (0.0, np.inf): "RELU"}


@lowers("Clip")
def clip(b, n):
    x = n.input(0)
    lo_t, hi_t = n.input(1), n.input(2)
    if n.opset < 11:  # bounds were attributes
        lo_t = b.const(np.float32(n.attr("min", -3.4028234663852886e38)))
        hi_t = b.const(np.float32(n.attr("max", 3.4028234663852886e38)))
    lo = None if lo_t < 0 else b.value(lo_t)
    hi = None if hi_t < 0 else b.value(hi_t)
    if b.dtype(x) == "float32" and (lo_t < 0 or lo is not None) and (hi_t < 0 or hi is not None):
        bounds = (-np.inf if lo is None else float(lo.reshape(())),
                  np.inf if hi is None else float(hi.reshape(())))
        if bounds in _CLAMPS:
            return b.op(_CLAMPS[bounds], [x])
    y = x
    if lo_t >= 0:
        y = b.op("MAXIMUM", [y, lo_t])
    if hi_t >= 0:
        y = b.op("MINIMUM", [y, hi_t])
    return y


@lowers("HardSigmoid")
def hard_sigmoid(b, n):
    """clip(alpha * x + beta, 0, 1); x * HardSigmoid(x) with alpha 1/6 becomes HARD_SWISH later."""
    x = n.input(0)
    alpha, beta = float(n.attr("alpha", 0.2)), float(n.attr("beta", 0.5))
    y = b.op("MUL", [x, b.const(np.float32(alpha))])
    y = b.op("ADD", [y, b.const(np.float32(beta))])
    return b.op("RELU_0_TO_1", [y])


# -- Cast ----------------------------------------------------------------------------------------

@lowers("Cast")
def cast(b, n):
    from onnx import helper

    from edgelite.schema import dtype_name
    to = int(n.attr("to"))
    try:
        dtype = dtype_name(helper.tensor_dtype_to_np_dtype(to))
    except (KeyError, ValueError, TypeError):
        raise n.fail(f"cannot cast to ONNX type {to}: .tflite has no such tensor type") from None
    x = n.input(0)
    return b.cast(x, dtype)


# Abramowitz & Stegun 7.1.26: |error| < 1.5e-7 for every x.
_ERF_P = 0.3275911
_ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


@lowers("Erf")
def erf(b, n):
    """No TFLite builtin computes erf: a polynomial in t = 1 / (1 + p|x|) times exp(-x^2).
    (x * (1 + erf(x / sqrt 2)) / 2 becomes one GELU before lowering.)"""
    x = n.input(0)
    c = lambda v: b.const(np.array(v, np.float32))  # noqa: E731
    t = b.op("DIV", [c(1.0), b.op("ADD", [b.op("MUL", [b.op("ABS", [x]), c(_ERF_P)]), c(1.0)])])
    poly = b.op("MUL", [t, c(_ERF_A[-1])])
    for a in reversed(_ERF_A[:-1]):
        poly = b.op("MUL", [b.op("ADD", [poly, c(a)]), t])
    gauss = b.op("EXP", [b.op("NEG", [b.op("MUL", [x, x])])])
    magnitude = b.op("SUB", [c(1.0), b.op("MUL", [poly, gauss])])
    return b.op("MUL", [b.op("SIGN", [x]), magnitude])
