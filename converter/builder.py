"""Building the IR op by op, with every new op's output shapes inferred (and its value folded when
all its inputs are constant) by the interpreter's own kernels.

The importer and the passes emit TFLite ops through an `IRBuilder`; each `op()` call asks the
kernel's `prepare` for the output shapes, so shapes are known the moment a tensor exists, and an
op whose inputs are all constant never enters the graph: its kernel computes the value, which
becomes a constant tensor. Constant folding and shape inference are the interpreter's kernels,
nothing else.

A kernel whose output shape depends on values known only while running (a TILE whose multiples
are a model input) is dynamic (`node.dynamic`); the caller then gives the shapes the model
declares for its outputs (`shapes=`, from ONNX's shape inference), which the file records.
"""
from __future__ import annotations

import numpy as np

from edgelite.schema import (Model, Operator, OperatorCode, Options, Subgraph, Tensor,
                             default_options, dtype_name, has_side_effects, numpy_dtype)
from edgelite.schema.ops import data_input

from .errors import ConversionError


def kernel_node(model: Model, sg: Subgraph, op: Operator, index: int, with_values: bool = True,
                world: dict | None = None, shapes: dict | None = None):
    """The interpreter's view of `op` (a kernels `Node`), built from the IR's tensors; `world`
    gives values that only this conversion's input sizes fix (shapes of dynamic tensors),
    `shapes` other shapes for some tensors (the shadow sizes)."""
    from edgelite.interpreter import budget
    from edgelite.interpreter.kernels.registry import Node, TensorInfo

    graph_inputs = set(sg.inputs)

    def info(t):
        if t < 0:
            return None
        tensor = sg.tensors[t]
        data = None
        if with_values and t not in graph_inputs:
            data = model.constant(sg, t)
            if data is None and world:
                data = world.get(t)
            if data is None and 0 in tensor.shape:  # no elements: the value is known
                data = np.zeros(tensor.shape, tensor.np_dtype)
        shape = tuple(tensor.shape)
        if shapes and t in shapes:   # the shadow's shape: a value of another shape is not its
            shape = tuple(shapes[t])
            if data is not None and data.shape != shape:
                data = None
        return TensorInfo(t, tensor.name, shape, tensor.np_dtype, tensor.dtype,
                          tensor.quantization, data, tensor.is_variable)

    return Node(op=op.opcode.name, index=index, inputs=[info(t) for t in op.inputs],
                outputs=[info(t) for t in op.outputs], options=op.options,
                custom_options=op.custom_options, is_custom=op.opcode.builtin == "CUSTOM",
                runtime=budget.conversion_owner())   # the conversion's allocation budget


def prepare_op(model: Model, sg: Subgraph, op: Operator, index: int, what: str = "",
               world: dict | None = None, shapes: dict | None = None):
    """Run the kernel's `prepare` on `op`: returns (node, run). ConversionError naming `what`
    (the ONNX node being lowered, or the pass) when edgelite has no kernel or prepare refuses."""
    from edgelite.interpreter.kernels import registry

    node = kernel_node(model, sg, op, index, world=world, shapes=shapes)
    prepare = registry.lookup(node)
    where = f"{what}: " if what else ""
    if prepare is None:
        have = registry.supported_keys(node.op)
        detail = f"for {registry.arithmetic(node)} (it has {', '.join(have)})" if have else ""
        raise ConversionError(f"{where}edgelite's interpreter has no {node.op} kernel {detail}"
                              .rstrip() + "; shapes and constants are computed by its kernels")
    try:
        run = prepare(node)
    except (ValueError, TypeError, IndexError) as e:
        raise ConversionError(f"{where}{e}") from None
    return node, run


# Where no kernel computes a dtype (int16 ADD, float64 MAXIMUM, an int8 MUL without quantization
# parameters, ...), the op computes in a wider type between CASTs: exact for integers (CAST back
# wraps as the narrow type's own arithmetic would) and float16; float64 computes in float32.
COMPUTE_AS = {"int8": "int32", "uint8": "int32", "int16": "int32", "uint16": "int32",
              "uint32": "int64", "float16": "float32", "float64": "float32"}
# int64 ops with no kernel whose results stay within their inputs' range: folded in int32 when
# every input is a constant that fits (shape arithmetic: Div(Shape(x)[1], 2)).
_INT64_FOLDS = frozenset({"DIV", "FLOOR_DIV", "FLOOR_MOD", "SIGN"})
# Ops whose integer inputs are indices or shapes, which widening must leave alone.
_INDEX_INPUTS = {"GATHER": (1,), "GATHER_ND": (1,), "TILE": (1,), "PAD": (1,), "PADV2": (1,),
                 "MIRROR_PAD": (1,), "RESHAPE": (1,), "TRANSPOSE": (1,), "SLICE": (1, 2),
                 "STRIDED_SLICE": (1, 2, 3), "TOPK_V2": (1,), "SPLIT": (0,), "SPLIT_V": (1, 2),
                 "SUM": (1,), "MEAN": (1,), "REDUCE_MAX": (1,), "REDUCE_MIN": (1,),
                 "REDUCE_PROD": (1,), "CUMSUM": (1,), "ARG_MAX": (1,), "ARG_MIN": (1,),
                 "BROADCAST_TO": (1,), "EXPAND_DIMS": (1,), "REVERSE_V2": (1,), "FILL": (0,)}
# Versions the writer's automatic choice gets wrong for stock runtimes: TFLite registers
# BROADCAST_TO from version 2 (version 1 was the Flex op).
_VERSIONS = {"BROADCAST_TO": 2}
# The largest output (elements) computed as a world value: shape arithmetic is a few elements.
# LiteRT takes at most 8 dims in a TRANSPOSE ("Transpose op only supports 1D-8D input arrays")
# and refuses a 9-D tensor in a RESHAPE: the converter writes no TRANSPOSE past it.
TRANSPOSE_MAX_RANK = 8

WORLD_ELEMENTS = 1 << 16


class IRBuilder:
    """Adds tensors and ops to one subgraph of `model`, inferring as it goes."""

    def __init__(self, model: Model, sg: Subgraph):
        self.model = model
        self.sg = sg
        self.where = ""       # what is being built, for error messages and tensor names
        self._used_names: dict | None = None   # the subgraph's names, counted when first asked
        self.empty: set = set()  # constants with no elements (the format cannot mark them)
        self.dynamic: set = set()  # tensors whose shape is known only while running
        # Values that only this conversion's sizes for the dynamic dims fix (the SHAPE of a
        # dynamic tensor and arithmetic on it): the ops stay in the graph, and the values let
        # kernels infer the shapes that follow at these sizes.
        self.world: dict = {}
        # The shadow: the same graph at other sizes of the dynamic dims, inferred beside the
        # real one (every op's kernel prepared again at those sizes). A tensor's dim is dynamic
        # where its shadow size differs; a lowering that wrote a size into a constant is caught
        # where the shadow's prepare refuses it. Off (None) unless the importer sets it.
        self.shadow_shapes: dict | None = None   # tensor -> shape at the shadow sizes
        self.shadow_world: dict = {}              # tensor -> world value at the shadow sizes
        self.shadow_problems: list = []           # (where, message)
        self._followed = None                     # the op whose shadow was followed last
        # Loops over a dim as WHILE ops instead of unrolled (set when that dim is dynamic).
        self.prefer_loops = False

    # -- tensors -----------------------------------------------------------------------------

    def unique(self, name: str) -> str:
        if self._used_names is None:   # passes make builders for a few ops on large graphs
            self._used_names = {t.name: 1 for t in self.sg.tensors}
        n = self._used_names.get(name, 0)
        self._used_names[name] = n + 1
        return name if n == 0 else f"{name}_{n}"

    def const(self, value, name: str | None = None, dtype=None) -> int:
        """A constant tensor holding `value`."""
        value = _contiguous(value, dtype)
        self._hold(value.nbytes, f"a constant {list(value.shape)} of {value.dtype}")
        name = self.unique(name or f"{self.where or 'const'}/const")
        t = self.sg.add_tensor(Tensor(name, value.shape, dtype_name(value.dtype)))
        self._set_value(t, value)
        return t

    def tensor(self, name: str, shape=(), dtype: str = "float32") -> int:
        """A new tensor without data (an activation)."""
        return self.sg.add_tensor(Tensor(self.unique(name), tuple(shape), dtype))

    def shape(self, t: int) -> tuple:
        return self.sg.tensors[t].shape

    def rank(self, t: int) -> int:
        return len(self.sg.tensors[t].shape)

    def dtype(self, t: int) -> str:
        return self.sg.tensors[t].dtype

    def value(self, t: int) -> np.ndarray | None:
        """The value of a constant tensor, or None for activations and graph inputs."""
        if t < 0 or t in self.sg.inputs:
            return None
        if t in self.empty:
            return np.zeros(self.shape(t), self.sg.tensors[t].np_dtype)
        return self.model.constant(self.sg, t)

    def is_const(self, t: int) -> bool:
        return self.value(t) is not None

    def known(self, t: int):
        """A constant's value, or a world value (this conversion's value of shape arithmetic)."""
        value = self.value(t)
        return self.world.get(t) if value is None else value

    def dynamic_axes(self, t: int) -> frozenset:
        """The axes of tensor t whose size is dynamic (empty: every dim is fixed)."""
        if self.shadow_shapes is not None:
            other = self.shadow_shapes.get(t)
            if other is None or len(other) != len(self.shape(t)):
                return frozenset()
            return frozenset(i for i, (a, b) in enumerate(zip(self.shape(t), other)) if a != b)
        return frozenset()

    def shadow_shape(self, t: int) -> tuple:
        """t's shape at the shadow sizes (its shape when there is no shadow)."""
        if self.shadow_shapes is None:
            return self.shape(t)
        return tuple(self.shadow_shapes.get(t, self.shape(t)))

    def shadow_value(self, t: int):
        """t's value at the shadow sizes: a constant's value, a world value's shadow, or None."""
        value = self.value(t)
        if value is not None:
            return value
        return self.shadow_world.get(t) if t in self.world else None

    def dims_of(self, t: int, dtype: str = "int64") -> int:
        """A 1-D tensor holding t's shape: a constant when every dim is fixed, else a SHAPE op
        (of the tensor under t's layout transposes, gathered back: no TRANSPOSE stays for it)."""
        dims = np.array(self.shape(t), numpy_dtype(dtype))
        if not self.dynamic_axes(t):
            return self.const(dims)
        source, perm = t, list(range(len(dims)))
        producer = self._producer(source)
        while producer is not None and producer.op == "TRANSPOSE" and \
                self.value(producer.inputs[1]) is not None:
            step = [int(p) for p in self.value(producer.inputs[1])]
            perm = [step[p] for p in perm]
            source = producer.inputs[0]
            producer = self._producer(source)
        out = self.emit("SHAPE", [source], {"out_type": _type_code(dtype)},
                        [(len(dims),)], [dtype])[0]
        self.world[out] = np.array(self.shape(source), numpy_dtype(dtype))
        self.shadow_world[out] = np.array(self.shadow_shape(source), numpy_dtype(dtype))
        if perm != sorted(perm):
            out = self.op("GATHER", [out, self.const(np.array(perm, np.int32))], {"axis": 0})
        return out

    def _producer(self, t: int):
        for op in reversed(self.sg.operators):
            if t in op.outputs:
                return op
        return None

    # -- ops ---------------------------------------------------------------------------------

    def ops(self, op: str, inputs: list, options=None, n_out: int = 1, dtypes=None,
            names=None, shapes=None) -> list:
        """Emit `op` and return its output tensors. `options` is an `Options` or a dict of fields
        over TFLite's defaults; output dtypes default to the first input's. An op whose inputs
        are all constant is computed now and never enters the graph. `shapes`: the output
        shapes to record when the kernel can tell them only while running (None: unknown)."""
        opts = options if isinstance(options, Options) else default_options(op, **(options or {}))
        try:
            return self._emit(op, inputs, opts, n_out, dtypes, names, shapes)
        except ConversionError:
            widened = self._widened(op, inputs, opts, n_out, dtypes, names, shapes)
            if widened is None:
                raise
            return widened

    def _emit(self, op, inputs, opts, n_out, dtypes, names, shapes) -> list:
        data = inputs[data_input(op):]
        first = next((t for t in data if t >= 0), None)
        default_dtype = self.dtype(first) if first is not None else "float32"
        dtypes = list(dtypes) if dtypes is not None else [default_dtype] * n_out
        names = list(names) if names is not None else [None] * n_out
        base = f"{self.where}/{op.lower()}" if self.where else op.lower()
        outs = [self.tensor(names[k] or (base if n_out == 1 else f"{base}:{k}"), (), dtypes[k])
                for k in range(n_out)]
        operator = Operator(OperatorCode(op, _VERSIONS.get(op, 0)), [int(t) for t in inputs],
                            outs, opts)
        self.add(operator, shapes)
        return outs

    def _widened(self, op, inputs, opts, n_out, dtypes, names, shapes):
        """`op` computed in COMPUTE_AS types between CASTs, or None when no input needs it."""
        keep = _INDEX_INPUTS.get(op, ())
        compute_as = dict(COMPUTE_AS)
        if op in _INT64_FOLDS and all(t < 0 or self.is_const(t) or t in self.world
                                      for t in inputs) and all(
                _fits_int32(self.known(t)) for t in inputs if t >= 0 and self.dtype(t) == "int64"):
            compute_as["int64"] = "int32"  # shape arithmetic TFLite has no int64 kernel for
        narrow = {k: self.dtype(t) for k, t in enumerate(inputs) if t >= 0 and k not in keep
                  and self.dtype(t) in compute_as and self.sg.tensors[t].quantization is None}
        if not narrow:
            return None
        wide = [self.cast(t, compute_as[narrow[k]]) if k in narrow else t
                for k, t in enumerate(inputs)]
        data = inputs[data_input(op):]
        first = next((t for t in data if t >= 0), None)
        default = self.dtype(first) if first is not None else "float32"
        want = list(dtypes) if dtypes is not None else [default] * n_out
        computed = [compute_as.get(d, d) for d in want]
        try:
            outs = self._emit(op, wide, opts, n_out, computed, names, shapes)
        except ConversionError:
            return None
        return [self.cast(t, d) for t, d in zip(outs, want)]

    def op(self, op: str, inputs: list, options=None, dtype=None, name=None, shape=None) -> int:
        """`ops` for an op with one output."""
        return self.ops(op, inputs, options, 1, None if dtype is None else [dtype],
                        None if name is None else [name], None if shape is None else [shape])[0]

    def add(self, operator: Operator, shapes=None) -> bool:
        """Infer `operator`'s outputs with its kernel; append it to the graph, or fold it into
        constants when all its inputs are constant. Returns True when it was folded. An op
        reading a `world` value stays in the graph; its outputs' values join `world` where the
        kernel computes them (small ones: shape arithmetic)."""
        index = len(self.sg.operators)
        node, run = prepare_op(self.model, self.sg, operator, index, self.where, self.world)
        worldly = any(t in self.world for t in operator.inputs if t >= 0)
        try:
            if node.dynamic:
                return self._add_dynamic(operator, node, run, shapes, worldly)
            return self._add_static(operator, node, run, worldly)
        finally:
            if self.shadow_shapes is not None and operator.outputs and \
                    self.value(operator.outputs[0]) is None and self._followed is not operator:
                self._follow_shadow(operator, index)

    def _follow_shadow(self, operator: Operator, index: int) -> None:
        """Prepare `operator` again at the shadow sizes: its outputs' shadow shapes (and world
        values), or a shadow problem where the kernel refuses those sizes."""
        self._followed = operator
        ins = [t for t in operator.inputs if t >= 0]
        if not any(t in self.shadow_shapes or t in self.shadow_world for t in ins):
            return
        from edgelite.interpreter.kernels import registry
        try:
            node = kernel_node(self.model, self.sg, operator, index, world=self.shadow_world,
                               shapes=self.shadow_shapes)
            run = registry.lookup(node)(node)
            values = known_values(node, run, any(t in self.world for t in operator.outputs))
            if node.dynamic and values is None:
                raise ValueError("its output shape depends on values known only while running")
        except Exception as e:  # noqa: BLE001  any refusal of the kernel at the other sizes
            self.shadow_problems.append((self.where, f"{operator.op}: {e}"))
            return
        for k, t in enumerate(operator.outputs):
            shape = tuple(values[k].shape) if values is not None else tuple(node.outputs[k].shape)
            if shape != tuple(self.shape(t)):
                self.shadow_shapes[t] = shape
            if values is not None and t in self.world:
                self.shadow_world[t] = np.array(values[k], numpy_dtype(self.dtype(t)))

    def _add_static(self, operator: Operator, node, run, worldly: bool) -> bool:
        for t, out in zip(operator.outputs, node.outputs):
            self.sg.tensors[t].shape = tuple(int(d) for d in out.shape)
        if all(o.data is not None for o in node.outputs):  # prepare knew the values
            if worldly:
                return self._add_worldly(operator, [o.data for o in node.outputs])
            for t, out in zip(operator.outputs, node.outputs):
                self._set_value(t, out.data)
            return True
        foldable = (not has_side_effects(operator)
                    and all(i is None or i.data is not None for i in node.inputs))
        if foldable and worldly and sum(int(np.prod(o.shape)) for o in node.outputs) > \
                WORLD_ELEMENTS:
            foldable = False   # a big tensor made from a shape: not needed to infer shapes
        if foldable:
            outs = self._fold(node, run)
            if worldly:
                return self._add_worldly(operator, outs)
            for t, value in zip(operator.outputs, outs):
                self._set_value(t, value)
            return True
        self.sg.operators.append(operator)
        return False

    def _add_worldly(self, operator: Operator, values) -> bool:
        """Outputs computed from world values: the same at the shadow sizes, they are constants
        (the channel count read from the SHAPE of an image whose height and width are dynamic);
        else the op stays, its values in `world`."""
        values = [np.array(v, numpy_dtype(self.sg.tensors[t].dtype))
                  for t, v in zip(operator.outputs, values)]
        if self.shadow_shapes is not None and not has_side_effects(operator):
            for t, value in zip(operator.outputs, values):
                self.sg.tensors[t].shape = value.shape
                self.world[t] = value
            self._follow_shadow(operator, len(self.sg.operators))
            same = all(t in self.shadow_world and self.shadow_world[t].shape == v.shape and
                       np.array_equal(self.shadow_world[t], v)
                       for t, v in zip(operator.outputs, values))
            if same:
                for t, value in zip(operator.outputs, values):
                    del self.world[t]
                    self.shadow_world.pop(t, None)
                    self._set_value(t, value)
                return True
        self.sg.operators.append(operator)
        for t, value in zip(operator.outputs, values):
            self.sg.tensors[t].shape = value.shape
            self.world[t] = value
        return False

    def emit(self, op: str, inputs: list, options, shapes: list, dtypes: list) -> list:
        """Append `op` as given, without asking its kernel or folding it (control flow, whose
        kernels need a running interpreter; an op that must stay in the graph)."""
        opts = options if isinstance(options, Options) else default_options(op, **(options or {}))
        base = f"{self.where}/{op.lower()}" if self.where else op.lower()
        outs = [self.tensor(base if len(shapes) == 1 else f"{base}:{k}", shape, dtype)
                for k, (shape, dtype) in enumerate(zip(shapes, dtypes))]
        self.sg.operators.append(Operator(OperatorCode(op, _VERSIONS.get(op, 0)),
                                          [int(t) for t in inputs], outs, opts))
        return outs

    def _add_dynamic(self, operator: Operator, node, run, shapes, worldly: bool = False) -> bool:
        """An op whose output shapes depend on input values: folded when they are all
        constant (kept, its values in `world`, when some are world values), else given
        `shapes`."""
        if not has_side_effects(operator) and all(i is None or i.data is not None
                                                  for i in node.inputs):
            values = self._fold(node, run)
            if worldly:
                return self._add_worldly(operator, values)
            for t, value in zip(operator.outputs, values):
                self._set_value(t, value)
            return True
        shapes = list(shapes or [])
        if len(shapes) < len(operator.outputs) or any(s is None for s in shapes):
            raise fail(self.where, f"the output shape of {operator.op} depends on values known "
                       "only at run time, and the model does not declare it")
        for t, shape in zip(operator.outputs, shapes):
            self.sg.tensors[t].shape = tuple(int(d) for d in shape)
        self.sg.operators.append(operator)
        self.dynamic.update(operator.outputs)
        return False

    def _fold(self, node, run) -> list:
        """The kernel run on its constant inputs, its outputs allocated through the
        conversion's budget (interpreter/budget.py: the interpreter's rule), or refused before
        they are, naming the node and the size."""
        from edgelite.interpreter import budget

        from . import memo
        try:
            return memo.made(("fold", node.op), [i.data if i is not None else None
                                                  for i in node.inputs],
                             (node.options, [o.shape for o in node.outputs]),
                             lambda: budget.fold(node, run, key="folded"))
        except budget.MemoryBudgetError as e:
            raise fail(self.where, str(e)) from None

    def _hold(self, nbytes: int, what: str) -> None:
        """A constant a lowering computed (np.full, a transposed weight): held in the
        conversion's budget too, or refused naming the node."""
        from edgelite.interpreter import budget
        owner = budget.conversion_owner()
        if owner is not None:
            try:
                owner.budget.charge("folded", nbytes, what)
            except budget.MemoryBudgetError as e:
                raise fail(self.where, str(e)) from None

    def _set_value(self, t: int, value: np.ndarray) -> None:
        tensor = self.sg.tensors[t]
        value = _contiguous(value, numpy_dtype(tensor.dtype))
        tensor.shape = value.shape
        tensor.buffer = self.model.add_buffer(value if value.size else None)
        if not value.size:
            self.empty.add(t)

    # -- common small ops --------------------------------------------------------------------

    def transpose(self, t: int, perm) -> int:
        perm = [int(p) for p in perm]
        if perm == list(range(len(perm))):
            return t
        return self.op("TRANSPOSE", [t, self.const(np.array(perm, np.int32))])

    def reshape(self, t: int, shape, shadow=None) -> int:
        """RESHAPE t to `shape` (its sizes at this conversion's sizes of the dynamic dims): when t
        has dynamic dims, the target follows them (-1 for one; computed from t's SHAPE for
        more), found by grouping the dims of t and of `shape` whose products match. `shadow`:
        the target at the shadow sizes where the caller knows it and it moves one dim (an ONNX
        target's own -1, resolved there: a dynamic dim split into several, which no grouping
        can follow)."""
        shape = [int(d) for d in shape]
        if list(self.shape(t)) == shape:
            return t
        if not self.dynamic_axes(t):
            return self.op("RESHAPE", [t, self.const(np.array(shape, np.int32))],
                           {"new_shape": tuple(shape)})
        groups = regroup(self.shape(t), shape)
        if shadow is not None and sum(a != b for a, b in zip(shape, shadow)) != 1:
            shadow = None
        if shadow is None and groups is not None:
            shadow = shadow_target(self.shadow_shape(t), shape, groups)
        differ = [] if shadow is None else [j for j, (a, b) in enumerate(zip(shape, shadow))
                                           if a != b]
        if len(differ) <= 1:
            target = [-1 if j in differ else d for j, d in enumerate(shape)]
            return self.op("RESHAPE", [t, self.const(np.array(target, np.int32))],
                           {"new_shape": tuple(target)})
        dims = self.dims_of(t, "int32")
        parts = []
        for ins, outs in groups:
            for j in outs:
                if j not in differ:
                    parts.append(self.const(np.array([shape[j]], np.int32)))
                elif j == differ[-1]:
                    parts.append(self.const(np.array([-1], np.int32)))
                elif len(ins) == 1:
                    parts.append(self.op("GATHER", [dims, self.const(np.array(ins, np.int32))],
                                         {"axis": 0}))
                else:
                    picked = self.op("GATHER", [dims, self.const(np.array(ins, np.int32))],
                                     {"axis": 0})
                    parts.append(self.op("REDUCE_PROD", [picked, self.const(
                        np.array([0], np.int32))], {"keep_dims": True}))
        target = parts[0] if len(parts) == 1 else \
            self.op("CONCATENATION", parts, {"axis": 0})
        return self.op("RESHAPE", [t, target])

    def cast(self, t: int, dtype: str) -> int:
        if self.dtype(t) == dtype:
            return t
        return self.op("CAST", [t], {"in_data_type": _type_code(self.dtype(t)),
                                     "out_data_type": _type_code(dtype)}, dtype=dtype)


def known_values(node, run, compute: bool) -> list | None:
    """A prepared kernel node's output values where they are known without running the graph:
    a dynamic kernel's (which returns them) or what prepare knew, else, when `compute`, the
    kernel run on its inputs' values; None when an input's value is missing."""
    ins = [None if i is None else i.data for i in node.inputs]
    have = all(i is None or i.data is not None for i in node.inputs)
    if node.dynamic:
        return list(run(*ins)) if have else None
    if all(o.data is not None for o in node.outputs):
        return [o.data for o in node.outputs]
    if not (compute and have):
        return None
    values = [np.empty(o.shape, o.dtype) for o in node.outputs]
    run(*ins, *values)
    return values


def _contiguous(value, dtype=None) -> np.ndarray:
    """`value` as a C-contiguous array of `dtype`, copied only when it is not one already (a
    folded weight of hundreds of MB is not copied again); 0-d arrays stay 0-d."""
    value = np.asarray(value, dtype=dtype)
    return value if value.flags.c_contiguous else np.array(value, order="C")


def reshape_groups(in_shape, out_shape):
    """[(in axes, out axes)]: the smallest runs of non-1 dims with equal products that a
    reshape from in_shape to out_shape maps onto each other, in order; None when there are none
    (the element counts differ)."""
    a = [i for i, d in enumerate(in_shape) if d != 1]
    b = [j for j, d in enumerate(out_shape) if d != 1]
    groups, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        gi, gj = [a[i]], [b[j]]
        pi, pj = in_shape[a[i]], out_shape[b[j]]
        i, j = i + 1, j + 1
        while pi != pj:
            if pi < pj and i < len(a):
                gi.append(a[i])
                pi, i = pi * in_shape[a[i]], i + 1
            elif pj < pi and j < len(b):
                gj.append(b[j])
                pj, j = pj * out_shape[b[j]], j + 1
            else:
                return None
        groups.append((gi, gj))
    return groups if i == len(a) and j == len(b) else None


def regroup(in_shape, out_shape):
    """`reshape_groups` with every output axis in one group, each group's output axes one run
    (a size-1 output dim inside a group's run joins it), in output order: a target built group
    by group is then in axis order ([b, s, 24] -> [b, s, 3, 1, 8] has [3, 1, 8] as one group).
    A size-1 output dim outside every run is alone, with no input axes (a size-1 input dim is in
    no group)."""
    groups = reshape_groups(in_shape, out_shape)
    if groups is None:
        return None
    runs = [(ins, list(range(outs[0], outs[-1] + 1))) for ins, outs in groups]
    inside = {j for _, outs in runs for j in outs}
    runs += [([], [j]) for j, d in enumerate(out_shape) if d == 1 and j not in inside]
    return sorted(runs, key=lambda g: g[1][0])


def shadow_target(shadow_in, out_shape, groups):
    """`out_shape` at the shadow sizes: a group with one output dim takes the product of its
    input dims' shadow sizes; a group splitting into several must keep its size (else None: which
    output dim follows is not known)."""
    target = list(out_shape)
    for ins, outs in groups:
        size = int(np.prod([shadow_in[i] for i in ins], dtype=np.int64)) if ins else 1
        if len(outs) == 1:
            target[outs[0]] = size
        elif size != int(np.prod([out_shape[j] for j in outs], dtype=np.int64)):
            return None
    return target


def _fits_int32(value) -> bool:
    return value is not None and (value.size == 0 or (
        int(value.min()) >= -2**31 and int(value.max()) < 2**31))


def _type_code(name: str) -> int:
    from edgelite.schema.model import TENSOR_TYPE_CODES
    return TENSOR_TYPE_CODES[name]


def fail(where: str, message: str) -> ConversionError:
    return ConversionError(f"{where}: {message}" if where else message)
