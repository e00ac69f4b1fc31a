"""The conversion: import, optimize, lay out the inputs and outputs, sign, serialize.

An input dim the ONNX file leaves open (a batch, an image's height and width, a sequence's
length) stays dynamic. The model is converted at two sizes of the open dims: the dims and RESHAPE
targets that differ between the two graphs are the dynamic ones (-1 in `shape_signature` and in
the RESHAPE shape), so no per-op rule has to track them. When the two graphs differ otherwise
(shape arithmetic folded into constants that follow the sizes), the values whose shapes follow
the open dims have their shapes computed in the graph (SHAPE and arithmetic on it), and the
conversions at two sizes must then agree.
"""
from __future__ import annotations

import gc
import json
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from edgelite.interpreter import budget
from edgelite.interpreter.feeds import IO_LAYOUT_KEY
from edgelite.schema import Model, SignatureDef, save

from . import data_dependent, memo, pipeline
from .builder import TRANSPOSE_MAX_RANK
from .errors import input_shapes_setting, worded
from .errors import ConversionError
from .onnx_import import Imported, checked, import_onnx, inferred_types, load_onnx, \
    resolve_inputs
from .editor import Editor
from .pass_clean import compact
from .pass_shape import tidy_computed_shapes

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
    # Python's cycle collector walks every object the conversion made, again and again, and
    # finds little: a third of the time of a 40k-node graph. It runs once, at the end.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _convert(source, input_shapes, keep_io_layout)
    finally:
        if collecting:
            gc.enable()


def _convert(source, input_shapes, keep_io_layout: bool) -> Conversion:
    start = time.perf_counter()
    proto = load_onnx(source)
    # Constants folded while converting are allocated through one budget, the interpreter's.
    with budget.conversion(_model_bytes(source, proto)), memo.conversion():
        return _convert_loaded(proto, input_shapes, keep_io_layout, start)


def _model_bytes(source, proto) -> int:
    """The model's size in bytes, about: its file's, or its initializers' data when that is
    more (external data). proto.ByteSize() serializes the model: seconds for a large one."""
    import os

    data = sum(len(init.raw_data) for init in proto.graph.initializer)
    if isinstance(source, (str, os.PathLike)) and os.path.isfile(source):
        return max(os.path.getsize(source), data)
    return proto.ByteSize() if data < 1 << 26 else data


def _convert_loaded(proto, input_shapes, keep_io_layout: bool, start: float) -> Conversion:
    resolve_inputs(proto, input_shapes or {})   # the settings' mistakes, whatever the sizes
    sizes = Sizes(proto, input_shapes or {})
    proto = Checked(*checked(proto))
    warnings = []
    if not sizes.open:
        model, imported, layout = _convert_at(proto, input_shapes, keep_io_layout, sizes.at(0))
        if proto.data_dependent:
            other, _, _ = _convert_at(proto, input_shapes, keep_io_layout, sizes.at(0),
                                      other=True)
            problem = mark_dynamic_dims(model, other)
            if problem:
                warnings.append(f"the sizes that follow the values stay at their nominal sizes "
                                f"in shape_signature: {problem}")
    else:
        model, imported, layout, problem = _convert_dynamic(proto, input_shapes, keep_io_layout,
                                                            sizes)
        if problem:
            warnings.append(worded(f"{sizes.describe()}: {problem}; fix them with ",
                                   input_shapes_setting(), " to silence this"))
    if proto.data_dependent:
        data_dependent.mark_declared_outputs(model, imported.outputs, layout["outputs"])
    _check_ranks(model)
    content = save(model)
    ops = Counter(op.op for sg in model.subgraphs for op in sg.operators)
    return Conversion(content, model, dict(sorted(imported.op_counts.items())),
                      dict(sorted(ops.items())), ops.get("TRANSPOSE", 0),
                      time.perf_counter() - start, io_layout_json(imported, layout), warnings)


def _check_ranks(model: Model) -> None:
    """LiteRT refuses a tensor of more than 8 dims (TRANSPOSE: "only supports 1D-8D input
    arrays", RESHAPE: "too many dimensions"): every op that would read or write one, at once,
    rather than a file LiteRT refuses."""
    found = []
    for sg in model.subgraphs:
        for op in sg.operators:
            over = [t for t in dict.fromkeys((*op.inputs, *op.outputs))
                    if t >= 0 and len(sg.tensors[t].shape) > TRANSPOSE_MAX_RANK]
            if over:
                found.append(f"{op.op} on " + ", ".join(
                    f"'{sg.tensors[t].name}' {list(sg.tensors[t].shape)}" for t in over))
    if found:
        raise ConversionError(
            f"LiteRT takes tensors of at most {TRANSPOSE_MAX_RANK} dims; {len(found)} op(s) "
            f"of the converted graph would have more: " + "; ".join(found[:10])
            + ("; ..." if len(found) > 10 else ""))


class Sizes:
    """The sizes the open dims of the model's inputs take in the conversions that find which
    dims follow them: a first dim (a batch) at `batch + k`, any other open dim at LADDER's
    sizes (an open dim named like another one takes its sizes: ONNX's dim_param ties them).
    `at(k)` gives the importer's size function for conversion k."""

    LADDERS = ((128, 160, 192, 224), (1024, 1280, 1536, 1792), (32, 48, 64, 80))

    def __init__(self, proto, input_shapes: dict):
        self.open = []   # (input name, axis, key)
        initializers = {init.name for init in proto.graph.initializer}
        for vi in proto.graph.input:
            if vi.name in initializers or not vi.type.HasField("tensor_type"):
                continue
            dims = list(vi.type.tensor_type.shape.dim)
            given = input_shapes.get(vi.name)
            for axis, d in enumerate(dims if given is None else given):
                if given is None:
                    fixed = d.HasField("dim_value") and d.dim_value > 0
                    key = d.dim_param or (vi.name, axis)
                else:
                    fixed, key = int(d) >= 0, (vi.name, axis)
                if not fixed:
                    self.open.append((vi.name, axis, key))
        self.ladder = 0
        self.batch = 1
        self.fixed = None   # `shown` for a conversion that fixed only some of the open dims

    @property
    def batch_only(self) -> bool:
        return all(axis == 0 for _, axis, _ in self.open)

    def at(self, k: int):
        table = {}
        for _name, axis, key in self.open:
            table.setdefault(key, self.batch + k if axis == 0 else self.LADDERS[self.ladder][k])
        keys = {(name, axis): key for name, axis, key in self.open}
        return lambda name, axis: table[keys[(name, axis)]]

    def describe(self, dims=None) -> str:
        """The sentence saying that the open dims (or `dims`) are fixed at `shown`'s sizes."""
        return f"the dynamic dims are fixed at {self.shown(dims)}"

    def shown(self, dims=None) -> str:
        """The open dims (or `dims`, (name, axis) pairs of them) at their first sizes
        ("x[2]=128, x[3]=128"), or those a conversion that fixed some of them fixed (`fixed`)."""
        if isinstance(self.fixed, str) and dims is None:
            return self.fixed
        nominal = self.at(0)
        dims = [(name, axis) for name, axis, _ in self.open] if dims is None else dims
        return ", ".join(f"{name}[{axis}]={nominal(name, axis)}" for name, axis in dims)


def _convert_dynamic(proto, input_shapes, keep_io_layout: bool, sizes: Sizes):
    """Convert with the open dims kept dynamic. (model, imported, layout, problem): the model,
    and why its dims could not stay dynamic (None when they did; the model then has them at
    their first sizes). Sizes too small for the model (a window larger than the input) are
    retried at the next ladder's."""
    from .errors import UnsupportedOpsError

    errors = []
    for ladder in range(len(Sizes.LADDERS)):
        sizes.ladder = ladder
        try:
            return _dynamic_at(proto, input_shapes, keep_io_layout, sizes)
        except ConversionError as e:
            if isinstance(e, UnsupportedOpsError) and all(
                    "no lowering for" in p or "is not supported" in p and "domain" in p
                    for p in e.problems):
                raise   # the same at any size
            sizes.batch = 1
            errors.append((sizes.shown(), e))
            if sizes.batch_only:
                break   # the ladder does not change a first dim's sizes
    tried = "; ".join(shown for shown, _ in errors)
    pinning = None if sizes.batch_only else _pinning_reshape(errors[0][1])
    if pinning is not None:   # a Reshape refused the sizes that follow the first ones
        sizes.ladder, sizes.batch = 0, 1
        return _pinned(proto, input_shapes, keep_io_layout, sizes, pinning, tried)
    if len(errors) == 1 or sizes.batch_only:
        raise errors[0][1]
    first = errors[0][1]
    raise ConversionError(worded(
        f"the model converts at none of the sizes tried for its open dims ({tried}); give "
        "the sizes it needs with ", input_shapes_setting(), " (-1 keeps a dim dynamic). At "
        "the first sizes: ", first)) from None


def _pinning_reshape(error) -> str | None:
    """The problem of a Reshape whose target the graph's constants fix where the element count
    follows the open dims (an export that wrote the sizes it traced into the target: MobileViT's
    patches), or None."""
    problems = getattr(error, "problems", [str(error)])
    for p in problems:
        if p.startswith("Reshape node ") and ": cannot reshape " in p:
            return p
    return None


def _pinned(proto, input_shapes, keep_io_layout: bool, sizes: Sizes, pinning: str,
            tried: str):
    """The open dims other than the first ones fixed, where a Reshape (`pinning`) refused other
    sizes: at their first sizes, or where the model does not convert there, scaled alike by
    what the Reshape's target asks for (square scaling: its element count over its input's);
    a first dim (a batch) stays dynamic if it can. When the model converts at neither, one
    error naming the Reshape and the setting that would fix the sizes."""
    node, refused = pinning.split(": cannot reshape ")
    why = f"{node} has a target that the graph's constants fix (at other sizes: {refused})"
    fixed = [(name, axis) for name, axis, _ in sizes.open if axis != 0]
    nominal = sizes.at(0)
    at = {key: nominal(*key) for key in fixed}
    try:
        return _fixed_at(proto, input_shapes, keep_io_layout, sizes, fixed, at, why)
    except ConversionError as e:
        first = e
    scaled = _scaled_sizes(_pinning_reshape(first), at)
    if scaled is not None:
        try:
            return _fixed_at(proto, input_shapes, keep_io_layout, sizes, fixed, scaled, why)
        except ConversionError:
            pass
    name = fixed[0][0]
    vi = next(vi for vi in proto.graph.input if vi.name == name)
    shape = _fixed_shapes(proto, input_shapes, sizes, fixed, at)[name]
    dims = [(d.dim_param or f"d{axis}") if (name, axis) in fixed else int(shape[axis])
            for axis, d in enumerate(vi.type.tensor_type.shape.dim)]
    shown = sizes.shown(fixed)
    at_first = _pinning_reshape(first)
    at_first = at_first.split(": ", 1)[1] if at_first else str(first)
    raise ConversionError(worded(
        f"the model converts at none of the sizes tried for its open dims ({tried}): {node} "
        f"has a target that the graph's constants fix (at {shown} fixed alone: {at_first}); "
        "give the sizes it was exported at with ", input_shapes_setting(name, dims),
        " (-1 keeps a dim dynamic)")) from None


def _scaled_sizes(pinning: str | None, at: dict) -> dict | None:
    """The sizes `at` scaled alike so that a Reshape that refused them ("... cannot reshape
    [1, 2, 128, 128] to [1, 2, 4096]") gets its element count, or None."""
    if pinning is None:
        return None
    try:
        have, want = (json.loads(part) for part in
                      pinning.split(": cannot reshape ")[1].split(" to "))
    except ValueError:
        return None
    ratio = (float(np.prod(want)) / float(np.prod(have))) ** (1 / len(at)) if have else 0
    scaled = {key: int(round(size * ratio)) for key, size in at.items()}
    if any(v < 1 or abs(v - size * ratio) > 1e-6 * v for (key, size), v in
           zip(at.items(), scaled.values())) or scaled == at:
        return None
    return scaled


def _fixed_shapes(proto, input_shapes, sizes: Sizes, fixed, at: dict) -> dict:
    """`input_shapes` with the dims `fixed` at the sizes `at`, the other open dims -1."""
    shapes = dict(input_shapes or {})
    for spec, _ in resolve_inputs(proto, input_shapes or {}, sizes.at(0)):
        if any(name == spec.name for name, _ in fixed):
            shapes[spec.name] = [at[(spec.name, axis)] if (spec.name, axis) in fixed else
                                 -1 if axis in spec.dynamic else d
                                 for axis, d in enumerate(spec.shape)]
    return shapes


def _fixed_at(proto, input_shapes, keep_io_layout: bool, sizes: Sizes, fixed, at: dict,
              why: str):
    """The conversion with the dims `fixed` at the sizes `at` (the others dynamic if they
    can): (model, imported, layout, the warning's reason)."""
    shapes = _fixed_shapes(proto, input_shapes, sizes, fixed, at)
    inner = Sizes(proto, shapes)
    if inner.open:
        model, imported, layout, problem = _convert_dynamic(proto, shapes, keep_io_layout, inner)
    else:
        (model, imported, layout), problem = _convert_at(proto, shapes, keep_io_layout,
                                                         inner.at(0)), None
    shown = ", ".join(f"{name}[{axis}]={at[(name, axis)]}" for name, axis in fixed)
    if problem:   # the first dims could not stay dynamic either
        shown += ", " + inner.shown()
        why = f"{why}; {problem}"
    sizes.fixed = shown
    return model, imported, layout, why


def _dynamic_at(proto, input_shapes, keep_io_layout: bool, sizes: Sizes):
    """A dynamic first dim alone (a batch) usually needs no shape arithmetic in the graph: the
    graphs converted at sizes 1 and 2, shapes folded, differ only where it is -1. Otherwise the
    graph computes the shapes that follow the dynamic dims (the builder's shadow, at the next
    sizes, tells which they are): converted at the sizes k (shadow k + 1) and k + 1 (shadow
    k + 2) the graphs must again differ only in the dynamic dims. A first dim then starts at 2,
    where no transpose of it is a reshape, and the inputs are given their first sizes."""
    sizes.batch = 1
    recurrent = bool({"LSTM", "GRU"} & {n.op_type for n in proto.graph.node})
    # A constant the folded graphs hold that follows the batch: they differ at any two sizes,
    # so their conversions (three) are skipped for the shadow's (two).
    expanded = sizes.batch_only and not recurrent and not proto.data_dependent \
        and _expanded_to_batch(proto, input_shapes, sizes)
    if expanded:
        first, problem = None, f"{expanded} follows it"
    elif sizes.batch_only:
        first = _convert_at(proto, input_shapes, keep_io_layout, sizes.at(0))
        try:
            second = _convert_at(proto, input_shapes, keep_io_layout, sizes.at(1), other=True)
        except ConversionError as e:
            # The export wrote its traced batch into the graph (a reshape to [197, 1, 3, 768]
            # in torch's dynamo export of a ViT): the model runs at its first size only.
            return (*first, f"the model does not convert at a second size ({e})")
        problem = mark_dynamic_dims(first[0], second[0])
        if problem is None:
            return (*first, None)
        folded = _folded_with_loops(proto, input_shapes, keep_io_layout, sizes) if recurrent \
            else None
        # a data-dependent graph's second conversion is the other one (not the size-2 folded)
        folded = folded or _folded_from_second_and_third(
            proto, input_shapes, keep_io_layout, sizes,
            None if proto.data_dependent else second)
        if folded is not None:
            return (*folded, None)
    else:
        first, problem = None, None
    sizes.batch = 2
    for loops in ([False, True] if recurrent else [False]):
        try:
            a = _convert_at(proto, input_shapes, keep_io_layout, sizes.at(0), loops, sizes.at(1))
            b = _convert_at(proto, input_shapes, keep_io_layout, sizes.at(1), loops, sizes.at(2),
                            other=True)
        except ConversionError as e:
            if first is None and not sizes.batch_only:
                raise
            # (a batch-only model whose folded conversions were skipped: fixed at size 1)
            problem = f"the model does not convert at a second size ({e})" if expanded \
                else str(e)
            continue
        shadow = a[1].shadow_problems or b[1].shadow_problems
        again = mark_dynamic_dims(a[0], b[0])
        if again is None and not shadow:
            tidy_computed_shapes(a[0])
            sizes.batch = 1
            _nominal_inputs(a[0], a[1], a[2], sizes.at(0))
            return (*a, None)
        problem = again if not shadow else "{}: {}".format(*shadow[0])
    if first is None:
        sizes.batch = 1
        first = _convert_at(proto, input_shapes, keep_io_layout, sizes.at(0))
    sizes.batch = 1
    return (*first, problem)


def _expanded_to_batch(proto, input_shapes, sizes: Sizes) -> str | None:
    """An Expand, Tile or ConstantOfShape computed from constants and shapes alone whose output
    shape follows the first dims (torchvision's ViT expands its class token to the batch), at
    the first two sizes: its name, or None. Folded it is a constant that differs at any two
    sizes, so the folded conversions cannot be compared. The shapes are ONNX's inference's, or
    where it cannot tell (a shape through Where), the reference evaluator's on the nodes that
    compute them."""
    graph = proto.graph
    known = {init.name for init in graph.initializer}
    nodes, candidates = [], []
    for node in graph.node:
        if node.op_type == "Shape" or all(not name or name in known for name in node.input):
            known.update(node.output)
            nodes.append(node)
            if node.op_type in ("Expand", "Tile", "ConstantOfShape"):
                candidates.append(node.output[0])
    if not candidates:
        return None
    shapes = []
    for k in (0, 1):
        inputs = resolve_inputs(proto.proto, input_shapes or {}, sizes.at(k))
        types = dict(inferred_types(proto.proto, inputs))
        types.update({spec.name: (spec.shape, dtype) for spec, dtype in inputs})
        shapes.append({name: types.get(name, (None,))[0] for name in candidates})
        unknown = [name for name in candidates
                   if shapes[-1][name] is None or None in shapes[-1][name]]
        if unknown:
            shapes[-1].update(_evaluated_shapes(graph, nodes, types, unknown))
    for name in candidates:
        a, b = shapes[0].get(name), shapes[1].get(name)
        if a is not None and b is not None and None not in a + b and tuple(a) != tuple(b):
            return f"{name!r} (shape {list(a)} at the first size, {list(b)} at the second)"
    return None


def _evaluated_shapes(graph, nodes, types: dict, names) -> dict:
    """The shapes of `names` (outputs of `nodes`, computed from constants and shapes alone),
    by ONNX's reference evaluator with each Shape op a constant of its input's inferred shape;
    a dim inference leaves open takes two different stand-ins, and a shape that follows them is
    not known. {} where that fails."""
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    producer = {out: node for node in nodes for out in node.output}
    needed, todo = set(), list(names)
    while todo:   # the nodes the values of `names` are computed by
        node = producer.get(todo.pop())
        if node is not None and id(node) not in needed:
            needed.add(id(node))
            todo.extend(node.input if node.op_type != "Shape" else [])
    runs = []
    for stand_in in (1009, 1013):
        body = []
        for node in (node for node in nodes if id(node) in needed):
            if node.op_type != "Shape":
                body.append(node)
                continue
            dims = types.get(node.input[0], (None,))[0]
            if dims is None:
                return {}
            attrs = {a.name: a.i for a in node.attribute}
            value = np.array([stand_in if d is None else d for d in dims], np.int64)
            value = value[attrs.get("start", 0):attrs.get("end", len(dims))]
            body.append(helper.make_node("Constant", [], list(node.output),
                                         value=helper.make_tensor("value", TensorProto.INT64,
                                                                  value.shape, value.tolist())))
        used = {name for node in body for name in node.input}
        model = helper.make_model(helper.make_graph(
            body, "shapes", [], [helper.make_tensor_value_info(n, TensorProto.UNDEFINED, None)
                                 for n in names],
            [init for init in graph.initializer if init.name in used]))
        try:
            values = ReferenceEvaluator(model).run(list(names), {})
        except Exception:  # noqa: BLE001  no answer: the folded conversions are tried as before
            return {}
        runs.append([tuple(int(d) for d in np.shape(v)) for v in values])
    return {name: a for name, a, b in zip(names, *runs) if a == b}


def _folded_with_loops(proto, input_shapes, keep_io_layout: bool, sizes: Sizes):
    """Recurrent ops unrolled over a dynamic dim change the graph with its size: as WHILE loops
    they do not. The folded graph with loops and its dynamic dims marked, or None."""
    model, imported, layout = _convert_at(proto, input_shapes, keep_io_layout, sizes.at(0), True)
    other, _, _ = _convert_at(proto, input_shapes, keep_io_layout, sizes.at(1), True,
                              other=True)
    if mark_dynamic_dims(model, other):
        return None
    return model, imported, layout


def _folded_from_second_and_third(proto, input_shapes, keep_io_layout: bool, sizes: Sizes,
                                  second=None):
    """At size 1 a transpose that moves the dynamic first dim is a RESHAPE (size-1 dims move
    no data), so the folded graphs at sizes 1 and 2 differ. Sizes 2 and 3 may not: then the
    size-2 graph with its dynamic dims marked, and 1 as their nominal size. None when that
    fails too. `second`: the conversion at size 2 already made (mark_dynamic_dims left it
    as it was: it edits its first model only), else it is made here."""
    try:
        model, imported, layout = second or _convert_at(proto, input_shapes, keep_io_layout,
                                                        sizes.at(1))
        other, _, _ = _convert_at(proto, input_shapes, keep_io_layout, sizes.at(2), other=True)
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


def _nominal_inputs(model: Model, imported: Imported, layout: dict, nominal) -> None:
    """The inputs' dynamic dims at their nominal sizes (what a first `allocate_tensors` sees),
    and every shape inferred again from them."""
    sg = model.subgraphs[0]
    for spec, t, perm in zip(imported.inputs, sg.inputs, layout["inputs"]):
        tensor = sg.tensors[t]
        tensor.shape = tuple(nominal(spec.name, perm[k]) if perm[k] in spec.dynamic else d
                             for k, d in enumerate(tensor.shape))
        spec.shape = tuple(nominal(spec.name, axis) if axis in spec.dynamic else d
                           for axis, d in enumerate(spec.shape))
    reinfer_shapes(model)
    for spec, t in zip(imported.outputs, sg.outputs):
        spec.shape = sg.tensors[t].shape


def reinfer_shapes(model: Model) -> None:
    """Every op's output shapes in the main subgraph inferred again by its kernel, in order
    (after its inputs' shapes changed), shape arithmetic computed on the way; stops at an op the
    kernels cannot prepare alone (control flow), whose outputs keep the shapes they have."""
    from .builder import WORLD_ELEMENTS, kernel_node, known_values
    from edgelite.interpreter.kernels import registry

    sg = model.subgraphs[0]
    world: dict = {}
    for index, op in enumerate(sg.operators):
        node = kernel_node(model, sg, op, index, world=world)
        prepare = registry.lookup(node)
        if prepare is None:
            return
        try:
            run = prepare(node)
            small = sum(int(np.prod(o.shape)) for o in node.outputs) <= WORLD_ELEMENTS
            values = known_values(node, run, small)
        except Exception:  # noqa: BLE001  the file's shapes stay; the runtimes infer again
            return
        if node.dynamic and values is None:
            return
        for k, (t, out) in enumerate(zip(op.outputs, node.outputs)):
            if model.constant(sg, t) is None:
                shape = out.shape if values is None else values[k].shape
                sg.tensors[t].shape = tuple(int(d) for d in shape)
                if values is not None:
                    world[t] = np.asarray(values[k])


class Checked:
    """The model after `onnx_import.checked`, for the imports of one conversion."""

    def __init__(self, proto, opset: int):
        self.proto, self.opset = proto, opset
        self.graph = proto.graph
        # an op whose output sizes follow the values (in the graph or a body of it)
        self.data_dependent = data_dependent.present(proto.graph)


def _convert_at(proto: Checked, input_shapes, keep_io_layout: bool, dynamic_size,
                loops: bool = False, shadow_size=None, other: bool = False):
    """One conversion; `other`: the one a conversion is compared with, its data-dependent
    sizes swapped (`data_dependent.other_sizes`), so that those dims are marked too."""
    if other:
        with data_dependent.other_sizes():
            return _convert_at(proto, input_shapes, keep_io_layout, dynamic_size, loops,
                               shadow_size)
    imported = import_onnx(proto.proto, input_shapes, dynamic_size, loops, shadow_size,
                           prepared=(proto.proto, proto.opset))
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
    edits, signatures, computed = [], [], []
    for i, (ta, tb) in enumerate(zip(a.tensors, b.tensors)):
        va, vb = model.constant(a, i), other.constant(b, i)
        if va is not None and vb is not None:
            if va.shape == vb.shape and np.array_equal(va, vb):
                continue
            if i not in reshape_targets or va.shape != vb.shape or va.ndim != 1:
                return f"constant {ta.name!r} depends on it"
            differ = np.flatnonzero(va != vb)
            if len(differ) > 1:
                op = reshape_targets[i]
                computed.append((op, [int(d) for d in va], [int(d) for d in vb],
                                 b.tensors[op.inputs[0]].shape))
                continue
            edits.append((i, int(differ[0])))
            continue
        if len(ta.shape) != len(tb.shape):
            return f"the rank of {ta.name!r} depends on it"
        if ta.shape != tb.shape:
            signatures.append((ta, tuple(-1 if x != y else x for x, y in zip(ta.shape, tb.shape))))
    ed = None
    for op, target, other_target, other_in in computed:
        ed = ed or Editor(model, a)
        problem = _target_from_shape(ed, op, target, other_in, other_target)
        if problem:
            return problem
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


def _target_from_shape(ed, op, target, other_in, other_target) -> str | None:
    """A RESHAPE whose constant target follows dynamic dims in several places (a pass wrote
    it: a transpose of size-1 dims as a reshape) gets it computed from its input's SHAPE: each
    output dim that follows them is the product of its group of input dims (`regroup`), the
    last one -1. Why it cannot, if it cannot."""
    from .builder import regroup, shadow_target

    x = op.inputs[0]
    name = ed.sg.tensors[op.inputs[1]].name
    groups = regroup(ed.shape(x), target)
    if groups is None or shadow_target(other_in, target, groups) != other_target:
        return f"RESHAPE target {name!r} depends on it and is not a regrouping of its input"
    differ = [j for j, (p, q) in enumerate(zip(target, other_target)) if p != q]
    dims = ed.tensor(f"{name}/dims", (len(ed.shape(x)),), "int32")
    new_ops = [ed.new_op("SHAPE", [x], [dims], {"out_type": 2})]
    parts = []
    for ins, outs in groups:
        for j in outs:
            if j not in differ or j == differ[-1]:
                parts.append(ed.const(np.array([-1 if j in differ else target[j]], np.int32),
                                      f"{name}/{j}"))
                continue
            picked = ed.tensor(f"{name}/{j}", (len(ins),), "int32")
            new_ops.append(ed.new_op("GATHER", [dims, ed.const(np.array(ins, np.int32),
                                                               f"{name}/{j}/axes")],
                                     [picked], {"axis": 0}))
            if len(ins) > 1:
                product = ed.tensor(f"{name}/{j}/size", (1,), "int32")
                new_ops.append(ed.new_op("REDUCE_PROD", [picked, ed.const(
                    np.array([0], np.int32), f"{name}/{j}/axis")], [product],
                    {"keep_dims": True}))
                picked = product
            parts.append(picked)
    shape = ed.tensor(f"{name}/computed", (len(target),), "int32")
    new_ops.append(ed.new_op("CONCATENATION", parts, [shape], {"axis": 0}))
    for new in new_ops:
        ed.insert_before(op, new)
    ed.set_input(op, 1, shape)
    op.options = op.options.replace(new_shape=tuple(
        -1 if j in differ else d for j, d in enumerate(target)))
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
