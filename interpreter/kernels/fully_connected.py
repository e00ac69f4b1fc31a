"""FULLY_CONNECTED and BATCH_MATMUL on float32: one BLAS matmul each, into the output."""
from __future__ import annotations

import numpy as np

from .common import (F32, SIGN_BIT, TANH, activation_code, bound_on_call, check_float,
                     clamp_activation, clip, fixed_view, matmul_shape, raw, reference_resolver)
from .steps import call, calls_step, step_calls
from .geometry import fully_connected_shape
from .registry import register


@register("FULLY_CONNECTED", "float32")
def fully_connected(node):
    node.expect_inputs(2, 3)
    x, w = node.input(0), node.input(1)
    b = node.optional_input(2)
    check_float(node, x, w, b)
    rows, units, depth = fully_connected_shape(node, w.shape)
    if b is not None and int(np.prod(b.shape)) != units:
        raise node.fail(f"bias shape {list(b.shape)} does not match {units} units")
    opts = node.options
    code = int(opts.fused_activation_function or 0)
    if code in (TANH, SIGN_BIT):  # as LiteRT: float FULLY_CONNECTED only clamps
        raise node.fail(f"fused activation {code} is not supported (only RELU, RELU_N1_TO_1 "
                        "and RELU6 are)")
    # XNNPACK takes a FULLY_CONNECTED of constant weights under LiteRT's default resolver
    act = clamp_activation(code, node, w.data is not None and not reference_resolver(node))
    const_w = w.data
    # One row: the transposed view (a GEMV, as fast); more: contiguous, which OpenBLAS's AVX-512
    # kernels run up to 2.4x faster. Made on first use: the converter prepares kernels only to
    # infer shapes, and a large model's weights copied there cost seconds.
    transposed = []

    def weights_t():
        if not transposed:
            transposed.append(const_w.T if rows == 1 else np.ascontiguousarray(const_w.T))
        return transposed[0]
    has_bias = b is not None

    def run(x, w, *rest):
        out = rest[-1]
        o2 = out.reshape(rows, units)
        np.matmul(x.reshape(rows, depth), weights_t() if const_w is not None else w.T, out=o2)
        if has_bias:
            np.add(o2, rest[0].reshape(units), out=o2)
        if act is not None:
            act(o2)

    def bind(x, w, *rest):   # the plan's arrays, fixed: views made once (plan.bind_step)
        x2, o2 = fixed_view(x, (rows, depth)), fixed_view(rest[-1], (rows, units))
        bias = fixed_view(rest[0], (1, units)) if has_bias else None
        if x2 is None or o2 is None or (has_bias and bias is None):
            return None
        if bias is not None and b.data is not None and 1 < rows <= TILED_BIAS_ELEMENTS // units:
            bias = np.tile(bias, (rows, 1))    # a broadcast add costs 0.45 µs more a call
        lims = None if act is None else act.bounds
        if rows == 1 and const_w is not None and const_w.flags.c_contiguous \
                and x2.flags.c_contiguous and o2.flags.c_contiguous:
            # A GEMV through np.dot: 0.4 µs less a call than matmul, the same BLAS sgemv
            return _bound_run(raw(np.dot), const_w, x2.reshape(depth), o2.reshape(units),
                              None if bias is None else bias.reshape(units), lims)
        return _bound_run(np.matmul, x2, weights_t() if const_w is not None else w.T, o2, bias,
                          lims)
    run.bind = bind
    return run


TILED_BIAS_ELEMENTS = 1 << 16   # a constant bias is tiled to all rows up to this many floats


def _bound_run(product, a, b, out, bias, lims):
    """FULLY_CONNECTED on fixed arrays, in one frame: product(a, b) into `out`, the bias added
    (`out`'s shape, or broadcast to it), the clamp (0-d bounds)."""
    lo, hi = lims or (None, None)
    return calls_step(call(product, a, b, out),
                      None if bias is None else call(np.add, out, bias, out),
                      None if lo is None else call(clip, out, lo, hi, out))


@register("BATCH_MATMUL", "float32")
def batch_matmul(node):
    node.expect_inputs(2)
    x, y = node.input(0), node.input(1)
    check_float(node, x, y)
    adj_x, adj_y, m, _, n, batch = matmul_shape(node, x.shape, y.shape)
    node.outputs[0].shape = tuple(batch) + (m, n)

    def run(x, y, out):
        np.matmul(x.swapaxes(-1, -2) if adj_x else x, y.swapaxes(-1, -2) if adj_y else y,
                  out=out)
    run.bind = lambda x, y, out: calls_step(call(   # the swapped views made once
        np.matmul, x.swapaxes(-1, -2) if adj_x else x, y.swapaxes(-1, -2) if adj_y else y, out))
    return run


def with_producer(producer, shape, node):
    """FULLY_CONNECTED of one row fused with the op that makes its input (plan fusion,
    issue 17): run(*the producer's inputs, out) or None. The producer (its prepared `run`,
    output `shape`) writes straight into the head of a buffer [x..., 1], and the weights carry
    the bias as their last column, so the layer is one GEMV: no bias pass, no input copy."""
    x, w, b = node.input(0), node.input(1), node.optional_input(2)
    code = activation_code(node.options)
    if w.data is None or b is None or b.data is None or w.dtype != F32 or b.dtype != F32 \
            or x.dtype != F32 or len(w.shape) != 2 or code in (TANH, SIGN_BIT) \
            or int(np.prod(x.shape)) != w.shape[1] or int(np.prod(shape)) != w.shape[1]:
        return None
    units, depth = w.shape
    act = clamp_activation(code, node, not reference_resolver(node))
    lo, hi = (None, None) if act is None else act.bounds
    ext = np.zeros(depth + 1, F32)
    ext[depth] = 1.0
    head = ext[:depth].reshape(shape)
    weights = np.ascontiguousarray(np.concatenate(
        [w.data, np.asarray(b.data, F32).reshape(units, 1)], axis=1), dtype=F32)
    dot = raw(np.dot)

    def bind(*args):
        *ins, out = args
        o1 = fixed_view(out, (units,))
        if o1 is None or not o1.flags.c_contiguous:
            return None
        produce = getattr(producer, "bind", lambda *_: None)(*ins, head)
        if produce is None:
            produce = lambda: producer(*ins, head)   # noqa: E731

        # the producer's calls written out in this step's (steps.step_calls): one frame
        # for the whole chain (none in the plan's run_steps) instead of one per layer
        run = calls_step(*step_calls(produce), call(dot, weights, ext, o1),
                         None if lo is None else call(clip, o1, lo, hi, o1))
        run.taken = getattr(produce, "taken", None)   # a gathering producer's (conv.py)
        run.copies = getattr(produce, "copies", None)
        return run
    fused = bound_on_call(bind, "the fused FULLY_CONNECTED")
    fused.input_tail = getattr(producer, "input_tail", None)   # the producer's inputs' (plan)
    return fused
