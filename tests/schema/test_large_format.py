"""The large-model format: buffers after the FlatBuffer, addressed by offset and size."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.schema import load, save
from edgelite.schema import tflite_generated as fb
from tests.schema._litert import ref_inputs, run
from tests.schema.test_from_scratch import INPUTS, build_model, numpy_steps

NAMES = ["digits_cnn", "digits_cnn_int8", "mwk_okay_nabu", "mp_face_detection"]


def _check_layout(content: bytes) -> None:
    """Tensor data after the FlatBuffer (16-byte aligned, in range), metadata inline, and the
    `buffer_location` marker TFLite's exporter writes."""
    root = fb.Model.GetRootAs(content, 0)
    metadata = {root.Metadata(i).Name().decode(): root.Metadata(i).Buffer()
                for i in range(root.MetadataLength())}
    assert "buffer_location" in metadata and "min_runtime_version" in metadata
    marker = root.Buffers(metadata["buffer_location"]).DataAsNumpy()
    assert bytes(marker) == b"outside flatbuffers"
    outside = 0
    for i in range(root.BuffersLength()):
        b = root.Buffers(i)
        if i in metadata.values():
            assert b.Offset() == 0 and b.DataLength() > 0, f"metadata buffer {i} not inline"
            continue
        assert b.DataLength() == 0, f"buffer {i} still has inline data"
        if b.Offset():
            outside += 1
            assert b.Offset() > 1 and b.Offset() % 16 == 0, f"buffer {i} offset {b.Offset()}"
            assert b.Offset() + b.Size() + 16 <= len(content), f"buffer {i} out of range"
    assert outside > 0
    assert root.Buffers(0).Offset() == 0 and root.Buffers(0).Size() == 0


@pytest.mark.parametrize("name", NAMES)
def test_large_format_loads_back_equal_and_runs_the_same(models_dir, name):
    path = models_dir / f"{name}.tflite"
    model = load(path)
    small, large = save(model), save(model, large=True)
    _check_layout(large)
    assert save(load(large), large=True) == large
    assert load(large) == load(small)
    assert save(load(large)) == small
    inputs = ref_inputs(path)
    if name == "mwk_okay_nabu":
        inputs = [np.random.default_rng(1).integers(-128, 128, inputs[0].shape, dtype=np.int8)]
    for want, have in zip(run(small, inputs, 3, all_tensors=True),
                          run(large, inputs, 3, all_tensors=True)):
        assert want.keys() == have.keys()
        for index in want:
            np.testing.assert_array_equal(have[index], want[index])


def test_large_format_from_scratch_model_runs():
    from tests.schema._litert import interpreter
    content = save(build_model(), large=True)
    _check_layout(content)
    it = interpreter(content)
    runner = it.get_signature_runner("serving_default")
    for x, want in zip(INPUTS, numpy_steps(INPUTS)):
        np.testing.assert_allclose(runner(x=x)["y"], want, rtol=1e-6, atol=1e-6)
