"""What passes use to read and edit one subgraph: producers, consumers, constants, new tensors,
and ops inserted in place. Built on the schema's graph helper.

The producer and reader maps stay current through the editor's own edits (`remove`,
`insert_after`, `insert_before`, `set_outputs`, `set_input`, `set_inputs`, `replace_uses`), each
of which costs what it touches, not the graph's size; a pass that edits ops directly calls
`refresh()`, which rebuilds them (O(ops); `Editor.rebuilds` counts those, for the tests that
keep passes linear in the graph's size).
"""
from __future__ import annotations

import numpy as np

from edgelite.schema import Operator, OperatorCode, default_options, producers

from .builder import IRBuilder


class Editor:
    rebuilds = 0   # full rebuilds of the maps, every editor together (tests read it)

    def __init__(self, model, sg):
        self.model = model
        self.sg = sg
        self.b = IRBuilder(model, sg)
        self.refresh()

    def refresh(self) -> None:
        """Recompute producers and consumers after ops were edited directly."""
        Editor.rebuilds += 1
        ops = self.sg.operators
        self.prod = {t: ops[i] for t, i in producers(self.sg).items()}
        self.cons: dict = {}
        for op in ops:
            self._add_reads(op, op.inputs)
        self._alive = {id(op) for op in ops}
        self._pos = {id(op): i for i, op in enumerate(ops)}
        self._shift = 0   # inserts and removes since _pos was built: how far it may be off

    # -- reading -----------------------------------------------------------------------------

    def value(self, t: int):
        """The constant value of tensor t, or None."""
        if t < 0 or t in self.sg.inputs:
            return None
        tensor = self.sg.tensors[t]
        if tensor.is_variable:
            return None
        return self.model.constant(self.sg, t)

    def shape(self, t: int) -> tuple:
        return self.sg.tensors[t].shape

    def producer(self, t: int):
        return self.prod.get(t)

    def readers(self, t: int) -> list:
        return self.cons.get(t, [])

    def has(self, op) -> bool:
        """Whether `op` is (still) one of the subgraph's operators."""
        return id(op) in self._alive

    def is_output(self, t: int) -> bool:
        return t in self.sg.outputs

    def only_read_by(self, t: int, op) -> bool:
        """True when `op` is t's one reader and t is not a graph output."""
        readers = self.readers(t)
        return len(readers) == 1 and readers[0] is op and not self.is_output(t)

    def transpose_perm(self, op) -> tuple | None:
        """The permutation of a TRANSPOSE op with a constant perm, else None."""
        if op is None or op.op != "TRANSPOSE" or len(op.inputs) != 2:
            return None
        perm = self.value(op.inputs[1])
        return None if perm is None else tuple(int(p) for p in perm.reshape(-1))

    # -- editing -----------------------------------------------------------------------------

    def const(self, value, name: str) -> int:
        return self.b.const(value, name=name)

    def tensor(self, name: str, shape, dtype: str) -> int:
        return self.b.tensor(name, shape, dtype)

    def new_op(self, builtin: str, inputs: list, outputs: list, options=None) -> Operator:
        if options is None or isinstance(options, dict):
            options = default_options(builtin, **(options or {}))
        opts = options
        return Operator(OperatorCode(builtin), list(inputs), list(outputs), opts)

    def insert_after(self, anchor, op) -> None:
        self._insert(self._index(anchor) + 1, op)

    def insert_before(self, anchor, op) -> None:
        self._insert(self._index(anchor), op)

    def remove(self, op) -> None:
        """Take `op` out of the subgraph (its outputs then have no producer)."""
        del self.sg.operators[self._index(op)]
        self._shift += 1
        self._pos.pop(id(op), None)
        self._alive.discard(id(op))
        for t in op.outputs:
            if self.prod.get(t) is op:
                del self.prod[t]
        self._drop_reads(op, op.inputs)

    def set_outputs(self, op, outputs) -> None:
        """`op` now writes `outputs` (whose old producer, if any, the caller removes)."""
        for t in op.outputs:
            if self.prod.get(t) is op:
                del self.prod[t]
        op.outputs = list(outputs)
        for t in op.outputs:
            if t >= 0:
                self.prod[t] = op

    def set_inputs(self, op, inputs) -> None:
        self._drop_reads(op, op.inputs)
        op.inputs = list(inputs)
        self._add_reads(op, op.inputs)

    def set_input(self, op, k: int, t: int) -> None:
        inputs = list(op.inputs)
        inputs[k] = t
        self.set_inputs(op, inputs)

    def replace_uses(self, old: int, new: int) -> int:
        """Every reader of tensor `old` (ops and graph outputs) reads `new`; returns the count
        (the schema's `replace_uses`, through the reader map)."""
        n = 0
        for op in list(self.readers(old)):
            n += sum(t == old for t in op.inputs)
            self.set_inputs(op, [new if t == old else t for t in op.inputs])
        for k, t in enumerate(self.sg.outputs):
            if t == old:
                self.sg.outputs[k] = new
                n += 1
        return n

    def transpose_after(self, op, k: int, perm) -> int:
        """Make output k of `op` hold its value permuted by inverse(perm), and add a TRANSPOSE
        (perm) that gives every reader the value it read before. Returns the new tensor."""
        t = op.outputs[k]
        tensor = self.sg.tensors[t]
        inv = np.argsort(perm)
        old_shape = tensor.shape
        back = self.tensor(f"{tensor.name}/transposed", old_shape, tensor.dtype)
        self.sg.tensors[back].quantization = tensor.quantization   # per-tensor (lower_qdq.py)
        self.replace_uses(t, back)
        tensor.shape = tuple(old_shape[i] for i in inv)
        perm_t = self.const(np.array(perm, np.int32), f"{tensor.name}/perm")
        self.insert_after(op, self.new_op("TRANSPOSE", [t, perm_t], [back]))
        return back

    # -- the maps ----------------------------------------------------------------------------

    def _insert(self, i: int, op) -> None:
        self.sg.operators.insert(i, op)
        self._shift += 1
        self._pos[id(op)] = i
        self._alive.add(id(op))
        for t in op.outputs:
            if t >= 0:
                self.prod[t] = op
        self._add_reads(op, op.inputs)

    def _add_reads(self, op, inputs) -> None:
        for t in dict.fromkeys(inputs):
            if t >= 0:
                self.cons.setdefault(t, []).append(op)

    def _drop_reads(self, op, inputs) -> None:
        for t in dict.fromkeys(inputs):
            readers = self.cons.get(t)
            if readers is None:
                continue
            readers[:] = [r for r in readers if r is not op]
            if not readers:
                del self.cons[t]

    def _index(self, op) -> int:
        """Where `op` is in the operator list. Each insert or remove since the positions were
        recorded moves an op by at most one place, so it is searched for that far around its
        recorded place; the positions are recorded again when that would cost more."""
        ops = self.sg.operators
        guess = self._pos.get(id(op))
        if guess is not None and self._shift <= 64:
            for i in range(max(0, guess - self._shift), min(len(ops), guess + self._shift + 1)):
                if ops[i] is op:
                    return i
        self._pos = {id(o): i for i, o in enumerate(ops)}
        self._shift = 0
        if id(op) not in self._pos:
            raise ValueError("operator not in the subgraph")
        return self._pos[id(op)]
