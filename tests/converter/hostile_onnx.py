"""A structured generator of hostile ONNX models for the converter (issue 19): small valid models
of many ops, each given one to three mutations that a broken exporter or an attacker could make:
extreme integer attributes, attributes of the wrong type or missing, extreme or open input dims,
initializers of unknown types or with data that does not match their dims, shape constants
asking for huge tensors, dangling or duplicated tensor names, odd opsets, swapped op types, deep
If nesting. `case(seed)` is deterministic; `run_case` converts one and names the outcome.

Outcomes: `converted` (then edgelite's interpreter runs it or refuses it: `converted, refused by
the interpreter`), `refused` (one ConversionError), and the failures: `internal: <type>` (any
other exception), `blow-up` (MemoryError under the address-space limit), `hang` (over the time
limit), `crash` (the worker process died; the runner sees that).
"""
from __future__ import annotations

import random

import numpy as np

F = 1   # TensorProto.FLOAT
EXTREME_INTS = [0, -1, -2, 1, 2**31 - 1, 2**31, 2**40, 2**63 - 1, -(2**63), 10**6, -(10**6)]
EXTREME_FLOATS = [0.0, -1.0, 1e6, 1e30, float("inf"), float("nan"), 1e-30, -1e6]
EXTREME_DIMS = [0, 1, 2**31 - 1, 2**31, 2**40, 2**63 - 1, 10**5]


def _templates():
    """name -> (nodes, inputs [(name, shape)], outputs [names], initializers {name: array})."""
    from onnx import helper

    n = helper.make_node
    x4 = [("x", [1, 3, 8, 8])]
    x2 = [("x", [2, 6])]

    def w(*shape):
        return np.arange(np.prod(shape), dtype=np.float32).reshape(shape) / 10

    return {
        "conv": ([n("Conv", ["x", "w", "b"], ["y"], name="conv", kernel_shape=[3, 3],
                    strides=[1, 1], dilations=[1, 1], pads=[1, 1, 1, 1], group=1)],
                 x4, ["y"], {"w": w(4, 3, 3, 3), "b": w(4)}),
        "conv_transpose": ([n("ConvTranspose", ["x", "w"], ["y"], name="deconv", strides=[2, 2],
                              kernel_shape=[2, 2])], x4, ["y"], {"w": w(3, 2, 2, 2)}),
        "max_pool": ([n("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[2, 2],
                        strides=[2, 2], pads=[0, 0, 0, 0])], x4, ["y"], {}),
        "avg_pool": ([n("AveragePool", ["x"], ["y"], name="avg", kernel_shape=[3, 3],
                        strides=[1, 1], pads=[1, 1, 1, 1])], x4, ["y"], {}),
        "gemm": ([n("Gemm", ["x", "w", "b"], ["y"], name="gemm", transB=1, alpha=1.0)], x2,
                 ["y"], {"w": w(5, 6), "b": w(5)}),
        "matmul": ([n("MatMul", ["x", "w"], ["y"], name="mm")], x2, ["y"], {"w": w(6, 3)}),
        "reshape": ([n("Reshape", ["x", "s"], ["y"], name="reshape")], x2, ["y"],
                    {"s": np.array([3, 4], np.int64)}),
        "expand": ([n("Expand", ["x", "s"], ["y"], name="expand")], [("x", [1, 6])], ["y"],
                   {"s": np.array([4, 6], np.int64)}),
        "tile": ([n("Tile", ["x", "r"], ["y"], name="tile")], x2, ["y"],
                 {"r": np.array([2, 3], np.int64)}),
        "constant_of_shape": ([n("ConstantOfShape", ["s"], ["c"], name="fill"),
                               n("Add", ["x", "c"], ["y"], name="add")], x2, ["y"],
                              {"s": np.array([2, 6], np.int64)}),
        "slice": ([n("Slice", ["x", "st", "en", "ax", "sp"], ["y"], name="slice")], x2, ["y"],
                  {"st": np.array([0, 1], np.int64), "en": np.array([2, 5], np.int64),
                   "ax": np.array([0, 1], np.int64), "sp": np.array([1, 2], np.int64)}),
        "gather": ([n("Gather", ["x", "i"], ["y"], name="gather", axis=1)], x2, ["y"],
                   {"i": np.array([0, 5, 2], np.int64)}),
        "resize": ([n("Resize", ["x", "", "sc"], ["y"], name="resize", mode="nearest")], x4,
                   ["y"], {"sc": np.array([1, 1, 2, 2], np.float32)}),
        "pad": ([n("Pad", ["x", "p"], ["y"], name="pad", mode="constant")], x2, ["y"],
                {"p": np.array([1, 1, 1, 1], np.int64)}),
        "concat": ([n("Concat", ["x", "x"], ["y"], name="concat", axis=1)], x2, ["y"], {}),
        "split": ([n("Split", ["x", "sp"], ["y", "z"], name="split", axis=1),
                   n("Add", ["y", "z"], ["o"], name="add")], x2, ["o"],
                  {"sp": np.array([3, 3], np.int64)}),
        "transpose": ([n("Transpose", ["x"], ["y"], name="transpose", perm=[0, 2, 3, 1])], x4,
                      ["y"], {}),
        "reduce": ([n("ReduceMean", ["x", "ax"], ["y"], name="reduce", keepdims=1)], x4, ["y"],
                   {"ax": np.array([2, 3], np.int64)}),
        "softmax": ([n("Softmax", ["x"], ["y"], name="softmax", axis=-1)], x2, ["y"], {}),
        "range": ([n("Range", ["a", "b", "d"], ["r"], name="range"),
                   n("Cast", ["r"], ["y"], name="cast", to=F)], [], ["y"],
                  {"a": np.array(0, np.int64), "b": np.array(10, np.int64),
                   "d": np.array(1, np.int64)}),
        "batch_norm": ([n("BatchNormalization", ["x", "s", "bb", "m", "v"], ["y"], name="bn",
                          epsilon=1e-5)], x4, ["y"],
                       {"s": w(3), "bb": w(3), "m": w(3), "v": w(3) + 1}),
        "topk": ([n("TopK", ["x", "k"], ["y", "i"], name="topk", axis=1)], x2, ["y"],
                 {"k": np.array([2], np.int64)}),
        "depth_to_space": ([n("DepthToSpace", ["x"], ["y"], name="d2s", blocksize=2)],
                           [("x", [1, 4, 3, 3])], ["y"], {}),
        "lstm": ([n("LSTM", ["x", "W", "R"], ["y"], name="lstm", hidden_size=2)],
                 [("x", [3, 1, 4])], ["y"], {"W": w(1, 8, 4), "R": w(1, 8, 2)}),
        "if": ([n("If", ["c"], ["y"], name="if")], [("x", [2]), ("c", [])], ["y"], {}),
        "einsum": ([n("Einsum", ["x", "w"], ["y"], name="einsum", equation="ij,jk->ik")], x2,
                   ["y"], {"w": w(6, 2)}),
    }


def _branch(helper, name, op, out, depth):
    nodes = [helper.make_node(op, ["x"], [out], name=f"{name}_{op}")]
    return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(out, F, [2])])


def _if_graphs(helper, rng, depth):
    """then/else bodies; the then body nests another If `depth` - 1 times."""
    def body(d):
        if d == 0:
            return _branch(helper, f"leaf{d}", "Relu", f"o{d}", d)
        inner = helper.make_node("If", ["c"], [f"o{d}"], name=f"if{d}",
                                 then_branch=body(d - 1),
                                 else_branch=_branch(helper, f"e{d}", "Neg", f"e{d}", d))
        return helper.make_graph([inner], f"b{d}", [],
                                 [helper.make_tensor_value_info(f"o{d}", F, [2])])
    return body(depth), _branch(helper, "else", "Neg", "e_top", 0)


def build(name: str, rng: random.Random):
    """The template `name` as a ModelProto (its outputs typed, shapes left to inference)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes, inputs, outputs, inits = _templates()[name]
    nodes = [onnx.NodeProto.FromString(n.SerializeToString()) for n in nodes]
    if name == "if":
        then_b, else_b = _if_graphs(helper, rng, rng.choice([1, 2, 3, 8, 20, 30, 31]))
        nodes[0].attribute.extend([helper.make_attribute("then_branch", then_b),
                                   helper.make_attribute("else_branch", else_b)])
    ins = [helper.make_tensor_value_info(i, TensorProto.BOOL if i == "c" else F, s)
           for i, s in inputs]
    outs = [helper.make_tensor_value_info(o, F, None) for o in outputs]
    graph = helper.make_graph(nodes, name, ins, outs,
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    if name == "if":   # deep bodies are more than onnx's inference re-parses
        model.graph.output[0].CopyFrom(helper.make_tensor_value_info("y", F, [2]))
        return model
    inferred = onnx.shape_inference.infer_shapes(model)   # the outputs get their shapes
    del model.graph.output[:]
    model.graph.output.extend(inferred.graph.output)
    return model


# -- mutations -----------------------------------------------------------------------------------

def _int_attributes(model):
    return [(node, a) for node in model.graph.node for a in node.attribute
            if a.type in (a.INT, a.INTS)]


def m_extreme_int_attribute(model, rng):
    found = _int_attributes(model)
    if not found:
        return False
    _, a = rng.choice(found)
    if a.type == a.INT:
        a.i = rng.choice(EXTREME_INTS)
    elif a.ints:
        a.ints[rng.randrange(len(a.ints))] = rng.choice(EXTREME_INTS)
    return True


def m_attribute_wrong_type(model, rng):
    nodes = [n for n in model.graph.node if n.attribute]
    if not nodes:
        return False
    a = rng.choice(rng.choice(nodes).attribute)
    kind = rng.choice(["float", "string", "ints", "empty"])
    name = a.name
    a.Clear()
    a.name = name
    if kind == "float":
        a.type, a.f = a.FLOAT, rng.choice(EXTREME_FLOATS)
    elif kind == "string":
        a.type, a.s = a.STRING, b"\xff\x00garbage"
    elif kind == "ints":
        a.type = a.INTS
        a.ints.extend(rng.choice(EXTREME_INTS) for _ in range(rng.randrange(0, 6)))
    else:
        a.type = a.INTS
    return True


def m_drop_attribute(model, rng):
    nodes = [n for n in model.graph.node if n.attribute]
    if not nodes:
        return False
    node = rng.choice(nodes)
    del node.attribute[rng.randrange(len(node.attribute))]
    return True


def m_input_dims(model, rng):
    inputs = [i for i in model.graph.input if i.type.tensor_type.shape.dim]
    if not inputs:
        return False
    dims = rng.choice(inputs).type.tensor_type.shape.dim
    d = dims[rng.randrange(len(dims))]
    choice = rng.random()
    if choice < 0.2:
        d.Clear()
        d.dim_param = "n"
    elif choice < 0.3:
        dims.add().dim_value = rng.choice([1, 2, 3])
    else:
        d.dim_value = rng.choice(EXTREME_DIMS)
    return True


def m_initializer_type(model, rng):
    if not model.graph.initializer:
        return False
    init = rng.choice(model.graph.initializer)
    init.data_type = rng.choice([0, 2, 3, 5, 7, 8, 10, 11, 13, 16, 17, 21, 22, 23, 40, 99])
    return True


def m_initializer_dims(model, rng):
    if not model.graph.initializer:
        return False
    init = rng.choice(model.graph.initializer)
    if rng.random() < 0.5 and init.dims:
        init.dims[rng.randrange(len(init.dims))] = rng.choice(EXTREME_DIMS + [-1])
    elif rng.random() < 0.5:
        init.dims.append(rng.choice([0, 2, 7]))
    else:
        raw = init.raw_data
        init.raw_data = raw[: rng.randrange(len(raw) + 1)] if raw else b"\x01" * 3
    return True


def _extreme_initializer(model, rng, data_type: int, extremes) -> bool:
    """One element of an initializer of `data_type` set to one of `extremes`."""
    from onnx import numpy_helper

    found = [i for i in model.graph.initializer if i.data_type == data_type]
    if not found:
        return False
    init = rng.choice(found)
    value = numpy_helper.to_array(init).copy()
    flat = value.reshape(-1)
    if flat.size:
        flat[rng.randrange(flat.size)] = rng.choice(extremes)
    init.CopyFrom(numpy_helper.from_array(value, init.name))
    return True


def m_shape_constant(model, rng):
    """An integer initializer (a shape, repeats, pads, axes, k) with extreme values."""
    return _extreme_initializer(model, rng, 7, EXTREME_INTS + [3 * 10**8])


def m_float_constant(model, rng):
    return _extreme_initializer(model, rng, 1, EXTREME_FLOATS + [1e6])


def m_dangling_name(model, rng):
    if not model.graph.node:
        return False
    node = rng.choice(list(model.graph.node))
    if node.input and rng.random() < 0.6:
        node.input[rng.randrange(len(node.input))] = rng.choice(["nowhere", "", "y", "x"])
    elif node.output:
        node.output[rng.randrange(len(node.output))] = rng.choice(["x", "y", "", "dup"])
    return True


def m_opset(model, rng):
    model.opset_import[0].version = rng.choice([1, 6, 9, 10, 11, 13, 21, 23, 26, 999])
    return True


def m_swap_op(model, rng):
    if not model.graph.node:
        return False
    node = rng.choice(list(model.graph.node))
    node.op_type = rng.choice(["Conv", "Reshape", "Resize", "Expand", "Tile", "ConstantOfShape",
                               "Gather", "Slice", "Pad", "MaxPool", "Gemm", "Relu", "Loop",
                               "Scan", "NonMaxSuppression", "Unique", "NotAnOp"])
    return True


def m_duplicate_node(model, rng):
    if not model.graph.node:
        return False
    node = rng.choice(list(model.graph.node))
    model.graph.node.append(node)
    if rng.random() < 0.5:   # a cycle: the first node reads the last one's output
        model.graph.node[0].input.append(model.graph.node[-1].output[0])
    return True


def m_drop_outputs(model, rng):
    del model.graph.output[:]
    if rng.random() < 0.5:
        del model.graph.node[:]
    return True


MUTATIONS = [m_extreme_int_attribute, m_extreme_int_attribute, m_attribute_wrong_type,
             m_drop_attribute, m_input_dims, m_input_dims, m_initializer_type,
             m_initializer_dims, m_shape_constant, m_shape_constant, m_shape_constant,
             m_float_constant, m_dangling_name, m_opset, m_swap_op, m_duplicate_node,
             m_drop_outputs]


def case(seed: int):
    """(description, ModelProto) of hostile case `seed`."""
    rng = random.Random(seed)
    name = rng.choice(sorted(_templates()))
    model = build(name, rng)
    done = []
    for _ in range(rng.choice([1, 1, 2, 3])):
        mutation = rng.choice(MUTATIONS)
        try:
            applied = mutation(model, rng)
        except Exception:  # noqa: BLE001  an earlier mutation left what this one cannot read
            applied = False
        if applied:
            done.append(mutation.__name__[2:])
    return f"{name}: {', '.join(done) or 'unmutated'}", model


# -- running one ---------------------------------------------------------------------------------

def run_case(model) -> str:
    """Convert `model` (and run what converts): the outcome's name (see the module docstring).
    Time and memory limits are the caller's (the worker process's)."""
    from edgelite.converter.convert import convert_onnx
    from edgelite.converter.errors import ConversionError

    try:
        conversion = convert_onnx(model)
    except ConversionError:
        return "refused"
    except MemoryError:
        return "blow-up"
    except TimeoutError:
        return "hang"
    except RecursionError:
        return "internal: RecursionError"
    except Exception as e:  # noqa: BLE001  every other exception is a converter bug
        return f"internal: {type(e).__name__}"
    return "converted, " + _run_converted(conversion.content)


def _run_converted(content: bytes) -> str:
    from edgelite.interpreter import Interpreter

    try:
        interpreter = Interpreter(model_content=content)
        interpreter.allocate_tensors()
        for detail in interpreter.get_input_details():
            interpreter.set_tensor(detail["index"], np.zeros(detail["shape"], detail["dtype"]))
        interpreter.invoke()
    except MemoryError:
        return "interpreter blow-up"
    except TimeoutError:
        return "interpreter hang"
    except (ValueError, RuntimeError) as e:   # the interpreter's refusals
        from tests.schema.hostile_worker import _is_internal
        if _is_internal(e):   # one that wraps an exception no check named ("failed: ValueError")
            return f"interpreter internal: {type(e).__name__}"
        return f"refused by the interpreter ({type(e).__name__})"
    except Exception as e:  # noqa: BLE001
        return f"interpreter internal: {type(e).__name__}"
    return "ran"
