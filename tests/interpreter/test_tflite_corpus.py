"""The pinned CI subset of issue 13's third-party corpus (tools/tflite_corpus.py has the whole).

TensorFlow cannot run in CI cheaply (a 570 MB wheel, then about a minute per conversion on two
cores), so the TF-converted part of the subset is the shared models TensorFlow's converter
made once (MobileNetV2 float32 and full int8, the digits CNN in int8), and the MediaPipe part is
the pinned mediapipe 0.10.14 wheel's own files, which `tools/tflite_corpus.py mediapipe`
downloads in seconds (CI's "tflite corpus" stage). Each file loads, runs and matches LiteRT by
the corpus rules (float <= 1e-5 x max|ref|, float16 weights <= 1e-4, int8 bit-exact to
BUILTIN_REF). The face landmarker with attention, whose MediaPipe custom ops LiteRT's wheel
lacks, is checked in two halves: its builtin part by LiteRT (the custom ops' outputs fed in as
graph inputs) and each custom op by the float64 formulas of test_mediapipe_ops.
"""
from __future__ import annotations


import numpy as np
import pytest

from tests.conftest import models_dir
from tests.tflite_corpus_files import CORPUS, corpus_file, corpus_tool

pytest.importorskip("ai_edge_litert", reason="LiteRT (ai-edge-litert) is the oracle")


tc = corpus_tool()

# Small files that cover what the corpus needs: Convolution2DTransposeBias (selfie
# segmentation), DENSIFY of sparse float16 weights (full-range face detection), float32 with
# PRELU (hand recrop), a graph amplifying rounding past the float16 rule in LiteRT itself (pose
# landmarks: LiteRT's default and reference kernels differ by 2e-4 there).
PINNED_MEDIAPIPE = ["mp_selfie_segmentation.tflite", "mp_face_detection_full_range_sparse.tflite",
                    "mp_hand_recrop.tflite", "mp_face_detection_short_range.tflite",
                    "mp_pose_landmark_full.tflite"]
PINNED_SHARED = ["mobilenet_v2.tflite", "mobilenet_v2_int8.tflite", "digits_cnn_int8.tflite"]
PASSING = ("ok", "bit-exact")


@pytest.mark.parametrize("name", PINNED_MEDIAPIPE)
def test_mediapipe_file_matches_litert(name):
    row = tc.check_file(corpus_file(name), repeat=0)
    assert row["result"].startswith(PASSING), row


@pytest.mark.parametrize("name", PINNED_SHARED)
def test_tensorflow_converted_file_matches_litert(name):
    row = tc.check_file(models_dir() / name, repeat=0)
    assert row["result"].startswith(PASSING), row
    assert row["kind"] == ("int8" if "int8" in name else "float32")


# -- the face landmarker with attention ---------------------------------------------------------

def _without_custom_ops(content: bytes) -> tuple:
    """The model with its custom ops removed and their outputs made graph inputs (appended
    after the original inputs), and those tensors' indices."""
    import edgelite.schema as schema
    model = schema.load(content)
    sg = model.subgraphs[0]
    custom = [op for op in sg.operators if op.opcode.custom_code]
    fed = [t for op in custom for t in op.outputs]
    sg.operators = [op for op in sg.operators if not op.opcode.custom_code]
    sg.inputs = list(sg.inputs) + fed
    return schema.save(model), fed, custom


def test_face_landmark_with_attention():
    from edgelite.interpreter import Interpreter
    from ai_edge_litert.interpreter import Interpreter as LiteRT
    from tests.interpreter import test_mediapipe_ops as ref
    from flatbuffers import flexbuffers

    content = corpus_file("mp_face_landmark_with_attention.tflite").read_bytes()
    ours = Interpreter(model_content=content, experimental_preserve_all_tensors=True)
    ours.allocate_tensors()
    x = np.random.default_rng(0).random((1, 192, 192, 3), dtype=np.float32)
    ours.set_tensor(ours.get_input_details()[0]["index"], x)
    ours.invoke()
    outputs = [ours.get_tensor(d["index"]) for d in ours.get_output_details()]

    # 1. every custom op's output from its inputs, by MediaPipe's formulas in float64
    cut, fed, custom = _without_custom_ops(content)
    kinds = {}
    for op in custom:
        ins = [ours.get_tensor(t) for t in op.inputs]
        got = ours.get_tensor(op.outputs[0])
        name = op.opcode.custom_code
        kinds[name] = kinds.get(name, 0) + 1
        if name == "Landmarks2TransformMatrix":
            opts = flexbuffers.Loads(bytes(op.custom_options))
            want = ref._l2tm_float64(opts, ins[0][0].astype(np.float64))
            np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
        elif name == "TransformTensorBilinear":
            opts = flexbuffers.Loads(bytes(op.custom_options))
            want = ref._bilinear_loops(ins[0][0], ins[1][0], opts["output_height"],
                                       opts["output_width"])
            np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
        else:
            xy1 = np.concatenate([ins[0][0, :, :2], np.zeros((len(ins[0][0]), 1)),
                                  np.ones((len(ins[0][0]), 1))], 1)
            want = xy1 @ ins[1][0, :2].astype(np.float64).T
            np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    assert kinds == {"Landmarks2TransformMatrix": 3, "TransformTensorBilinear": 3,
                     "TransformLandmarks": 5}

    # 2. the builtin ops around them by LiteRT, fed edgelite's custom-op outputs
    theirs = LiteRT(model_content=cut)
    theirs.allocate_tensors()
    details = theirs.get_input_details()
    theirs.set_tensor(details[0]["index"], x)
    for d, t in zip(details[1:], fed):
        theirs.set_tensor(d["index"], ours.get_tensor(t))
    theirs.invoke()
    for a, d in zip(outputs, theirs.get_output_details()):
        b = theirs.get_tensor(d["index"])
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-4 * max(np.abs(b).max(), 1e-30))


def test_face_landmark_with_attention_matches_mediapipe():
    """Against MediaPipe's own runtime (the mediapipe 0.10.14 wheel's InferenceCalculator with
    its custom-op resolver, as its face mesh with refined landmarks runs this model):
    `tools/tflite_corpus.py mediapipe-reference` saved its input tensor and outputs."""
    from edgelite.interpreter import Interpreter
    corpus_file(tc.ATTENTION)
    saved = np.load(corpus_file(tc.ATTENTION_REFERENCE))
    assert str(saved["mediapipe"]) == "0.10.14"
    it = Interpreter(model_path=str(CORPUS / tc.ATTENTION))
    it.allocate_tensors()
    x = saved["input"].reshape(1, 192, 192, 3)
    np.testing.assert_allclose(x, saved["image"][None] / 255.0, atol=1e-6)   # the same image
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    details = it.get_output_details()
    assert len(details) == 7
    for k, d in enumerate(details):
        ours, theirs = it.get_tensor(d["index"]).reshape(-1), saved[f"o{k}"]
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-4 * np.abs(theirs).max(),
                                   err_msg=d["name"])


# -- hybrid (dynamic-range) numerics: issue 13, item 4 ------------------------------------------

def test_hybrid_mobilenet_v2_bit_exact_to_litert_reference(tmp_path):
    """A dynamic-range MobileNetV2 (edgelite's own quantizer: int8 weights, float activations,
    the small first convolutions kept float) equals LiteRT's BUILTIN_REF bit for bit: its float
    depthwise and stem convolutions and its global MEAN sum in the reference kernels' order
    (kernels/reference_order.py), so the hybrid layers quantize the same inputs. LiteRT's own
    default kernels differ from its reference by about 0.1 x max|output| here, and edgelite
    differed by 0.04 before the ordered sums: a 1-ulp difference moved across an on-the-fly
    quantization step is amplified layer after layer."""
    pytest.importorskip("onnx", reason="the converter needs onnx: pip install -e '.[dev]'")
    from edgelite.converter import Optimize, TFLiteConverter
    conv = TFLiteConverter.from_onnx(str(models_dir() / "syn_mobilenetv2.onnx"))
    conv.optimizations = [Optimize.DEFAULT]          # no calibration data: dynamic range
    path = tmp_path / "mobilenet_v2.dynamic.tflite"
    path.write_bytes(conv.convert())
    row = tc.check_file(path, repeat=0, value_range=(0.0, 1.0))
    assert row["kind"] == "dynamic"
    assert row["gap"] == 0.0, row                      # edgelite vs LiteRT BUILTIN_REF
    assert row["litert_gap"] > 1e-3, row               # LiteRT default vs its reference
