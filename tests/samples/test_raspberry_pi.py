"""The Raspberry Pi samples (samples/raspberry_pi/) end to end, headless, through their command
lines, on real models taken from pinned wheels by setup_models.py and on real inputs: the digits
test set (classification), scikit-image's astronaut photograph (a face; a person to segment), text
rendered with Pillow in several fonts and sizes (OCR: the exact text back), espeak-ng speech mixed
with silence (VAD: segments where the speech is). Each also on stock LiteRT (--runtime litert):
the same labels, boxes, text and segments. The camera paths run on stand-in cameras.

The models are made once into $EDGELITE_SAMPLE_MODELS (default ~/.cache/edgelite-samples): the
first run downloads the pinned wheels (~80 MB) and converts; later runs find them there."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from edgelite.tasks.audio import read_wav, resample, write_wav
from edgelite.tasks.detection import iou
from edgelite.tasks.image import load_image, write_png
from tests.samples.rpi import SAMPLES, render_text

DATA = Path(__file__).resolve().parent / "data"
# The astronaut's face (Eileen Collins), marked by hand on the 512x512 picture: x0, y0, x1, y1.
ASTRONAUT_FACE = np.array([180, 80, 272, 175], np.float64)


def run_sample(script: str, *args, runtime: str = "edgelite", tmp: Path) -> list:
    """The sample's JSON lines (one a frame, or a block and a summary for vad.py)."""
    command = [sys.executable, str(SAMPLES / script), *map(str, args), "--json", "--no-window",
               "--runtime", runtime, "--output-dir", str(tmp / f"out-{runtime}")]
    result = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=tmp)
    assert result.returncode == 0, f"{script} {args}: {result.stderr[-3000:]}"
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


# -- classification ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def digit_images(models_dir, tmp_path_factory) -> tuple:
    """The 360 digits test images as 8-bit PNGs, named NNN_label; (folder, labels, model
    accuracy on the same 8-bit pixels)."""
    data = np.load(models_dir / "digits.npz")
    folder = tmp_path_factory.mktemp("digits")
    pixels = np.round(data["x_test"][:, 0] * 255).astype(np.uint8)
    for k, (image, label) in enumerate(zip(pixels, data["y_test"])):
        write_png(folder / f"{k:03d}_{label}.png", image)
    (folder.parent / "labels.txt").write_text("\n".join(f"digit {k}" for k in range(10)) + "\n")
    return folder, data["y_test"], pixels


def _accuracy(records, labels) -> float:
    got = [int(r["top"][0][0].split()[-1]) for r in records]
    return float(np.mean(np.array(got) == labels))


@pytest.mark.parametrize("model", ["digits_cnn", "digits_cnn_int8"])
def test_classify_digits_as_accurate_as_the_model(models_dir, digit_images, model, tmp_path):
    from edgelite.interpreter import Interpreter
    folder, labels, pixels = digit_images
    records = run_sample("classify.py", "--model", models_dir / f"{model}.tflite", "--input",
                         folder, "--labels", folder.parent / "labels.txt", tmp=tmp_path)
    assert len(records) == 360 and all(len(r["top"]) == 3 for r in records)
    # the model's own accuracy on the same pixels, fed directly
    it = Interpreter(model_path=str(models_dir / f"{model}.tflite"))
    it.allocate_tensors()
    detail = it.get_input_details()[0]
    right = 0
    for image, label in zip(pixels, labels):
        x = image[None, :, :, None] / np.float32(255)
        if detail["dtype"] == np.int8:
            scale, zero = detail["quantization"]
            x = np.clip(np.round(x / scale) + zero, -128, 127).astype(np.int8)
        it.set_tensor(detail["index"], x.astype(detail["dtype"]))
        it.invoke()
        right += int(it.get_tensor(it.get_output_details()[0]["index"]).argmax() == label)
    assert _accuracy(records, labels) == right / 360 >= 0.97


def test_classify_agrees_with_litert(models_dir, digit_images, tmp_path):
    folder, labels, _ = digit_images
    args = ("--model", models_dir / "digits_cnn.tflite", "--input", folder, "--top-k", "10")
    ours = run_sample("classify.py", *args, tmp=tmp_path)
    theirs = run_sample("classify.py", *args, runtime="litert", tmp=tmp_path)
    assert [r["top"][0][0] for r in ours] == [r["top"][0][0] for r in theirs]
    worst = max(abs(a[1] - b[1]) for r, s in zip(ours, theirs)
                for a, b in zip(sorted(r["top"]), sorted(s["top"])))
    assert worst <= 1e-5, worst


# -- faces -----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def face_inputs(sample_models, tmp_path_factory) -> Path:
    """The astronaut, her mirror image, and a flat grey picture with no face."""
    folder = tmp_path_factory.mktemp("faces")
    picture = load_image(sample_models / "astronaut.png")
    write_png(folder / "a_astronaut.png", picture)
    write_png(folder / "b_mirrored.png", np.ascontiguousarray(picture[:, ::-1]))
    write_png(folder / "c_grey.png", np.full((240, 320, 3), 128, np.uint8))
    return folder


def test_faces_found_where_they_are(sample_models, face_inputs, tmp_path):
    model = sample_models / "face_detection_short_range.tflite"
    ours = run_sample("detect_faces.py", "--model", model, "--input", face_inputs, tmp=tmp_path)
    assert [r["frame"] for r in ours] == ["a_astronaut", "b_mirrored", "c_grey"]
    (face,), (mirrored,), grey = (r["faces"] for r in ours)
    assert grey == []
    box = np.array(face["box"])
    assert iou(ASTRONAUT_FACE, box[None])[0] >= 0.8 and face["score"] > 0.8
    flipped = np.array([512 - box[2], box[1], 512 - box[0], box[3]])
    assert np.abs(np.array(mirrored["box"]) - flipped).max() < 4
    eyes = np.array(face["keypoints"][:2])
    assert ((eyes >= box[:2]) & (eyes <= box[2:])).all()
    drawn = load_image(tmp_path / "out-edgelite" / "a_astronaut.png")
    original = load_image(face_inputs / "a_astronaut.png")
    assert (drawn[int(box[1]) + 10, int(box[0])] != original[int(box[1]) + 10, int(box[0])]).any()
    theirs = run_sample("detect_faces.py", "--model", model, "--input", face_inputs,
                        runtime="litert", tmp=tmp_path)
    for r, s in zip(ours, theirs):
        assert len(r["faces"]) == len(s["faces"])
        for a, b in zip(r["faces"], s["faces"]):
            assert np.abs(np.array(a["box"]) - b["box"]).max() < 0.05
            assert abs(a["score"] - b["score"]) < 1e-4


# -- segmentation ----------------------------------------------------------------------------------

def test_segmentation_masks_the_person(sample_models, tmp_path):
    model = sample_models / "selfie_segmentation.tflite"
    picture = sample_models / "astronaut.png"
    (ours,) = run_sample("segment.py", "--model", model, "--input", picture, tmp=tmp_path)
    (theirs,) = run_sample("segment.py", "--model", model, "--input", picture, runtime="litert",
                           tmp=tmp_path)
    assert 0.4 < ours["person_fraction"] < 0.7
    assert abs(ours["mask_mean"] - theirs["mask_mean"]) < 1e-4
    assert abs(ours["person_fraction"] - theirs["person_fraction"]) < 1e-3
    blurred = load_image(tmp_path / "out-edgelite" / "astronaut.png").astype(int)
    original = load_image(picture).astype(int)
    x0, y0, x1, y1 = ASTRONAUT_FACE.astype(int)
    face_change = np.abs(blurred[y0:y1, x0:x1] - original[y0:y1, x0:x1]).mean()
    sky_change = np.abs(blurred[0:100, 400:512] - original[0:100, 400:512]).mean()
    assert face_change < 3 < sky_change        # the person kept, the background blurred


# -- OCR -------------------------------------------------------------------------------------------

LINES = ["Raspberry Pi 5", "edgelite reads text", "OCR 2026"]
FONTS = ["/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
         "/usr/share/fonts/truetype/liberation/LiberationSerif-Regular.ttf",
         "/usr/share/fonts/truetype/liberation/LiberationMono-Regular.ttf"]


@pytest.fixture(scope="module")
def text_images(tmp_path_factory) -> Path:
    """LINES drawn black on white with Pillow: its own font at 44 px, and each system font
    found (DejaVu, Liberation) at 28 and 44 px."""
    folder = tmp_path_factory.mktemp("text")
    render_text(folder / "pillow_44.png", LINES, 44, 640)
    for font in map(Path, FONTS):
        for size in (28, 44) if font.exists() else ():
            render_text(folder / f"{font.stem}_{size}.png", LINES, size, 640, font)
    return folder


def _ocr(sample_models, text_images, tmp_path, runtime="edgelite", rec="ppocr_rec.tflite"):
    return run_sample("ocr.py", "--model", sample_models / "ppocr_det.tflite", "--rec-model",
                      sample_models / rec, "--keys", sample_models / "ppocr_keys.txt",
                      "--input", text_images, runtime=runtime, tmp=tmp_path)


def test_ocr_reads_rendered_text_exactly(sample_models, text_images, tmp_path):
    ours = _ocr(sample_models, text_images, tmp_path)
    assert len(ours) == len(list(text_images.glob("*.png")))
    for record in ours:
        assert record["text"] == LINES, record["frame"]
    theirs = _ocr(sample_models, text_images, tmp_path, runtime="litert")
    for r, s in zip(ours, theirs):
        assert r["text"] == s["text"]
        for a, b in zip(r["lines"], s["lines"]):
            # the detector's maps differ by ~3e-4: a pixel may cross the threshold
            assert np.abs(np.subtract(a["box"], b["box"])).max() <= 2
            assert abs(a["confidence"] - b["confidence"]) < 1e-4


def test_ocr_with_int8_weights_reads_the_same(sample_models, text_images, tmp_path):
    for record in _ocr(sample_models, text_images, tmp_path, rec="ppocr_rec_dynamic.tflite"):
        assert record["text"] == LINES, record["frame"]


# -- voice activity --------------------------------------------------------------------------------

def _speech_mix(tmp_path) -> tuple:
    """espeak-ng's sentence (tests/samples/data/speech.wav, 16 kHz) twice between silences, at
    22.05 kHz (the sample resamples); returns (wav path, [(start, end)] of the speech in s)."""
    speech, rate = read_wav(DATA / "speech.wav")
    loud = np.nonzero(np.abs(speech) > 0.02)[0]
    speech = speech[loud[0]:loud[-1] + 1]
    gaps = (1.0, 1.5, 1.0)
    parts, spans, t = [], [], 0.0
    for gap in gaps:
        parts.append(np.zeros(int(gap * rate), np.float32))
        t += gap
        if len(spans) < 2:
            parts.append(speech)
            spans.append((t, t + len(speech) / rate))
            t += len(speech) / rate
    mix = np.concatenate(parts)
    mix += np.random.default_rng(0).normal(0, 0.002, len(mix)).astype(np.float32)
    path = tmp_path / "mix.wav"
    write_wav(path, resample(mix, rate, 22050), 22050)
    return path, spans


def test_vad_finds_the_speech(sample_models, tmp_path):
    path, spans = _speech_mix(tmp_path)
    model = sample_models / "silero_vad.tflite"
    ours = run_sample("vad.py", "--model", model, "--input", path, tmp=tmp_path)
    theirs = run_sample("vad.py", "--model", model, "--input", path, runtime="litert",
                        tmp=tmp_path)
    segments = ours[-1]["segments"]
    assert segments == theirs[-1]["segments"]
    for start, end in segments:              # every segment is speech, give or take 0.2 s
        assert any(a - 0.2 <= start and end <= b + 0.2 for a, b in spans), (segments, spans)
    for a, b in spans:                        # and covers most of each sentence
        covered = sum(max(0.0, min(b, e) - max(a, s)) for s, e in segments)
        assert covered >= 0.8 * (b - a), (segments, spans)
    probs = np.concatenate([r["probs"] for r in ours[:-1]])
    theirs_probs = np.concatenate([r["probs"] for r in theirs[:-1]])
    assert np.abs(probs - theirs_probs).max() < 1e-4


# -- cameras ---------------------------------------------------------------------------------------

class StandInPicamera2:
    """picamera2.Picamera2's calls the samples make; hands out recorded frames as BGR bytes."""
    recorded: list = []

    def __init__(self):
        self.frames, self.config = list(self.recorded), None

    def create_preview_configuration(self, main):
        return {"main": main}

    def configure(self, config):
        self.config = config

    def start(self):
        pass

    def capture_array(self):
        return self.frames.pop(0)[..., ::-1].copy()


class StandInCapture:
    """cv2.VideoCapture's read(): recorded frames (BGR), then (False, None)."""

    def __init__(self, frames):
        self.frames = list(frames)

    def read(self):
        return (True, self.frames.pop(0)[..., ::-1].copy()) if self.frames else (False, None)


@pytest.fixture()
def common_module(monkeypatch):
    monkeypatch.syspath_prepend(str(SAMPLES))
    import common
    return common


def test_camera_frames_come_out_rgb(common_module):
    frames = [np.random.default_rng(k).integers(0, 256, (6, 8, 3), dtype=np.uint8)
              for k in range(3)]
    got = [f for _, f in common_module.camera_frames(StandInCapture(frames))]
    assert len(got) == 3 and all((a == b).all() for a, b in zip(got, frames))
    StandInPicamera2.recorded = frames
    got = [f for _, f in common_module.camera_frames(StandInPicamera2(), limit=2)]
    assert len(got) == 2 and all((a == b).all() for a, b in zip(got, frames))


def test_face_sample_on_a_picamera2_stand_in(common_module, sample_models, monkeypatch, capsys,
                                             tmp_path):
    """No --input: the sample opens picamera2 (here a stand-in module) and reads its frames."""
    import types
    picture = load_image(sample_models / "astronaut.png")
    StandInPicamera2.recorded = [picture, picture[:, ::-1]]
    monkeypatch.setitem(sys.modules, "picamera2", types.SimpleNamespace(Picamera2=StandInPicamera2))
    import detect_faces
    assert detect_faces.main(["--model", str(sample_models / "face_detection_short_range.tflite"),
                              "--max-frames", "2", "--json", "--no-window",
                              "--output-dir", str(tmp_path)]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [len(r["faces"]) for r in records] == [1, 1]
    assert iou(ASTRONAUT_FACE, np.array([records[0]["faces"][0]["box"]]))[0] >= 0.8
    assert sorted(p.name for p in tmp_path.glob("*.png")) == ["frame_00000.png", "frame_00001.png"]


def test_classify_sample_on_an_opencv_camera_stand_in(common_module, models_dir, digit_images,
                                                      monkeypatch, capsys, tmp_path):
    """No picamera2: the sample opens OpenCV's camera (a stand-in cv2) and reads until it ends."""
    import types
    folder, labels, pixels = digit_images
    frames = [np.repeat(p[..., None], 3, axis=2) for p in pixels[:5]]
    opened = []

    def video_capture(index):
        opened.append(index)
        capture = StandInCapture(frames)
        capture.set = lambda prop, value: None
        capture.isOpened = lambda: True
        return capture

    cv2 = types.SimpleNamespace(VideoCapture=video_capture, CAP_PROP_FRAME_WIDTH=3,
                                CAP_PROP_FRAME_HEIGHT=4)
    monkeypatch.setitem(sys.modules, "picamera2", None)      # import picamera2 fails
    monkeypatch.setitem(sys.modules, "cv2", cv2)
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    import classify
    assert classify.main(["--model", str(models_dir / "digits_cnn.tflite"), "--camera-id", "2",
                          "--json", "--output-dir", str(tmp_path)]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert opened == [2]
    assert [int(r["top"][0][0]) for r in records] == labels[:5].tolist()
