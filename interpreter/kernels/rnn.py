"""Recurrent ops with their state in variable tensors (kept across invokes, as TFLite keeps
them): RNN (one step), UNIDIRECTIONAL_SEQUENCE_RNN, BIDIRECTIONAL_SEQUENCE_RNN and SVDF.

A step is h = activation(x W^T + aux W_aux^T + h R^T + b), where the activation is any fused
activation of the format (RELU, RELU_N1_TO_1, RELU6, TANH, SIGN_BIT: 1 where negative, else 0).
Float32 weights, or int8 weights with float activations (hybrid, as LiteRT's RnnBatchStep and
EvalHybridSVDF: each product quantizes its float rows to int8 on the fly, symmetrically or, with
`asymmetric_quantize_inputs`, asymmetrically, and scales the exact integer sums by row scale *
weight scale). SVDF also runs fully quantized (int8 input and output, int16 state).
"""
from __future__ import annotations

import numpy as np

from .common import clip_, raw
from .eigen_math import eigen_tanh_
from .hybrid import (dequantize_rows, dequantized_weights, quantize_rows_asymmetric,
                     quantize_rows_symmetric)
from .fixed_point import mbqm, quantize_multiplier, wrap32
from .geometry import batch_major, sequence_input
from .registry import register
from .requantize import exact_rounding
from .rnn_cells import OutputRows, narrow

F32 = np.float32


def _signbit(v):
    v[...] = np.signbit(v)


def _tanh(v):
    np.tanh(v, v)


_tanh.ufunc = np.tanh   # _recurrence calls it directly: no Python frame a step


def bidirectional_outputs(node, merge: bool, lead: tuple, fw: int, bw: int) -> None:
    """Set the outputs of a bidirectional sequence op: one [.., fw + bw] output when the
    directions are merged, else one per direction."""
    n_outs = 1 if merge else 2
    if len(node.outputs) != n_outs:
        raise node.fail(f"expected {n_outs} outputs (merge_outputs={merge}), got "
                        f"{len(node.outputs)}")
    if merge:
        node.outputs[0].shape = lead + (fw + bw,)
    else:
        node.outputs[0].shape = lead + (fw,)
        node.outputs[1].shape = lead + (bw,)


def bidirectional_views(outs, merge: bool, fw_size: int, time_major: bool) -> tuple:
    """The forward and backward directions' outputs as [batch, time, units] views: the two
    halves of the one merged output, or the two outputs."""
    first = batch_major(outs[0], time_major)
    if merge:
        return first[..., :fw_size], first[..., fw_size:]
    return first, batch_major(outs[1], time_major)


def rnn_activation(node, code):
    """The in-place activation of TFLite's ApplyActivationToVector for fused code `code`. The
    format has no code 6 (SIGMOID exists only inside TFLite): LiteRT reads it as NONE. TANH
    under BUILTIN_REF is Eigen's, as LiteRT's (eigen_math.py); numpy's by default."""
    code = int(code or 0)
    bounds = {1: (0.0, np.inf), 2: (-1.0, 1.0), 3: (0.0, 6.0)}
    if code in bounds:
        lo, hi = bounds[code]
        return lambda v: clip_(v, lo, hi)
    table = {0: lambda v: None, 4: eigen_tanh_ if exact_rounding(node) else _tanh,
             5: _signbit, 6: lambda v: None}
    if code not in table:
        raise node.fail(f"unknown fused activation {code}")
    return table[code]


class Product:
    """rows @ W^T for the weights input k: a float matrix product, or for int8 weights LiteRT's
    hybrid product (rows quantized on the fly, exact integer sums, float scaling; under the
    default resolver the float product of the rows dequantized and the weights dequantized at
    prepare, as the other hybrid kernels)."""

    def __init__(self, node, k: int):
        t = node.input(k)
        self.hybrid = t.type_name == "int8"
        if t.type_name not in ("float32", "int8"):
            raise node.fail(f"weights {t.name!r} must be float32 or int8, got {t.type_name}")
        if self.hybrid:
            q = t.quantization
            if t.data is None or q is None or q.scale.size != 1:
                raise node.fail(f"int8 weights {t.name!r} must be constant, with one scale")
            self.asymmetric = bool(getattr(node.options, "asymmetric_quantize_inputs", False))
            # the default resolver's: rows quantized and dequantized, weights dequantized once;
            # BUILTIN_REF's exact sums: the integer weights in float64, the scale apart
            self.dequantized = None if exact_rounding(node) else \
                np.ascontiguousarray(dequantized_weights(t.data, q.scale, 0).T)
            if self.dequantized is None:
                self.w = np.ascontiguousarray(t.data.astype(np.float64).T)
                self.scale = F32(q.scale[0])
            self.buffers = {}

    def _buffers(self, shape: tuple) -> tuple:
        """(the dequantized rows, the product) for rows of `shape`, made on first use."""
        found = self.buffers.get(shape)
        if found is None:
            found = self.buffers[shape] = (np.empty(shape, F32),
                                           np.empty((shape[0], self.dequantized.shape[1]), F32))
        return found

    def __call__(self, rows: np.ndarray, w: np.ndarray) -> np.ndarray:
        """rows @ W^T; on the default hybrid path into buffers made once per rows' shape (the
        result is read before the next call: a step's product, or the input projection)."""
        if not self.hybrid:
            return rows @ w.T
        rows = np.ascontiguousarray(rows, F32)
        if self.dequantized is not None:
            q, out = self._buffers(rows.shape)
            dequantize_rows(rows, q, self.asymmetric)
            np.matmul(q, self.dequantized, out)
            return out
        q, half = np.empty_like(rows), np.empty_like(rows)
        scales = np.empty(rows.shape[0], F32)
        if self.asymmetric:
            offsets = np.empty(rows.shape[0], F32)
            quantize_rows_asymmetric(rows, q, scales, offsets, half, centered=True)
        else:
            quantize_rows_symmetric(rows, q, scales, half)
        acc = (q.astype(np.float64) @ self.w).astype(F32)
        acc *= (scales * self.scale)[:, None]
        return acc


def _weights(node, w: int, r: int, b: int, n_input: int):
    """(units, input product, recurrent product) after checking weights [units, n_input],
    recurrent weights [units, units] and a float32 bias [units]."""
    wt, rt, bt = node.input(w), node.input(r), node.input(b)
    units = wt.shape[0] if len(wt.shape) == 2 else -1
    if tuple(wt.shape) != (units, n_input) or tuple(rt.shape) != (units, units) \
            or tuple(bt.shape) != (units,):
        raise node.fail(f"weights {list(wt.shape)}, recurrent weights {list(rt.shape)} and bias "
                        f"{list(bt.shape)} do not fit an input of size {n_input}")
    if bt.type_name != "float32":
        raise node.fail(f"bias {bt.name!r} must be float32, got {bt.type_name}")
    return units, Product(node, w), Product(node, r)


def _state(node, k: int, shape: tuple):
    s = node.input(k)
    if tuple(s.shape) != shape:
        raise node.fail(f"state input {k} has shape {list(s.shape)}, expected {list(shape)}")
    return s


def run_sequence(xs, w, r, b, h, out, act, products, aux=None, aux_w=None, reverse=False,
                 rows=None):
    """h over the steps of xs [batch, time, input] (out [batch, time, units], a view): the
    input products of all steps at once, then the recurrence step by step. `products`:
    (input, recurrent, aux) Product objects; `rows`: out's per-step views when the caller keeps
    them (rnn_cells.OutputRows)."""
    x_prod, r_prod, aux_prod = products
    batch, steps = xs.shape[:2]
    z = x_prod(xs.reshape(batch * steps, -1), w).reshape(batch, steps, -1)
    z += b
    if aux is not None:
        z += aux_prod(aux.reshape(batch * steps, -1), aux_w).reshape(batch, steps, -1)
    order = range(steps - 1, -1, -1) if reverse else range(steps)
    if r_prod.hybrid or h.dtype != F32 or not h.flags.c_contiguous:
        for t in order:
            step = z[:, t]
            step += r_prod(h, r)
            act(step)
            h[...] = step
            out[:, t] = step
        return
    # Float: each step's h into its output row (_recurrence), weights transposed once per run.
    if rows is None:
        rows = [out[:, t] for t in range(steps)]
    _recurrence(h, np.ascontiguousarray(r.T, F32), np.empty(h.shape, F32),
                [rows[t] for t in order], [z[:, t] for t in order], act)


def _recurrence(h, rt, product, rows, z_rows, act) -> None:
    """The float recurrence: per step h R^T (rt: R transposed) by np.dot into `product` (on a
    row a fraction of `@`'s call cost), plus the step's input product z_rows[t] into its output
    row rows[t], the activation in place (its ufunc called directly where it has one: no Python
    frame a step); each step reads the row before, the state h takes the last row once."""
    ufunc = getattr(act, "ufunc", None)
    prev = h
    for row, zt in zip(rows, z_rows):
        np.dot(prev, rt, product)
        np.add(product, zt, row)
        if ufunc is not None:
            ufunc(row, row)
        else:
            act(row)
        prev = row
    if prev is not h:
        np.copyto(h, prev)


@register("RNN", "float32")
def rnn(node):
    node.expect_inputs(5)
    x = node.input(0)
    if len(x.shape) != 2:
        raise node.fail(f"input must be [batch, input], got {list(x.shape)}")
    units, x_prod, r_prod = _weights(node, 1, 2, 3, x.shape[1])
    _state(node, 4, (x.shape[0], units))
    node.outputs[0].shape = (x.shape[0], units)
    act = rnn_activation(node, node.options.fused_activation_function)
    products = (x_prod, r_prod, None)

    def run(a, w, r, b, h, out):
        run_sequence(a[:, None], w, r, b, h, out[:, None], act, products)
    return run


@register("UNIDIRECTIONAL_SEQUENCE_RNN", "float32")
def unidirectional_sequence_rnn(node):
    node.expect_inputs(5)
    x, time_major, batch = sequence_input(node)
    units, x_prod, r_prod = _weights(node, 1, 2, 3, x.shape[2])
    _state(node, 4, (batch, units))
    node.outputs[0].shape = tuple(x.shape[:2]) + (units,)
    act = rnn_activation(node, node.options.fused_activation_function)
    products = (x_prod, r_prod, None)
    out_rows = OutputRows(time_major)
    fast = _constant_float_sequence(node, x, time_major, batch, units, act, out_rows)
    if fast is not None:
        return fast

    def run(a, w, r, b, h, out):
        run_sequence(batch_major(a, time_major), w, r, b, h, batch_major(out, time_major), act,
                     products, rows=out_rows(out))
    return run


def _constant_float_sequence(node, x, time_major, batch, units, act, out_rows):
    """UNIDIRECTIONAL_SEQUENCE_RNN with constant float32 weights and bias, prepared once: the
    weights transposed, the input product of every step in one GEMM into a buffer made here.
    The default resolver's TANH over a narrow input (rnn_cells.narrow: a GEMV over
    [h, x, 1] costs less than the GEMM and a sum a step) takes two numpy calls a step
    (_stacked_tanh); otherwise
    (BUILTIN_REF, other activations) per step np.dot into one buffer, the sum into the step's
    output row, the activation (run_sequence's float loop, without its per-invoke transposes
    and allocations). None where the general run is needed."""
    ws = [node.input(k) for k in (1, 2, 3)]
    if any(t.data is None or t.type_name != "float32" for t in ws):
        return None
    wt, rt = (np.ascontiguousarray(np.asarray(t.data, F32).T) for t in ws[:2])
    bias = np.asarray(ws[2].data, F32)
    steps = x.shape[0] if time_major else x.shape[1]
    if act is _tanh and not exact_rounding(node) and narrow(wt.shape[0], units):
        return _stacked_tanh(wt, rt, bias, steps, batch, units, time_major)
    z = np.zeros((batch, steps, units), F32)
    z_rows = [z[:, t] for t in range(steps)]
    product = np.zeros((batch, units), F32)

    def run(a, w, r, b, h, out):
        np.matmul(batch_major(a, time_major), wt, z)
        np.add(z, bias, z)
        _recurrence(h, rt, product, out_rows(out), z_rows, act)
    return run


def _stacked_tanh(wt, rt, bias, steps: int, batch: int, units: int, time_major: bool):
    """The TANH recurrence in two numpy calls a step: v[t] holds [h_{t-1}, x_t, 1] per batch
    row, so one product with [[R^T], [W^T], [b]] gives h R^T + x_t W^T + b (the sum's order is
    BLAS's; no input projection of its own) and tanh writes h_t into v[t + 1]; the outputs take
    v's h rows in one copy after the loop."""
    n_in = wt.shape[0]
    v = np.zeros((steps + 1, batch, units + n_in + 1), F32)
    v[..., -1] = 1
    m = np.ascontiguousarray(np.concatenate([rt, wt, bias[None]]), F32)
    xs, hs = v[:steps, :, units:units + n_in], v[1:, :, :units]
    if not time_major:   # the input's and the output's layout, viewed once
        xs, hs = xs.transpose(1, 0, 2), hs.transpose(1, 0, 2)
    product = np.zeros((batch, units), F32)
    # per step: v[t]'s bound dot (a method call: half np.dot's dispatch) and the row tanh fills
    loop = [(v[t].dot, v[t + 1, :, :units]) for t in range(steps)]

    h_first, h_last = v[0, :, :units], v[steps, :, :units]
    copyto = raw(np.copyto)

    def run(a, w, r, b, h, out):
        copyto(xs, a)
        copyto(h_first, h)
        tanh = np.tanh
        for dot, row in loop:
            dot(m, product)
            tanh(product, row)
        copyto(out, hs)
        copyto(h, h_last)
    return run


@register("BIDIRECTIONAL_SEQUENCE_RNN", "float32")
def bidirectional_sequence_rnn(node):
    """A forward and a backward RNN over the sequence. With an auxiliary input (input 9) and
    aux weights, both directions add aux W_aux^T; with an auxiliary input alone, the backward
    RNN reads it instead of the input (stacked bidirectional layers)."""
    node.expect_inputs(12)
    opts = node.options
    x, time_major, batch = sequence_input(node)
    merge = bool(opts.merge_outputs)
    aux = node.optional_input(9)
    fw_aux_w, bw_aux_w = node.optional_input(10), node.optional_input(11)
    use_aux = fw_aux_w is not None
    non_stacking = aux is not None and not use_aux
    bw_size = aux.shape[2] if non_stacking else x.shape[2]
    fw_units, fw_x, fw_r = _weights(node, 1, 2, 3, x.shape[2])
    bw_units, bw_x, bw_r = _weights(node, 5, 6, 7, bw_size)
    fw_products = (fw_x, fw_r, Product(node, 10) if use_aux else None)
    bw_products = (bw_x, bw_r, Product(node, 11) if use_aux else None)
    _state(node, 4, (batch, fw_units))
    _state(node, 8, (batch, bw_units))
    if use_aux and (aux is None or bw_aux_w is None):
        raise node.fail("aux weights need the auxiliary input and both directions' aux weights")
    bidirectional_outputs(node, merge, tuple(x.shape[:2]), fw_units, bw_units)
    act = rnn_activation(node, opts.fused_activation_function)

    def run(*arrays):
        a, fw_w, fw_r, fw_b, fw_h, bw_w, bw_r, bw_b, bw_h = arrays[:9]
        ins = arrays[:len(node.inputs)]
        outs = arrays[len(node.inputs):]
        aux_v = ins[9] if len(ins) > 9 else None
        fw_out, bw_out = bidirectional_views(outs, merge, fw_units, time_major)
        xs = batch_major(a, time_major)
        aux_bm = None if aux_v is None else batch_major(aux_v, time_major)
        run_sequence(xs, fw_w, fw_r, fw_b, fw_h, fw_out, act, fw_products,
                     aux_bm if use_aux else None, ins[10] if use_aux else None)
        run_sequence(aux_bm if non_stacking else xs, bw_w, bw_r, bw_b, bw_h, bw_out, act,
                     bw_products, aux_bm if use_aux else None, ins[11] if use_aux else None,
                     reverse=True)
    return run


def _svdf_shapes(node):
    """(batch, filters, memory, units, rank) after checking SVDF's inputs; sets the output."""
    node.expect_inputs(5)
    x, wf, wt = node.input(0), node.input(1), node.input(2)
    rank = int(node.options.rank)
    if len(x.shape) != 2 or len(wf.shape) != 2 or len(wt.shape) != 2:
        raise node.fail("input, feature weights and time weights must be 2-D")
    filters, memory = wf.shape[0], wt.shape[1]
    if rank < 1 or filters % rank or wf.shape[1] != x.shape[1] or wt.shape[0] != filters:
        raise node.fail(f"feature weights {list(wf.shape)}, time weights {list(wt.shape)} and "
                        f"rank {rank} do not fit the input {list(x.shape)}")
    units = filters // rank
    bias = node.optional_input(3)
    if bias is not None and tuple(bias.shape) != (units,):
        raise node.fail(f"bias has shape {list(bias.shape)}, expected [{units}]")
    batch = x.shape[0]
    _state(node, 4, (batch, memory * filters))
    node.outputs[0].shape = (batch, units)
    return batch, filters, memory, units, rank


def _shift_in(state, batch, filters, memory, newest):
    """The state [batch, filters * memory] shifted one step left, `newest` at each end."""
    s = state.reshape(batch, filters, memory)
    s[:, :, :-1] = s[:, :, 1:].copy()
    s[:, :, -1] = newest
    return s


@register("SVDF", "float32")
def svdf(node):
    """Singular value decomposition filter: per filter, a feature projection of the input is
    pushed into a memory of the last `memory_size` values (the state), which is weighted over
    time; `rank` filters sum into each unit. State [batch, memory_size * num_filters]. Hybrid
    with int8 feature weights (int8 time weights are dequantized)."""
    batch, filters, memory, units, rank = _svdf_shapes(node)
    feature = Product(node, 1)
    wt = node.input(2)
    time_weights = None
    if wt.type_name == "int8":
        if wt.data is None or wt.quantization is None or wt.quantization.scale.size != 1:
            raise node.fail("int8 time weights must be constant, with one scale")
        time_weights = dequantized_weights(wt.data, wt.quantization.scale, 0)
    elif wt.type_name != "float32":
        raise node.fail(f"time weights must be float32 or int8, got {wt.type_name}")
    act = rnn_activation(node, node.options.fused_activation_function)
    if exact_rounding(node):
        return _svdf_reference(feature, time_weights, act, batch, filters, memory, units, rank)

    def run(a, w_feature, w_time, b, state, out):
        s = _shift_in(state, batch, filters, memory, feature(a, w_feature))
        per_filter = np.einsum("bfm,fm->bf", s, w_time if time_weights is None else time_weights)
        out[...] = per_filter.reshape(batch, units, rank).sum(axis=2)
        if b is not None:
            out += b
        act(out)
    return run


def _svdf_reference(feature, time_weights, act, batch, filters, memory, units, rank):
    """The float SVDF in the order of LiteRT's ApplyTimeWeightsBiasAndActivation (BUILTIN_REF):
    per filter the time-weighted state summed from 0 over the memory slots in order
    (BatchVectorBatchVectorDotProduct), the rank filters of each unit summed from 0 in order
    (ReductionSumVector), then the bias added, then the activation (einsum and sum take their
    own orders: 1 in the last place off, now and then)."""
    def run(a, w_feature, w_time, b, state, out):
        s = _shift_in(state, batch, filters, memory, feature(a, w_feature))
        wt = np.asarray(w_time if time_weights is None else time_weights, F32)
        per_filter = np.zeros((batch, filters), F32)
        for m in range(memory):
            per_filter += s[:, :, m] * wt[:, m]
        grouped = per_filter.reshape(batch, units, rank)
        total = np.zeros((batch, units), F32)
        for k in range(rank):
            total += grouped[:, :, k]
        if b is not None:
            total += b
        act(total)
        out[...] = total
    return run


@register("SVDF", "int8")
def svdf_int8(node):
    """Fully quantized SVDF (TFLite's EvalIntegerSVDF): int8 input and feature weights, int16
    time weights and state (symmetric), int32 bias, int8 output. TFLite accepts only the RELU
    activation and applies none beyond the output's clamp, so neither does this."""
    batch, filters, memory, units, rank = _svdf_shapes(node)
    x, wf, wt = node.input(0), node.input(1), node.input(2)
    state, out = node.input(4), node.outputs[0]
    bias = node.optional_input(3)
    types = (wf.type_name, wt.type_name, state.type_name, out.type_name,
             bias.type_name if bias is not None else "int32")
    if types != ("int8", "int16", "int16", "int8", "int32"):
        raise node.fail(f"expected int8 feature weights, int16 time weights and state, int8 "
                        f"output and int32 bias; got {', '.join(types)}")
    if int(node.options.fused_activation_function or 0) != 1:
        raise node.fail("quantized SVDF supports only the RELU activation")
    m1, s1 = quantize_multiplier(x.scale * wf.scale / state.scale)
    m2, s2 = quantize_multiplier(state.scale * wt.scale / out.scale)
    x_zp, out_zp = x.zero_point, out.zero_point

    def run(a, w_feature, w_time, b, st, o):
        dot = (a.astype(np.int64) - x_zp) @ w_feature.astype(np.int64).T   # [batch, filters]
        newest = np.clip(mbqm(wrap32(dot), m1, s1), -32768, 32767)
        s = _shift_in(st, batch, filters, memory, newest)
        per_filter = wrap32(np.einsum("bfm,fm->bf", s.astype(np.int64), w_time.astype(np.int64)))
        total = wrap32(per_filter.reshape(batch, units, rank).sum(axis=2))
        if b is not None:
            total = wrap32(total + b.astype(np.int64))
        o[...] = np.clip(mbqm(total, m2, s2) + out_zp, -128, 127)
    return run
