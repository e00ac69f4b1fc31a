"""What passes use to read and edit one subgraph: producers, consumers, constants, new tensors,
and ops inserted in place. Built on the schema's graph helper."""
from __future__ import annotations

import numpy as np

from edgelite.schema import (Operator, OperatorCode, consumers, default_options, producers,
                             replace_uses)

from .builder import IRBuilder


class Editor:
    def __init__(self, model, sg):
        self.model = model
        self.sg = sg
        self.b = IRBuilder(model, sg)
        self.refresh()

    def refresh(self) -> None:
        """Recompute producers and consumers after an edit."""
        ops = self.sg.operators
        self.prod = {t: ops[i] for t, i in producers(self.sg).items()}
        self.cons = {t: [ops[i] for i in idx] for t, idx in consumers(self.sg).items()}

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
        ops = self.sg.operators
        ops.insert(_index(ops, anchor) + 1, op)

    def insert_before(self, anchor, op) -> None:
        ops = self.sg.operators
        ops.insert(_index(ops, anchor), op)

    def remove(self, op) -> None:
        ops = self.sg.operators
        del ops[_index(ops, op)]

    def transpose_after(self, op, k: int, perm) -> int:
        """Make output k of `op` hold its value permuted by inverse(perm), and add a TRANSPOSE
        (perm) that gives every reader the value it read before. Returns the new tensor."""
        t = op.outputs[k]
        tensor = self.sg.tensors[t]
        inv = np.argsort(perm)
        old_shape = tensor.shape
        back = self.tensor(f"{tensor.name}/transposed", old_shape, tensor.dtype)
        self.sg.tensors[back].quantization = tensor.quantization   # per-tensor (lower_qdq.py)
        replace_uses(self.sg, t, back)
        tensor.shape = tuple(old_shape[i] for i in inv)
        perm_t = self.const(np.array(perm, np.int32), f"{tensor.name}/perm")
        self.insert_after(op, self.new_op("TRANSPOSE", [t, perm_t], [back]))
        return back


def _index(ops: list, op) -> int:
    for i, o in enumerate(ops):
        if o is op:
            return i
    raise ValueError("operator not in the subgraph")
