"""What the tests that need torch share: `require(name)` imports torch, torchvision or
transformers, or skips with one reason (fails instead under EDGELITE_REQUIRE_TORCH=1, as CI's
torch stage sets it); `check_torch` converts a module through `TFLiteConverter.from_torch` and
checks it in edgelite and in LiteRT against onnxruntime (on the exported ONNX) and against torch
itself."""
from __future__ import annotations

import importlib
import os

import numpy as np
import pytest

REQUIRE = "EDGELITE_REQUIRE_TORCH"
EXTRA = {"torch": "torch", "torchvision": "torchvision", "transformers": "transformers",
         "onnxscript": "onnxscript"}


def require(name: str, required: bool = True):
    """The module `name`, or a skip saying what to install (a failure under
    EDGELITE_REQUIRE_TORCH=1 when `required`)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        reason = (f"{name} is not installed (pip install {EXTRA.get(name, name)}): the torch "
                  "tests need it")
        if required and os.environ.get(REQUIRE) == "1":
            pytest.fail(f"{reason} ({REQUIRE}=1)")
        pytest.skip(reason)


def check_torch(module, example_inputs, exporter: str = "torchscript", feeds=None, **kwargs):
    """from_torch, convert, then edgelite and LiteRT vs onnxruntime (onnx_cases' rule) and
    edgelite vs torch's own outputs at the example inputs; returns the conversion."""
    import torch

    from edgelite.converter import TFLiteConverter
    from edgelite.converter.check import compare, run_tflite, to_onnx_layout, to_tflite_layout

    converter = TFLiteConverter.from_torch(module, example_inputs, exporter=exporter, **kwargs)
    converter.convert()
    conversion = converter.last_conversion
    args = (example_inputs,) if isinstance(example_inputs, torch.Tensor) else example_inputs
    inputs = [a.detach().numpy() for a in args]
    rows = compare(conversion, converter.onnx_model, inputs if feeds is None else feeds)
    for row in rows:
        assert row["reference"] == "onnxruntime"
        assert set(row["errors"]) == {"edgelite", "LiteRT"}, row
        assert row["ok"], row
    with torch.no_grad():
        expected = module(*args)
    expected = [expected] if isinstance(expected, torch.Tensor) else list(expected)
    got = to_onnx_layout(run_tflite(conversion.content, to_tflite_layout(inputs,
                                                                          conversion.io_layout)),
                         conversion.io_layout)
    for g, e in zip(got, expected):
        e = e.numpy()
        assert g.shape == e.shape
        assert np.abs(g - e).max() <= 1e-5 + 1e-4 * np.abs(e).max()
    return conversion
