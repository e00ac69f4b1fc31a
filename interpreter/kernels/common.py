"""Helpers shared by kernels: fused activations, padding arithmetic, broadcasting."""
from __future__ import annotations

import operator

import numpy as np

from edgelite.schema.ops import ACTIVATION_BOUNDS, Activation

try:  # the clip ufunc, without np.clip's Python wrapper (~3x cheaper per call); private in numpy 2
    from numpy._core.umath import clip
except ImportError:  # numpy < 2
    try:
        from numpy.core.umath import clip
    except ImportError:
        def clip(x, lo, hi, out=None):
            return np.clip(x, lo, hi, out=out)


def raw(function):
    """numpy's C function under an __array_function__ dispatcher (np.copyto, np.dot): one Python
    frame less a call (0.1 µs), for kernels' bound runs, whose arrays are plain ndarrays."""
    return getattr(function, "_implementation", function)


def clip_(x: np.ndarray, lo, hi) -> None:
    """x = clip(x, lo, hi) in place, with scalar bounds."""
    clip(x, lo, hi, out=x)


def bounds(lo, hi, dtype=np.float32) -> tuple:
    """A clamp's bounds as 0-d arrays of `dtype`: clip converts a Python number on every call
    (0.25 µs with 0-d arrays vs 0.7 µs with floats on a small tensor)."""
    return np.array(lo, dtype), np.array(hi, dtype)


# The fused activations' codes (ActivationFunctionType), by name.
NONE, RELU, RELU_N1_TO_1, RELU6 = Activation.NONE, Activation.RELU, Activation.RELU_N1_TO_1, \
    Activation.RELU6
TANH, SIGN_BIT, SIGMOID = Activation.TANH, Activation.SIGN_BIT, Activation.SIGMOID


def fused_activation(code: int, node=None):
    """An in-place function applying a fused activation to a float array, or None; a clamp
    carries its 0-d `bounds` (lo, hi).

    As TFLite's CalculateActivationRange: RELU, RELU6 and RELU_N1_TO_1 clamp; TANH, SIGN_BIT and
    SIGMOID fused into an op are ignored by its kernels (or refused at prepare), so here too."""
    code = int(code or 0)
    if code in ACTIVATION_BOUNDS:
        lo, hi = bounds(*ACTIVATION_BOUNDS[code])

        def clamp(x):
            clip(x, lo, hi, out=x)
        clamp.bounds = lo, hi   # for kernels that bind the clip into their own frame
        clamp.calls_on = _clip_calls(lo, hi)
        return clamp
    if code in (NONE, TANH, SIGN_BIT, SIGMOID):
        return None
    msg = f"unknown fused activation {code}"
    raise (node.fail(msg) if node is not None else ValueError(msg))


FLT_MAX = float(np.finfo(np.float32).max)


def clamp_activation(code, node, delegated: bool = False):
    """The fused activation of TFLite's float conv, fully-connected, pool and ADD_N kernels, as
    CalculateActivationRange: a clamp to RELU's [0, FLT_MAX], RELU_N1_TO_1's or RELU6's range,
    and for the other codes (NONE, TANH, SIGN_BIT, SIGMOID) to [-FLT_MAX, FLT_MAX]: an inf
    comes out +-3.4e38, NaN stays NaN (std::min / std::max as numpy's clip).

    `delegated`: the op runs in XNNPACK under LiteRT's default resolver (it takes NONE, RELU,
    RELU_N1_TO_1 and RELU6), whose range is unbounded: None for NONE, RELU unbounded above."""
    code = int(code or 0)
    if delegated and code in (NONE, RELU, RELU_N1_TO_1, RELU6):
        return fused_activation(code, node) if code in ACTIVATION_BOUNDS else None
    lo, hi = ACTIVATION_BOUNDS.get(code, (-FLT_MAX, FLT_MAX))
    lo, hi = bounds(lo, min(hi, FLT_MAX))

    def clamp(x):
        clip(x, lo, hi, out=x)
    clamp.bounds = lo, hi
    clamp.calls_on = _clip_calls(lo, hi)
    return clamp


def _clip_calls(lo, hi):
    """`calls_on(x)` of a clamp to 0-d (lo, hi): its calls on a fixed x (steps.calls_step)."""
    return lambda x: ((clip, (x, lo, hi, x), {}),)


def reference_resolver(node) -> bool:
    """Whether `node` runs under OpResolverType.BUILTIN_REF (or outside an interpreter)."""
    runtime = getattr(node, "runtime", None)
    return runtime is None or bool(getattr(runtime, "reference", True))


def sigmoid_(x: np.ndarray) -> None:
    """x = 1 / (1 + exp(-x)) in place."""
    np.negative(x, out=x)
    np.exp(x, out=x)
    np.add(x, 1.0, out=x)
    np.reciprocal(x, out=x)


def with_activation(compute, act):
    """`compute(*arrays)` followed by `act` on its last argument (the output), if any."""
    if act is None:
        return compute

    def run(*arrays):
        compute(*arrays)
        act(arrays[-1])
    return run


def activation_code(options) -> int:
    """The fused activation code (ActivationFunctionType) in an op's options: 0 (none) where the
    options have no such field or are None."""
    return int(getattr(options, "fused_activation_function", 0) or 0)


def fixed_view(a: np.ndarray, shape) -> np.ndarray | None:
    """`a` reshaped to `shape` as a view of its memory, for a kernel's `bind` (which computes
    through it on every invoke); None where the reshape would copy (`bind` then declines)."""
    view = a.view()
    try:
        view.shape = shape
    except (AttributeError, ValueError):
        return None
    return view


def bound_on_call(bind, what: str):
    """run(*arrays) for a kernel written as `bind(*arrays)` (a step of no arguments computing on
    those very arrays, or None where it cannot): the step is made at the first call and again
    when the arrays change, compared by identity (the step holds them, so they stay the same
    objects). `run.bind` is `bind`, which the plan calls at allocate (plan.bind_step)."""
    held = [(), None]    # the arrays bound, their step
    is_ = operator.is_

    def run(*args):
        arrays, step = held
        if len(args) != len(arrays) or not all(map(is_, args, arrays)):
            step = bind(*args)
            if step is None:
                raise ValueError(f"{what} needs contiguous arrays")
            held[:] = args, step
        step()
    run.bind = bind
    return run


def with_optional_inputs(node, run, count: int):
    """`run` takes all `count` inputs (None for omitted optional ones) then the output; adapt
    it to the number of inputs the operator has."""
    have = len(node.inputs)
    if have == count:
        return run
    missing = (None,) * (count - have)
    adapted = lambda *args: run(*args[:have], *missing, *args[have:])  # noqa: E731
    bind = getattr(run, "bind", None)
    if bind is not None:   # plan.bind_step: the kernel's bound form, the inputs adapted too
        adapted.bind = lambda *args: bind(*args[:have], *missing, *args[have:])
    return adapted


F32 = np.dtype(np.float32)


def check_float(node, *infos) -> None:
    """Fails unless every given tensor (None for an omitted input) is float32."""
    for t in infos:
        if t is not None and t.dtype != F32:
            raise node.fail(f"tensor {t.name!r} is {t.type_name}; this kernel takes float32")


def bias_epilogue(bias_info, act, out_rows, tile):
    """`tail(out, bias)` for a float convolution's output: adds the bias (input `bias_info`,
    constant or given while running; tiled `tile` times to fill the rows of the
    `out_rows`-shaped view of the output: one long inner loop instead of a broadcast) and
    applies the fused activation; None when there is nothing to do."""
    if bias_info is None and act is None:
        return None
    tiled = None
    if bias_info is not None:
        tiled = np.empty((tile, int(np.prod(bias_info.shape))), F32)
        if bias_info.data is not None:
            tiled[:] = np.reshape(bias_info.data, -1)
    runtime_bias = bias_info is not None and bias_info.data is None
    tiled_flat = None if tiled is None else tiled.reshape(-1)

    def tail(out, bias):
        rows = out.reshape(out_rows)
        if runtime_bias:
            np.copyto(tiled, bias)
        if tiled_flat is not None:
            np.add(rows, tiled_flat, out=rows)
        if act is not None:
            act(rows)

    def calls_on(out, bias):   # tail's calls on fixed arrays (steps.calls_step), or None
        rows = fixed_view(out, out_rows)
        acts = () if act is None else getattr(act, "calls_on", lambda _: None)(rows)
        if rows is None or acts is None:
            return None
        return ((raw(np.copyto), (tiled, bias), {}) if runtime_bias else None,
                None if tiled_flat is None else (np.add, (rows, tiled_flat, rows), {}), *acts)
    tail.calls_on = calls_on
    return tail


def broadcast_shape(node, *shapes) -> tuple:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise node.fail(f"input shapes {', '.join(str(list(s)) for s in shapes)} do not "
                        "broadcast") from None


def same_padding(in_size: int, kernel: int, stride: int, dilation: int = 1) -> tuple:
    """(output size, padding before) of TFLite's SAME padding."""
    effective = (kernel - 1) * dilation + 1
    out = (in_size + stride - 1) // stride
    total = max((out - 1) * stride + effective - in_size, 0)
    return out, total // 2


def valid_padding(in_size: int, kernel: int, stride: int, dilation: int = 1) -> tuple:
    effective = (kernel - 1) * dilation + 1
    return (in_size - effective + stride) // stride, 0


def conv_output(padding: int, in_size: int, kernel: int, stride: int, dilation: int = 1) -> tuple:
    """(output size, padding before) for the format's Padding value (0 SAME, 1 VALID)."""
    if padding == 0:
        return same_padding(in_size, kernel, stride, dilation)
    return valid_padding(in_size, kernel, stride, dilation)


# The dtypes that data-movement ops (reshape, transpose, slicing, ...) copy without arithmetic.
DATA_TYPES = ("float32", "float16", "int8", "uint8", "int16", "int32", "int64", "bool")


def constant_value(node, k: int, what: str) -> np.ndarray:
    """The value of input `k`, which must be known before running (a constant, or folded).

    Ops whose output shape depends on that value (RESHAPE's shape, TILE's multiples, ...) call
    this: edgelite plans every shape before running, so a value known only at run time fails."""
    t = node.input(k)
    if t.data is None and 0 in t.shape:  # an empty constant has no buffer to read
        return np.zeros(t.shape, t.dtype)
    if t.data is None:
        raise node.fail(f"{what} (input {k}, {t.name!r}) is not constant: its value is known only "
                        "at run time, and data-dependent shapes are not supported")
    return t.data


def known_at_run_time(node, *ks: int) -> bool:
    """True when any of these inputs is known only while running (not a constant, not empty)."""
    return any(node.input(k).data is None and 0 not in node.input(k).shape for k in ks)


def int_vector(node, k: int, what: str, value=None) -> list:
    """Input k's constant value as ints, or `value` (its value while running)."""
    t = node.input(k)
    if t.type_name not in ("int32", "int64"):
        raise node.fail(f"{what} must be int32 or int64, got {t.type_name}")
    value = constant_value(node, k, what) if value is None else value
    return [int(v) for v in np.asarray(value).reshape(-1)]


def normalize_axis(node, axis: int, rank: int, what: str = "axis") -> int:
    """`axis` in [-rank, rank) as a non-negative index; fails naming the op otherwise."""
    axis = int(axis)
    if not -rank <= axis < rank:
        raise node.fail(f"{what} {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def matmul_shape(node, a_shape, b_shape) -> tuple:
    """BATCH_MATMUL's shapes under the op's adj_x/adj_y options: (adj_x, adj_y, m, k, n, batch)
    for a [..., m, k] x [..., k, n] product; fails naming the op when the inputs do not fit."""
    adj_x = bool(getattr(node.options, "adj_x", False))
    adj_y = bool(getattr(node.options, "adj_y", False))
    if len(a_shape) < 2 or len(b_shape) < 2:
        raise node.fail(f"inputs {list(a_shape)} and {list(b_shape)} must have rank >= 2")
    m, k = (a_shape[-1], a_shape[-2]) if adj_x else (a_shape[-2], a_shape[-1])
    kb, n = (b_shape[-1], b_shape[-2]) if adj_y else (b_shape[-2], b_shape[-1])
    if k != kb:
        raise node.fail(f"inner dimensions differ: {list(a_shape)} (adj_x={adj_x}) times "
                        f"{list(b_shape)} (adj_y={adj_y})")
    return adj_x, adj_y, m, k, n, broadcast_shape(node, a_shape[:-2], b_shape[:-2])
