"""Weight-only quantizations: dynamic range (int8 weights run by hybrid kernels, float
activations) and float16 (float16 weights, DEQUANTIZE to float32 before use)."""
from __future__ import annotations

import copy

import numpy as np

from edgelite.schema import Model, Operator, OperatorCode, Tensor, default_options
from edgelite.schema.ops import OPS, facts

from . import params as P
from .full_integer import Report, fold_float16_dequantize
from .rules import integer_kernel

# The ops whose one weights input a hybrid kernel takes as int8 (per channel along the row's
# weight axis); UNIDIRECTIONAL_SEQUENCE_LSTM, with many, is _hybrid_lstm's.
HYBRID_WEIGHTS = {op: f for op, f in OPS.items() if f.hybrid and len(f.weights) == 1}
# TensorFlow's converter leaves weights smaller than this float (the hybrid kernel's on-the-fly
# input quantization costs more than it saves on them).
MIN_WEIGHT_ELEMENTS = 1024
FLOAT16_MAX = 65504.0


# UNIDIRECTIONAL_SEQUENCE_LSTM's weights (input-to-gate, recurrent, peephole and projection) take
# one scale each (LiteRT's hybrid LSTM takes per-tensor scales); biases and layer norms stay float.
LSTM = "UNIDIRECTIONAL_SEQUENCE_LSTM"


# The hybrid ops LiteRT runs with int4 weights (packed two a byte); the others keep int8.
INT4_OPS = ("FULLY_CONNECTED", "CONV_2D")


def quantize_dynamic(model: Model, min_elements: int = MIN_WEIGHT_ELEMENTS,
                     bits: int = 8) -> tuple:
    """(copy of `model` with int8 weights where a hybrid kernel takes them, Report). `bits` 4:
    int4 weights (symmetric, [-7, 7]) for FULLY_CONNECTED and CONV_2D, int8 for the rest."""
    from edgelite.converter.pass_clean import compact
    from edgelite.schema.model import pack_int4

    if bits not in (4, 8):
        raise ValueError(f"weights of {bits} bits: choose 8 or 4")
    m = copy.deepcopy(model)
    fold_float16_dequantize(m)
    sg = m.subgraphs[0]
    report = Report("dynamic range" if bits == 8 else "dynamic range, int4 weights")
    cache = {}
    for i, op in enumerate(sg.operators):
        if op.op == LSTM:
            _hybrid_lstm(m, sg, i, op, min_elements, report, cache)
            continue
        spec = HYBRID_WEIGHTS.get(op.op)
        if spec is None:
            continue
        (k,), axis, bias_k = spec.weights, spec.weight_axis, spec.bias
        x, w = _tensor(sg, op, 0), _tensor(sg, op, k)
        value = m.constant(sg, op.inputs[k]) if w is not None and \
            op.inputs[k] not in sg.inputs else None
        if x is None or x.dtype != "float32" or value is None or w.dtype != "float32":
            continue
        if value.size < min_elements:
            report.float_ops.append((i, op.op, f"weights have {value.size} elements (fewer "
                                               f"than {min_elements})"))
            continue
        if not integer_kernel(op.op, "hybrid"):
            report.float_ops.append((i, op.op, "edgelite has no hybrid kernel"))
            continue
        level = 7 if bits == 4 and op.op in INT4_OPS else 127
        key = (op.inputs[k], axis, level)
        if key not in cache:
            scales = P.weight_scales(value, axis, level)
            q = P.quantize_weights(value, scales, axis, level)
            dtype, data = ("int4", pack_int4(q)) if level == 7 else ("int8", q)
            cache[key] = sg.add_tensor(Tensor(
                w.name, q.shape, dtype, buffer=m.add_buffer(data),
                quantization=P.qparams(scales, np.zeros(scales.size, np.int64),
                                       axis if axis is not None else 0)))
        op.inputs[k] = cache[key]
        if op.op in ("CONV_2D", "DEPTHWISE_CONV_2D") and (len(op.inputs) <= bias_k
                                                          or op.inputs[bias_k] < 0):
            # LiteRT's hybrid convolutions need a bias tensor.
            zeros = np.zeros(value.shape[axis], np.float32)
            bias = sg.add_tensor(Tensor(f"{w.name}/bias", zeros.shape, "float32",
                                        buffer=m.add_buffer(zeros)))
            op.inputs = list(op.inputs[:bias_k]) + [bias]
        if op.options is not None and "asymmetric_quantize_inputs" in op.options.fields:
            op.options = op.options.replace(asymmetric_quantize_inputs=True)
        op.opcode = OperatorCode(op.opcode.builtin, 0, op.opcode.custom_code)
        report.quantized_ops[op.op] = report.quantized_ops.get(op.op, 0) + 1
    compact(m)
    return m, report


def _hybrid_lstm(m, sg, i, op, min_elements, report, cache) -> None:
    x = _tensor(sg, op, 0)
    if x is None or x.dtype != "float32" or _tensor(sg, op, 1) is None:
        if x is not None and x.dtype == "float32":
            report.float_ops.append((i, op.op, "CIFG LSTMs stay float (edgelite picks the "
                                               "hybrid kernel by the input gate's weights)"))
        return
    values = {k: m.constant(sg, op.inputs[k]) for k in facts(LSTM).weights
              if k < len(op.inputs) and op.inputs[k] >= 0}
    if any(v is None or sg.tensors[op.inputs[k]].dtype != "float32" for k, v in values.items()):
        return
    if sum(v.size for v in values.values()) < min_elements:
        report.float_ops.append((i, op.op, f"weights have fewer than {min_elements} elements"))
        return
    if not integer_kernel(op.op, "hybrid"):
        report.float_ops.append((i, op.op, "edgelite has no hybrid kernel"))
        return
    for k, value in values.items():
        key = (op.inputs[k], None)
        if key not in cache:
            scales = P.weight_scales(value, None)
            q = P.quantize_weights(value, scales, None)
            cache[key] = sg.add_tensor(Tensor(sg.tensors[op.inputs[k]].name, q.shape, "int8",
                                              buffer=m.add_buffer(q),
                                              quantization=P.qparams(scales, [0])))
        op.inputs[k] = cache[key]
    op.options = op.options.replace(asymmetric_quantize_inputs=True)
    op.opcode = OperatorCode(op.opcode.builtin, 0, op.opcode.custom_code)
    report.quantized_ops[op.op] = report.quantized_ops.get(op.op, 0) + 1


def _tensor(sg, op, k: int):
    return sg.tensors[op.inputs[k]] if k < len(op.inputs) and op.inputs[k] >= 0 else None


def quantize_float16(model: Model) -> tuple:
    """(copy of `model` whose float32 constants read by ops are float16, each behind one
    DEQUANTIZE, Report). Constants outside float16's range stay float32."""
    from edgelite.converter.pass_clean import compact

    m = copy.deepcopy(model)
    sg = m.subgraphs[0]
    report = Report("float16")
    halves: dict = {}
    new_ops = []
    for op in sg.operators:
        for k, t in enumerate(op.inputs):
            if t < 0 or t in sg.inputs or sg.tensors[t].dtype != "float32":
                continue
            value = m.constant(sg, t)
            if value is None or value.size == 0:
                continue
            if np.abs(value).max() > FLOAT16_MAX:
                report.notes.append(f"{sg.tensors[t].name!r} stays float32 (outside float16's "
                                    "range)")
                continue
            if t not in halves:
                src = sg.tensors[t]
                half = sg.add_tensor(Tensor(f"{src.name}/float16", src.shape, "float16",
                                            buffer=m.add_buffer(value.astype(np.float16))))
                out = sg.add_tensor(Tensor(src.name, src.shape, "float32"))
                new_ops.append(Operator(OperatorCode("DEQUANTIZE", 0), [half], [out],
                                        default_options("DEQUANTIZE")))
                halves[t] = out
            op.inputs[k] = halves[t]
        new_ops.append(op)
    report.quantized_ops["DEQUANTIZE"] = len(halves)
    sg.operators = new_ops
    compact(m)
    return m, report
