"""Chain models of any length for the converter's scaling checks: the test that counts the work
(tests/converter/test_convert_linear.py) and the benchmark that times it
(benchmarks/bench_convert_scaling.py) convert the same graphs. Needs only onnx and numpy."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

def chain(kind: str, n: int):
    """n Relu nodes in a row; n Add(constant) -> Relu pairs (each Relu fuses into its Add: n
    edits of the graph); or n 1x1 Conv -> Relu pairs (the layout pass cancels a transpose pair
    per conv, the Relu fuses)."""
    nodes, inits, shape = [], [], [1, 4]
    for i in range(n):
        a, b = f"t{i}", f"t{i + 1}"
        if kind == "relu":
            nodes.append(helper.make_node("Relu", [a], [b]))
        elif kind == "add_relu":
            inits.append(numpy_helper.from_array(np.full([1, 4], i, np.float32), f"c{i}"))
            nodes += [helper.make_node("Add", [a, f"c{i}"], [f"s{i}"]),
                      helper.make_node("Relu", [f"s{i}"], [b])]
        else:
            shape = [1, 2, 4, 4]
            inits.append(numpy_helper.from_array(np.ones([2, 2, 1, 1], np.float32), f"w{i}"))
            nodes += [helper.make_node("Conv", [a, f"w{i}"], [f"s{i}"]),
                      helper.make_node("Relu", [f"s{i}"], [b])]
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("t0", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(f"t{n}", TensorProto.FLOAT, shape)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
