"""edgelite.interpreter.compiled_model against LiteRT 2.3's CompiledModel / TensorBuffer: each
scenario runs on both modules and must give the same values, details and errors (type, code and
the message's last line: LiteRT's also carry its C++ source locations)."""
from __future__ import annotations

import re

import numpy as np
import pytest

from edgelite.schema import (Model, Operator, OperatorCode, SignatureDef, Subgraph, Tensor,
                             default_options, save)
from tests.opmodel import In, Out, op_model

litert_cm = pytest.importorskip("ai_edge_litert.compiled_model",
                                reason="LiteRT (ai-edge-litert) is the oracle")


def _ours():
    from edgelite.interpreter import compiled_model
    return compiled_model


MODULES = {"litert": lambda: litert_cm, "edgelite": _ours}


def _signature_model() -> bytes:
    """sum = a + b * c, with a signature 'combine' whose names differ from the tensors'."""
    model, sg = Model(), Subgraph(name="main")
    a, b, c = (sg.add_tensor(Tensor(n, (2, 3))) for n in ("ta", "tb", "tc"))
    bc, out = sg.add_tensor(Tensor("bc", (2, 3))), sg.add_tensor(Tensor("tsum", (2, 3)))
    sg.operators += [Operator(OperatorCode("MUL", 1), [b, c], [bc], default_options("MUL")),
                     Operator(OperatorCode("ADD", 1), [a, bc], [out], default_options("ADD"))]
    sg.inputs, sg.outputs = [a, b, c], [out]
    model.subgraphs.append(sg)
    model.signature_defs.append(SignatureDef("combine", 0, inputs={"a": a, "b": b, "c": c},
                                             outputs={"sum": out}))
    return save(model)


def _plain_model() -> bytes:
    w = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    return op_model("FULLY_CONNECTED", [In((1, 3)), w, None], [Out((1, 4))])


def _outcome(fn):
    """('ok', value) or ('error', type name, code, the message's lines)."""
    try:
        return ("ok", fn())
    except Exception as e:  # noqa: BLE001  (the outcome is what is compared)
        text = str(e)
        code = re.search(r"code=(\d+)", text)
        lines = [ln.replace("└ ", "").split("message=")[-1].strip()
                 for ln in text.strip().splitlines()]
        return ("error", type(e).__name__, code and code.group(1), lines)


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def _scenarios(cm):
    """Each scenario: name -> a function of the module giving something comparable."""
    plain, sig = _plain_model(), _signature_model()
    x = np.array([[1.0, -2.0, 0.5]], np.float32)

    def run_plain():
        m = cm.CompiledModel.from_buffer(plain)
        ins, outs = m.create_input_buffers(0), m.create_output_buffers(0)
        ins[0].write(x)
        m.run_by_index(0, ins, outs)
        return outs[0].read(4, np.float32), outs[0].get_tensor_details()

    def run_signature(by_name):
        m = cm.CompiledModel.from_buffer(sig)
        key = m.get_signature_by_index(0)["key"]
        vals = {n: np.full((2, 3), v, np.float32) for n, v in (("a", 1), ("b", 2), ("c", 3))}
        if by_name:
            ins = {n: m.create_input_buffer_by_name(key, n) for n in vals}
            out = {"sum": m.create_output_buffer_by_name(key, "sum")}
            for n, buf in ins.items():
                buf.write(vals[n])
            m.run_by_name(key, ins, out)
            return out["sum"].read(6, np.float32)
        ins, outs = m.create_input_buffers(0), m.create_output_buffers(0)
        for buf, n in zip(ins, m.get_signature_list()[key]["inputs"]):
            buf.write(vals[n])
        m.run_by_index(0, ins, outs)
        return outs[0].read(6, np.float32)

    def model():
        return cm.CompiledModel.from_buffer(plain)

    def signatures(data):
        m = cm.CompiledModel.from_buffer(data)
        key = list(m.get_signature_list())[0]
        return (m.get_signature_list(), m.get_num_signatures(), m.get_signature_index(key),
                m.get_signature_index("nope"), m.get_signature_by_index(0),
                m.get_input_tensor_details(key), m.get_output_tensor_details(key),
                m.get_input_buffer_requirements(0), m.get_output_buffer_requirements(0),
                m.is_fully_accelerated())

    def buffer_bytes():
        m = model()
        b = m.create_input_buffers(0)[0]
        b.write(np.full(2, 7, np.float32))           # a short write: the first bytes only
        b.write(np.ones(1, np.int8))                 # raw bytes, another dtype
        return b.read(3, np.float32)[:1].view(np.uint32), b.read(2, np.int8)

    def destroyed(then):
        m = model()
        ins, outs = m.create_input_buffers(0), m.create_output_buffers(0)
        ins[0].destroy()
        return then(m, ins, outs)

    return {
        "run_by_index": run_plain,
        "run_by_index signature": lambda: run_signature(False),
        "run_by_name signature": lambda: run_signature(True),
        "signatures, none in the model": lambda: signatures(plain),
        "signatures": lambda: signatures(sig),
        "buffer bytes": buffer_bytes,
        "write too much": lambda: model().create_input_buffers(0)[0].write(
            np.zeros(9, np.float32)),
        "write float64": lambda: model().create_input_buffers(0)[0].write(np.zeros(3)),
        "write a list": lambda: model().create_input_buffers(0)[0].write([1.0, 2.0, 3.0]),
        "read too much": lambda: model().create_output_buffers(0)[0].read(5, np.float32),
        "read int64": lambda: model().create_output_buffers(0)[0].read(1, np.int64),
        "buffers of a bad signature": lambda: model().create_input_buffers(3),
        "run a bad signature": lambda: (lambda m: m.run_by_index(
            2, m.create_input_buffers(0), m.create_output_buffers(0)))(model()),
        "run with no inputs": lambda: (lambda m: m.run_by_index(
            0, [], m.create_output_buffers(0)))(model()),
        "run with two outputs": lambda: (lambda m: m.run_by_index(
            0, m.create_input_buffers(0), m.create_output_buffers(0) * 2))(model()),
        "run_by_name bad key": lambda: model().run_by_name("nope", {}, {}),
        "buffer of an unknown input": lambda: model().create_input_buffer_by_name(
            "<placeholder signature>", "zzz"),
        "buffer of an unknown signature": lambda: model().create_input_buffer_by_name(
            "zz", "zzz"),
        "details of an unknown signature": lambda: model().get_input_tensor_details("zz"),
        "requirements out of range": lambda: model().get_input_buffer_requirements(4),
        "strict resize of a static input": lambda: model().resize_input_tensor(0, [2, 3]),
        "resize_by_name unknown input": lambda: model().resize_input_tensor_by_name(
            "<placeholder signature>", "zz", [1, 3]),
        "host memory not contiguous": lambda: cm.TensorBuffer.create_from_host_memory(
            np.zeros((3, 2), np.float32).T),
        "host memory float64": lambda: cm.TensorBuffer.create_from_host_memory(np.zeros(3)),
        "host memory details": lambda: cm.TensorBuffer.create_from_host_memory(
            np.zeros((1, 3), np.float32)).get_tensor_details(),
        "host memory of another shape": lambda: (lambda m: m.run_by_index(
            0, [cm.TensorBuffer.create_from_host_memory(np.zeros(3, np.float32))],
            m.create_output_buffers(0)))(model()),
        "write to a destroyed buffer": lambda: destroyed(lambda m, i, o: i[0].write(x)),
        "read a destroyed buffer": lambda: destroyed(lambda m, i, o: i[0].read(1, np.float32)),
        "run a destroyed buffer": lambda: destroyed(lambda m, i, o: m.run_by_index(0, i, o)),
        "garbage bytes": lambda: cm.CompiledModel.from_buffer(b"garbage"),
        "options and hardware_accel": lambda: cm.CompiledModel.from_buffer(
            plain, hardware_accel=cm.HardwareAccelerator.CPU, options=cm.Options()),
        "closed model": lambda: (lambda m: (m.close(), m.get_signature_list()))(model()),
        "shared environment": lambda: (lambda env: (cm.CompiledModel.from_buffer(
            plain, environment=env).environment is env, env.options.compiler_plugin_path))(
            cm.Environment.create(compiler_plugin_path="/nowhere")),
        "environment paths twice": lambda: cm.Environment.create(options="/a", runtime_path="/b"),
        "environment positional": lambda: cm.Environment.create("/a"),
    }



def _names():
    class _Stub:
        def __getattr__(self, name):
            return None
    return list(_scenarios(_Stub()))


@pytest.mark.parametrize("name", _names())
def test_same_as_litert(name):
    theirs = _outcome(_scenarios(litert_cm)[name])
    ours = _outcome(_scenarios(_ours())[name])
    assert ours[0] == theirs[0], f"edgelite {ours} vs LiteRT {theirs}"
    if ours[0] == "error":
        assert ours[1:3] == theirs[1:3], f"edgelite {ours} vs LiteRT {theirs}"
        located = all(re.fullmatch(r"ERROR: \[.*\]", ln) for ln in theirs[3])
        # (a closed model: LiteRT's message names its C++ wrapper; a message of source
        # locations only, the text on stderr: the same type and code)
        if ours[1] != "AttributeError" and not located:
            # the same first line, or edgelite's last line among LiteRT's (which adds source
            # locations)
            assert ours[3][0] == theirs[3][0] or ours[3][-1] in theirs[3], \
                f"edgelite {ours} vs LiteRT {theirs}"
    else:
        assert _same(ours[1], theirs[1]), f"edgelite {ours[1]} vs LiteRT {theirs[1]}"


def test_signature_by_index_out_of_range_raises():
    """LiteRT aborts the process here (a failed C++ check); edgelite raises."""
    m = _ours().CompiledModel.from_buffer(_plain_model())
    with pytest.raises(RuntimeError, match="Signature index is out of range"):
        m.get_signature_by_index(7)


def test_gpu_is_refused_with_a_pointer_to_the_opencl_delegate():
    cm = _ours()
    with pytest.raises(RuntimeError, match="CPU only.*opencl"):
        cm.CompiledModel.from_buffer(_plain_model(), hardware_accel=cm.HardwareAccelerator.GPU)


def test_host_memory_is_shared():
    cm = _ours()
    array = np.zeros(3, np.float32)
    buf = cm.TensorBuffer.create_from_host_memory(array)
    buf.write(np.array([1, 2, 3], np.float32))
    np.testing.assert_array_equal(array, [1, 2, 3])
