"""Rewrites on the ONNX graph before lowering, for patterns whose parts have no TFLite op or
that TFLite runs as one: x * 0.5 * (1 + erf(x / sqrt 2)) becomes one Gelu node, and GPT-2's
x * 0.5 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))) one Gelu with approximate="tanh"
(any order of the products; x^3 as Pow(x, 3) or x * x * x).

Works on a copy; the caller's ModelProto is never changed.
"""
from __future__ import annotations

import math

import numpy as np


class _Constants:
    """name -> value of initializers and Constant nodes with a tensor value, converted when
    first asked (the patterns look at a few scalars; a large model's weights are not read)."""

    def __init__(self, graph):
        self.initializers = {init.name: init for init in graph.initializer}
        self.constants = {node.output[0]: node.attribute[0].t for node in graph.node
                          if node.op_type == "Constant" and node.attribute and
                          node.attribute[0].name == "value"}
        self.values: dict = {}

    def get(self, name: str):
        if name not in self.values:
            from onnx import numpy_helper

            from . import memo

            init, const = self.initializers.get(name), self.constants.get(name)
            self.values[name] = memo.initializer(init) if init is not None else \
                None if const is None else numpy_helper.to_array(const)
        return self.values[name]


def _near(value, target: float) -> bool:
    return value is not None and np.asarray(value).size == 1 and \
        abs(float(np.asarray(value).reshape(-1)[0]) - target) <= 1e-5 * abs(target)


class _Graph:
    def __init__(self, graph):
        self.nodes = list(graph.node)
        self.consts = _Constants(graph)
        self.outputs = {o.name for o in graph.output}
        self.readers: dict = {}
        self.producer: dict = {}
        for node in self.nodes:
            for name in node.input:
                self.readers.setdefault(name, []).append(node)
            for name in node.output:
                self.producer[name] = node

    def only_reader(self, name: str):
        readers = self.readers.get(name, [])
        if len(readers) != 1 or name in self.outputs:
            return None
        return readers[0]

    def other(self, node, name: str):
        """The input of a two-input node that is not `name`."""
        if len(node.input) != 2 or name not in node.input:
            return None
        return node.input[1] if node.input[0] == name else node.input[0]


def _erf_input(g: _Graph, erf):
    """x when `erf` computes erf(x / sqrt 2)."""
    scaled = g.producer.get(erf.input[0])
    if scaled is None or g.only_reader(erf.input[0]) is not erf:
        return None
    if scaled.op_type == "Div" and _near(g.consts.get(scaled.input[1]), math.sqrt(2)):
        return scaled.input[0], [scaled]
    if scaled.op_type == "Mul":
        x = next((a for a in scaled.input if _near(g.consts.get(g.other(scaled, a)),
                                                   1 / math.sqrt(2))), None)
        return None if x is None else (x, [scaled])
    return None


def _scaled_by(g: _Graph, name: str, factor: float):
    """(y, node) when `name` is written by Mul(y, factor), read only by what follows."""
    node = g.producer.get(name)
    if node is None or node.op_type != "Mul" or g.only_reader(name) is None:
        return None
    y = next((a for a in node.input if _near(g.consts.get(g.other(node, a)), factor)), None)
    return None if y is None else (y, node)


def _cube_of(g: _Graph, name: str):
    """(x, nodes) when `name` is Pow(x, 3) or x * x * x."""
    node = g.producer.get(name)
    if node is None or g.only_reader(name) is None:
        return None
    if node.op_type == "Pow" and _near(g.consts.get(node.input[1]), 3.0):
        return node.input[0], [node]
    if node.op_type == "Mul" and len(node.input) == 2:
        for a, b in (node.input, node.input[::-1]):
            square = g.producer.get(a)
            if square is not None and square.op_type == "Mul" and list(square.input) == [b, b] \
                    and g.only_reader(a) is node:
                return b, [square, node]
    return None


def _tanh_input(g: _Graph, tanh):
    """x when `tanh` computes tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))."""
    outer = _scaled_by(g, tanh.input[0], math.sqrt(2 / math.pi))
    if outer is None or g.only_reader(tanh.input[0]) is not tanh:
        return None
    inner, mul = outer
    add = g.producer.get(inner)
    if add is None or add.op_type != "Add" or len(add.input) != 2 or g.only_reader(inner) is None:
        return None
    for x, other in (add.input, add.input[::-1]):
        term = _scaled_by(g, other, 0.044715)
        cube = _cube_of(g, term[0]) if term is not None else None
        if cube is not None and cube[0] == x:
            return x, [mul, add, term[1]] + cube[1]
    return None


def _gelu_at(g: _Graph, heart):
    """(x, output name, nodes to drop, approximate) when `heart` (an Erf or a Tanh) is the heart
    of a GELU, else None."""
    found = _erf_input(g, heart) if heart.op_type == "Erf" else _tanh_input(g, heart)
    if found is None:
        return None
    x, inner = found
    add = g.only_reader(heart.output[0])
    if add is None or add.op_type != "Add" or not _near(
            g.consts.get(g.other(add, heart.output[0])), 1.0):
        return None
    m1 = g.only_reader(add.output[0])
    if m1 is None or m1.op_type != "Mul":
        return None
    o1 = g.other(m1, add.output[0])
    dropped = inner + [heart, add, m1]
    approximate = "none" if heart.op_type == "Erf" else "tanh"
    if _near(g.consts.get(o1), 0.5) or o1 == x:       # (1 + erf) * 0.5 * x, (1 + erf) * x * 0.5
        m2 = g.only_reader(m1.output[0])
        want_half = o1 == x
        if m2 is None or m2.op_type != "Mul":
            return None
        o2 = g.other(m2, m1.output[0])
        if (want_half and not _near(g.consts.get(o2), 0.5)) or (not want_half and o2 != x):
            return None
        return x, m2.output[0], dropped + [m2], approximate
    half = g.producer.get(o1)                         # (x * 0.5) * (1 + erf)
    if half is not None and half.op_type == "Mul" and x in half.input and \
            _near(g.consts.get(g.other(half, x)), 0.5) and g.only_reader(o1) is m1:
        return x, m1.output[0], dropped + [half], approximate
    return None


def fuse_gelu(proto) -> list:
    """The nodes of `proto`'s graph, each erf-GELU pattern replaced by one Gelu node (the model
    itself is not copied: its initializers can be most of a large model's bytes)."""
    from onnx import helper

    g = _Graph(proto.graph)
    matches = [m for m in (_gelu_at(g, n) for n in g.nodes if n.op_type in ("Erf", "Tanh")) if m]
    if not matches:
        return list(proto.graph.node)
    drop, inserts = set(), {}
    for x, y, nodes, approximate in matches:
        drop.update(id(n) for n in nodes)
        last = max(nodes, key=g.nodes.index)
        attrs = {"approximate": approximate} if approximate != "none" else {}
        inserts[id(last)] = helper.make_node("Gelu", [x], [y], name=f"{last.name or y}/gelu",
                                             **attrs)
    new_nodes = []
    for node in g.nodes:
        if id(node) in inserts:
            new_nodes.append(inserts[id(node)])
        elif id(node) not in drop:
            new_nodes.append(node)
    return new_nodes
