"""Editing one weight in the IR moves LiteRT's output exactly as the arithmetic predicts."""
from __future__ import annotations

import numpy as np

from edgelite.schema import Buffer, load, save
from tests.schema._litert import ref_inputs, run


def test_edit_one_weight_of_the_last_fully_connected(models_dir):
    path = models_dir / "digits_cnn.tflite"
    model = load(path)
    sg = model.subgraphs[0]
    fc_index = max(i for i, op in enumerate(sg.operators) if op.op == "FULLY_CONNECTED")
    fc = sg.operators[fc_index]
    act_index, w_index = fc.inputs[0], fc.inputs[1]
    assert fc.outputs[0] in sg.outputs, "the last FULLY_CONNECTED should give the logits"
    weights = model.constant(sg, w_index)
    assert not weights.flags.writeable, "weights should be read-only views over the file"

    inputs = ref_inputs(path)
    (before,) = run(path.read_bytes(), inputs, all_tensors=True)
    activation = before[act_index].reshape(-1)
    i = int(np.argmax(np.abs(activation)))
    assert activation[i] != 0
    j, delta_w = 3, np.float32(0.5)

    edited = weights.copy()
    edited[j, i] += delta_w
    model.buffers[sg.tensors[w_index].buffer] = Buffer(edited.view(np.uint8).reshape(-1))
    (after,) = run(save(model), inputs)

    out = sg.outputs[0]
    delta = after[out].reshape(-1).astype(np.float64) - before[out].reshape(-1)
    expected = np.zeros_like(delta)
    expected[j] = float(delta_w) * float(activation[i])
    np.testing.assert_allclose(delta[j], expected[j], rtol=1e-5)
    others = np.arange(delta.size) != j
    np.testing.assert_array_equal(delta[others], 0.0)
    # The file on disk is untouched.
    assert load(path).constant(load(path).subgraphs[0], w_index)[j, i] == weights[j, i]
