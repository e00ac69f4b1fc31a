"""A pinned subset of issue 12's torch corpus (tools/torch_corpus.py: the same builders, random
weights, fixed seeds), each exported through TFLiteConverter.from_torch, converted, and checked in
edgelite and in LiteRT against onnxruntime and torch: torchvision-like MobileNetV3 and SqueezeNet
blocks defined in the corpus script, a tiny BERT from transformers, and torchvision's own
MobileNetV3-small and SqueezeNet where torchvision is installed (CI has none: its wheels here need
torch 2.14's 5.5 GB CUDA build). The whole corpus is the script's (tools/corpus_report.py prints
its table). Skips without torch or transformers (fails under EDGELITE_REQUIRE_TORCH=1, as CI's
torch stage sets)."""
from __future__ import annotations

import pytest

from tests.converter.torch_cases import check_torch, require

# name -> (the package it needs, whether CI must have it, exporters, transposes allowed)
PINNED = {"mini_mobilenet_v3": ("torch", True, ["torchscript", "dynamo"], 0),
          "mini_squeezenet": ("torch", True, ["torchscript"], 0),
          "hf_bert": ("transformers", True, ["torchscript", "dynamo"], None),
          "tv_mobilenet_v3_small": ("torchvision", False, ["torchscript"], 0),
          "tv_squeezenet": ("torchvision", False, ["torchscript"], 0)}


@pytest.mark.parametrize("name, exporter", [(n, e) for n, (_, _, exporters, _) in PINNED.items()
                                            for e in exporters])
def test_pinned_corpus_model(name, exporter):
    torch = require("torch")
    package, required, _, transposes = PINNED[name]
    require(package, required)
    if exporter == "dynamo":
        require("onnxscript")
    from tools.torch_corpus import SEED, exports

    spec = next(s for s in exports() if s.name == name)
    torch.manual_seed(SEED)
    module, inputs = spec.build()
    conversion = check_torch(module, tuple(inputs.values()), exporter,
                             input_names=list(inputs))
    assert [e["name"] for e in conversion.io_layout["inputs"]] == list(inputs)
    if transposes is not None:
        assert conversion.transposes == transposes
