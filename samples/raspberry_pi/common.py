"""What the Raspberry Pi samples share: their flags, the interpreter (edgelite, or stock LiteRT
to compare), where frames come from (picamera2, an OpenCV camera, or files), where results go
(a window when there is a display, else annotated files and lines on stdout), and stage times.

The model maths (resizing, anchors, NMS, CTC, audio chunks) is in edgelite.tasks, not here."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from edgelite.tasks.image import load_image, write_png

MODELS = Path(__file__).resolve().with_name("models")
IMAGES = {".png", ".jpg", ".jpeg", ".bmp", ".webp"}
VIDEOS = {".mp4", ".avi", ".mkv", ".mov", ".h264"}


def parser(description: str, model: str) -> argparse.ArgumentParser:
    """The flags every sample takes (TensorFlow's Raspberry Pi examples' names, dashed)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--model", default=str(MODELS / model),
                   help="the .tflite model (default: %(default)s, from setup_models.py)")
    p.add_argument("--input", metavar="PATH",
                   help="an image, a folder of images, a video or a WAV file (default: the camera "
                        "or microphone)")
    p.add_argument("--num-threads", type=int, default=1,
                   help="interpreter threads (default: %(default)s)")
    p.add_argument("--delegate", choices=["opencl"], help="run on an OpenCL device (edgelite)")
    p.add_argument("--runtime", choices=["edgelite", "litert"], default="edgelite",
                   help="litert: the same file on stock LiteRT (ai-edge-litert), to compare")
    p.add_argument("--camera-id", type=int, default=0, help="OpenCV camera index")
    p.add_argument("--width", type=int, default=640, help="camera frame width")
    p.add_argument("--height", type=int, default=480, help="camera frame height")
    p.add_argument("--max-frames", type=int, default=0, help="stop after N frames (0: never)")
    p.add_argument("--repeat", type=int, default=1,
                   help="run each input file N times (steady-state timing)")
    p.add_argument("--output-dir", default="out",
                   help="where annotated frames go when there is no window (default: %(default)s)")
    p.add_argument("--no-window", action="store_true", help="never open a window")
    p.add_argument("--json", action="store_true", help="one JSON object a frame on stdout")
    return p


def make_interpreter(args, model_path=None):
    """An allocated interpreter for the model, on the chosen runtime and delegate."""
    if args.runtime == "litert":
        if args.delegate:
            raise SystemExit("--delegate opencl is edgelite's; LiteRT runs on its CPU kernels")
        from ai_edge_litert.interpreter import Interpreter
        delegates = None
    else:
        from edgelite.interpreter import Interpreter, load_delegate
        delegates = [load_delegate(args.delegate)] if args.delegate else None
    path = Path(model_path or args.model)
    if not path.is_file():
        raise SystemExit(f"{path}: no such model (run samples/raspberry_pi/setup_models.py, "
                         "or pass --model)")
    it = Interpreter(model_path=str(path), num_threads=args.num_threads,
                     experimental_delegates=delegates)
    it.allocate_tensors()
    return it


def run(it, *inputs) -> list:
    """Set the inputs (in get_input_details() order), invoke, copy out every output."""
    for detail, x in zip(it.get_input_details(), inputs):
        it.set_tensor(detail["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]).copy() for d in it.get_output_details()]


def dequantize(x: np.ndarray, detail: dict) -> np.ndarray:
    """An integer output as float with its scale and zero point (float outputs unchanged)."""
    if np.issubdtype(x.dtype, np.floating):
        return x
    scale, zero_point = detail["quantization"]
    return (x.astype(np.float32) - zero_point) * scale


# -- frames in -----------------------------------------------------------------------------------

def frames(args):
    """(name, RGB uint8 frame) pairs: from --input's files, else from the camera."""
    if args.input:
        for name, frame in file_frames(Path(args.input), args.max_frames):
            for k in range(max(args.repeat, 1)):
                yield (name if k == 0 else f"{name}_{k}"), frame
    else:
        yield from camera_frames(open_camera(args), args.max_frames)


def file_frames(path: Path, limit: int = 0):
    if not path.exists():
        raise SystemExit(f"{path}: no such file or folder")
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix.lower() in IMAGES)
        for k, f in enumerate(files):
            if limit and k >= limit:
                return
            yield f.stem, load_image(f)
    elif path.suffix.lower() in VIDEOS:
        import cv2
        yield from ((f"{path.stem}_{k:05d}", frame) for k, (_, frame)
                    in enumerate(camera_frames(cv2.VideoCapture(str(path)), limit)))
    else:
        yield path.stem, load_image(path)


def open_camera(args):
    """picamera2 (the Pi's camera) when installed, else OpenCV's camera `--camera-id`."""
    try:
        from picamera2 import Picamera2
    except ImportError:
        pass
    else:
        camera = Picamera2()
        camera.configure(camera.create_preview_configuration(
            main={"size": (args.width, args.height), "format": "RGB888"}))
        camera.start()
        return camera
    try:
        import cv2
    except ImportError:
        raise SystemExit("no camera: install picamera2 or opencv-python, or pass --input PATH") \
            from None
    capture = cv2.VideoCapture(args.camera_id)
    capture.set(cv2.CAP_PROP_FRAME_WIDTH, args.width)
    capture.set(cv2.CAP_PROP_FRAME_HEIGHT, args.height)
    if not capture.isOpened():
        raise SystemExit(f"camera {args.camera_id} does not open; pass --input PATH")
    return capture


def camera_frames(camera, limit: int = 0):
    """Frames from a picamera2 camera (capture_array) or an OpenCV capture (read), as RGB.
    Both hand out BGR bytes (picamera2's "RGB888" is blue first, as OpenCV's frames)."""
    k = 0
    while not limit or k < limit:
        if hasattr(camera, "capture_array"):
            frame = camera.capture_array()
        else:
            ok, frame = camera.read()
            if not ok:
                return
        yield f"frame_{k:05d}", np.ascontiguousarray(frame[..., 2::-1])
        k += 1


# -- results out ---------------------------------------------------------------------------------

class Stages:
    """Per-stage wall times of one frame (ms), and frames per second over the run."""

    def __init__(self):
        self.times, self.start, self.count = {}, time.perf_counter(), 0

    @contextmanager
    def __call__(self, name: str):
        t = time.perf_counter()
        yield
        self.times[name] = self.times.get(name, 0.0) + (time.perf_counter() - t) * 1000

    def frame_done(self) -> dict:
        """This frame's stage times; starts the next frame's."""
        self.count += 1
        times, self.times = {k: round(v, 2) for k, v in self.times.items()}, {}
        return times

    @property
    def fps(self) -> float:
        return self.count / max(time.perf_counter() - self.start, 1e-9)


def has_display() -> bool:
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


class Output:
    """A window (OpenCV, ESC quits) when there is a display, else annotated PNGs in
    --output-dir; one line a frame on stdout either way."""

    def __init__(self, args, title: str):
        self.args, self.title, self.window = args, title, False
        if not args.no_window and has_display():
            try:
                import cv2   # noqa: F401
                self.window = True
            except ImportError:
                pass
        if not self.window:
            Path(args.output_dir).mkdir(parents=True, exist_ok=True)

    def frame(self, name: str, image: np.ndarray | None, record: dict, stages: Stages) -> None:
        record = {"frame": name, **record, "ms": stages.frame_done(),
                  "fps": round(stages.fps, 2)}
        if image is not None:
            if self.window:
                import cv2
                cv2.imshow(self.title, image[..., ::-1])
                if cv2.waitKey(1) == 27:
                    raise KeyboardInterrupt
            else:
                write_png(Path(self.args.output_dir) / f"{name}.png", image)
        if self.args.json:
            print(json.dumps(record), flush=True)
        else:
            stage_text = " ".join(f"{k} {v:.1f} ms" for k, v in record["ms"].items())
            result = _rounded({k: v for k, v in record.items()
                               if k not in ("frame", "ms", "fps")})
            print(f"{name}: {result}  [{stage_text}; {record['fps']:.1f} FPS]", flush=True)


def _rounded(value):
    """Floats to 3 decimals, inside lists and dicts (for the human-readable lines)."""
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    return value


def main_loop(args, title: str, process) -> int:
    """Each frame through `process(frame, stages) -> (annotated image or None, record)`."""
    out = Output(args, title)
    stages = Stages()
    try:
        for name, frame in frames(args):
            image, record = process(frame, stages)
            out.frame(name, image, record, stages)
    except KeyboardInterrupt:
        pass
    print(f"{stages.count} frames, {stages.fps:.2f} FPS", file=sys.stderr)
    return 0
