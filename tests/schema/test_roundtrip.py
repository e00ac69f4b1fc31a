"""Every shared .tflite loads, saves and reloads to an equal model, saves deterministically, and
the saved file runs in LiteRT with bit-identical results."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.schema import load, save
from tests.conftest import models_dir
from tests.schema._litert import ref_inputs, run, strip_added_runtime_version, tflite_files

FILES = tflite_files()
# Streaming models keep state in variables: several invokes check that the state evolves alike.
INVOKES = {"mwk_okay_nabu": 5}
# Small models: compare every tensor, not only the outputs.
ALL_TENSORS = {"digits_cnn", "digits_cnn_int8", "mwk_okay_nabu", "mp_face_detection"}


def _params():
    return [pytest.param(p, id=p.stem) for p in FILES] or [pytest.param(None, id="no-models")]


@pytest.mark.parametrize("path", _params())
def test_load_save_reload_equal_and_deterministic(path):
    if path is None:
        models_dir()
    model = load(path)
    saved = save(model)
    reloaded = load(saved)
    assert save(reloaded) == saved, "a second save gives different bytes"
    assert save(load(path)) == saved, "saving the same file twice gives different bytes"
    assert strip_added_runtime_version(model, reloaded) == model


@pytest.mark.parametrize("path", _params())
def test_saved_file_runs_like_the_original(path):
    if path is None:
        models_dir()
    inputs = ref_inputs(path)
    if path.stem == "mwk_okay_nabu":  # the reference input alone leaves the detector at 0
        rng = np.random.default_rng(0)
        inputs = [rng.integers(-128, 128, inputs[0].shape, dtype=np.int8)]
    invokes = INVOKES.get(path.stem, 1)
    everything = path.stem in ALL_TENSORS
    expected = run(path.read_bytes(), inputs, invokes, everything)
    got = run(save(load(path)), inputs, invokes, everything)
    for k, (want, have) in enumerate(zip(expected, got)):
        assert want.keys() == have.keys()
        for index in want:
            np.testing.assert_array_equal(have[index], want[index],
                                          err_msg=f"invoke {k}, tensor {index}")


def test_equal_vectors_are_written_once():
    """Per-channel zero points repeat (a weight's and its bias's are equal): one copy in the
    file."""
    from edgelite.schema import tflite_generated as fb
    path = models_dir() / "digits_cnn_int8.tflite"
    saved = save(load(path))
    sg = fb.Model.GetRootAs(saved, 0).Subgraphs(0)
    starts = {}
    for i in range(sg.TensorsLength()):
        q = sg.Tensors(i).Quantization()
        if q is not None and q.ZeroPointLength() > 1:
            starts.setdefault(q.ZeroPointLength(), set()).add(q._tab.Vector(q._tab.Offset(10)))
    assert starts and all(len(s) == 1 for s in starts.values()), starts
    assert len(saved) < path.stat().st_size
