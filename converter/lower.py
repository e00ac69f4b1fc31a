"""The registry of ONNX op lowerings: one small function per ONNX op type, one file per family.

A lowering is `fn(b: IRBuilder, n: OnnxNode) -> list of tensor indices` (one per ONNX output, or a
single index): it emits TFLite ops in ONNX's layout (NCHW); layout-sensitive ops wrap their NHWC
TFLite op in TRANSPOSE ops, which the layout pass later pushes away and cancels. The `lower_*`
modules register them; `lowerings.py` imports every family (the coverage table).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .errors import ConversionError

LOWERINGS: dict = {}   # ONNX op type -> lowering function


def lowers(*op_types: str):
    """Decorator: register `fn` as the lowering of these ONNX op types (default domain). The
    registry holds it between the size guards (`guards.py`): a node whose output would be
    absurdly large is refused before `fn` runs, a tensor `fn` made beyond the limits after."""
    def wrap(fn: Callable) -> Callable:
        guarded = _guarded(fn)
        for op_type in op_types:
            if op_type in LOWERINGS:
                raise RuntimeError(f"two lowerings registered for {op_type}")
            LOWERINGS[op_type] = guarded
        return fn
    return wrap


def _guarded(fn: Callable) -> Callable:
    from . import guards

    @functools.wraps(fn)
    def lower(b, n):
        guards.before_lowering(b, n)
        first_new = len(b.sg.tensors)
        outs = fn(b, n)
        guards.after_lowering(b, n, first_new)
        return outs
    return lower


class Unsupported(ConversionError):
    """A node uses a form of its op (an attribute value, a non-constant input) that the converter
    does not lower."""


@dataclass
class OnnxNode:
    """One ONNX node as a lowering sees it: inputs already mapped to IR tensors."""

    proto: object                  # onnx.NodeProto
    inputs: list                   # IR tensor index per ONNX input; -1 for an omitted one
    opset: int                     # the default domain's opset version of the model
    attrs: dict = field(default_factory=dict)
    declared: list = field(default_factory=list)  # per output: ONNX's inferred dims, or None
    scope: object = None          # the importer's Scope (control flow lowers body graphs)

    @property
    def op_type(self) -> str:
        return self.proto.op_type

    @property
    def name(self) -> str:
        return self.proto.name or (self.proto.output[0] if self.proto.output else "?")

    @property
    def label(self) -> str:
        """How messages name this node: `Conv node 'conv1'`."""
        return f"{self.op_type} node {self.name!r}"

    def attr(self, name: str, default=None):
        return self.attrs.get(name, default)

    def out_shape(self, k: int = 0):
        """The shape ONNX's shape inference gives output k, or None where it does not know it
        (the shape to record for a kernel that knows it only while running)."""
        dims = self.declared[k] if k < len(self.declared) else None
        if dims is None or any(d is None for d in dims):
            return None
        return tuple(int(d) for d in dims)

    def input(self, k: int) -> int:
        """Tensor index of input k, or -1 when it is omitted."""
        return self.inputs[k] if k < len(self.inputs) else -1

    def fail(self, message: str) -> Unsupported:
        return Unsupported(f"{self.label} (opset {self.opset}): {message}")


def decode_attrs(proto) -> dict:
    """ONNX attributes as Python values (tensors as numpy arrays, strings as str)."""
    from onnx import helper, numpy_helper

    out = {}
    for a in proto.attribute:
        value = helper.get_attribute_value(a)
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        elif hasattr(value, "dims") and hasattr(value, "data_type"):  # a TensorProto
            value = numpy_helper.to_array(value)
        elif isinstance(value, list) and value and isinstance(value[0], bytes):
            value = [v.decode("utf-8", "replace") for v in value]
        out[a.name] = value
    return out


def body_graphs(node):
    """(attribute name, graph) for each body graph of an ONNX node: an If's branches, a Loop's
    or Scan's body (GRAPH attributes, and each graph of a GRAPHS one)."""
    from onnx import AttributeProto

    for attr in node.attribute:
        if attr.type == AttributeProto.GRAPH:
            yield attr.name, attr.g
        elif attr.type == AttributeProto.GRAPHS:
            for graph in attr.graphs:
                yield attr.name, graph


def const_input(b, n: OnnxNode, k: int, what: str) -> np.ndarray:
    """The value of input k, which this lowering needs to know at conversion time."""
    t = n.input(k)
    value = b.value(t) if t >= 0 else None
    if value is None and t >= 0 and 0 in b.shape(t):  # no elements: known while converting
        return np.zeros(b.shape(t), b.sg.tensors[t].np_dtype)
    if value is None:
        raise n.fail(f"{what} (input {k}) must be a constant or computable from static shapes")
    return value


def optional_const(b, n: OnnxNode, k: int, what: str):
    """Like `const_input`, but None when the input is omitted or empty."""
    t = n.input(k)
    if t < 0 or (t in b.empty) or (t in b.sg.inputs and 0 in b.shape(t) and b.rank(t) == 1):
        return None
    return const_input(b, n, k, what)


def axis_of(n: OnnxNode, axis: int, rank: int) -> int:
    axis = int(axis)
    if not -rank <= axis < rank:
        raise n.fail(f"axis {axis} is out of range for rank {rank}")
    return axis % rank
