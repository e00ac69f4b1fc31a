"""The one rule for user arrays in either layout (`edgelite.interpreter.feeds`)."""
from __future__ import annotations

import numpy as np

from edgelite.interpreter.feeds import channels_last, find_key, fits, input_keys, inverse, \
    to_layout


def test_fits_allows_samples_and_unknown_dims():
    assert fits((5, 8, 8, 3), (1, 8, 8, 3)) and fits((5, 8, 8, 3), (-1, 8, -1, 3))
    assert not fits((5, 8, 8, 3), (2, 8, 8, 3)) and not fits((8, 8, 3), (1, 8, 8, 3))


def test_to_layout():
    perm = channels_last(4)
    nchw = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    moved, note = to_layout(nchw, (1, 4, 5, 3), perm)
    assert note == " (NCHW, transposed to NHWC)" and moved.flags.c_contiguous
    np.testing.assert_array_equal(moved, nchw.transpose(0, 2, 3, 1))
    same, note = to_layout(moved, (1, 4, 5, 3), perm)       # already in the model's layout
    assert same is moved and note == ""
    one, note = to_layout(nchw[0], (1, 4, 5, 3), perm)      # one sample, no batch axis
    assert one.shape == (4, 5, 3) and "transposed" in note
    cube = np.zeros((1, 3, 3, 3), np.float32)               # fits both ways: taken as it is
    kept, note = to_layout(cube, (1, 3, 3, 3), perm)
    assert kept is cube and note == " (taken as NHWC: it also fits as NCHW)"
    wrong = np.zeros((1, 7, 4, 5), np.float32)               # fits neither: left to the caller
    assert to_layout(wrong, (1, 4, 5, 3), perm) == (wrong, "")
    assert to_layout(nchw, (1, 4, 5, 3), None)[1] == ""      # no other layout known
    back, note = to_layout(moved, (1, 3, 4, 5), inverse(perm), "ONNX layout", "the .tflite's")
    np.testing.assert_array_equal(back, nchw)
    assert note == " (the .tflite's, transposed to ONNX layout)"


def test_input_keys():
    assert input_keys(["image", "image"], 0, 1) == ["image", "input_0", "x"]
    assert input_keys(["a"], 1, 2) == ["a", "input_1"]          # x only for one input
    assert find_key({"x": 0, "input_0": 1}, input_keys(["image"], 0, 1)) == "input_0"
    assert find_key({}, ["a"]) is None
