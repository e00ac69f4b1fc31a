"""Code written for `tflite_runtime.interpreter` (the older LiteRT wheel of Raspberry Pi and Coral
tutorials) runs on edgelite after one import change: `edgelite.interpreter` has the module's
names, a tutorial's script gives LiteRT's numbers, and the Edge TPU gets one clear error."""
from __future__ import annotations

import numpy as np
import pytest

import edgelite.interpreter as tflite
from edgelite.interpreter.delegation import DelegateError
from tests.opmodel import In, Out, op_model

litert = pytest.importorskip("ai_edge_litert.interpreter",
                             reason="LiteRT (ai-edge-litert) is the oracle")

API = ["Interpreter", "InterpreterWithCustomOps", "load_delegate", "Delegate", "OpResolverType",
       "SignatureRunner"]

# A Raspberry Pi tutorial's classifier loop, as written for tflite_runtime.
TUTORIAL = """
import numpy as np
import tflite_runtime.interpreter as tflite

interpreter = tflite.Interpreter(model_path=MODEL, num_threads=2)
interpreter.allocate_tensors()
input_details = interpreter.get_input_details()
output_details = interpreter.get_output_details()
height, width = input_details[0]['shape'][1:3]
results = []
for image in IMAGES:
    input_data = np.expand_dims(image[:height, :width], axis=0).astype(np.float32)
    interpreter.set_tensor(input_details[0]['index'], input_data)
    interpreter.invoke()
    scores = np.squeeze(interpreter.get_tensor(output_details[0]['index']))
    results.append((int(np.argmax(scores)), scores))
"""


def test_the_module_has_tflite_runtimes_names():
    for name in API:
        assert hasattr(litert, name), name        # the names are LiteRT's
        assert hasattr(tflite, name), f"edgelite.interpreter lacks {name}"


def _run_tutorial(module_name: str, model: str, images) -> list:
    code = TUTORIAL.replace("import tflite_runtime.interpreter as tflite",
                            f"import {module_name} as tflite")
    scope = {"MODEL": model, "IMAGES": images}
    exec(compile(code, "tutorial.py", "exec"), scope)
    return scope["results"]


def test_a_tutorial_runs_after_one_import_change(tmp_path):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 5, 5, 3)).astype(np.float32)
    conv = op_model("CONV_2D", [In((1, 12, 12, 3)), w, rng.standard_normal(8).astype(np.float32)],
                    [Out((1, 8, 8, 8))], options=dict(padding=1, stride_w=1, stride_h=1))
    path = tmp_path / "model.tflite"
    path.write_bytes(conv)
    images = [rng.random((14, 14, 3)) for _ in range(3)]
    ours = _run_tutorial("edgelite.interpreter", str(path), images)
    theirs = _run_tutorial("ai_edge_litert.interpreter", str(path), images)
    for (k, s), (k2, s2) in zip(ours, theirs):
        assert k == k2
        np.testing.assert_allclose(s, s2, rtol=1e-5, atol=1e-5 * np.abs(s2).max())


def test_interpreter_with_custom_ops_takes_python_registerers():
    def negate(node):
        node.outputs[0].shape = node.inputs[0].shape
        return lambda x, out: np.negative(x, out=out)

    model = op_model("CUSTOM", [In((2, 3))], [Out((2, 3))], custom_code="CompatNegate")
    it = tflite.InterpreterWithCustomOps(
        custom_op_registerers=[lambda register: register("CompatNegate", negate, replace=True)],
        model_content=model)
    it.allocate_tensors()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    np.testing.assert_array_equal(it.get_tensor(it.get_output_details()[0]["index"]), -x)


def test_interpreter_with_custom_ops_refuses_a_cpp_registerer():
    with pytest.raises(ValueError, match="'TF_TestRegisterer' is a C\\+\\+ function.*Python"):
        tflite.InterpreterWithCustomOps(custom_op_registerers=["TF_TestRegisterer"],
                                        model_content=op_model("ABS", [In((2,))]))


@pytest.mark.parametrize("library", ["libedgetpu.so.1", "edgetpu.dll", "libedgetpu.1.dylib"])
def test_the_edge_tpu_delegate_is_named(library):
    with pytest.raises(DelegateError, match="Coral Edge TPU"):
        tflite.load_delegate(library)
