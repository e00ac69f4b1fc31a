"""Rewrites on the ONNX graph before lowering, for patterns whose parts have no TFLite op:
x * 0.5 * (1 + erf(x / sqrt 2)) (any order of the products) becomes one Gelu node.

Works on a copy; the caller's ModelProto is never changed.
"""
from __future__ import annotations

import math

import numpy as np


def constants(graph) -> dict:
    """name -> value of initializers and Constant nodes with a tensor value."""
    from onnx import helper, numpy_helper

    out = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            out[node.output[0]] = numpy_helper.to_array(helper.get_attribute_value(
                node.attribute[0]))
    return out


def _near(value, target: float) -> bool:
    return value is not None and np.asarray(value).size == 1 and \
        abs(float(np.asarray(value).reshape(-1)[0]) - target) <= 1e-5 * abs(target)


class _Graph:
    def __init__(self, graph):
        self.nodes = list(graph.node)
        self.consts = constants(graph)
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


def _gelu_at(g: _Graph, erf):
    """(x, output name, nodes to drop) when `erf` is the heart of a GELU, else None."""
    scaled = g.producer.get(erf.input[0])
    if scaled is None or g.only_reader(erf.input[0]) is not erf:
        return None
    if scaled.op_type == "Div" and _near(g.consts.get(scaled.input[1]), math.sqrt(2)):
        x = scaled.input[0]
    elif scaled.op_type == "Mul":
        x = next((a for a in scaled.input if _near(g.consts.get(g.other(scaled, a)),
                                                   1 / math.sqrt(2))), None)
        if x is None:
            return None
    else:
        return None
    add = g.only_reader(erf.output[0])
    if add is None or add.op_type != "Add" or not _near(
            g.consts.get(g.other(add, erf.output[0])), 1.0):
        return None
    m1 = g.only_reader(add.output[0])
    if m1 is None or m1.op_type != "Mul":
        return None
    o1 = g.other(m1, add.output[0])
    dropped = [scaled, erf, add, m1]
    if _near(g.consts.get(o1), 0.5) or o1 == x:       # (1 + erf) * 0.5 * x, (1 + erf) * x * 0.5
        m2 = g.only_reader(m1.output[0])
        want_half = o1 == x
        if m2 is None or m2.op_type != "Mul":
            return None
        o2 = g.other(m2, m1.output[0])
        if (want_half and not _near(g.consts.get(o2), 0.5)) or (not want_half and o2 != x):
            return None
        return x, m2.output[0], dropped + [m2]
    half = g.producer.get(o1)                         # (x * 0.5) * (1 + erf)
    if half is not None and half.op_type == "Mul" and x in half.input and \
            _near(g.consts.get(g.other(half, x)), 0.5) and g.only_reader(o1) is m1:
        return x, m1.output[0], dropped + [half]
    return None


def fuse_gelu(proto):
    """`proto`, or a copy with each erf-GELU pattern replaced by one Gelu node."""
    import onnx
    from onnx import helper

    g = _Graph(proto.graph)
    matches = [m for m in (_gelu_at(g, n) for n in g.nodes if n.op_type == "Erf") if m]
    if not matches:
        return proto
    drop, inserts = set(), {}
    for x, y, nodes in matches:
        drop.update(id(n) for n in nodes)
        last = max(nodes, key=g.nodes.index)
        inserts[id(last)] = helper.make_node("Gelu", [x], [y], name=f"{last.name or y}/gelu")
    out = onnx.ModelProto()
    out.CopyFrom(proto)
    new_nodes = []
    for node in g.nodes:
        if id(node) in inserts:
            new_nodes.append(inserts[id(node)])
        elif id(node) not in drop:
            new_nodes.append(node)
    del out.graph.node[:]
    out.graph.node.extend(new_nodes)
    return out
