"""MediaPipe's Convolution2DTransposeBias on the OpenCL delegate (TRANSPOSE_CONV's kernel with
the custom op's inputs, options and padding) against edgelite's CPU kernel: on its own, and
inside the mediapipe wheel's selfie segmentation model, which then runs in one partition."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from edgelite.interpreter.delegation import placement
from tests.delegates.compare import TOLERANCE, assert_matches
from tests.opmodel import In, Out, op_model, run_edgelite, run_interpreter

SAME, VALID = 1, 2


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("xs,ws,padding,s", [((1, 8, 8, 16), (1, 2, 2, 16), SAME, (2, 2)),
                                             ((1, 7, 5, 4), (3, 3, 3, 4), SAME, (2, 2)),
                                             ((2, 5, 6, 2), (4, 3, 3, 2), VALID, (1, 2))])
def test_convolution_2d_transpose_bias_on_opencl(xs, ws, padding, s, precision, opencl):
    from edgelite.interpreter import Interpreter
    from tests.interpreter.test_mediapipe_ops import _transpose_out

    delegate = opencl(precision)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    b = rng.standard_normal(ws[0]).astype(np.float32)
    out = (xs[0], _transpose_out(padding, xs[1], ws[1], s[0]),
           _transpose_out(padding, xs[2], ws[2], s[1]), ws[0])
    model = op_model("CUSTOM", [In(xs), w, b], [Out(out)], custom_code="Convolution2DTransposeBias",
                     custom_options=struct.pack("<3i", padding, s[1], s[0]))
    it = Interpreter(model_content=model, experimental_delegates=[delegate])
    ours = run_interpreter(it, [x])
    assert [p["where"] for p in placement(it)] == [delegate.name]
    assert_matches(ours, run_edgelite(model, [x]), TOLERANCE[precision])


def test_selfie_segmentation_in_one_partition(opencl):
    from edgelite.interpreter import Interpreter
    from tests.tflite_corpus_files import corpus_file

    content = corpus_file("mp_selfie_segmentation.tflite").read_bytes()
    delegate = opencl("fp32")
    x = np.random.default_rng(0).random((1, 256, 256, 3), dtype=np.float32)
    it = Interpreter(model_content=content, experimental_delegates=[delegate])
    ours = run_interpreter(it, [x])
    where = {p["where"] for p in placement(it) if p["where"] != "folded"}
    assert where == {delegate.name}, where
    assert_matches(ours, run_edgelite(content, [x]), TOLERANCE["fp32"])
