"""The conversion: import, optimize, lay out the inputs and outputs, sign, serialize.

A dynamic first input dim (a batch) is converted twice, at sizes 1 and 2: the dims and RESHAPE
targets that differ between the two graphs are the dynamic ones (-1 in `shape_signature` and in
the RESHAPE shape), so no per-op rule has to track them.
"""
from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from edgelite.interpreter.feeds import IO_LAYOUT_KEY
from edgelite.schema import Model, SignatureDef, save

from . import pipeline
from .errors import input_shapes_setting, worded
from .onnx_import import Imported, import_onnx, load_onnx
from .pass_clean import compact

SIGNATURE_KEY = "serving_default"


@dataclass
class Conversion:
    """What `convert_onnx` made, and the facts the CLI summary reports."""

    content: bytes
    model: Model
    ops_in: dict = field(default_factory=dict)    # ONNX op type -> count
    ops_out: dict = field(default_factory=dict)   # TFLite op -> count
    transposes: int = 0
    seconds: float = 0.0
    io_layout: dict = field(default_factory=dict)
    warnings: list = field(default_factory=list)
    notes: list = field(default_factory=list)      # how user data was read
    quantization: object = None   # quantize.Report when the model was quantized (hook)


def convert_onnx(source, input_shapes: dict | None = None,
                 keep_io_layout: bool = False) -> Conversion:
    """Convert an ONNX model (path or ModelProto) into `.tflite` bytes."""
    start = time.perf_counter()
    proto = load_onnx(source)
    model, imported, layout = _convert_at(proto, input_shapes, keep_io_layout, 1)
    warnings = []
    if any(spec.dynamic for spec in imported.inputs):
        other, _, _ = _convert_at(proto, input_shapes, keep_io_layout, 2)
        problem = mark_dynamic_dims(model, other)
        if problem:
            retry = _dynamic_with_loops(proto, input_shapes, keep_io_layout, imported) or \
                _dynamic_from_two_and_three(proto, input_shapes, keep_io_layout)
            if retry is not None:
                model, imported, layout = retry
            else:
                warnings.append(worded(f"the first input dim is fixed at 1: {problem}; fix it "
                                       "with ", input_shapes_setting(), " to silence this"))
    content = save(model)
    ops = Counter(op.op for sg in model.subgraphs for op in sg.operators)
    return Conversion(content, model, dict(sorted(imported.op_counts.items())),
                      dict(sorted(ops.items())), ops.get("TRANSPOSE", 0),
                      time.perf_counter() - start, io_layout_json(imported, layout), warnings)


def _dynamic_with_loops(proto, input_shapes, keep_io_layout: bool, imported):
    """Recurrent ops unrolled over a dynamic dim change the graph with its size: as WHILE loops
    they do not. The graph with loops and its dynamic dims marked, or None."""
    if not {"LSTM", "GRU"} & set(imported.op_counts):
        return None
    model, imported, layout = _convert_at(proto, input_shapes, keep_io_layout, 1, loops=True)
    other, _, _ = _convert_at(proto, input_shapes, keep_io_layout, 2, loops=True)
    if mark_dynamic_dims(model, other):
        return None
    return model, imported, layout


def _dynamic_from_two_and_three(proto, input_shapes, keep_io_layout: bool):
    """At size 1 a transpose that moves the dynamic dim is a RESHAPE (size-1 dims move no
    data), so the graphs at sizes 1 and 2 differ. Sizes 2 and 3 may not: then the size-2 graph
    with its dynamic dims marked, and 1 as their nominal size. None when that fails too."""
    from .errors import ConversionError

    try:
        model, imported, layout = _convert_at(proto, input_shapes, keep_io_layout, 2)
        other, _, _ = _convert_at(proto, input_shapes, keep_io_layout, 3)
    except ConversionError:
        return None
    if mark_dynamic_dims(model, other):
        return None
    for sg in model.subgraphs:
        for tensor in sg.tensors:
            signature = tensor.shape_signature
            if signature is not None and -1 in signature:
                tensor.shape = tuple(1 if s == -1 else d for d, s in zip(tensor.shape, signature))
    for spec in imported.inputs + imported.outputs:
        spec.shape = tuple(1 if i in spec.dynamic else d for i, d in enumerate(spec.shape))
    return model, imported, layout


def _convert_at(proto, input_shapes, keep_io_layout: bool, dynamic_size: int,
                loops: bool = False):
    imported = import_onnx(proto, input_shapes, dynamic_size, loops)
    model = imported.model
    pipeline.optimize(model)
    layout = pipeline.settle_io_layout(model, keep_io_layout)
    finish(model, imported, layout)
    return model, imported, layout


def finish(model: Model, imported: Imported, layout: dict) -> None:
    """Names, the signature and the io-layout metadata of the converted model."""
    sg = model.subgraphs[0]
    for specs, tensors in ((imported.inputs, sg.inputs), (imported.outputs, sg.outputs)):
        for spec, t in zip(specs, tensors):
            _rename(sg, t, spec.name)
    compact(model)
    model.signature_defs = [SignatureDef(
        SIGNATURE_KEY, 0,
        inputs={spec.name: t for spec, t in zip(imported.inputs, sg.inputs)},
        outputs={spec.name: t for spec, t in zip(imported.outputs, sg.outputs)})]
    model.set_metadata(IO_LAYOUT_KEY, json.dumps(io_layout_json(imported, layout),
                                                 sort_keys=True).encode())


def _rename(sg, t: int, name: str) -> None:
    """Give tensor t the ONNX name; another tensor that has it takes a suffix."""
    for i, other in enumerate(sg.tensors):
        if other.name == name and i != t:
            other.name = f"{name}/inner"
    sg.tensors[t].name = name


def mark_dynamic_dims(model: Model, other: Model) -> str | None:
    """Compare `model` (dynamic dim at 1) with `other` (at 2): differing dims become -1 in
    shape_signature, differing RESHAPE targets -1. Returns why it cannot, if it cannot."""
    a, b = model.subgraphs[0], other.subgraphs[0]
    ops_a = [(op.opcode.builtin, op.inputs, op.outputs) for op in a.operators]
    ops_b = [(op.opcode.builtin, op.inputs, op.outputs) for op in b.operators]
    if len(a.tensors) != len(b.tensors) or ops_a != ops_b:
        return "the graph's structure depends on it"
    reshape_targets = {op.inputs[1]: op for op in a.operators
                       if op.op == "RESHAPE" and len(op.inputs) > 1}
    edits, signatures = [], []
    for i, (ta, tb) in enumerate(zip(a.tensors, b.tensors)):
        va, vb = model.constant(a, i), other.constant(b, i)
        if va is not None and vb is not None:
            if va.shape == vb.shape and np.array_equal(va, vb):
                continue
            if i not in reshape_targets or va.shape != vb.shape or va.ndim != 1:
                return f"constant {ta.name!r} depends on it"
            differ = np.flatnonzero(va != vb)
            if len(differ) != 1:
                return f"RESHAPE target {ta.name!r} depends on it in {len(differ)} places"
            edits.append((i, int(differ[0])))
            continue
        if len(ta.shape) != len(tb.shape):
            return f"the rank of {ta.name!r} depends on it"
        if ta.shape != tb.shape:
            signatures.append((ta, tuple(-1 if x != y else x for x, y in zip(ta.shape, tb.shape))))
    for tensor, signature in signatures:
        tensor.shape_signature = signature
    for i, k in edits:
        target = model.constant(a, i).copy()
        target[k] = -1
        tensor = a.tensors[i]
        tensor.buffer = model.add_buffer(target)
        op = reshape_targets[i]
        op.options = op.options.replace(new_shape=tuple(int(d) for d in target))
    return None


def io_layout_json(imported: Imported, layout: dict) -> dict:
    """{"inputs": [{"name", "perm"}], "outputs": [...]}: the .tflite tensor is
    numpy.transpose(onnx_tensor, perm)."""
    def entries(specs, kind):
        return [{"name": s.name, "perm": [int(p) for p in perm]}
                for s, perm in zip(specs, layout[kind])]
    return {"convention": "tflite = numpy.transpose(onnx, perm)",
            "inputs": entries(imported.inputs, "inputs"),
            "outputs": entries(imported.outputs, "outputs")}
