"""edgelite.tasks, the samples' pre/post-processing, against outside oracles where one exists:
Pillow for PNG files, onnxruntime's Resize and NonMaxSuppression, MediaPipe's published anchor
counts, a flood fill for the connected components; by construction elsewhere."""
from __future__ import annotations

import io

import numpy as np
import pytest
from onnx import TensorProto, helper

from edgelite.tasks import audio, detection, image, ocr
from tests.oracles import onnxruntime_run

RNG = np.random.default_rng(14)


# -- image -----------------------------------------------------------------------------------------

def _smooth(h, w, c):
    y, x = np.mgrid[0:h, 0:w]
    base = (x * 3 + y * 5)[..., None] + np.arange(c) * 40
    return ((base + RNG.integers(0, 9, (h, w, c))) % 256).astype(np.uint8)


@pytest.mark.parametrize("mode", ["L", "LA", "RGB", "RGBA", "P"])
def test_read_png_matches_pillow(tmp_path, mode):
    """Pillow's encoder picks every row filter (Sub, Up, Average, Paeth) on these images."""
    from PIL import Image
    channels = {"L": 1, "LA": 2, "RGB": 3, "RGBA": 4, "P": 3}[mode]
    pixels = _smooth(37, 53, channels)
    picture = Image.fromarray(pixels[..., 0] if channels == 1 else pixels)
    picture = picture.quantize(64) if mode == "P" else picture
    picture.save(tmp_path / "a.png", optimize=True)
    want = np.asarray(Image.open(tmp_path / "a.png").convert("RGB" if mode == "P" else mode))
    got = image.read_png(tmp_path / "a.png")
    assert (got.reshape(want.shape) == want).all()


def test_write_png_reads_back_in_pillow(tmp_path):
    from PIL import Image
    pixels = RNG.integers(0, 256, (20, 31, 3), dtype=np.uint8)
    image.write_png(tmp_path / "b.png", pixels)
    assert (np.asarray(Image.open(tmp_path / "b.png")) == pixels).all()
    assert (image.read_png(tmp_path / "b.png") == pixels).all()


def test_read_png_rejects_other_files(tmp_path):
    (tmp_path / "c.png").write_bytes(b"GIF89a....")
    with pytest.raises(ValueError, match="not a PNG"):
        image.read_png(tmp_path / "c.png")
    from PIL import Image
    buffer = io.BytesIO()
    Image.fromarray(np.zeros((4, 4), np.uint16)).save(buffer, format="PNG")
    (tmp_path / "d.png").write_bytes(buffer.getvalue())
    with pytest.raises(ValueError, match="8-bit"):
        image.read_png(tmp_path / "d.png")


@pytest.mark.parametrize("size", [(17, 23), (64, 48), (5, 90)])
def test_resize_matches_onnxruntime_linear_half_pixel(size):
    src = RNG.random((31, 40, 3)).astype(np.float32) * 255
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="linear",
                            coordinate_transformation_mode="half_pixel")
    graph = helper.make_graph(
        [node], "r", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 31, 40])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [helper.make_tensor("sizes", TensorProto.INT64, [4], [1, 3, *size])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    (want,) = onnxruntime_run(model, {"x": src.transpose(2, 0, 1)[None]})
    got = image.resize(src, *size)
    np.testing.assert_allclose(got, want[0].transpose(1, 2, 0), rtol=0, atol=1e-3)


def test_letterbox_round_trip():
    frame = RNG.integers(0, 256, (100, 200, 3)).astype(np.uint8)
    boxed, transform = image.letterbox(frame, 128, 128)
    assert boxed.shape == (128, 128, 3) and transform == (0.64, 0, 32)
    assert (boxed[:32] == 0).all() and (boxed[96:] == 0).all()
    corners = image.unletterbox([0, 32, 128, 96], transform)
    np.testing.assert_allclose(corners, [0, 0, 200, 100])


def test_to_input_quantizes_for_integer_models():
    detail = {"name": "x", "shape": np.array([1, 2, 2, 1]), "dtype": np.int8,
              "quantization": (1 / 255, -128)}
    x = image.to_input(np.array([[0, 255], [128, 64]], np.float32), detail)
    assert x.dtype == np.int8 and x.reshape(-1).tolist() == [-128, 127, 0, -64]


def test_box_blur_keeps_flat_images_and_means():
    flat = np.full((9, 11, 3), 77.0, np.float32)
    np.testing.assert_allclose(image.box_blur(flat, 3), flat, rtol=1e-6)
    spike = np.zeros((9, 9, 1), np.float32)
    spike[4, 4] = 49.0
    assert np.isclose(image.box_blur(spike, 3)[4, 4, 0], 1.0) and \
        np.isclose(image.box_blur(spike, 3).sum(), 49.0)


# -- detection -------------------------------------------------------------------------------------

def test_anchors_as_mediapipe_counts_them():
    """BlazeFace short range has 896 anchors (16x16x2 + 8x8x6), BlazePose's detector 2254."""
    face = detection.ssd_anchors(detection.FACE_SHORT_RANGE)
    assert face.shape == (896, 4)
    np.testing.assert_allclose(face[0], [1 / 32, 1 / 32, 1, 1])
    np.testing.assert_allclose(face[1], [1 / 32, 1 / 32, 1, 1])       # two anchors a cell
    np.testing.assert_allclose(face[512], [1 / 16, 1 / 16, 1, 1])     # the 8x8 layers start
    assert len(detection.ssd_anchors(detection.POSE_DETECTION)) == 2254
    sized = detection.ssd_anchors(detection.AnchorOptions(64, 64, 0.2, 0.8, (32,),
                                                          fixed_anchor_size=False))
    np.testing.assert_allclose(sized[0, 2:], [0.5, 0.5])              # (min+max)/2, one layer


def test_decode_boxes():
    anchors = np.array([[0.5, 0.25, 1, 1]], np.float32)
    raw = np.array([[12.8, -12.8, 64, 32, 0, 0, 6.4, 12.8]], np.float32)
    boxes, points = detection.decode_boxes(raw, anchors, 128, num_keypoints=2)
    np.testing.assert_allclose(boxes, [[0.35, 0.025, 0.85, 0.275]], atol=1e-6)
    np.testing.assert_allclose(points, [[[0.5, 0.25], [0.55, 0.35]]], atol=1e-6)


def _random_boxes(n):
    xy = RNG.random((n, 2)) * 80
    wh = RNG.random((n, 2)) * 30 + 2
    return np.concatenate([xy, xy + wh], axis=1).astype(np.float32), \
        RNG.permutation(n).astype(np.float32) / n


@pytest.mark.parametrize("threshold", [0.2, 0.5])
def test_nms_matches_onnxruntime(threshold):
    boxes, scores = _random_boxes(60)
    node = helper.make_node("NonMaxSuppression", ["b", "s", "m", "t"], ["i"])
    graph = helper.make_graph(
        [node], "n", [helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 60, 4]),
                      helper.make_tensor_value_info("s", TensorProto.FLOAT, [1, 1, 60])],
        [helper.make_tensor_value_info("i", TensorProto.INT64, None)],
        [helper.make_tensor("m", TensorProto.INT64, [1], [60]),
         helper.make_tensor("t", TensorProto.FLOAT, [1], [threshold])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    # ONNX's boxes are (y0, x0, y1, x1) with center_point_box=0: swap axes, same IoU
    (want,) = onnxruntime_run(model, {"b": boxes[None][..., [1, 0, 3, 2]], "s": scores[None, None]})
    assert detection.nms(boxes, scores, threshold) == want[:, 2].tolist()


def test_weighted_nms_averages_overlapping_boxes():
    boxes = np.array([[0, 0, 10, 10], [1, 1, 11, 11], [50, 50, 60, 60]], np.float32)
    scores = np.array([0.9, 0.3, 0.8], np.float32)
    points = np.arange(12, dtype=np.float32).reshape(3, 2, 2)
    (box, score, kp), (box2, score2, kp2) = detection.weighted_nms(boxes, scores, 0.3, points)
    np.testing.assert_allclose(box, [0.25, 0.25, 10.25, 10.25], atol=1e-6)
    assert score == pytest.approx(0.9) and score2 == pytest.approx(0.8)
    np.testing.assert_allclose(kp, 0.75 * points[0] + 0.25 * points[1], atol=1e-6)
    np.testing.assert_allclose(box2, boxes[2])
    # a zero-area box is kept once, not looped over forever
    assert len(detection.weighted_nms(np.zeros((2, 4)), np.array([0.6, 0.5]), 0.3)) == 2


def test_sigmoid_clips_without_overflow():
    with np.errstate(over="raise"):
        s = detection.sigmoid(np.array([-1000.0, 0.0, 1000.0]))
    np.testing.assert_allclose(s, [0, 0.5, 1], atol=1e-30)


# -- ocr -------------------------------------------------------------------------------------------

def _flood_fill_count(mask):
    seen, count = np.zeros_like(mask), 0
    for y, x in zip(*np.nonzero(mask)):
        if seen[y, x]:
            continue
        count += 1
        stack = [(y, x)]
        seen[y, x] = True
        while stack:
            cy, cx = stack.pop()
            for dy in (-1, 0, 1):
                for dx in (-1, 0, 1):
                    ny, nx = cy + dy, cx + dx
                    if (0 <= ny < mask.shape[0] and 0 <= nx < mask.shape[1]
                            and mask[ny, nx] and not seen[ny, nx]):
                        seen[ny, nx] = True
                        stack.append((ny, nx))
    return count


@pytest.mark.parametrize("density", [0.2, 0.45, 0.6])
def test_components_match_a_flood_fill(density):
    mask = RNG.random((40, 50)) < density
    rows, starts, ends, labels = ocr.label_components(mask)
    assert labels.max() + 1 == _flood_fill_count(mask)
    rebuilt = np.zeros_like(mask)
    for r, s, e in zip(rows, starts, ends):
        rebuilt[r, s:e] = True
    assert (rebuilt == mask).all()


def test_text_boxes_from_a_probability_map():
    prob = np.zeros((60, 100), np.float32)
    prob[10:20, 10:50] = 0.9        # a line
    prob[40:50, 60:90] = 0.4        # above threshold, below box_threshold: dropped
    prob[40:50, 10:30] = 0.8
    prob[30, 5] = 0.9               # a speck, under min_size
    boxes = ocr.text_boxes(prob, dilate=False)
    # grown by area * 1.6 / perimeter: 6.4 px and 5.33 px
    assert [(b.x0, b.y0, b.x1, b.y1) for b in boxes] == [(3, 3, 57, 27), (4, 34, 36, 56)]
    assert boxes[0].score == pytest.approx(0.9)
    with pytest.raises(ValueError, match="map"):
        ocr.text_boxes(prob[None])


def test_reading_order_lines_then_left_to_right():
    b = [ocr.TextBox(60, 11, 90, 30, 1), ocr.TextBox(0, 10, 50, 30, 1),
         ocr.TextBox(0, 40, 50, 60, 1)]
    assert ocr.reading_order(b) == [b[1], b[0], b[2]]


def test_recognizer_input_keeps_aspect_and_pads():
    crop = np.full((24, 48, 3), 255, np.uint8)
    x = ocr.recognizer_input(crop, (0, 0, 48, 24), 48, 320)
    assert x.shape == (48, 320, 3)
    assert np.allclose(x[:, :96], 1.0) and np.allclose(x[:, 96:], 0.0)


def test_ctc_greedy_decode():
    charset = ocr.ppocr_charset("a\nb\nc")
    assert charset == ["<blank>", "a", "b", "c", " "]
    steps = [1, 1, 0, 1, 2, 2, 0, 0, 4, 3]          # a a _ a b b _ _ ' ' c
    probs = np.full((len(steps), 5), 0.01, np.float32)
    probs[np.arange(len(steps)), steps] = 0.96
    text, confidence = ocr.ctc_greedy_decode(probs, charset)
    assert text == "aab c" and confidence == pytest.approx(0.96)
    with pytest.raises(ValueError, match="character set"):
        ocr.ctc_greedy_decode(probs[:, :4], charset)


# -- audio -----------------------------------------------------------------------------------------

def test_wav_round_trip_and_resample(tmp_path):
    t = np.arange(8000) / 8000
    tone = 0.5 * np.sin(2 * np.pi * 440 * t)
    audio.write_wav(tmp_path / "t.wav", tone, 8000)
    got, rate = audio.read_wav(tmp_path / "t.wav")
    assert rate == 8000 and np.abs(got - tone).max() < 1e-4
    up = audio.resample(got, 8000, 16000)
    assert len(up) == 16000 and np.abs(up[::2] - got).max() < 1e-6


def test_chunks_carry_context():
    x = np.arange(10, dtype=np.float32)
    c = audio.chunks(x, 4, 2)
    assert c.tolist() == [[0, 0, 0, 1, 2, 3], [2, 3, 4, 5, 6, 7], [6, 7, 8, 9, 0, 0]]
    c = audio.chunks(x[:4], 4, 2, before=np.array([-2, -1], np.float32))
    assert c.tolist() == [[-2, -1, 0, 1, 2, 3]]


def test_speech_segments_hysteresis():
    probs = [0.1, 0.9, 0.8, 0.4, 0.6, 0.1, 0.1, 0.1, 0.95, 0.1, 0.1, 0.1, 0.7, 0.7, 0.7]
    segments = audio.speech_segments(probs, 0.1, 0.5, min_speech=0.15, min_silence=0.2)
    # 0.4 is above release (0.35): speech goes on; one 0.95 chunk is too short; the end is open
    assert [(round(a, 2), round(b, 2)) for a, b in segments] == [(0.1, 0.5), (1.2, 1.5)]


def test_imports_with_numpy_and_flatbuffers_only():
    """No OpenCV, Pillow, onnx or LiteRT: the module runs where the runtime install runs."""
    from tests.blocked import HEAVY, assert_runs_blocked
    assert_runs_blocked(f"""
        import sys
        sys.modules["PIL"] = None; sys.modules["cv2"] = None
        import edgelite.tasks.image, edgelite.tasks.detection, edgelite.tasks.ocr
        import edgelite.tasks.audio
        assert not any(m in sys.modules for m in {HEAVY!r}), sorted(sys.modules)
    """)
