"""Hostile and absurd ONNX models (issue 19): each is one clear ConversionError naming the node,
the initializer or the input, refused before anything large is allocated; nested If converts
(it failed with an IndexError at any depth above one); external data outside the model's folder
is refused by our own check, whatever onnx's version checks."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgelite.converter.convert import convert_onnx
from edgelite.converter.errors import ConversionError
from edgelite.converter.guards import MAX_NESTING
from tests.converter.onnx_cases import check

F = TensorProto.FLOAT
vi = helper.make_tensor_value_info


def model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def const(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


def unknown_type_initializer():
    bad = TensorProto(name="b", data_type=99, dims=[2], raw_data=b"\0" * 8)
    return model([helper.make_node("Add", ["x", "b"], ["y"], name="add")], [vi("x", F, [2])],
                 [vi("y", F, [None])], [bad])


def conv(**attrs):
    return model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv", **attrs)],
                 [vi("x", F, [1, 1, 4, 4])], [vi("y", F, [None] * 4)],
                 [const("w", np.ones([1, 1, 1, 1], np.float32))])


HOSTILE = {
    "input dim 2^63-1": (
        model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [vi("x", F, [2**63 - 1])],
              [vi("y", F, [None])]),
        "input 'x' has dim 9223372036854775807: .tflite dims are int32"),
    "input of 2^32 elements": (
        model([helper.make_node("TopK", ["x", "k"], ["y", "i"], name="topk", axis=1)],
              [vi("x", F, [2, 2**31 - 1])], [vi("y", F, [2, 2]), vi("i", TensorProto.INT64,
                                                                   [2, 2])],
              [const("k", np.array([2]))]),
        "input 'x' has shape [2, 2147483647]: 4294967294 elements, more than a .tflite tensor"),
    "LSTM hidden_size -5": (
        model([helper.make_node("LSTM", ["x", "W", "R"], ["y"], name="lstm", hidden_size=-5)],
              [vi("x", F, [3, 1, 4])], [vi("y", F, None)],
              [const("W", np.zeros([1, 8, 4], np.float32)),
               const("R", np.zeros([1, 8, 2], np.float32))]),
        "LSTM node 'lstm': attribute hidden_size = -5 must be positive"),
    "Conv dilations 2^40": (conv(dilations=[2**40, 1]),
                            "Conv node 'conv': attribute dilations = [1099511627776, 1]"),
    "Conv strides 2^40": (conv(strides=[2**40, 1]),
                          "Conv node 'conv': attribute strides = [1099511627776, 1]"),
    "initializer data_type 99": (unknown_type_initializer(),
                                 "initializer 'b' has ONNX data type 99"),
    "Expand to 2^50 elements": (
        model([helper.make_node("Expand", ["x", "s"], ["y"], name="expand")], [vi("x", F, [1])],
              [vi("y", F, [None] * 3)], [const("s", np.array([2**20, 2**20, 2**10]))]),
        "Expand node 'expand': output 'y' would have shape [1048576, 1048576, 1024] (4096.0 TiB)"),
    "Tile to 2^42 elements": (
        model([helper.make_node("Tile", ["x", "r"], ["y"], name="tile")], [vi("x", F, [2, 2])],
              [vi("y", F, [None] * 2)], [const("r", np.array([2**20, 2**20]))]),
        "Tile node 'tile': output 'y' would have shape [2097152, 2097152]"),
    "ConstantOfShape [3e8, 1]": (
        model([helper.make_node("ConstantOfShape", ["s"], ["y"], name="fill")], [],
              [vi("y", F, [None] * 2)], [const("s", np.array([300_000_000, 1]))]),
        "ConstantOfShape node 'fill': output 'y' would have shape [300000000, 1] (1.1 GiB), over "
        "the converter's limit of 1.0 GiB"),
    "Resize scale 1e6": (
        model([helper.make_node("Resize", ["x", "", "sc"], ["y"], name="up", mode="nearest")],
              [vi("x", F, [1, 3, 8, 8])], [vi("y", F, [None] * 4)],
              [const("sc", np.array([1, 1, 1e6, 1e6], np.float32))]),
        "Resize node 'up': output 'y' would have shape [1, 3, 8000000, 8000000] (698.5 TiB)"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_model_is_one_clear_error(case):
    proto, expected = HOSTILE[case]
    with pytest.raises(ConversionError) as e:
        convert_onnx(proto)
    assert expected in str(e.value)


def test_the_tensor_limit_is_a_setting(monkeypatch):
    """A 4 MB ConstantOfShape converts; under a limit of 10^6 bytes it is refused."""
    proto = model([helper.make_node("ConstantOfShape", ["s"], ["y"], name="fill")], [],
                  [vi("y", F, [1000, 1000])], [const("s", np.array([1000, 1000]))])
    convert_onnx(proto)
    monkeypatch.setenv("EDGELITE_CONVERT_TENSOR_LIMIT", "1e6")
    with pytest.raises(ConversionError) as e:
        convert_onnx(proto)
    assert "(3.8 MiB), over the converter's limit of 976.6 KiB for one tensor " \
        "($EDGELITE_CONVERT_TENSOR_LIMIT sets it)" in str(e.value)


def test_refused_before_allocating():
    """Under a 512 MiB address-space limit above the process's baseline, ConstantOfShape
    [3e8, 1] (1.2 GB) and Resize x1e6 (698 TiB) are refused by name, not a MemoryError."""
    code = (
        "import resource, sys\n"
        "from tests.converter.test_hostile_onnx import HOSTILE\n"
        "from edgelite.converter.convert import convert_onnx\n"
        "from edgelite.converter.errors import ConversionError\n"
        "with open('/proc/self/statm') as f: vm = int(f.read().split()[0]) * 4096\n"
        "resource.setrlimit(resource.RLIMIT_AS, (vm + 2**29, vm + 2**29))\n"
        "for case in ('ConstantOfShape [3e8, 1]', 'Resize scale 1e6'):\n"
        "    try:\n"
        "        convert_onnx(HOSTILE[case][0])\n"
        "    except ConversionError as e:\n"
        "        print('refused', str(e).splitlines()[-1].split(':')[0])\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=os.path.dirname(os.path.dirname(os.path.dirname(
                             os.path.abspath(__file__)))))
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split("\n")[:2] == ["refused   ConstantOfShape node 'fill'",
                                         "refused   Resize node 'up'"], run.stdout


def nested_if(depth: int):
    """y = If(c, then: If(c, then: ... Relu(x) ..., else: -x), else: -x), `depth` Ifs."""
    def leaf(d):
        return helper.make_graph([helper.make_node("Neg", ["x"], [f"e{d}"])], f"e{d}", [],
                                 [vi(f"e{d}", F, [2])])

    def body(d):
        if d == 0:
            nodes = [helper.make_node("Relu", ["x"], ["o0"])]
        else:
            nodes = [helper.make_node("If", ["c"], [f"o{d}"], then_branch=body(d - 1),
                                      else_branch=leaf(d), name=f"if{d}")]
        return helper.make_graph(nodes, f"b{d}", [], [vi(f"o{d}", F, [2])])
    top = helper.make_node("If", ["c"], ["y"], then_branch=body(depth - 1),
                           else_branch=leaf(depth), name="top")
    return model([top], [vi("x", F, [2]), vi("c", TensorProto.BOOL, [])], [vi("y", F, [2])])


@pytest.mark.parametrize("cond", [True, False])
def test_nested_if_against_onnxruntime(cond):
    check(nested_if(3), {"x": np.array([-1.5, 2.0], np.float32), "c": np.array(cond)})


def test_if_nested_20_deep_converts_and_deeper_than_onnx_reads_is_refused():
    conversion = convert_onnx(nested_if(20))
    assert len(conversion.model.subgraphs) == 1 + 2 * 20
    with pytest.raises(ConversionError, match="If node 'if1': body graphs nested "
                                              f"more than {MAX_NESTING} deep"):
        convert_onnx(nested_if(MAX_NESTING + 1))


# -- external data -------------------------------------------------------------------------------

def _external_model(tmp_path, location: str):
    weights = const("w", np.arange(4, dtype=np.float32))
    proto = model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [vi("x", F, [4])],
                  [vi("y", F, [4])], [weights])
    init = proto.graph.initializer[0]
    init.ClearField("raw_data")
    init.ClearField("float_data")
    init.data_location = TensorProto.EXTERNAL
    init.external_data.add(key="location", value=location)
    path = tmp_path / "m" / "model.onnx"
    path.parent.mkdir(exist_ok=True)
    onnx.save(proto, path)
    return path


@pytest.mark.parametrize("location, why", [
    ("../secret.bin", "a path with '..'"),
    ("/etc/hostname", "an absolute path"),
    ("link.bin", "leads outside the model's folder"),
    ("missing.bin", "which is not a file"),
])
def test_external_data_outside_the_models_folder_is_refused(tmp_path, location, why):
    (tmp_path / "secret.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    path = _external_model(tmp_path, location)
    (path.parent / "link.bin").symlink_to(tmp_path / "secret.bin")
    with pytest.raises(ConversionError) as e:
        convert_onnx(path)
    assert f"initializer 'w' keeps its data in {location!r}" in str(e.value)
    assert why in str(e.value)


def test_external_data_inside_the_folder_is_read(tmp_path):
    path = _external_model(tmp_path, "weights/w.bin")
    (path.parent / "weights").mkdir()
    (path.parent / "weights" / "w.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    conversion = convert_onnx(path)
    sg = conversion.model.subgraphs[0]
    constants = [conversion.model.constant(sg, t) for t in range(len(sg.tensors))]
    assert any(c is not None and np.array_equal(c, np.arange(4)) for c in constants)


def test_onnx_minimum_has_the_external_data_fixes():
    """pyproject's minimum onnx has the external-data fixes: '..' (CVE-2024-27318, fixed in
    1.16), symlinks (CVE-2026-27489) and ExternalDataInfo key injection (CVE-2026-34445), both
    fixed in 1.21. The converter checks locations itself too (the tests above)."""
    import re
    from pathlib import Path

    text = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    pins = re.findall(r'"onnx>=(\d+)\.(\d+)', text)
    assert pins and all((int(a), int(b)) >= (1, 21) for a, b in pins), pins

