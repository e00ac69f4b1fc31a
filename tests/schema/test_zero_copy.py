"""Loading does not copy weights: buffers are views over the file's mmap or the given bytes."""
from __future__ import annotations

import mmap

import numpy as np

from edgelite.schema import load


def _base_chain(arr: np.ndarray) -> list:
    chain, obj = [], arr
    while obj is not None:
        chain.append(obj)
        attr = "base" if isinstance(obj, np.ndarray) else "obj"
        obj = getattr(obj, attr, None)
    return chain


def _weights(model) -> list:
    return [b.data for b in model.buffers if b.nbytes >= 64]


def test_path_load_views_the_mmap(models_dir):
    model = load(models_dir / "digits_cnn.tflite")
    weights = _weights(model)
    assert len(weights) >= 4
    roots = {id(_base_chain(w)[-1]) for w in weights}
    assert len(roots) == 1, "buffers do not share one underlying file object"
    root = _base_chain(weights[0])[-1]
    assert isinstance(root, mmap.mmap), f"buffers are over {type(root).__name__}, not the mmap"
    whole = np.frombuffer(root, np.uint8)
    for w in weights:
        assert not w.flags.owndata
        assert np.shares_memory(w, whole)
    assert np.shares_memory(weights[0], whole) and np.shares_memory(weights[1], whole)


def test_bytes_load_views_the_bytes(models_dir):
    data = (models_dir / "digits_cnn.tflite").read_bytes()
    model = load(data)
    whole = np.frombuffer(data, np.uint8)
    for w in _weights(model):
        assert np.shares_memory(w, whole), "a buffer was copied out of the given bytes"
        start = w.__array_interface__["data"][0] - whole.__array_interface__["data"][0]
        assert data[start:start + w.size] == w.tobytes()


def test_bytearray_load_views_and_large_format_views(models_dir):
    from edgelite.schema import save
    data = bytearray(save(load(models_dir / "digits_cnn.tflite"), large=True))
    whole = np.frombuffer(data, np.uint8)
    model = load(data)
    weights = _weights(model)
    assert weights and all(np.shares_memory(w, whole) for w in weights)
