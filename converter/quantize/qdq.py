"""ONNX QDQ models, the integer half: the float graph with QUANTIZE / DEQUANTIZE pairs that
`converter/lower_qdq.py` imports becomes an integer model with the QDQ model's own parameters.

1. ranges: every float tensor a QUANTIZE reads or a DEQUANTIZE writes gets the range of its
   pair's grid, [(-128 - zp) s, (127 - zp) s]: full_integer derives exactly s and zp back.
2. full_integer's quantizer makes integer every op its rules and edgelite's kernels allow. The
   weights keep their QDQ scales, found by content (the imported float weights are exactly
   q x s per channel, however lowerings and passes transposed them or permuted their columns);
   an op whose output the QDQ model leaves float stays float, unless it only moves values
   (MAX_POOL_2D, RESHAPE, ...: exact on integers).
3. conversions: the pairs are float ops to the quantizer, which surrounds them with DEQUANTIZE /
   QUANTIZE; QUANTIZE(DEQUANTIZE(a)) then becomes `a` (same grid) or one requantizing QUANTIZE
   (where TFLite's constraints gave an op other output parameters than the QDQ model: the
   "same" ops, SOFTMAX / LOGISTIC, CONCATENATION). A pair left between float ops is the QDQ
   model's fake quantization, kept.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgelite.schema import Model, remove_dead
from edgelite.schema.ops import data_input

from ..lower_qdq import (ACTIVATION_TYPES, QDQ_OPS, VALUE_MOVING, along, dequantize_array,
                         quantize_array)
from .rules import data_inputs, rule

NOTE = "parameters from the ONNX model's QuantizeLinear / DequantizeLinear nodes (QDQ)"
LEFT_FLOAT = "its output is not quantized in the QDQ model"


# -- 1. ranges of the pairs ----------------------------------------------------------------------

def grid(tensor) -> tuple | None:
    """(scale, int8 zero point) of an int8 / uint8 per-tensor tensor (uint8's shifted)."""
    q = tensor.quantization
    if tensor.dtype not in ACTIVATION_TYPES or q is None or q.scale.size != 1:
        return None
    return float(q.scale[0]), int(q.zero_point[0]) - (128 if tensor.dtype == "uint8" else 0)


def pair_ranges(model: Model) -> dict:
    """{float tensor: (lo, hi)} for the inputs of QUANTIZE and the outputs of DEQUANTIZE, and
    on through value-moving ops (whose identity pairs the import dropped)."""
    sg = model.subgraphs[0]
    ranges = {}
    for op in sg.operators:
        if op.op in VALUE_MOVING:
            source = op.inputs[data_input(op.op)]
            for t in op.outputs:
                if source in ranges and sg.tensors[t].dtype == "float32":
                    ranges.setdefault(t, ranges[source])
            continue
        if op.op == "QUANTIZE" and sg.tensors[op.inputs[0]].dtype == "float32":
            t, g = op.inputs[0], grid(sg.tensors[op.outputs[0]])
        elif op.op == "DEQUANTIZE" and sg.tensors[op.outputs[0]].dtype == "float32":
            t, g = op.outputs[0], grid(sg.tensors[op.inputs[0]])
        else:
            continue
        if g is not None:
            scale, zp = g
            ranges.setdefault(t, ((-128 - zp) * scale, (127 - zp) * scale))
    _share_output_ranges(model, ranges)
    return ranges


def _share_output_ranges(model: Model, ranges: dict) -> None:
    """A shared op's (CONCATENATION's) inputs that only it reads take its output's range, so
    its output keeps the QDQ model's grid and each input is requantized onto it once."""
    sg = model.subgraphs[0]
    readers: dict = {}
    for op in sg.operators:
        for t in set(op.inputs):
            readers[t] = readers.get(t, 0) + 1
    for op in sg.operators:
        r = rule(op.op)
        if r is None or r.output != "shared" or op.outputs[0] not in ranges:
            continue
        for k in data_inputs(op, r):
            t = op.inputs[k]
            if t in ranges and readers.get(t) == 1 and t not in sg.outputs:
                ranges[t] = ranges[op.outputs[0]]


def left_float(model: Model, ranges: dict) -> dict:
    """{operator index: why}: ops that compute (not only move values) into a float output the
    QDQ model does not quantize."""
    sg = model.subgraphs[0]
    out = {}
    for i, op in enumerate(sg.operators):
        r = rule(op.op)
        if r is None or r.output == "none" or op.op in VALUE_MOVING:
            continue
        if any(sg.tensors[t].dtype == "float32" and t not in ranges for t in op.outputs):
            out[i] = LEFT_FLOAT
    return out


# -- 2. the weights' scales ----------------------------------------------------------------------

@dataclass
class WeightRecord:
    """A constant behind a DequantizeLinear: its float values (ONNX layout) and scales."""

    name: str
    values: np.ndarray
    scale: np.ndarray          # 1-D float32; size 1 per tensor
    axis: int | None
    symmetric: bool            # q - zero point fits int8: usable as TFLite weights
    clamped: bool = False      # holds -128, which TFLite's symmetric weights clamp to -127

    def __post_init__(self):
        self.sorted = _rows(self.values, self.axis)

    def matches(self, w: np.ndarray, axis: int | None) -> bool:
        """Whether `w` holds this record's values per channel (in any order within one)."""
        if w.size != self.values.size:
            return False
        if self.scale.size == 1:
            return np.array_equal(_rows(w, None), self.sorted)
        return axis is not None and w.shape[axis] == self.scale.size and \
            np.array_equal(_rows(w, axis), self.sorted)


def _rows(values: np.ndarray, axis: int | None) -> np.ndarray:
    """The values sorted within each channel along `axis` (None: all one channel)."""
    if axis is None:
        return np.sort(values, axis=None)
    return np.sort(np.moveaxis(values, axis, 0).reshape(values.shape[axis], -1), axis=1)


class WeightScales:
    """full_integer's `weight_scales` hook: the QDQ scales of weights whose values match."""

    def __init__(self, records: list):
        self.records = [r for r in records if r.symmetric]
        self.unmatched: list = []
        self.clamped: list = []

    def __call__(self, op, k, w, axis):
        for r in self.records:
            if r.matches(np.asarray(w), axis):
                if r.clamped:
                    self.clamped.append(r.name)
                return r.scale
        self.unmatched.append(op.op)
        return None


def weight_records(proto, base_dir: str = "") -> list:
    """Every DequantizeLinear of a constant (an initializer, a Constant, or a QuantizeLinear of
    one), dequantized as the importer does."""
    from onnx import helper, numpy_helper

    graph = proto.graph
    initializers = {init.name: init for init in graph.initializer}
    consts: dict = {}

    def value(name):
        if name in consts:
            return consts[name]
        if name in initializers:
            consts[name] = numpy_helper.to_array(initializers[name], base_dir)
            return consts[name]
        return None

    records = []
    for node in graph.node:
        if node.domain not in ("", "ai.onnx"):
            continue
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            consts[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
        if node.op_type not in QDQ_OPS:
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        x, scale = value(node.input[0]), value(node.input[1])
        zp = value(node.input[2]) if len(node.input) > 2 and node.input[2] else None
        if x is None or scale is None or attrs.get("block_size") or \
                (len(node.input) > 2 and node.input[2] and zp is None):
            continue
        scale = np.asarray(scale, np.float32)
        axis = int(attrs.get("axis", 1)) % max(x.ndim, 1) if scale.size > 1 else None
        if axis is None:
            scale = scale.reshape(())
            zp = None if zp is None else np.asarray(zp).reshape(())
        if node.op_type == "QuantizeLinear":
            zp = np.zeros(scale.shape, np.uint8) if zp is None else zp
            consts[node.output[0]] = quantize_array(x, scale, zp, axis)
            continue
        zp = np.zeros(scale.shape, x.dtype) if zp is None else np.asarray(zp)
        centered = x.astype(np.int64) - along(zp, axis, x.ndim).astype(np.int64)
        fits = bool(centered.size) and -128 <= centered.min() and centered.max() <= 127
        records.append(WeightRecord(
            node.output[0], dequantize_array(x, scale, zp, axis), scale.reshape(-1), axis,
            fits, fits and centered.min() == -128))
    return records


# -- 3. conversions ------------------------------------------------------------------------------

def fold_conversions(model: Model) -> None:
    """Shorten chains of QUANTIZE / DEQUANTIZE: each reads the first tensor of its chain that
    holds the same values as its input (through DEQUANTIZE, and QUANTIZE onto the same grid),
    and a QUANTIZE whose output such a tensor already holds goes."""
    sg = model.subgraphs[0]
    changed = True
    while changed:
        changed = False
        producer = {t: op for op in sg.operators for t in op.outputs}
        for op in sg.operators:
            if op.op not in ("QUANTIZE", "DEQUANTIZE"):
                continue
            chain = [t for t in _same_values(sg, producer, op.inputs[0]) if grid(sg.tensors[t])]
            if not chain:
                continue
            out = sg.tensors[op.outputs[0]]
            if op.op == "QUANTIZE":
                same = [t for t in chain if grid(sg.tensors[t]) == grid(out)]
                exact = [t for t in same if sg.tensors[t].dtype == out.dtype]
                if exact and _replace(model, op.outputs[0], exact[-1]):
                    changed = True
                    continue
                source = producer.get(same[-1]) if same else None
                if source is not None and source.op == "QUANTIZE" and \
                        sg.tensors[source.inputs[0]].dtype == "float32":
                    chain = [source.inputs[0]]      # quantize the float onto the grid directly
            if op.inputs[0] != chain[-1]:
                op.inputs = [chain[-1]]
                changed = True
        remove_dead(sg)


def _same_values(sg, producer: dict, t: int) -> list:
    """t, then the tensors before it that hold the same values (int8 and uint8 on one grid)."""
    chain = [t]
    while True:
        op = producer.get(t)
        if op is not None and op.op == "QUANTIZE":
            source = op.inputs[0]
            inner = producer.get(source)
            if sg.tensors[source].dtype == "float32" and inner is not None and \
                    inner.op == "DEQUANTIZE":
                source = inner.inputs[0]
            if grid(sg.tensors[source]) is None or grid(sg.tensors[source]) != grid(sg.tensors[t]):
                return chain
        elif op is not None and op.op == "DEQUANTIZE":
            source = op.inputs[0]
        else:
            return chain
        chain.append(source)
        t = source


def _replace(model: Model, old: int, new: int) -> bool:
    """Readers of `old` read `new`; a graph output moves to `new`, which takes its name."""
    sg = model.subgraphs[0]
    if old in sg.outputs and (new in sg.inputs or new in sg.outputs):
        return False
    for op in sg.operators:
        op.inputs = [new if t == old else t for t in op.inputs]
    if old in sg.outputs:
        sg.outputs = [new if t == old else t for t in sg.outputs]
        name = sg.tensors[old].name
        sg.tensors[old].name = f"{name}/replaced"
        sg.tensors[new].name = name
        for sig in model.signature_defs:
            if sig.subgraph_index == 0:
                sig.outputs = {k: (new if v == old else v) for k, v in sig.outputs.items()}
    return True


# -- the whole conversion ------------------------------------------------------------------------

def integerize(model: Model, records: list, input_type: str = "float32",
               output_type: str = "float32") -> tuple:
    """(integer copy of a QDQ-imported float model, full_integer Report)."""
    from ..errors import ConversionError
    from ..pass_clean import compact
    from .full_integer import quantize_integer

    ranges = pair_ranges(model)
    sg = model.subgraphs[0]
    for kind, tensors, dtype in (("input", sg.inputs, input_type),
                                 ("output", sg.outputs, output_type)):
        missing = [sg.tensors[t].name for t in tensors if dtype != "float32" and t not in ranges
                   and sg.tensors[t].dtype == "float32"]
        if missing:
            raise ConversionError(f"inference_{kind}_type={dtype}: the QDQ model does not "
                                  f"quantize {kind} {', '.join(map(repr, missing))}")
    scales = WeightScales(records)
    m, report = quantize_integer(model, ranges, "int8", input_type, output_type,
                                 weight_scales=scales, keep_float=left_float(model, ranges))
    fold_conversions(m)
    compact(m)
    ops = m.subgraphs[0].operators
    report.float_ops = [f for f in report.float_ops if f[1] not in ("QUANTIZE", "DEQUANTIZE")]
    requantizing = [op for op in ops if op.op == "QUANTIZE" and
                    m.subgraphs[0].tensors[op.inputs[0]].dtype != "float32"]
    report.requantized = len(requantizing)
    report.conversions = sum(op.op in ("QUANTIZE", "DEQUANTIZE") for op in ops) - \
        len(requantizing)
    report.notes.insert(0, NOTE)
    if scales.unmatched:
        report.notes.append(f"weights of {', '.join(sorted(set(scales.unmatched)))} match no "
                            "DequantizeLinear of a constant: quantized on their own range")
    if scales.clamped:
        report.notes.append(f"weights {', '.join(sorted(set(scales.clamped)))} hold -128: "
                            "clamped to -127 (TFLite's symmetric int8 weights)")
    return m, report


@dataclass
class QdqRequest:
    """TFLiteConverter's settings for a QDQ model (integer inputs / outputs at most); `apply`
    makes the float import of the model integer. `deferred`: the settings are the defaults, and
    whether the model is a QDQ one is read from the import's op counts."""

    source: object                  # the ONNX model: a path or a ModelProto
    input_type: str = "float32"
    output_type: str = "float32"
    strict: bool = False
    deferred: bool = False

    def apply(self, conversion) -> None:
        from collections import Counter

        from edgelite.schema import save

        from ..errors import ConversionError

        if self.deferred and not set(QDQ_OPS) & set(conversion.ops_in):
            return
        proto, base_dir = _graph_of(self.source)
        m, report = integerize(conversion.model, weight_records(proto, base_dir),
                               self.input_type, self.output_type)
        if self.strict and report.float_ops:
            ops = ", ".join(f"{op} (operator {i}: {why})" for i, op, why in report.float_ops)
            raise ConversionError("target_spec.supported_ops={TFLITE_BUILTINS_INT8} asks for "
                                  f"integer ops only; these would stay float: {ops}")
        conversion.model = m
        conversion.content = save(m)
        conversion.ops_out = dict(sorted(Counter(op.op for sg in m.subgraphs
                                                 for op in sg.operators).items()))
        conversion.quantization = report
        conversion.warnings += [f"kept float: {op} (operator {i}): {why}"
                                for i, op, why in report.float_ops]


def _graph_of(source) -> tuple:
    """(ModelProto without its external data, the folder that holds that data); (None, "")
    when the file cannot be read (the import then says why)."""
    import onnx

    if isinstance(source, onnx.ModelProto):
        return source, ""
    path = Path(source)
    try:
        return onnx.load(str(path), load_external_data=False), str(path.parent)
    except Exception:  # noqa: BLE001  not a readable ONNX file
        return None, ""


def has_qdq(proto) -> bool:
    return any(n.op_type in QDQ_OPS and n.domain in ("", "ai.onnx") for n in proto.graph.node)


def request_for(converter) -> QdqRequest | None:
    """A QdqRequest when `converter`'s model may be a QDQ model (None: it is not, and its
    quantization settings are for the float path); ConversionError for settings that would
    quantize a QDQ model again."""
    from ..errors import ConversionError
    from .conversion import _enum_names, _name

    io = {k: _name(getattr(converter, f"inference_{k}_type")) or "float32"
          for k in ("input", "output")}
    ops = _enum_names(converter.target_spec.supported_ops)
    dataset, types = converter.representative_dataset, converter.target_spec.supported_types
    if not converter.optimizations and dataset is None and not types and \
            io == {"input": "float32", "output": "float32"} and ops <= {"TFLITE_BUILTINS"}:
        return QdqRequest(converter._model, deferred=True)
    proto, _ = _graph_of(converter._model)
    if proto is None or not has_qdq(proto):
        return None
    problems = [f"inference_{k}_type={v} (float32 or int8)" for k, v in io.items()
                if v not in ("float32", "int8")]
    if dataset is not None:
        problems.append("representative_dataset (its QDQ scales are used)")
    if types:
        problems.append("target_spec.supported_types")
    if ops - {"TFLITE_BUILTINS", "TFLITE_BUILTINS_INT8"}:
        problems.append(f"target_spec.supported_ops {', '.join(sorted(ops))}")
    if problems:
        raise ConversionError("the model is already quantized (QuantizeLinear / "
                              "DequantizeLinear); these settings do not apply to it: "
                              + "; ".join(problems))
    return QdqRequest(converter._model, io["input"], io["output"],
                      ops == {"TFLITE_BUILTINS_INT8"})
