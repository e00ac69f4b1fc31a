"""Binary elementwise ops with broadcasting: arithmetic (with fused activations), comparisons,
logical ops, SELECT and SELECT_V2.

Each `prepare` checks that the shapes broadcast, sets the output shape and returns a `run` that
calls prebound ufuncs with `out=`. Float ops compute in float32 as TFLite's reference kernels
do; integer ops follow TFLite's C++ where it differs from numpy (DIV truncates toward zero).
"""
from __future__ import annotations

import numpy as np

from edgelite.schema.ops import ACTIVATION_BOUNDS

from .common import (FLT_MAX, activation_code, bounds, broadcast_shape, clip, fixed_view, raw,
                     reference_resolver, with_activation)
from .steps import call, calls_step, source_step
from .registry import register

FLOAT = ("float32",)
INTS = ("int32", "int64", "uint64")   # uint64: edgelite only (ONNX); wraps as numpy and C++ do

_INT_BOUNDS = {1: (0, None), 2: (-1, 1), 3: (0, 6)}  # RELU, RELU_N1_TO_1, RELU6


def activation_bounds(node, dtype):
    """(lo, hi) of `node`'s fused activation for outputs of `dtype`, as 0-d arrays of it (None
    when there is none).

    As TFLite's CalculateActivationRange: RELU, RELU_N1_TO_1 and RELU6 clamp (integers too);
    TANH, SIGN_BIT and SIGMOID leave the values unchanged in these kernels. Float32 under
    BUILTIN_REF: every code clamps, NONE, TANH, SIGN_BIT and SIGMOID to [-FLT_MAX, FLT_MAX], RELU
    to [0, FLT_MAX] (an inf comes out +-3.4e38); under the default resolver XNNPACK takes NONE,
    RELU, RELU_N1_TO_1, RELU6 and SIGMOID (unbounded: inf stays inf), the optimized kernels
    TANH and SIGN_BIT (clamped to +-FLT_MAX)."""
    code = activation_code(node.options)
    if np.dtype(dtype) == np.float32 and code in (0, 1, 4, 5, 6) \
            and (code in (4, 5) or reference_resolver(node)):
        return bounds(0.0 if code == 1 else -FLT_MAX, FLT_MAX, dtype)
    if code in (0, 4, 5, 6):
        return None
    if code not in _INT_BOUNDS:   # the codes of ACTIVATION_BOUNDS too
        raise node.fail(f"unknown fused activation {code}")
    if np.dtype(dtype).kind == "f":
        return bounds(*ACTIVATION_BOUNDS[code], dtype)
    lo, hi = _INT_BOUNDS[code]
    return bounds(lo, int(np.iinfo(dtype).max) if hi is None else hi, dtype)


def activation_for(node, dtype):
    """The in-place fused activation of `node` for outputs of `dtype` (None when there is
    none): a clamp to `activation_bounds`."""
    lims = activation_bounds(node, dtype)
    if lims is None:
        return None
    lo, hi = lims
    return lambda x: clip(x, lo, hi, out=x)


# numpy deprecates a positional `out` for these two only; every other ufunc takes it
# positionally (0.05 µs a call cheaper than the keyword).
_OUT_KEYWORD = (np.maximum, np.minimum)
# Outputs of at most this many elements are computed into a scratch array and clamped into the
# output: numpy's in-place call on a one-element array takes its slow path (0.9 µs vs 0.25).
SCRATCH_ELEMENTS = 1


def prepare_binary(node, same_types: bool = True):
    """Check a two-input op, set its broadcast output shape; returns the two inputs."""
    node.expect_inputs(2)
    a, b = node.input(0), node.input(1)
    if same_types and a.dtype != b.dtype:
        raise node.fail(f"input types differ: {a.type_name} and {b.type_name}")
    node.outputs[0].shape = broadcast_shape(node, a.shape, b.shape)
    return a, b


def binary(ufunc, fused: bool = False, check=prepare_binary):
    """A kernel computing `ufunc(a, b)`, then the op's fused activation if it has one;
    `check(node)` validates the inputs and sets the output's shape. One Python frame a call:
    the clamp is bound into the kernel's closure; bound at allocate, none (its calls are
    written into the plan's run_steps)."""
    def prepare(node):
        check(node)
        lims = activation_bounds(node, node.input(0).dtype) if fused else None
        run = binary_run(ufunc, lims, node.outputs[0])
        scalar = _PYTHON_OPS.get(ufunc) if node.outputs[0].dtype == np.float32 and all(
            int(np.prod(t.shape)) == 1 for t in (*node.inputs, node.outputs[0])) else None
        constants = [t.data for t in node.inputs]

        def make(a, b, out):
            step = None if scalar is None else python_binary(scalar, a, b, out, constants, lims)
            return step if step is not None else bound_binary(ufunc, lims, a, b, out)
        run.bind = bind_operands(node, make)
        return run
    return prepare


# One-element float32 ops computed on Python floats (double), rounded to float32 once when
# stored: exactly numpy's float32 result (a sum, difference or product of two float32 values
# rounded from double is the correctly rounded float32 one: 53 >= 2 * 24 + 2 bits), at ~0.08
# µs a step against 0.25 µs a ufunc call (0.5 with a fused clamp).
_PYTHON_OPS = {np.add: "+", np.subtract: "-", np.multiply: "*"}


def python_binary(op: str, a, b, out, constants, lims):
    """A one-element float32 `a op b` (then the clamp to `lims`) as one line of Python on
    memoryviews of the arrays (steps.source_step); a constant operand is read once, as a
    Python float. The clamp as clip's: NaN stays, -0.0 stays -0.0 at a lower bound 0 (the
    stored value read back first: a product rounding to -0.0 is -0.0 there); None where an
    array is not a plain float32 one."""
    objects, terms = {}, []
    for k, (arr, data) in enumerate(zip((a, b), constants)):
        if data is not None:
            objects[f"v{k}"] = float(np.asarray(data, np.float32).reshape(-1)[0])
            terms.append(f"{{v{k}}}")
            continue
        view = fixed_view(arr, (1,))
        if view is None or view.dtype != np.float32:
            return None
        objects[f"v{k}"] = memoryview(view)
        terms.append(f"{{v{k}}}[0]")
    view = fixed_view(out, (1,))
    if view is None or view.dtype != np.float32:
        return None
    objects["out"] = memoryview(view)
    line = f"{{out}}[0] = {terms[0]} {op} {terms[1]}"
    if lims is not None:
        lo, hi = (float(v) for v in lims)
        if lo == 0.0:
            line += "; v = {out}[0]"
        else:
            line = line.replace("{out}[0] = ", "v = ")
        clamp = "v"
        if hi != np.inf:
            objects["hi"] = hi
            clamp = f"({{hi}} if v > {{hi}} else {clamp})"
        if lo != -np.inf:
            objects["lo"] = lo
            clamp = f"{{lo}} if v < {{lo}} else {clamp}"
        line += f"; {{out}}[0] = {clamp}"
    return source_step(line, **objects)


# A constant operand that broadcasts is tiled to the output's shape, up to this many elements.
TILE_ELEMENTS = 1 << 14


def operand_views(x, y, out, constant):
    """(x, y) as operands of `out`'s shape or 0-d (one element) for a bound run, or (x, y)
    themselves where nothing is gained (the same shapes, a one-element output) or it would
    copy a runtime value: numpy's broadcasting costs ~0.5 µs a call ((1, 32) * (1, 1): 0.68 µs;
    as (1, 32) * 0-d: 0.24)."""
    if x.shape == y.shape or out.size <= SCRATCH_ELEMENTS:
        return x, y
    views = []
    for a, const in zip((x, y), constant):
        if a.shape == out.shape:
            views.append(a)
        elif a.size == 1:
            views.append(fixed_view(a, ()))
        elif const and out.size <= TILE_ELEMENTS:
            views.append(np.ascontiguousarray(np.broadcast_to(a, out.shape)))
        else:
            views.append(a)
    return (x, y) if views[0] is None or views[1] is None else views


def bind_operands(node, make):
    """A binary kernel's `bind` (plan.bind_step): `make(a, b, out)`, the run on the plan's fixed
    arrays with `operand_views` for operands (no broadcasting where it pays to avoid)."""
    constant = [t.data is not None for t in node.inputs]

    def bind(x, y, out):
        return make(*operand_views(x, y, out, constant), out)
    return bind


def bound_binary(ufunc, lims, a, b, out):
    """`binary`'s run on the plan's arrays, as plain calls (steps.calls_step): operands `a`,
    `b` of `out`'s shape, 0-d, or broadcasting; a clamped one-element output through a
    scratch array (numpy's in-place call on one element takes its slow path: 0.74 vs 0.24 µs)."""
    if lims is None:
        return calls_step(call(ufunc, a, b, out=out) if ufunc in _OUT_KEYWORD
                          else call(ufunc, a, b, out))
    lo, hi = lims
    into = np.empty(out.shape, out.dtype) if out.size <= SCRATCH_ELEMENTS else out
    return calls_step(call(ufunc, a, b, out=into) if ufunc in _OUT_KEYWORD
                      else call(ufunc, a, b, into), call(clip, into, lo, hi, out))


def binary_run(ufunc, lims, out_info):
    """`run(x, y, out)`: out = ufunc(x, y), clamped to `lims` (0-d (lo, hi), or None)."""
    if lims is None:
        if ufunc in _OUT_KEYWORD:
            def run(x, y, out):
                ufunc(x, y, out=out)
        else:
            def run(x, y, out):
                ufunc(x, y, out)
        return run
    lo, hi = lims
    if int(np.prod(out_info.shape)) <= SCRATCH_ELEMENTS:
        scratch = np.empty(out_info.shape, out_info.dtype)

        def run(x, y, out):
            ufunc(x, y, out=scratch)
            clip(scratch, lo, hi, out)
        return run

    def run(x, y, out):
        ufunc(x, y, out=out)
        clip(out, lo, hi, out)
    return run


register("ADD", *FLOAT, *INTS)(binary(np.add, fused=True))
register("SUB", *FLOAT, *INTS)(binary(np.subtract, fused=True))
register("MUL", *FLOAT, *INTS)(binary(np.multiply, fused=True))
register("MAXIMUM", *INTS)(binary(np.maximum))
register("MINIMUM", *INTS)(binary(np.minimum))


def _litert_extremum(node):
    """Float MAXIMUM / MINIMUM as TFLite's el1 > el2 ? el1 : el2 (< for MINIMUM): a NaN first
    operand gives the second, a NaN second operand gives NaN (numpy's maximum propagates both),
    in two calls, both exact: fmax(x, y) (NaN only where both are; y where x is NaN), then
    clip(that, y, inf) (clip's max propagates a NaN y; otherwise the larger of the two, as
    el1 > el2 ? el1 : el2, signed zeros too). MINIMUM: fmin, then clip(that, -inf, y).
    (Was maximum, then a NaN search by one reduction more: 0.36 + 0.86 µs a call on one
    element; fmax and clip take `out` positionally, 0.1 µs less than maximum's keyword.)"""
    prepare_binary(node)
    first = np.fmax if node.op == "MAXIMUM" else np.fmin
    inf = np.array(np.inf, np.float32)
    shape = node.outputs[0].shape
    scratch = np.empty(shape, np.float32) if int(np.prod(shape)) <= SCRATCH_ELEMENTS else None

    def bounds_of(y):
        return (y, inf) if node.op == "MAXIMUM" else (-inf, y)

    def run(x, y, out):
        into = out if scratch is None else scratch
        first(x, y, into)
        clip(into, *bounds_of(y), out)

    def make(a, b, out):
        into = np.empty(out.shape, out.dtype) if out.size <= SCRATCH_ELEMENTS else out
        return calls_step(call(first, a, b, into), call(clip, into, *bounds_of(b), out))
    run.bind = bind_operands(node, make)
    return run


register("MAXIMUM", *FLOAT)(_litert_extremum)
register("MINIMUM", *FLOAT)(_litert_extremum)
register("FLOOR_MOD", *FLOAT, *INTS)(binary(np.remainder))


@register("DIV", *FLOAT, *INTS)  # int64, uint64: edgelite only (ONNX)
def div(node):
    a, _ = prepare_binary(node)
    act = activation_for(node, a.dtype)
    if a.dtype.kind == "u":     # unsigned: truncation is the floor
        def compute(x, y, out):
            np.floor_divide(x, y, out=out)
        return with_activation(compute, act)
    if a.dtype.kind == "f":
        def compute(x, y, out):
            np.divide(x, y, out=out)
        run = with_activation(compute, act)
        lims = activation_bounds(node, a.dtype)
        run.bind = bind_operands(node, lambda x, y, out: bound_binary(np.divide, lims, x, y, out))
        return run
    return with_activation(_truncating_divide(a.dtype, node.outputs[0].shape), act)


def _truncating_divide(dtype, shape):
    """x / y rounded toward zero as in C++: numpy's floor division, plus one where the division
    is inexact and the quotient negative."""
    rem = np.empty(shape, dtype)
    inexact = np.empty(shape, np.bool_)
    negative = np.empty(shape, np.bool_)
    floor_divide, remainder, not_equal, less, logical_and, add = (
        np.floor_divide, np.remainder, np.not_equal, np.less, np.logical_and, np.add)

    def compute(x, y, out):
        floor_divide(x, y, out=out)
        remainder(x, y, out=rem)
        not_equal(rem, 0, out=inexact)
        less(out, 0, out=negative)
        logical_and(inexact, negative, out=inexact)
        add(out, inexact, out=out, casting="unsafe")
    return compute


@register("FLOOR_DIV", *FLOAT, "int32", "int64")  # int64: edgelite only (ONNX)
def floor_div(node):
    a, _ = prepare_binary(node)
    if a.dtype.kind != "f":
        def compute(x, y, out):
            np.floor_divide(x, y, out=out)
        return compute

    # TFLite computes floor(double(x) / double(y)); float32 division rounds 1 / 0.1 up to 10.
    quotient = np.empty(node.outputs[0].shape, np.float64)

    def compute(x, y, out):
        np.divide(x, y, out=quotient, dtype=np.float64)
        np.floor(quotient, out=quotient)
        np.copyto(out, quotient, casting="same_kind")
    compute.bind = lambda x, y, out: calls_step(
        call(np.divide, x, y, out=quotient, dtype=np.float64), call(np.floor, quotient, quotient),
        call(raw(np.copyto), out, quotient, casting="same_kind"))
    return compute


@register("SQUARED_DIFFERENCE", *FLOAT, "int32")
def squared_difference(node):
    prepare_binary(node)
    subtract, multiply = np.subtract, np.multiply

    def compute(x, y, out):
        subtract(x, y, out)
        multiply(out, out, out)

    compute.bind = bind_operands(
        node, lambda a, b, out: lambda: (subtract(a, b, out), multiply(out, out, out)))
    return compute


@register("POW", *FLOAT, "int32", "int64")  # int64: edgelite only (ONNX)
def pow(node):
    a, b = prepare_binary(node)
    if a.dtype.kind != "f" and b.data is not None and (b.data < 0).any():
        raise node.fail("an integer POW needs non-negative exponents")

    def compute(x, y, out):
        np.power(x, y, out=out)
    compute.bind = bind_operands(node, lambda x, y, out: calls_step(call(np.power, x, y, out)))
    return compute


# -- comparisons and logic ---------------------------------------------------------------------

_ORDERED = ("float32", "int32", "int64", "uint64")
register("LESS", *_ORDERED)(binary(np.less))
register("LESS_EQUAL", *_ORDERED)(binary(np.less_equal))
register("GREATER", *_ORDERED)(binary(np.greater))
register("GREATER_EQUAL", *_ORDERED)(binary(np.greater_equal))
register("EQUAL", *_ORDERED, "bool")(binary(np.equal))
register("NOT_EQUAL", *_ORDERED, "bool")(binary(np.not_equal))
register("LOGICAL_AND", "bool")(binary(np.logical_and))
register("LOGICAL_OR", "bool")(binary(np.logical_or))


@register("LOGICAL_NOT", "bool")
def logical_not(node):
    node.expect_inputs(1)
    node.outputs[0].shape = node.input(0).shape

    def compute(x, out):
        np.logical_not(x, out=out)
    return compute


@register("SELECT", "bool")
def select(node):
    """TFLite's SELECT: a condition of x's shape, a scalar, or a vector choosing rows of x."""
    node.expect_inputs(3)
    cond, x, y = node.input(0), node.input(1), node.input(2)
    if x.shape != y.shape:
        raise node.fail(f"x and y must have the same shape, got {list(x.shape)} and "
                        f"{list(y.shape)}")
    if cond.shape == x.shape or len(cond.shape) == 0:
        view = cond.shape
    elif len(cond.shape) == 1 and len(x.shape) >= 1 and cond.shape[0] == x.shape[0]:
        view = (cond.shape[0],) + (1,) * (len(x.shape) - 1)
    else:
        raise node.fail(f"condition shape {list(cond.shape)} must be x's {list(x.shape)}, a "
                        "scalar, or a vector of x's first dimension")
    node.outputs[0].shape = x.shape
    return _select_run(node, view)


@register("SELECT_V2", "bool")
def select_v2(node):
    node.expect_inputs(3)
    cond, x, y = node.input(0), node.input(1), node.input(2)
    node.outputs[0].shape = broadcast_shape(node, cond.shape, x.shape, y.shape)
    return _select_run(node, cond.shape)


def _select_run(node, cond_view):
    """out = cond ? x : y as a bitwise blend, y ^ ((x ^ y) & -cond), on the values' bits: exact
    for every type (inf and NaN included) and 20x faster than a masked copy on random masks."""
    x, y = node.input(1), node.input(2)
    if x.dtype != y.dtype or x.dtype != node.outputs[0].dtype:
        raise node.fail(f"x, y and the output must have one type, got {x.type_name}, "
                        f"{y.type_name} and {node.outputs[0].type_name}")
    bits = np.dtype(f"u{x.dtype.itemsize}")
    mask = np.empty(cond_view, bits)
    ones = bits.type(-1 % (1 << (8 * bits.itemsize)))
    multiply, xor, and_ = np.multiply, np.bitwise_xor, np.bitwise_and

    def run(c, x, y, out):
        multiply(c.reshape(cond_view), ones, out=mask, dtype=bits)
        o = out.view(bits)
        yb = y.view(bits)
        xor(x.view(bits), yb, out=o)
        and_(o, mask, out=o)
        xor(o, yb, out=o)
    return run
