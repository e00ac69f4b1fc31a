"""The emitter: builds one subgraph op by op, knowing every tensor's shape as it goes.

Each op is prepared by edgelite's own kernels as it is emitted, twice: once with the model's
declared batch and once with one more. A dimension that differs between the two is dynamic (-1 in
the tensor's shape signature), so the rules always know which dimensions are static and which
follow the batch; an op that cannot prepare, or that would bake a batch size into a shape, fails
right where it is emitted. Values known before running (constants, SHAPE of a static tensor, and
what folds from them) are carried along as the interpreter's plan carries them.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from edgelite.schema import Operator, OperatorCode, Subgraph, Tensor, default_options
from edgelite.schema.model import NUMPY_DTYPES, dtype_name
from edgelite.schema.ops import facts

from ..kernels import registry
from ..kernels.registry import KernelError, Node, TensorInfo
from ..plan import Runtime

F32 = "float32"


class GradientError(ValueError):
    """A training graph cannot be built: names the operators, tensors and options at fault."""


class _World:
    """Tensor facts at one batch size: what the kernels' prepare sees."""

    def __init__(self, model):
        self.runtime = Runtime(model)
        self.infos: list = []


class Emitter:
    """Appends tensors and builtin ops to a new subgraph of `model`. Tensors are declared with
    their shapes at the first batch size."""

    def __init__(self, model, name: str):
        self.model = model
        self.sg = Subgraph(name=name)
        self.worlds = [_World(model), _World(model)]
        self.scope = name
        self._consts: dict = {}
        self._shapes: dict = {}

    # -- tensors -----------------------------------------------------------------------------

    def _add(self, tensor: Tensor, infos: list) -> int:
        t = self.sg.add_tensor(tensor)
        for world, info in zip(self.worlds, infos):
            info.index = t
            world.infos.append(info)
        return t

    def input(self, name: str, shape, sig, dtype: str = F32, quantization=None,
              shape_b=None) -> int:
        """A graph input of declared `shape`; at the second batch size its dims that are -1 in
        `sig` are one more (or `shape_b`, when given)."""
        shape, sig = tuple(shape), tuple(sig)
        if shape_b is None:
            shape_b = tuple(d + 1 if s == -1 else d for d, s in zip(shape, sig))
        shapes = [shape, tuple(shape_b)]
        sig = tuple(-1 if a != b else a for a, b in zip(*shapes))
        infos = [TensorInfo(0, name, s, NUMPY_DTYPES[dtype], dtype, quantization)
                 for s in shapes]
        t = self._add(Tensor(name, shape, dtype, quantization=quantization,
                             shape_signature=sig if -1 in sig else None), infos)
        self.sg.inputs.append(t)
        return t

    def const(self, value, name: str | None = None, dtype: str | None = None) -> int:
        """A constant tensor holding `value` (small ones are shared)."""
        value = np.asarray(value, dtype=NUMPY_DTYPES[dtype] if dtype else None)
        if value.dtype == np.float64:
            value = value.astype(np.float32)
        value = np.array(value, order="C")  # (np.ascontiguousarray makes scalars 1-D)
        key = (value.dtype.str, value.shape, value.tobytes()) if value.nbytes <= 256 else None
        if key is not None and key in self._consts:
            return self._consts[key]
        t = self.buffer_const(self.model.add_buffer(value), value.shape, dtype_name(value.dtype),
                              name if name is not None else f"{self.scope}/const")
        if key is not None:
            self._consts[key] = t
        return t

    def buffer_const(self, buffer: int, shape, dtype: str, name: str, quantization=None) -> int:
        """A constant tensor over an existing buffer of the model (weights are not copied)."""
        data = self.model.buffers[buffer].data
        value = data.view(NUMPY_DTYPES[dtype]).reshape(shape) if dtype in NUMPY_DTYPES else None
        infos = [TensorInfo(0, name, tuple(shape), NUMPY_DTYPES.get(dtype, np.dtype(object)),
                            dtype, quantization, value) for _ in self.worlds]
        return self._add(Tensor(name, shape, dtype, buffer=buffer, quantization=quantization),
                         infos)

    def state(self, tensor: Tensor) -> int:
        """A copy of a variable tensor (is_variable: state kept between invokes)."""
        infos = [TensorInfo(0, tensor.name, tuple(tensor.shape), tensor.np_dtype, tensor.dtype,
                            tensor.quantization, None, True) for _ in self.worlds]
        return self._add(dataclasses.replace(tensor), infos)

    def scalar(self, value: float) -> int:
        """A float32 scalar constant."""
        return self.const(np.asarray(value, np.float32))

    def i32(self, values) -> int:
        return self.const(np.asarray(values, np.int32))

    # -- facts -------------------------------------------------------------------------------

    def sig(self, t: int) -> tuple:
        """The shape with -1 for the dimensions that follow the batch."""
        a, b = (w.infos[t].shape for w in self.worlds)
        return tuple(-1 if x != y else x for x, y in zip(a, b))

    def shape(self, t: int, world: int = 0) -> tuple:
        return self.worlds[world].infos[t].shape

    def dtype(self, t: int) -> str:
        return self.sg.tensors[t].dtype

    def value(self, t: int):
        """The value known before running (the same at both batch sizes), or None."""
        a, b = (w.infos[t].data for w in self.worlds)
        if a is None or b is None or a.shape != b.shape or not np.array_equal(a, b):
            return None
        return a

    # -- ops ---------------------------------------------------------------------------------

    def op(self, name: str, inputs: list, options=None, dtype: str | None = None,
           outputs: int = 1, templates: list | None = None, opcode: OperatorCode | None = None,
           custom_options: bytes | None = None, **fields):
        """Emit builtin op `name` on tensor indices `inputs` (-1: omitted); returns its output
        (or the list of them when `outputs` > 1). `options` defaults to the op's default table
        with `fields` set; output dtypes default to the first input's. `templates` gives the
        output Tensors in full (name, dtype, quantization, declared shape); `opcode` keeps a
        copied op's code and version."""
        opcode = opcode or OperatorCode(name, 0)
        if options is None and opcode.builtin != "CUSTOM":
            options = default_options(name, **fields)
        if templates is None:
            first = next((t for t in inputs if t >= 0), None)
            out_dtype = dtype or (self.dtype(first) if first is not None else F32)
            templates = [Tensor(f"{self.scope}/{name.lower()}", (), out_dtype)
                         for _ in range(outputs)]
        index = len(self.sg.operators)
        shapes, datas = [], []
        for world in self.worlds:
            outs = [TensorInfo(-1, tpl.name, tuple(tpl.shape),
                               NUMPY_DTYPES.get(tpl.dtype, np.dtype(object)), tpl.dtype,
                               tpl.quantization) for tpl in templates]
            node = Node(op=opcode.name, index=index,
                        inputs=[world.infos[t] if t >= 0 else None for t in inputs],
                        outputs=outs, options=options, custom_options=custom_options,
                        subgraph=-1, is_custom=opcode.builtin == "CUSTOM",
                        runtime=world.runtime)
            prepare = registry.lookup(node)
            if prepare is None:
                raise GradientError(f"{self.scope}: edgelite has no {name} kernel for "
                                    f"{registry.arithmetic(node)} inputs (it has "
                                    f"{', '.join(registry.supported_keys(name)) or 'none'})")
            try:
                run = prepare(node)
            except KernelError as e:
                raise GradientError(f"{self.scope}: the emitted {name} does not prepare: {e}") \
                    from None
            self._fold(node, run)
            shapes.append([tuple(int(d) for d in o.shape) for o in outs])
            datas.append(outs)
        results = []
        for k, tpl in enumerate(templates):
            a, b = shapes[0][k], shapes[1][k]
            if len(a) != len(b):
                raise GradientError(f"{self.scope}: {name} output {k} changes rank with the "
                                    f"batch ({list(a)} vs {list(b)})")
            sig = tuple(-1 if x != y else x for x, y in zip(a, b))
            tensor = Tensor(tpl.name, a, tpl.dtype, quantization=tpl.quantization,
                            shape_signature=sig if -1 in sig else None)
            results.append(self._add(tensor, [datas[0][k], datas[1][k]]))
        self.sg.operators.append(Operator(opcode, list(inputs), results, options,
                                          custom_options=custom_options))
        if not templates:
            return None
        return results[0] if len(templates) == 1 else results

    @staticmethod
    def _fold(node: Node, run) -> None:
        """Compute outputs whose value is known before running, as the plan does."""
        if all(o.data is not None for o in node.outputs) and node.outputs:
            return
        if facts(node.op).side_effects or node.is_custom or not node.outputs:
            return
        if not all(t is None or t.data is not None for t in node.inputs):
            return
        outs = [np.empty(o.shape, o.dtype) for o in node.outputs]
        run(*[None if t is None else t.data for t in node.inputs], *outs)
        for o, v in zip(node.outputs, outs):
            o.data = v

    def evaluate(self, op, values: dict, world: int = 0) -> list:
        """Run the kernel of emitted `op` on other values: {input position: array} replace those
        inputs (shape and dtype from the array). For rules that learn an op's index mapping."""
        w = self.worlds[world]
        ins = []
        for k, t in enumerate(op.inputs):
            if k in values:
                v = np.asarray(values[k])
                ins.append(TensorInfo(t, "probe", v.shape, v.dtype, dtype_name(v.dtype), None, v))
            else:
                ins.append(w.infos[t] if t >= 0 else None)
        outs = [TensorInfo(t, "probe", w.infos[t].shape, ins[0].dtype, ins[0].type_name)
                for t in op.outputs]
        node = Node(op=op.op, index=-1, inputs=ins, outputs=outs, options=op.options,
                    subgraph=-1, runtime=w.runtime)
        run = registry.lookup(node)(node)
        arrays = [np.empty(o.shape, o.dtype) for o in outs]
        run(*[None if t is None else t.data for t in ins], *arrays)
        return arrays

    def side_effect(self, name: str, inputs: list, **fields) -> None:
        """An op without outputs (ASSIGN_VARIABLE, CALL_ONCE)."""
        self.op(name, inputs, templates=[], **fields)

    # -- helpers the rules share -------------------------------------------------------------

    def add(self, a: int, b: int) -> int:
        return self.op("ADD", [a, b])

    def sub(self, a: int, b: int) -> int:
        return self.op("SUB", [a, b])

    def mul(self, a: int, b: int) -> int:
        return self.op("MUL", [a, b])

    def div(self, a: int, b: int) -> int:
        return self.op("DIV", [a, b])

    def scale(self, x: int, factor) -> int:
        """x * factor: factor a float (skipped when 1.0) or a tensor index."""
        if isinstance(factor, (float, np.floating)):
            return x if float(factor) == 1.0 else self.mul(x, self.scalar(factor))
        return self.mul(x, factor)

    def cast(self, x: int, dtype: str) -> int:
        return x if self.dtype(x) == dtype else self.op("CAST", [x], dtype=dtype)

    def mask(self, name: str, x: int, bound: float) -> int:
        """1.0 where `x <name> bound` (GREATER, LESS, ...), else 0.0."""
        return self.cast(self.op(name, [x, self.scalar(bound)], dtype="bool"), F32)

    def sum(self, x: int, axes, keep: bool = False) -> int:
        return self.op("SUM", [x, self.i32(list(axes))], keep_dims=keep)

    def shape_of(self, x: int) -> int:
        """SHAPE(x), emitted once per tensor."""
        if x not in self._shapes:
            self._shapes[x] = self.op("SHAPE", [x], dtype="int32", out_type=2)  # INT32
        return self._shapes[x]

    def reshape(self, x: int, sig) -> int:
        """RESHAPE to a static shape with at most one -1."""
        sig = tuple(int(d) for d in sig)
        if self.sig(x) == sig and sig.count(-1) <= 1:
            return x
        if sig.count(-1) > 1:
            raise GradientError(f"{self.scope}: cannot reshape to {list(sig)} without a "
                                "reference tensor")
        return self.op("RESHAPE", [x, self.i32(sig)], new_shape=None)

    def reshape_like(self, g: int, x: int) -> int:
        """g reshaped to x's shape, at any batch size."""
        return self.reshape_to(g, self.sig(x), x)

    def reshape_to(self, g: int, sig, like: int) -> int:
        """g reshaped to `sig`, whose -1 dims are those of tensor `like` (same rank)."""
        sig = tuple(int(d) for d in sig)
        if self.sig(g) == sig:
            return g
        if sig.count(-1) <= 1:
            return self.reshape(g, sig)
        if sig == self.sig(like):
            return self.op("RESHAPE", [g, self.shape_of(like)], new_shape=None)
        dynamic = np.array([d == -1 for d in sig], np.int32)
        static = np.array([0 if d == -1 else d for d in sig], np.int32)
        shape = self.op("ADD", [self.op("MUL", [self.shape_of(like), self.i32(dynamic)]),
                                self.i32(static)])
        return self.op("RESHAPE", [g, shape], new_shape=None)

    def runtime_dim(self, x: int, axis: int) -> int:
        """The size of axis `axis` of x as a float32 [1] tensor, read from SHAPE(x)."""
        one = self.op("STRIDED_SLICE", [self.shape_of(x), self.i32([axis]), self.i32([axis + 1]),
                                        self.i32([1])])
        return self.cast(one, F32)

    def count(self, x: int, axes):
        """How many elements `axes` of x hold: a float when static, else a float32 [1] tensor."""
        static, dynamic = 1, None
        for a in axes:
            d = self.sig(x)[a]
            if d != -1:
                static *= d
                continue
            size = self.runtime_dim(x, a)
            dynamic = size if dynamic is None else self.mul(dynamic, size)
        if dynamic is None:
            return float(static)
        return dynamic if static == 1 else self.mul(dynamic, self.scalar(static))

    def divide_by(self, x: int, n) -> int:
        """x / n for a count from `count`."""
        if isinstance(n, float):
            return self.scale(x, 1.0 / n)
        return self.div(x, n)

    def unbroadcast(self, g: int, x: int) -> int:
        """Sum g over the axes along which x was broadcast to g's shape; shaped like x."""
        gs, xs = self.sig(g), self.sig(x)
        lead = len(gs) - len(xs)
        axes = list(range(lead)) + [lead + i for i, d in enumerate(xs)
                                    if d == 1 and gs[lead + i] != 1]
        if axes:
            g = self.sum(g, axes, keep=False)
        return self.reshape_like(g, x)

    def add_n(self, terms: list) -> int:
        total = terms[0]
        for t in terms[1:]:
            total = self.add(total, t)
        return total
