"""Small multi-op float models for delegate tests, written with the schema's writer.

    g = Graph()
    x = g.input((1, 8, 8, 4))
    y = g.op("ADD", [x, g.const(np.ones(4, np.float32))])
    g.output(g.op("TANH", [y]))
    content = g.save()
"""
from __future__ import annotations

import numpy as np

from edgelite.schema import (Model, Operator, OperatorCode, Subgraph, Tensor, default_options,
                             dtype_name, save)


class Graph:
    def __init__(self):
        self.model = Model()
        self.sg = Subgraph(name="main")

    def input(self, shape, dtype="float32") -> int:
        t = self.sg.add_tensor(Tensor(f"input_{len(self.sg.inputs)}", tuple(shape), dtype))
        self.sg.inputs.append(t)
        return t

    def const(self, value) -> int:
        value = np.asarray(value)
        return self.sg.add_tensor(Tensor(f"const_{len(self.sg.tensors)}", value.shape,
                                         dtype_name(value.dtype),
                                         buffer=self.model.add_buffer(value)))

    def op(self, name: str, inputs: list, outputs: int = 1, **options):
        outs = [self.sg.add_tensor(Tensor(f"{name.lower()}_{len(self.sg.tensors)}", (),
                                          "float32")) for _ in range(outputs)]
        self.sg.operators.append(Operator(OperatorCode(name, 0), list(inputs), outs,
                                          default_options(name, **options)))
        return outs[0] if outputs == 1 else outs

    def output(self, t: int) -> None:
        self.sg.outputs.append(t)

    def save(self) -> bytes:
        self.model.subgraphs = [self.sg]
        return save(self.model)
