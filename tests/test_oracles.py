"""The onnxruntime oracle runs at ORT_ENABLE_BASIC on one thread (tests/oracles.py), and the guard
in tests/conftest.py fails a test whose session would run above BASIC: in this process, and in a
fresh pytest run where onnxruntime is first imported inside a test."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tests.conftest import REPO_ROOT
from tests.oracles import onnxruntime_run, onnxruntime_session

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")


def _relu_model() -> bytes:
    from onnx import TensorProto, helper
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8
    return proto


def test_helper_session_is_basic_on_one_thread(tmp_path):
    proto = _relu_model()
    path = tmp_path / "relu.onnx"
    path.write_bytes(proto.SerializeToString())
    for model in (proto, proto.SerializeToString(), str(path), path):
        options = onnxruntime_session(model).get_session_options()
        assert options.graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        assert options.intra_op_num_threads == 1
    x = np.array([-1, 0, 2], np.float32)
    np.testing.assert_array_equal(onnxruntime_run(proto, {"x": x})[0], [0, 0, 2])


@pytest.mark.parametrize("level", [None, "ORT_ENABLE_EXTENDED", "ORT_ENABLE_LAYOUT",
                                   "ORT_ENABLE_ALL"])
def test_guard_fails_a_session_above_basic(level):
    content = _relu_model().SerializeToString()
    if level is None:                                  # no options: onnxruntime's ENABLE_ALL
        with pytest.raises(pytest.fail.Exception, match="above ORT_ENABLE_BASIC.*default"):
            ort.InferenceSession(content, providers=["CPUExecutionProvider"])
        return
    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    with pytest.raises(pytest.fail.Exception, match=f"above ORT_ENABLE_BASIC \\({level}"):
        ort.InferenceSession(content, options, providers=["CPUExecutionProvider"])
    with pytest.raises(pytest.fail.Exception, match="tests.oracles.onnxruntime_session"):
        ort.InferenceSession(content, sess_options=options)


@pytest.mark.parametrize("level", ["ORT_DISABLE_ALL", "ORT_ENABLE_BASIC"])
def test_guard_lets_basic_and_below_run(level):
    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    session = ort.InferenceSession(_relu_model().SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    assert isinstance(session, ort.capi.onnxruntime_inference_collection.InferenceSession)


def test_guard_in_a_fresh_run_fails_the_test(tmp_path):
    """A fresh pytest run with tests/conftest.py: onnxruntime is not imported until a test
    imports it, and then a bare session fails that test (and a helper's session does not)."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_guarded.py").write_text(textwrap.dedent('''
        import sys

        def test_1_onnxruntime_not_imported_by_the_conftest():
            assert "onnxruntime" not in sys.modules

        def _model():
            from tests.test_oracles import _relu_model
            return _relu_model().SerializeToString()

        def test_2_bare_session():
            import onnxruntime as ort
            ort.InferenceSession(_model(), providers=["CPUExecutionProvider"])

        def test_3_helper_session():
            from tests.oracles import onnxruntime_session
            onnxruntime_session(_model())
    '''))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.conftest",
                          "-p", "no:cacheprovider", "-q", "--rootdir", str(tmp_path),
                          "-c", str(tmp_path / "pytest.ini"), str(tmp_path / "test_guarded.py")],
                         cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert "1 failed, 2 passed" in out, out
    assert "FAILED" in out and "test_2_bare_session" in out, out
    assert "above ORT_ENABLE_BASIC (ORT_ENABLE_ALL, the default with no SessionOptions)" in out, out
