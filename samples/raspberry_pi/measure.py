"""Per-sample speed on this machine: each vision sample on one picture, N frames, on edgelite
(numpy), edgelite with the OpenCL delegate and stock LiteRT; the median of each stage (ms) and
frames per second from their sum, the first frame (warm-up, OpenCL's kernel builds) left out.

    python measure.py [--models DIR] [--frames 10] [--runtimes edgelite,opencl,litert]

On a Raspberry Pi this is the number that matters; under qemu it means nothing."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def runs(models: Path, text: Path) -> dict:
    picture = models / "astronaut.png"
    return {
        "faces": ("detect_faces.py", "--model", models / "face_detection_short_range.tflite",
                  "--input", picture),
        "segmentation": ("segment.py", "--model", models / "selfie_segmentation.tflite",
                         "--input", picture),
        "ocr": ("ocr.py", "--model", models / "ppocr_det.tflite", "--input", text,
                "--rec-model", models / "ppocr_rec.tflite", "--keys", models / "ppocr_keys.txt"),
        "ocr (160x320 det, int8-weight rec)": (
            "ocr.py", "--model", models / "ppocr_det_small.tflite", "--input", text,
            "--rec-model", models / "ppocr_rec_dynamic.tflite",
            "--keys", models / "ppocr_keys.txt"),
    }


def text_picture(path: Path) -> Path:
    """Two lines of text (Pillow's font), as ocr.py would see a label."""
    from PIL import Image, ImageDraw, ImageFont
    font = ImageFont.load_default(28)
    picture = Image.new("RGB", (320, 160), "white")
    draw = ImageDraw.Draw(picture)
    draw.text((12, 25), "Raspberry Pi 5", fill="black", font=font)
    draw.text((12, 90), "OCR 2026", fill="black", font=font)
    picture.save(path)
    return path


def measure(script, args, runtime: str, frames: int, out: Path) -> dict:
    flags = {"edgelite": [], "opencl": ["--delegate", "opencl"], "litert": ["--runtime", "litert"]}
    command = [sys.executable, str(HERE / script), *map(str, args), "--repeat", str(frames),
               "--json", "--no-window", "--output-dir", str(out), *flags[runtime]]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        return {"error": result.stderr.strip().splitlines()[-1]}
    records = [json.loads(line) for line in result.stdout.splitlines()][1:]
    stages = {k: float(np.median([r["ms"].get(k, 0) for r in records])) for k in records[0]["ms"]}
    return {"ms": stages, "fps": 1000 / sum(stages.values())}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=str(HERE / "models"))
    p.add_argument("--frames", type=int, default=10)
    p.add_argument("--runtimes", default="edgelite,opencl,litert")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        text = text_picture(Path(tmp) / "text.png")
        for name, (script, *rest) in runs(Path(args.models), text).items():
            for runtime in args.runtimes.split(","):
                m = measure(script, rest, runtime, args.frames, Path(tmp) / "out")
                if "error" in m:
                    print(f"{name:38s} {runtime:9s} failed: {m['error']}")
                    continue
                stages = ", ".join(f"{k} {v:.1f}" for k, v in m["ms"].items())
                print(f"{name:38s} {runtime:9s} {m['fps']:7.2f} FPS   ({stages} ms)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
