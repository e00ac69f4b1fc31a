"""The torch corpus of issue 12: torchvision and Hugging Face `transformers` architectures with
random weights (fixed seeds, nothing downloaded: `weights=None`, models built from configs),
exported by `torch.onnx.export` with the TorchScript exporter and the dynamo exporter.

    python tools/torch_corpus.py [OUT] [--only NAME ...] [--exporter torchscript|dynamo]
                                 [--dynamic]

OUT (default ~/.cache/edgelite-corpus) gets NAME.EXPORTER[.dynamic].onnx, the example inputs
beside each (NAME.EXPORTER[.dynamic].npz, by ONNX input name) and manifest.json: one entry per
export, with the error where an export failed. `--dynamic` exports with dynamic axes (batch,
height/width, sequence or sample count) instead of fixed shapes; the entry records which axes
and three sizes to check them at. `tools/corpus_report.py OUT` converts and checks them all.

Needs torch, torchvision, transformers, onnx (and onnxscript for the dynamo exporter).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from edgelite.converter.torch_export import dynamic_kwargs

DEFAULT_OUT = Path("~/.cache/edgelite-corpus").expanduser()
SEED = 0
EXPORTERS = ("torchscript", "dynamo")
OPSET = 18


@dataclass
class Export:
    """One model to export: `build()` -> (module, example inputs by name), which axes of each
    input may be dynamic ({input: {axis: name}}), and the sizes to check those axes at."""

    name: str
    build: object
    dynamic_axes: dict = field(default_factory=dict)
    sizes: list = field(default_factory=list)     # [{input: shape}], for a dynamic export
    int_high: int = 2                             # integer inputs drawn from [0, int_high)
    # Detections sorted by score (rows of every output): near-tied scores may come out in
    # another order (corpus_report matches rows then).
    ranked: bool = False


# -- torchvision ---------------------------------------------------------------------------------

def _vision(fn_name: str, shape=(1, 3, 224, 224), module="models", calibrated=False,
            **kwargs):
    def build():
        import torch
        import torchvision

        fn = getattr(torchvision.models if module == "models" else
                     getattr(torchvision.models, module), fn_name)
        m = fn(weights=None, **kwargs).eval()
        _no_zero_weights(m)
        if calibrated:
            _calibrated_batchnorm(m, shape)
        return m, {"x": torch.randn(*shape)}
    return build


def _calibrated_batchnorm(model, shape, batches: int = 3, batch: int = 4):
    """BatchNorm statistics measured on random inputs of `shape` (its batch `batch`), the
    BatchNorms alone in training mode (no dropout, no stochastic depth). Fresh ones are the
    identity: behind torchvision's small-std convolutions the features of MobileNetV2/V3,
    EfficientNet, MNASNet (max|output| 3e-14 to 1e-7) shrink until the classifier's bias alone
    sets the output, which then barely follows the input (ShuffleNet's 8e-5 x max|ref|,
    DeepLabV3's 2e-8): an error check of such an output checks the bias."""
    import torch

    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    momenta = [m.momentum for m in norms]
    model.eval()
    for m in norms:
        m.reset_running_stats()
        m.momentum = None          # the average of every batch
        m.train()
    with torch.no_grad():
        for _ in range(batches):
            model(torch.randn(batch, *shape[1:]))
    for m, momentum in zip(norms, momenta):
        m.momentum = momentum
    return model.eval()


def _no_zero_weights(module) -> None:
    """Weights that torchvision initializes to zeros (ViT's head) drawn at random instead: an
    output that is all zeros checks nothing."""
    import torch

    with torch.no_grad():
        for p in module.parameters():
            if p.ndim > 1 and not p.any():
                p.normal_(0.0, 0.02)


def _picked(module, pick, names=None):
    """`module` with its output (a dict, a tuple, a model output) reduced by `pick` to tensors:
    ONNX exports take tensors. `names`: the inputs passed by keyword (transformers' models take
    more positional parameters than the ones exported)."""
    import torch

    class Picked(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = module

        def forward(self, *args):
            if names is not None:
                return pick(self.inner(**dict(zip(names, args))))
            return pick(self.inner(*args))
    return Picked().eval()


def _segmentation(fn_name: str, calibrated=False):
    def build():
        import torch
        import torchvision

        fn = getattr(torchvision.models.segmentation, fn_name)
        m = fn(weights=None, weights_backbone=None, aux_loss=False).eval()
        if calibrated:
            _calibrated_batchnorm(m, (1, 3, 224, 224))
        return _picked(m, lambda out: out["out"]), {"x": torch.randn(1, 3, 224, 224)}
    return build


def _ssdlite():
    import torch
    import torchvision

    m = torchvision.models.detection.ssdlite320_mobilenet_v3_large(
        weights=None, weights_backbone=None).eval()
    # torchvision's init (std 0.03 convs behind BatchNorms that are the identity) shrinks the
    # features to 1e-13 by the last level: every class score is then 1/91, and the detections
    # are an order of ties that nothing can check. He's scale and BatchNorm statistics give
    # scores 0.71-0.99 whose neighbours differ by 4e-6 or more.
    with torch.no_grad():
        for module in m.modules():
            if isinstance(module, torch.nn.Conv2d):
                torch.nn.init.kaiming_normal_(module.weight, nonlinearity="relu")
            elif isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.uniform_(-0.1, 0.1)
                module.running_var.uniform_(0.5, 2.0)

    def pick(out):
        return out[0]["boxes"], out[0]["scores"], out[0]["labels"]
    return _picked(m, pick), {"x": torch.rand(1, 3, 320, 320)}


def _image(shape=(1, 3, 224, 224)):
    return {0: "batch", 2: "height", 3: "width"}, [
        {"x": shape}, {"x": (2,) + shape[1:]}, {"x": shape[:2] + (shape[2] + 32, shape[3] - 32)}]


def _batch_only(shape):
    return {0: "batch"}, [{"x": shape}, {"x": (2,) + shape[1:]}, {"x": (3,) + shape[1:]}]


# Models whose outputs at torchvision's init check little (tiny, or nearly the same at any input:
# `corpus_report.py --references` finds them): BatchNorm statistics measured instead.
CALIBRATED = {"mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large", "efficientnet_b0",
              "shufflenet_v2", "mnasnet", "deeplabv3"}


def _vision_exports() -> list:
    specs = [("resnet18", "resnet18"), ("mobilenet_v2", "mobilenet_v2"),
             ("mobilenet_v3_small", "mobilenet_v3_small"),
             ("mobilenet_v3_large", "mobilenet_v3_large"),
             ("efficientnet_b0", "efficientnet_b0"), ("shufflenet_v2", "shufflenet_v2_x0_5"),
             ("squeezenet", "squeezenet1_1"), ("mnasnet", "mnasnet0_5"),
             ("regnet_y_400mf", "regnet_y_400mf"), ("convnext_tiny", "convnext_tiny")]
    out = []
    for name, fn in specs:
        axes, sizes = _image()
        out.append(Export(f"tv_{name}", _vision(fn, calibrated=name in CALIBRATED),
                          {"x": axes}, sizes))
    # ViT and Swin take their patch grid from the image size: a dynamic batch only.
    for name, fn in (("vit_b_16", "vit_b_16"), ("swin_t", "swin_t")):
        axes, sizes = _batch_only((1, 3, 224, 224))
        out.append(Export(f"tv_{name}", _vision(fn), {"x": axes}, sizes))
    for name, fn in (("deeplabv3", "deeplabv3_mobilenet_v3_large"),
                     ("lraspp", "lraspp_mobilenet_v3_large")):
        axes, sizes = _image()
        out.append(Export(f"tv_{name}", _segmentation(fn, calibrated=name in CALIBRATED),
                          {"x": axes}, sizes))
    out.append(Export("tv_ssdlite", _ssdlite, ranked=True))
    axes, sizes = _batch_only((1, 3, 8, 112, 112))
    out.append(Export("tv_r3d_18", _vision("r3d_18", (1, 3, 8, 112, 112), module="video"),
                      {"x": axes}, sizes))
    return out


# -- torchvision-like models without torchvision ---------------------------------------------------
# CI's pinned subset: torchvision's wheels here need torch 2.14's 5.5 GB CUDA build, and the
# CPU torch 2.13 loads no torchvision build. The same building blocks, smaller.

def _mini_mobilenet_v3():
    """MobileNetV3-small's blocks: a hardswish stem, inverted residuals with depthwise 3x3 and
    5x5, squeeze-and-excitation (hardsigmoid gate), a hardswish head."""
    import torch
    from torch import nn

    def conv(cin, cout, k, stride=1, groups=1, act=nn.Hardswish):
        return [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
                nn.BatchNorm2d(cout)] + ([act()] if act else [])

    class SqueezeExcite(nn.Module):
        def __init__(self, c, squeeze):
            super().__init__()
            self.fc1, self.fc2 = nn.Conv2d(c, squeeze, 1), nn.Conv2d(squeeze, c, 1)

        def forward(self, x):
            s = nn.functional.adaptive_avg_pool2d(x, 1)
            return x * nn.functional.hardsigmoid(self.fc2(torch.relu(self.fc1(s))))

    class Block(nn.Module):
        def __init__(self, cin, expand, cout, k, stride, se, act):
            super().__init__()
            layers = conv(cin, expand, 1, act=act) if expand != cin else []
            layers += conv(expand, expand, k, stride, groups=expand, act=act)
            layers += [SqueezeExcite(expand, max(8, expand // 4))] if se else []
            layers += conv(expand, cout, 1, act=None)
            self.body = nn.Sequential(*layers)
            self.residual = stride == 1 and cin == cout

        def forward(self, x):
            y = self.body(x)
            return x + y if self.residual else y

    class MiniMobileNetV3(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                *conv(3, 16, 3, 2), Block(16, 16, 16, 3, 2, True, nn.ReLU),
                Block(16, 72, 24, 3, 2, False, nn.ReLU), Block(24, 88, 24, 3, 1, False, nn.ReLU),
                Block(24, 96, 40, 5, 2, True, nn.Hardswish),
                Block(40, 120, 40, 5, 1, True, nn.Hardswish), *conv(40, 144, 1))
            self.classifier = nn.Sequential(nn.Linear(144, 256), nn.Hardswish(),
                                            nn.Dropout(0.2), nn.Linear(256, 10))

        def forward(self, x):
            x = nn.functional.adaptive_avg_pool2d(self.features(x), 1)
            return self.classifier(torch.flatten(x, 1))

    # Random BatchNorm statistics leave its output 8e-6 x max|ref| apart at two inputs: measured.
    return _calibrated_batchnorm(MiniMobileNetV3(), (1, 3, 96, 96)), \
        {"x": torch.randn(1, 3, 96, 96)}


def _mini_squeezenet():
    """SqueezeNet 1.1's fire modules (squeeze 1x1, expand 1x1 and 3x3 concatenated), ceil-mode
    max pools, a 1x1 conv classifier and a global average pool."""
    import torch
    from torch import nn

    class Fire(nn.Module):
        def __init__(self, cin, squeeze, expand):
            super().__init__()
            self.squeeze = nn.Conv2d(cin, squeeze, 1)
            self.e1, self.e3 = nn.Conv2d(squeeze, expand, 1), nn.Conv2d(squeeze, expand, 3,
                                                                          padding=1)

        def forward(self, x):
            s = torch.relu(self.squeeze(x))
            return torch.cat([torch.relu(self.e1(s)), torch.relu(self.e3(s))], 1)

    model = nn.Sequential(nn.Conv2d(3, 32, 3, 2), nn.ReLU(), nn.MaxPool2d(3, 2, ceil_mode=True),
                          Fire(32, 8, 32), Fire(64, 8, 32), nn.MaxPool2d(3, 2, ceil_mode=True),
                          Fire(64, 16, 48), nn.Dropout(0.5), nn.Conv2d(96, 10, 1), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten())
    return model.eval(), {"x": torch.randn(1, 3, 96, 96)}


def _mini_exports() -> list:
    axes, sizes = _image((1, 3, 96, 96))
    return [Export("mini_mobilenet_v3", _mini_mobilenet_v3, {"x": axes}, sizes),
            Export("mini_squeezenet", _mini_squeezenet, {"x": axes}, sizes)]


# -- transformers ---------------------------------------------------------------------------------

SMALL = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)
VOCAB = 1000


def _tokens(cls_name: str, config_name: str, seq: int = 16, **config):
    def build():
        import torch
        import transformers

        cfg = getattr(transformers, config_name)(**config)
        m = getattr(transformers, cls_name)(cfg).eval()
        ids = torch.randint(0, VOCAB, (1, seq))
        inputs = {"input_ids": ids, "attention_mask": torch.ones(1, seq, dtype=torch.int64)}
        return _picked(m, lambda out: out[0], list(inputs)), inputs
    return build


def _token_axes(seq: int = 16):
    names = ["input_ids", "attention_mask"]
    axes = {n: {0: "batch", 1: "sequence"} for n in names}
    sizes = [{n: (1, seq) for n in names}, {n: (2, seq + 7) for n in names},
             {n: (1, seq + 31) for n in names}]
    return axes, sizes


def _pixels(cls_name: str, config_name: str, shape, kaiming: bool = False, **config):
    def build():
        import torch
        import transformers

        cfg = getattr(transformers, config_name)(**config)
        m = getattr(transformers, cls_name)(cfg).eval()
        if kaiming:
            # He's scale alone still leaves MobileViT's last hidden state at 6e-23: its
            # BatchNorms' statistics measured too.
            _kaiming_convs(m)
            _calibrated_batchnorm(m, shape)
        return _picked(m, lambda out: out[0]), {"pixel_values": torch.randn(*shape)}
    return build


def _kaiming_convs(module) -> None:
    """Convolutions drawn with He's scale: at transformers' std 0.02 MobileViT's activations
    shrink to denormals within a few layers (LiteRT flushes those to zero, so the check would
    compare rounding of nothing)."""
    import torch

    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, torch.nn.Conv2d):
                torch.nn.init.kaiming_normal_(m.weight, nonlinearity="linear")


def _whisper_encoder():
    import torch
    import transformers

    cfg = transformers.WhisperConfig(d_model=64, encoder_layers=2, encoder_attention_heads=4,
                                     encoder_ffn_dim=128, decoder_layers=1,
                                     decoder_attention_heads=4, decoder_ffn_dim=128,
                                     num_mel_bins=80, max_source_positions=100,
                                     vocab_size=VOCAB, pad_token_id=0, bos_token_id=1,
                                     eos_token_id=2, decoder_start_token_id=1)
    encoder = transformers.WhisperModel(cfg).get_encoder().eval()
    return _picked(encoder, lambda out: out[0]), {"input_features":
                                                              torch.randn(1, 80, 200)}


def _wav2vec2():
    import torch
    import transformers

    cfg = transformers.Wav2Vec2Config(**SMALL, conv_dim=(32,) * 7, num_conv_pos_embeddings=16,
                                      num_conv_pos_embedding_groups=4, vocab_size=32)
    m = transformers.Wav2Vec2Model(cfg).eval()
    return _picked(m, lambda out: out[0]), {"input_values": torch.randn(1, 8000)}


def _transformer_exports() -> list:
    out = []
    axes, sizes = _token_axes()
    out.append(Export("hf_bert", _tokens("BertModel", "BertConfig", vocab_size=VOCAB,
                                         max_position_embeddings=128, **SMALL),
                      axes, sizes, VOCAB))
    out.append(Export("hf_distilbert", _tokens(
        "DistilBertModel", "DistilBertConfig", vocab_size=VOCAB, dim=64, n_layers=2, n_heads=4,
        hidden_dim=128, max_position_embeddings=128), axes, sizes, VOCAB))
    # GPT-2 with its attention mask: without one transformers looks for packed sequences in the
    # position ids (torch.diff, which the TorchScript exporter cannot export).
    out.append(Export("hf_gpt2", _tokens("GPT2Model", "GPT2Config", vocab_size=VOCAB, n_embd=64,
                                         n_layer=2, n_head=4, n_positions=128,
                                         use_cache=False), axes, sizes, VOCAB))
    out.append(Export("hf_t5_encoder", _tokens(
        "T5EncoderModel", "T5Config", vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128,
        num_layers=2, num_heads=4), axes, sizes, VOCAB))
    out.append(Export("hf_whisper_encoder", _whisper_encoder, {"input_features": {0: "batch"}},
                      [{"input_features": (1, 80, 200)}, {"input_features": (2, 80, 200)},
                       {"input_features": (3, 80, 200)}]))
    vit = dict(**SMALL, image_size=64, patch_size=16)
    out.append(Export("hf_vit", _pixels("ViTModel", "ViTConfig", (1, 3, 64, 64), **vit),
                      {"pixel_values": {0: "batch"}},
                      [{"pixel_values": (b, 3, 64, 64)} for b in (1, 2, 3)]))
    mobilevit = dict(image_size=128, hidden_sizes=[64, 80, 96],
                     neck_hidden_sizes=[16, 16, 24, 48, 64, 80, 320])
    out.append(Export("hf_mobilevit", _pixels("MobileViTModel", "MobileViTConfig",
                                              (1, 3, 128, 128), kaiming=True, **mobilevit),
                      {"pixel_values": {0: "batch", 2: "height", 3: "width"}},
                      [{"pixel_values": (1, 3, 128, 128)}, {"pixel_values": (2, 3, 128, 128)},
                       {"pixel_values": (1, 3, 160, 192)}]))
    out.append(Export("hf_wav2vec2", _wav2vec2, {"input_values": {0: "batch", 1: "samples"}},
                      [{"input_values": (1, 8000)}, {"input_values": (2, 8000)},
                       {"input_values": (1, 12000)}]))
    return out


def exports() -> list:
    """Every model of the corpus, in table order."""
    return _vision_exports() + _mini_exports() + _transformer_exports()


# -- exporting ------------------------------------------------------------------------------------

def export_one(spec: Export, exporter: str, dynamic: bool, out: Path) -> dict:
    """Export `spec` with `exporter` into `out`; the manifest entry (with "error" on failure)."""
    import torch

    torch.manual_seed(SEED)
    np.random.seed(SEED)
    stem = f"{spec.name}.{exporter}" + (".dynamic" if dynamic else "")
    entry = {"model": spec.name, "exporter": exporter, "dynamic": dynamic,
             "file": f"{stem}.onnx", "inputs": f"{stem}.npz", "int_high": spec.int_high,
             "ranked": spec.ranked,
             "torch": torch.__version__}
    start = time.perf_counter()
    try:
        module, inputs = spec.build()
        names = list(inputs)
        args = tuple(inputs[n] for n in names)
        path = out / entry["file"]
        kwargs = dict(input_names=names, opset_version=OPSET)
        if dynamic:
            if not spec.dynamic_axes:
                raise ValueError("no dynamic axes declared for this model")
            entry["dynamic_axes"] = {k: {str(a): n for a, n in v.items()}
                                     for k, v in spec.dynamic_axes.items()}
            entry["sizes"] = [{k: list(s) for k, s in size.items()} for size in spec.sizes]
            kwargs.update(dynamic_kwargs(exporter, module, spec.dynamic_axes, spec.dynamic_axes,
                                         names))
        # Not under torch.no_grad(): there nn.MultiheadAttention takes its fused fast path
        # (aten::_native_multi_head_attention), which the TorchScript exporter cannot export.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if exporter == "torchscript":
                torch.onnx.export(module, args, str(path), dynamo=False, **kwargs)
            else:
                program = torch.onnx.export(module, args, dynamo=True, external_data=False,
                                            verbose=False, **kwargs)
                program.save(str(path), external_data=False)
        np.savez(out / entry["inputs"], **{n: inputs[n].numpy() for n in names})
    except Exception as e:      # an export that fails is a row of the table, not a stop
        entry["error"] = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300]}"
        if os.environ.get("EDGELITE_CORPUS_TRACE"):
            traceback.print_exc()
    entry["export_seconds"] = round(time.perf_counter() - start, 2)
    return entry


def _replaced(manifest: list, entry: dict) -> list:
    """The manifest with `entry` in the place of the entry for its file (the table keeps its
    order when one export is made again), or at the end."""
    places = [k for k, e in enumerate(manifest) if e["file"] == entry["file"]]
    if not places:
        return manifest + [entry]
    return [entry if k == places[0] else e for k, e in enumerate(manifest)
            if e["file"] != entry["file"] or k == places[0]]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--only", nargs="*", default=None, help="model names (tv_resnet18 ...)")
    parser.add_argument("--exporter", choices=EXPORTERS, action="append", default=None)
    parser.add_argument("--dynamic", action="store_true",
                        help="export with dynamic axes (batch, height/width, sequence)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    manifest_path = args.out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else []
    chosen = [s for s in exports() if args.only is None or s.name in args.only]
    if args.only and len(chosen) != len(set(args.only)):
        known = ", ".join(s.name for s in exports())
        print(f"unknown model in --only; the corpus has: {known}", file=sys.stderr)
        return 2
    for spec in chosen:
        for exporter in args.exporter or EXPORTERS:
            entry = export_one(spec, exporter, args.dynamic, args.out)
            manifest = _replaced(manifest, entry)
            manifest_path.write_text(json.dumps(manifest, indent=1))
            print(f"{entry['file']}: {entry.get('error', 'exported')} "
                  f"({entry['export_seconds']} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
