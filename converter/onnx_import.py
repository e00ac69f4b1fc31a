"""ONNX -> IR: load and check the model, fix the input shapes, lower node by node.

The result is a graph in TFLite's op vocabulary that still computes in ONNX's layouts (NCHW):
layout-sensitive ops sit between TRANSPOSE ops that the layout pass removes later. Every tensor's
shape is static (a dynamic first dimension is imported at a chosen size); shape computations and
anything else on constants are already folded by the kernels.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from edgelite.interpreter import budget
from edgelite.schema import Model, Subgraph, dtype_name, remove_dead

from .builder import IRBuilder
from .errors import ConversionError, UnsupportedOpsError, input_shapes_setting, joined, \
    worded
from .guards import check_proto, load_checked
from .lower import OnnxNode, body_graphs, decode_attrs
from .lowerings import LOWERINGS
from . import memo
from .onnx_patterns import fuse_gelu

MIN_OPSET = 11
DEFAULT_DOMAINS = ("", "ai.onnx")


@dataclass
class IoSpec:
    """A graph input or output as ONNX declares it."""

    name: str
    shape: tuple          # static dims as imported
    dynamic: tuple = ()   # positions of dims that ONNX leaves open (-1 in shape_signature)


@dataclass
class Imported:
    model: Model
    inputs: list = field(default_factory=list)    # IoSpec, ONNX order
    outputs: list = field(default_factory=list)
    op_counts: dict = field(default_factory=dict)  # ONNX op type -> count
    # Where the builder's shadow (other sizes of the dynamic dims) was refused: (where, why).
    shadow_problems: list = field(default_factory=list)


def load_onnx(source):
    """An `onnx.ModelProto` from a path (with its external data) or a ModelProto."""
    import onnx

    if isinstance(source, onnx.ModelProto):
        return source
    path = Path(source)
    if not path.exists():
        raise ConversionError(f"no such file: {path}")
    if path.is_dir():
        raise ConversionError(f"{path} is a directory, not an ONNX model")
    return load_checked(path)   # guards.py: external-data locations checked before reading


def opset_of(proto) -> int:
    for imp in proto.opset_import:
        if imp.domain in DEFAULT_DOMAINS:
            return int(imp.version)
    raise ConversionError("the model imports no opset of the default ONNX domain")


def upgrade(proto, opset: int):
    """A copy of `proto` at opset MIN_OPSET, by onnx's version converter."""
    import onnx.version_converter

    try:
        return onnx.version_converter.convert_version(proto, MIN_OPSET)
    except Exception as e:  # noqa: BLE001  the converter raises RuntimeError and friends
        text = " ".join(str(e).split())[:200] or type(e).__name__
        raise ConversionError(f"the model uses opset {opset}; the converter reads opsets "
                              f"{MIN_OPSET} and newer, and onnx's version converter could "
                              f"not upgrade it ({text})") from None


# Initializers larger than this leave the copy that onnx's checker and shape inference read:
# both serialize the whole model (6.8 s of a 330 MB ViT's conversion), and neither needs weights.
LIGHT_BYTES = 1 << 20
_LIGHT: dict = {}   # id(proto) -> (proto, its light copy): the last model only


def light(proto):
    """`proto` with each large initializer a graph input of its type and shape instead (the
    same model for checking and shape inference; shapes computed from data come from small
    constants), or `proto` itself when it has none."""
    import onnx
    from onnx import helper

    cached = _LIGHT.get(id(proto))
    if cached is not None and cached[0] is proto:
        return cached[1]
    big = [init for init in proto.graph.initializer if init.ByteSize() > LIGHT_BYTES]
    if not big:
        return proto
    names = {init.name for init in big}
    out = onnx.ModelProto()
    # every field but the large initializers (CopyFrom would copy their data first)
    _copy_fields(out, proto, skip="graph")
    _copy_fields(out.graph, proto.graph, skip="initializer")
    out.graph.initializer.extend(init for init in proto.graph.initializer
                                 if init.name not in names)
    declared = {vi.name for vi in out.graph.input}
    out.graph.input.extend(helper.make_tensor_value_info(init.name, init.data_type, init.dims)
                           for init in big if init.name not in declared)
    _LIGHT.clear()
    _LIGHT[id(proto)] = (proto, out)
    return out


def _copy_fields(dst, src, skip: str) -> None:
    """Copy the message `src`'s set fields but `skip` into the empty message `dst`."""
    for fd, value in src.ListFields():
        if fd.name == skip:
            continue
        if fd.is_repeated:
            getattr(dst, fd.name).extend(value)
        elif fd.message_type is not None:
            getattr(dst, fd.name).CopyFrom(value)
        else:
            setattr(dst, fd.name, value)


def check_model(proto) -> None:
    import onnx

    proto = light(proto)

    if not proto.graph.node and not proto.graph.output:
        raise ConversionError("the ONNX model has an empty graph")
    try:  # full_check adds strict shape inference: contradicting types and shapes
        onnx.checker.check_model(proto, full_check=True)
    except onnx.checker.ValidationError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else "validation failed"
        raise ConversionError(f"invalid ONNX model: {first}") from None
    except onnx.shape_inference.InferenceError as e:
        text = " ".join(str(e).split())
        raise ConversionError(f"invalid ONNX graph: {text}") from None
    except ValueError:  # a model over 2 GB cannot be checked in memory; the import checks it
        pass


def unsupported_nodes(proto, opset: int) -> list:
    """One line per node the converter has no lowering for, in the graph and in the body graphs
    of its control flow (an If's branches, a Loop's body), all at once."""
    problems = []

    def scan(graph, inside: str) -> None:
        for node in graph.node:
            label = f"{node.op_type} node {node.name or (node.output[0] if node.output else '')!r}"
            if node.domain not in DEFAULT_DOMAINS:
                problems.append(f"{label}{inside}: domain {node.domain!r} is not supported")
            elif node.op_type not in LOWERINGS:
                problems.append(f"{label}{inside} (opset {opset}): no lowering for "
                                f"{node.op_type}")
            for name, body in body_graphs(node):
                scan(body, f" (in the {name} of {node.op_type} "
                           f"{node.name or node.output[0]!r})")

    scan(proto.graph, "")
    return problems


def checked(proto):
    """(proto at opset MIN_OPSET or newer, its opset) after every check that does not depend on
    the input sizes (the guards, onnx's checker, the unsupported nodes): a conversion that
    imports the model several times checks it once."""
    opset = opset_of(proto)
    if opset < MIN_OPSET:
        proto, opset = upgrade(proto, opset), MIN_OPSET
    check_proto(proto)   # guards.py: types, int32 dims and attributes, nesting
    check_model(proto)
    problems = unsupported_nodes(proto, opset)
    if problems:
        raise UnsupportedOpsError(problems)
    return proto, opset


def import_onnx(proto, input_shapes: dict | None = None, dynamic_size=1,
                loops: bool = False, shadow_size=None, prepared=None) -> Imported:
    """Lower `proto` into the IR. `input_shapes` maps input names to shapes (-1 marks a dim that
    stays dynamic); open dims take `dynamic_size` for the import (an int, or a function of the
    input's name and the dim's position). `loops`: recurrent ops as WHILE loops rather than
    unrolled (their step count may then change while running). `shadow_size` (like
    `dynamic_size`): other sizes of the open dims, followed beside the import (the builder's
    shadow), so that the shapes of tensors whose dims follow them are computed in the graph
    rather than folded into constants. `prepared`: what `checked(proto)` gave, when the caller
    ran it already."""
    proto, opset = prepared if prepared is not None else checked(proto)
    inputs = resolve_inputs(proto, input_shapes or {}, dynamic_size)
    shadow = None if shadow_size is None else \
        [spec.shape for spec, _ in resolve_inputs(proto, input_shapes or {}, shadow_size)]
    expected = inferred_types(proto, inputs)
    op_counts: dict = {}
    for node in proto.graph.node:
        op_counts[node.op_type] = op_counts.get(node.op_type, 0) + 1
    nodes = fuse_gelu(proto)

    model = Model(description="edgelite tflite-convert")
    sg = Subgraph(name="main")
    model.subgraphs.append(sg)
    b = IRBuilder(model, sg)
    b.prefer_loops = loops
    tensors = _Tensors(b, proto.graph.initializer)
    if shadow is not None:
        b.shadow_shapes = {}
    for k, (spec, dtype) in enumerate(inputs):
        t = b.tensor(spec.name, spec.shape, dtype)
        sg.inputs.append(t)
        tensors.names[spec.name] = t
        if shadow is not None and shadow[k] != spec.shape:
            b.shadow_shapes[t] = shadow[k]
    # the conversion's budget counts the inputs at the sizes the kernels are prepared at
    budget.conversion_inputs([(spec.shape, dtype) for spec, dtype in inputs] +
                             [(s, d) for s, (_, d) in zip(shadow or [], inputs)])
    result = Imported(model, [spec for spec, _ in inputs],
                      op_counts=dict(sorted(op_counts.items())))
    problems = Scope(b, tensors, opset, expected).lower(nodes)
    if problems:
        raise UnsupportedOpsError(problems)
    for out in proto.graph.output:
        t = tensors.get(out.name)
        if t < 0:
            raise ConversionError(f"graph output {out.name!r} is not produced by any node")
        sg.outputs.append(t)
        result.outputs.append(IoSpec(out.name, b.shape(t), _open_dims(out)))
    result.shadow_problems = list(b.shadow_problems)
    remove_dead(sg)
    return result


class Scope:
    """Lowers ONNX nodes into one subgraph: the builder, the ONNX names seen so far, and what
    control-flow lowerings need to lower a body graph (inline, or into a subgraph of its own)."""

    def __init__(self, b: IRBuilder, tensors: "_Tensors", opset: int, expected: dict):
        self.b, self.tensors, self.opset, self.expected = b, tensors, opset, expected

    def lower(self, nodes) -> list:
        """Lower `nodes` in order; one line per node that cannot be lowered."""
        problems, failed = [], set()
        for node in nodes:
            if any(name in failed for name in node.input):
                failed.update(node.output)
                continue
            try:
                self._lower_node(node)
            except ConversionError as e:
                problems.append(str(e))
                failed.update(node.output)
        return problems

    def inline(self, graph) -> list:
        """Lower a body graph's nodes here (an If whose condition is known); its outputs."""
        where = self.b.where
        problems = self.lower(graph.node)
        self.b.where = where
        if problems:
            raise ConversionError("; ".join(problems))
        return [self.tensors.get(out.name) for out in graph.output]

    def subgraph(self, graph) -> tuple:
        """Lower a body graph into a new subgraph: (subgraph index, the outer tensors it reads
        (its inputs, in order), its output tensors). Outer constants are copied in."""
        model = self.b.model
        sg = Subgraph(name=graph.name or f"body{len(model.subgraphs)}")
        model.subgraphs.append(sg)
        inner = IRBuilder(model, sg)
        inner.prefer_loops = self.b.prefer_loops
        tensors = _Tensors(inner, graph.initializer, parent=self.tensors)
        if graph.input:  # Loop and Scan bodies take inputs; If bodies take none
            raise ConversionError(f"body graph {graph.name!r} takes inputs: not supported")
        problems = Scope(inner, tensors, self.opset, self.expected).lower(graph.node)
        if problems:
            raise ConversionError("; ".join(problems))
        sg.outputs = [tensors.get(out.name) for out in graph.output]
        for k, t in enumerate(sg.outputs):
            if t in sg.inputs or inner.value(t) is not None:  # an op writes every output
                shape = inner.const(np.array(inner.shape(t), np.int32))
                sg.outputs[k] = inner.emit("RESHAPE", [t, shape], {"new_shape": inner.shape(t)},
                                           [inner.shape(t)], [inner.dtype(t)])[0]
        remove_dead(sg)
        return len(model.subgraphs) - 1, tensors.captured, sg.outputs

    def _lower_node(self, node) -> None:
        b, tensors, expected = self.b, self.tensors, self.expected
        declared = [expected.get(name, (None, None))[0] for name in node.output]
        n = OnnxNode(node, [tensors.get(name) for name in node.input], self.opset,
                     decode_attrs(node), declared, self)
        b.where = node.name or node.output[0]
        first_new = len(b.sg.tensors)
        try:
            outs = LOWERINGS[node.op_type](b, n)
        except ConversionError as e:
            if str(e).startswith(n.label):
                raise
            raise ConversionError(f"{n.label}: {e}") from None
        outs = [outs] if isinstance(outs, (int, np.integer)) else list(outs)
        if len(outs) < len([o for o in node.output if o]):
            raise ConversionError(f"{n.label}: lowering gave {len(outs)} outputs for "
                                  f"{len(node.output)}")
        for name, t in zip(node.output, outs):
            if not name:
                continue
            tensors.names[name] = t
            if t >= first_new:
                b.sg.tensors[t].name = b.unique(name)
            want = expected.get(name)
            if want is not None:
                _check_output(n, name, b.sg.tensors[t], *want)


def _check_output(n, name, tensor, dims, dtype) -> None:
    """The lowering must give what ONNX's shape inference says (where it knows)."""
    if dtype is not None and dtype != tensor.dtype:
        raise ConversionError(f"{n.label}: output {name!r} is {tensor.dtype} here but ONNX "
                              f"infers {dtype} (a converter bug)")
    if dims is not None and all(d is not None for d in dims) and tuple(dims) != tensor.shape:
        raise ConversionError(f"{n.label}: output {name!r} has shape {list(tensor.shape)} here "
                              f"but ONNX infers {list(dims)} (a converter bug)")


class _Tensors:
    """ONNX tensor names -> IR tensors; initializers become constants on first use. In a body
    graph (`parent` set), an outer name becomes a copy of the outer constant, or an input of
    the subgraph that the control-flow op feeds with the outer tensor (`captured`)."""

    def __init__(self, b: IRBuilder, initializers, parent: "_Tensors | None" = None):
        self.b = b
        self.names: dict = {}
        self.initializers = {init.name: init for init in initializers}
        self.parent = parent
        self.captured: list = []   # outer tensors, in the order of the subgraph's inputs

    def get(self, name: str) -> int:
        if not name:
            return -1
        t = self.names.get(name)
        if t is not None:
            return t
        init = self.initializers.get(name)
        if init is None and self.parent is not None:
            return self._capture(name)
        if init is None:
            raise ConversionError(f"tensor {name!r} is read but nothing produces it")
        value = memo.initializer(init)
        if value.dtype.kind in "OSU":
            raise ConversionError(f"initializer {name!r} holds strings: .tflite cannot")
        t = self.names[name] = self.b.const(value, name=name)
        return t

    def _capture(self, name: str) -> int:
        outer = self.parent.get(name)
        pb, b = self.parent.b, self.b
        value = pb.value(outer)
        if value is not None:
            t = b.const(value, name=name)
        else:
            t = b.tensor(name, pb.shape(outer), pb.dtype(outer))
            b.sg.inputs.append(t)
            self.captured.append(outer)
        self.names[name] = t
        return t


# -- inputs and shapes ---------------------------------------------------------------------------

def _elem_dtype(elem_type: int, what: str) -> str:
    from onnx import helper
    try:
        return dtype_name(helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, ValueError, TypeError):
        raise ConversionError(f"{what} has ONNX element type {elem_type}, which .tflite "
                              "cannot hold") from None


def _open_dims(value_info) -> tuple:
    dims = value_info.type.tensor_type.shape.dim
    return tuple(i for i, d in enumerate(dims) if not (d.HasField("dim_value") and d.dim_value > 0))


def _dims_text(value_info) -> str:
    return "[" + ", ".join(str(d.dim_value) if d.HasField("dim_value") and d.dim_value > 0
                           else (d.dim_param or "?")
                           for d in value_info.type.tensor_type.shape.dim) + "]"


def resolve_inputs(proto, input_shapes: dict, dynamic_size=1) -> list:
    """[(IoSpec, dtype)] of the graph inputs with every dim fixed (an open dim at
    `dynamic_size`, or `dynamic_size(name, axis)`); ConversionError listing every input whose
    shape cannot be resolved."""
    size_of = dynamic_size if callable(dynamic_size) else (lambda name, axis: dynamic_size)
    initializers = {init.name for init in proto.graph.initializer}
    graph_inputs = [i for i in proto.graph.input if i.name not in initializers]
    unknown = sorted(set(input_shapes) - {i.name for i in graph_inputs})
    if unknown:
        raise ConversionError(worded(
            input_shapes_setting(), f" names {', '.join(map(repr, unknown))}, but the model's "
            f"inputs are {', '.join(repr(i.name) for i in graph_inputs) or 'none'}"))
    problems, out = [], []
    for vi in graph_inputs:
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type"):
            problems.append(f"input {vi.name!r} is not a tensor (sequences and maps are not "
                            "supported)")
            continue
        dtype = _elem_dtype(tt.elem_type, f"input {vi.name!r}")
        if not tt.HasField("shape") and vi.name not in input_shapes:
            problems.append(worded(f"input {vi.name!r} has no shape; give one with ",
                                   input_shapes_setting(vi.name, ["..."])))
            continue
        dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None
                for d in tt.shape.dim]
        if vi.name in input_shapes:
            override = [int(d) for d in input_shapes[vi.name]]
            if tt.HasField("shape") and len(override) != len(dims):
                problems.append(worded(input_shapes_setting(vi.name), f": {len(override)} dims "
                                       f"given, the input has rank {len(dims)} {_dims_text(vi)}"))
                continue
            dims = [None if d < 0 else d for d in override]
        open_dims = [i for i, d in enumerate(dims) if d is None]
        shape = tuple(size_of(vi.name, i) if d is None else d for i, d in enumerate(dims))
        out.append((IoSpec(vi.name, shape, tuple(open_dims)), dtype))
    if problems:
        raise ConversionError(worded("cannot resolve the input shapes: ", joined("; ", problems)))
    return out


def _infer(model):
    import onnx

    try:
        return onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    except ValueError as e:  # a model over 2 GB: no ONNX inference, kernels still infer
        if "2GB" in str(e) or "2 GB" in str(e):
            return None
        raise
    except Exception as e:  # InferenceError: shapes or types that contradict each other
        text = str(e).strip().splitlines()
        raise ConversionError(f"invalid ONNX graph: {text[-1] if text else type(e).__name__}") \
            from None


def inferred_types(proto, inputs: list) -> dict:
    """ONNX shape inference on the model with the inputs fixed: name -> (dims, dtype). Made once
    a conversion for each set of input shapes (its imports at one size share it); read-only."""
    key = (id(proto), tuple((spec.name, spec.shape) for spec, _ in inputs))
    return memo.answer("inferred_types", key, proto, lambda: _inferred_types(proto, inputs))


def _inferred_types(proto, inputs: list) -> dict:
    import onnx

    fixed = onnx.ModelProto()
    fixed.CopyFrom(light(proto))
    by_name = {spec.name: spec for spec, _ in inputs}
    for vi in fixed.graph.input:
        spec = by_name.get(vi.name)
        if spec is None:
            continue
        dims = vi.type.tensor_type.shape.dim
        del dims[:]
        for d in spec.shape:
            dims.add().dim_value = d
    try:
        inferred = _infer(fixed)
    except ConversionError:
        # The exporter's own value_info and output shapes may hold a size it traced with where
        # the input's dim is open (torch's dynamo exporter writes [1, 197, 768] after an Add of
        # a [batch, 197, 768] input): inferred again from the inputs alone, which decide.
        declared = [o for o in fixed.graph.output if o.type.tensor_type.HasField("shape")]
        if not len(fixed.graph.value_info) and not declared:
            raise
        del fixed.graph.value_info[:]
        for o in declared:
            o.type.tensor_type.ClearField("shape")
        inferred = _infer(fixed)
    if inferred is None:
        return {}
    out = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.output):
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type") or not tt.HasField("shape"):
            continue
        dims = tuple(d.dim_value if d.HasField("dim_value") and d.dim_value >= 0 else None
                     for d in tt.shape.dim)
        try:
            dtype = _elem_dtype(tt.elem_type, vi.name) if tt.elem_type else None
        except ConversionError:
            dtype = None
        out[vi.name] = (dims, dtype)
    _backfill(inferred.graph, out)
    return out


# Ops whose output has their (first) input's shape.
_SAME_SHAPE = frozenset("""Abs Acos Asin Atan Cast Ceil Cos Dropout Elu Erf Exp Floor Gelu
HardSigmoid HardSwish Identity IsInf IsNaN LeakyRelu Log LogSoftmax Neg Not Reciprocal Relu
Round Selu Sigmoid Sign Sin Softmax Softplus Softsign Sqrt Tan Tanh""".split())


# Binary ops with broadcasting: the output has an input's shape when the other input is a
# scalar, or when both inputs are known to have one shape.
_BROADCASTING = frozenset("""Add Sub Mul Div Pow Max Min Mod And Or Xor Equal Less Greater
LessOrEqual GreaterOrEqual""".split())


def _backfill(graph, types: dict) -> None:
    """Give a tensor whose shape ONNX cannot infer (it depends on values known only while
    running) the shape of a tensor provably the same shape: a shape-preserving op's output, or
    a broadcasting op's output where the other input is a scalar or has the same shape. A
    declared Log(ReduceSum(x, axes)) tells the ReduceSum's shape; a declared window function's
    output tells its RANGE's length (a chain of scalar products, COS and sums of such)."""
    parent: dict = {}

    def find(a):
        while parent.get(a, a) != a:
            parent[a] = a = parent.get(parent[a], parent[a])
        return a

    scalars = {name for name, (dims, _) in types.items() if dims == ()}
    scalars |= {init.name for init in graph.initializer if not init.dims}
    changed = True
    while changed:
        changed = False
        for node in graph.node:
            if not node.input or not node.output:
                continue
            pairs = []
            if node.op_type in _SAME_SHAPE:
                pairs = [node.input[0]]
            elif node.op_type in _BROADCASTING and len(node.input) == 2:
                a, b = node.input
                same = find(a) == find(b)
                pairs = [x for x, other in ((a, b), (b, a)) if same or other in scalars]
            for x in pairs:
                if find(x) != find(node.output[0]):
                    parent[find(x)] = find(node.output[0])
                    changed = True
    classes: dict = {}
    for name in set(parent) | set(parent.values()):
        classes.setdefault(find(name), []).append(name)
    for members in classes.values():
        known = {types[m][0] for m in members if m in types and types[m][0] is not None
                 and all(d is not None for d in types[m][0])}
        if len(known) != 1:
            continue
        (shape,) = known
        for m in members:
            dims, dtype = types.get(m, (None, None))
            if dims is None or (len(dims) == len(shape) and None in dims):
                types[m] = (shape, dtype)

