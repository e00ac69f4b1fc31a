"""Small ONNX models built with onnx.helper for the converter's op tests, and `check`: convert,
run in edgelite's interpreter and in LiteRT, both checked against onnxruntime (max abs error
<= 1e-4 x max |ref|, exact for integer and boolean outputs)."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from edgelite.converter import TFLiteConverter
from edgelite.converter.check import compare

F = np.float32
RNG = np.random.default_rng(7)
_ELEM = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64,
         np.dtype(np.int32): TensorProto.INT32, np.dtype(np.bool_): TensorProto.BOOL}


def model(nodes, inputs, outputs, inits=None, opset=18):
    """inputs: [(name, shape)] or [(name, shape, dtype)]; outputs: names or (name, dtype)."""
    ins = [helper.make_tensor_value_info(i[0], _ELEM[np.dtype(i[2] if len(i) > 2 else F)],
                                         i[1]) for i in inputs]
    outs = [helper.make_tensor_value_info(*((o, TensorProto.FLOAT) if isinstance(o, str) else
                                            (o[0], _ELEM[np.dtype(o[1])])), None)
            for o in outputs]
    inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in (inits or {}).items()]
    graph = helper.make_graph(nodes, "case", ins, outs, inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    proto.ir_version = 8
    inferred = onnx.shape_inference.infer_shapes(proto)   # outputs get their shapes
    del proto.graph.output[:]
    proto.graph.output.extend(inferred.graph.output)
    return proto


def node(op, inputs, outputs, **attrs):
    return helper.make_node(op, inputs, outputs, **attrs)


def w(*shape, scale=0.5):
    return (RNG.standard_normal(shape) * scale).astype(F)


def convert(proto, shapes=None, keep_io_layout=False):
    converter = TFLiteConverter.from_onnx(proto, shapes)
    converter.keep_io_layout = keep_io_layout
    converter.convert()
    return converter.last_conversion


def check(proto, feeds=None, shapes=None, keep_io_layout=False):
    """Convert, compare both runtimes with onnxruntime; returns the conversion."""
    conversion = convert(proto, shapes, keep_io_layout)
    if feeds is not None:
        feeds = [feeds[e["name"]] for e in conversion.io_layout["inputs"]]
    rows = compare(conversion, proto, feeds)
    for row in rows:
        assert row["reference"] == "onnxruntime"
        assert set(row["errors"]) == {"edgelite", "LiteRT"}, row
        assert row["ok"], row
    return conversion
