"""The Interpreter API is a drop-in for LiteRT's: the same script runs against both, with the same
results and the same exception types."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.schema import Model, Operator, OperatorCode, SignatureDef, Subgraph, Tensor, \
    default_options, save
from tests.opmodel import In, op_model

litert = pytest.importorskip("ai_edge_litert.interpreter",
                             reason="LiteRT (ai-edge-litert) is the oracle: "
                                    "pip install -e '.[dev]'")
from edgelite import interpreter as edgelite_interpreter  # noqa: E402

RUNTIMES = {"edgelite": edgelite_interpreter, "litert": litert}


def _mlp_model() -> bytes:
    """x[-1, 4] -> ADD(bias, RELU) -> MUL(2) with a serving_default signature and dynamic batch."""
    model = Model()
    sg = Subgraph(name="main")
    x = sg.add_tensor(Tensor("x", (1, 4), shape_signature=(-1, 4)))
    b = sg.add_tensor(Tensor("b", (4,), buffer=model.add_buffer(
        np.array([0.5, -1.0, 2.0, 0.0], np.float32))))
    h = sg.add_tensor(Tensor("h", (1, 4), shape_signature=(-1, 4)))
    two = sg.add_tensor(Tensor("two", (), buffer=model.add_buffer(np.float32(2.0))))
    y = sg.add_tensor(Tensor("y", (1, 4), shape_signature=(-1, 4)))
    sg.inputs, sg.outputs = [x], [y]
    sg.operators = [
        Operator(OperatorCode("ADD", 0), [x, b], [h],
                 default_options("ADD", fused_activation_function=1)),
        Operator(OperatorCode("MUL", 0), [h, two], [y], default_options("MUL")),
    ]
    model.subgraphs.append(sg)
    model.signature_defs.append(SignatureDef("serving_default", 0, {"x": x}, {"y": y}))
    return save(model)


def _expected(x):
    return np.maximum(x + np.array([0.5, -1.0, 2.0, 0.0], np.float32), 0) * 2


def _script(rt, content: bytes):
    """What a user's script does; returns what it observed."""
    seen = {}
    it = rt.Interpreter(model_content=content, num_threads=1)
    with pytest.raises(RuntimeError):
        it.invoke()  # before allocate_tensors
    it.allocate_tensors()
    ins, outs = it.get_input_details(), it.get_output_details()
    seen["keys"] = sorted(ins[0]), sorted(ins[0]["quantization_parameters"])
    seen["in"] = (ins[0]["name"], ins[0]["index"], ins[0]["shape"].tolist(),
                  ins[0]["shape_signature"].tolist(), ins[0]["dtype"], ins[0]["quantization"])
    seen["out"] = (outs[0]["name"], outs[0]["shape"].tolist(), outs[0]["dtype"])
    x = np.array([[1.0, 2.0, -3.0, 4.0]], np.float32)
    with pytest.raises(ValueError):
        it.set_tensor(ins[0]["index"], x.astype(np.float64))      # wrong dtype
    with pytest.raises(ValueError):
        it.set_tensor(ins[0]["index"], x[0])                       # wrong rank
    with pytest.raises(ValueError):
        it.set_tensor(ins[0]["index"], np.zeros((1, 5), np.float32))  # wrong dimension
    with pytest.raises(ValueError):
        it.get_tensor(10_000)
    it.set_tensor(ins[0]["index"], x)
    it.invoke()
    seen["y"] = it.get_tensor(outs[0]["index"])
    seen["view"] = it.tensor(outs[0]["index"])().copy()
    it.resize_tensor_input(ins[0]["index"], [3, 4])
    it.allocate_tensors()
    x3 = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    it.set_tensor(ins[0]["index"], x3)
    it.invoke()
    seen["y3"] = it.get_tensor(it.get_output_details()[0]["index"])
    seen["out3_shape"] = it.get_output_details()[0]["shape"].tolist()
    seen["signatures"] = it.get_signature_list()
    runner = it.get_signature_runner()
    seen["runner_in"] = sorted(runner.get_input_details())
    seen["runner"] = runner(x=np.ones((2, 4), np.float32))["y"]
    with pytest.raises(ValueError):
        it.get_signature_runner("nope")
    with pytest.raises(ValueError):
        runner(z=np.ones((2, 4), np.float32))
    seen["n_subgraphs"] = it.num_subgraphs()
    return seen


def test_same_script_same_results():
    content = _mlp_model()
    ours, theirs = (_script(RUNTIMES[k], content) for k in ("edgelite", "litert"))
    for key in theirs:
        a, b = ours[key], theirs[key]
        if isinstance(b, np.ndarray):
            np.testing.assert_allclose(a, b, rtol=1e-6, err_msg=key)
        else:
            assert a == b, key
    np.testing.assert_allclose(ours["y3"], _expected(np.arange(12, dtype=np.float32)
                                                     .reshape(3, 4) - 5), rtol=1e-6)


@pytest.mark.parametrize("name", ["edgelite", "litert"])
def test_constructor_errors(name):
    rt = RUNTIMES[name]
    with pytest.raises(ValueError):
        rt.Interpreter()
    with pytest.raises(ValueError):
        rt.Interpreter(model_path="x.tflite", model_content=b"x")
    with pytest.raises(ValueError):
        rt.Interpreter(model_content=b"garbage" * 10)
    with pytest.raises(ValueError):
        rt.Interpreter(model_path="/nonexistent/model.tflite")


@pytest.mark.parametrize("name", ["edgelite", "litert"])
def test_unregistered_custom_op_is_named(name):
    content = op_model("CUSTOM", [In((2, 3))], custom_code="MyFancyOp")
    with pytest.raises(RuntimeError, match="MyFancyOp"):
        it = RUNTIMES[name].Interpreter(model_content=content)
        it.allocate_tensors()


def test_unsupported_ops_listed_at_once():
    model = Model()
    sg = Subgraph()
    ids = [sg.add_tensor(Tensor(f"t{i}", (2,))) for i in range(4)]
    sg.inputs, sg.outputs = [ids[0]], [ids[3]]
    sg.operators = [Operator(OperatorCode("CUSTOM", 1, "FooOp"), [ids[0]], [ids[1]]),
                    Operator(OperatorCode("ADD", 0), [ids[1], ids[1]], [ids[2]],
                             default_options("ADD")),
                    Operator(OperatorCode("CUSTOM", 1, "BarOp"), [ids[2]], [ids[3]])]
    model.subgraphs.append(sg)
    with pytest.raises(RuntimeError) as err:
        edgelite_interpreter.Interpreter(model_content=save(model))
    message = str(err.value)
    assert "FooOp" in message and "BarOp" in message and "2 operator" in message


def test_custom_op_registration_runs():
    def prepare(node):
        node.outputs[0].shape = node.inputs[0].shape

        def run(x, out):
            np.multiply(x, 3.0, out=out)
        return run

    edgelite_interpreter.register_custom_op("TimesThree", prepare, replace=True)
    content = op_model("CUSTOM", [In((2, 3))], custom_code="TimesThree")
    it = edgelite_interpreter.Interpreter(model_content=content)
    it.allocate_tensors()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    np.testing.assert_array_equal(it.get_tensor(it.get_output_details()[0]["index"]), 3 * x)


def test_arena_shares_memory():
    """A chain of ops reuses arena memory: the arena is smaller than the sum of the activations."""
    model = Model()
    sg = Subgraph()
    n = 10
    ids = [sg.add_tensor(Tensor(f"t{i}", (64, 64))) for i in range(n + 1)]
    sg.inputs, sg.outputs = [ids[0]], [ids[n]]
    sg.operators = [Operator(OperatorCode("ADD", 0), [ids[i], ids[i]], [ids[i + 1]],
                             default_options("ADD")) for i in range(n)]
    model.subgraphs.append(sg)
    it = edgelite_interpreter.Interpreter(model_content=save(model))
    it.allocate_tensors()
    plan = it._main
    assert plan.arena_bytes <= 1.1 * plan.live_bytes
    assert plan.arena_bytes < (n - 1) * 64 * 64 * 4 / 3
    x = np.ones((64, 64), np.float32)
    it.set_tensor(ids[0], x)
    it.invoke()
    np.testing.assert_array_equal(it.get_tensor(ids[n]), x * 2 ** n)
    # With every tensor preserved, intermediate values stay readable.
    keep = edgelite_interpreter.Interpreter(model_content=save(model),
                                            experimental_preserve_all_tensors=True)
    keep.allocate_tensors()
    keep.set_tensor(ids[0], x)
    keep.invoke()
    np.testing.assert_array_equal(keep.get_tensor(ids[3]), x * 8)


@pytest.mark.parametrize("model", ["digits_cnn", "digits_cnn_int8", "mobilenet_v2_int8",
                                   "mwk_okay_nabu"])
def test_underscored_helpers_like_litert(model, models_dir):
    """_get_ops_details, _get_op_details, _get_tensor_details and _get_full_signature_list
    (used by tools and scripts written for LiteRT) give what LiteRT gives (without its default
    delegate, whose node LiteRT lists as one more op)."""
    content = (models_dir / f"{model}.tflite").read_bytes()
    ours = edgelite_interpreter.Interpreter(model_content=content)
    litert = RUNTIMES["litert"]
    theirs = litert.Interpreter(
        model_content=content,
        experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    for it in (ours, theirs):
        it.allocate_tensors()

    def same(a, b, where):
        if isinstance(b, dict):
            assert a.keys() == b.keys(), where
            for k in b:
                same(a[k], b[k], f"{where}.{k}")
        elif isinstance(b, (list, tuple)):
            assert len(a) == len(b), where
            for i, (x, y) in enumerate(zip(a, b)):
                same(x, y, f"{where}[{i}]")
        elif isinstance(b, np.ndarray):
            assert a.dtype == b.dtype, where
            np.testing.assert_array_equal(a, b, err_msg=where)
        else:
            assert a == b, where
    same(ours._get_ops_details(), theirs._get_ops_details(), "ops")
    same(ours._get_op_details(1), theirs._get_op_details(1), "op 1")
    same(ours._get_full_signature_list(), theirs._get_full_signature_list(), "signatures")
    for t in range(min(8, len(ours.get_tensor_details()))):
        same(ours._get_tensor_details(t, 0), theirs._get_tensor_details(t, 0), f"tensor {t}")
    for it in (ours, theirs):
        with pytest.raises(ValueError):
            it._get_op_details(10_000)
        with pytest.raises(ValueError):
            it._get_tensor_details(10_000, 0)


def test_int4_weights_in_details_and_get_tensor_like_litert():
    """An int4 constant: details say int8 and get_tensor gives the unpacked values, as LiteRT."""
    from tests.interpreter.cases_int4 import CASES
    content = next(c for c in CASES if c.id == "fully_connected").model
    values = []
    for name in ("edgelite", "litert"):
        it = RUNTIMES[name].Interpreter(model_content=content)
        it.allocate_tensors()
        d = next(x for x in it.get_tensor_details() if x["name"] == "w")
        assert d["dtype"] is np.int8
        values.append(it.get_tensor(d["index"]))
    np.testing.assert_array_equal(values[0], values[1])
    assert values[0].shape == (4, 6) and values[0].min() >= -8 and values[0].max() <= 7
