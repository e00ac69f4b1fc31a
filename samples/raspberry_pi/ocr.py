"""OCR with PP-OCRv4 (rapidocr's models): the detector's text map, boxes from it (DB
post-processing), each box through the recognizer, CTC decoding to text, boxes drawn.

    python ocr.py --input page.png     # models from setup_models.py

The recognizer's 6625 classes are PP-OCR's Chinese+Latin dictionary (models/ppocr_keys.txt, taken
from the model's own metadata). --cls adds the 0/180-degree text-direction classifier."""
from __future__ import annotations

import sys

import numpy as np

import common
from edgelite.tasks import ocr
from edgelite.tasks.image import draw_box, input_size, letterbox, resize, unletterbox

DET_LIMIT = 960   # a dynamic-size detector: the longer side scaled to at most this


def detector_input(it, frame: np.ndarray) -> tuple:
    """The frame as the detector takes it ((x/255 - 0.5) / 0.5): resized to multiples of 32 (the
    longer side at most DET_LIMIT) for a detector with open sizes, letterboxed into a fixed-size
    one. Returns (x, transform)."""
    detail = it.get_input_details()[0]
    signature = list(detail.get("shape_signature", detail["shape"]))
    if -1 in signature[1:3]:
        scale = min(1.0, DET_LIMIT / max(frame.shape[:2]))
        height = max(32, int(round(frame.shape[0] * scale / 32)) * 32)
        width = max(32, int(round(frame.shape[1] * scale / 32)) * 32)
        image = resize(frame, height, width)
        if list(detail["shape"]) != [1, height, width, 3]:     # a new frame size
            it.resize_tensor_input(detail["index"], [1, height, width, 3])
            it.allocate_tensors()
        transform = ("stretch", frame.shape[1] / width, frame.shape[0] / height)
    else:
        height, width, _ = input_size(detail)
        image, transform = letterbox(frame, height, width, fill=255.0)
    return (image / 127.5 - 1.0)[None].astype(np.float32), transform


def to_frame(box: ocr.TextBox, transform: tuple) -> list:
    if transform[0] == "stretch":
        _, sx, sy = transform
        return [box.x0 * sx, box.y0 * sy, box.x1 * sx, box.y1 * sy]
    return list(unletterbox([box.x0, box.y0, box.x1, box.y1], transform))


def read_text(det, rec, cls, charset: list, frame: np.ndarray, stages) -> list:
    """[(box x0, y0, x1, y1 in frame pixels, text, confidence)] in reading order."""
    with stages("det_pre"):
        x, transform = detector_input(det, frame)
    with stages("det"):
        (prob, *_) = common.run(det, x)
    with stages("boxes"):
        boxes = [to_frame(b, transform) for b in ocr.text_boxes(prob[0, :, :, 0])]
    rec_h, rec_w, _ = input_size(rec.get_input_details()[0])
    found = []
    for box in boxes:
        with stages("rec_pre"):
            x = ocr.recognizer_input(frame, box, rec_h, rec_w)
        if cls is not None:
            with stages("cls"):
                cls_h, cls_w, _ = input_size(cls.get_input_details()[0])
                (p, *_) = common.run(cls, ocr.recognizer_input(frame, box, cls_h, cls_w)[None])
                if p[0].argmax() == 1 and p[0, 1] > 0.9:      # upside down
                    x = ocr.recognizer_input(np.ascontiguousarray(frame[::-1, ::-1]),
                                             _rotated(box, frame), rec_h, rec_w)
        with stages("rec"):
            (probs, *_) = common.run(rec, x[None])
        with stages("ctc"):
            text, confidence = ocr.ctc_greedy_decode(probs[0], charset)
        if text.strip():
            found.append((box, text, confidence))
    return found


def _rotated(box, frame) -> list:
    """The box's place in the frame turned 180 degrees."""
    h, w = frame.shape[:2]
    x0, y0, x1, y1 = box
    return [w - x1, h - y1, w - x0, h - y0]


def main(argv=None) -> int:
    p = common.parser(__doc__.splitlines()[0], "ppocr_det.tflite")
    p.add_argument("--rec-model", default=str(common.MODELS / "ppocr_rec.tflite"))
    p.add_argument("--keys", default=str(common.MODELS / "ppocr_keys.txt"),
                   help="the recognizer's characters, one a line")
    p.add_argument("--cls", nargs="?", const=str(common.MODELS / "ppocr_cls.tflite"),
                   help="also run the text-direction classifier (default model if no path)")
    args = p.parse_args(argv)
    det = common.make_interpreter(args)
    rec = common.make_interpreter(args, args.rec_model)
    cls = common.make_interpreter(args, args.cls) if args.cls else None
    with open(args.keys, encoding="utf-8") as f:
        charset = ocr.ppocr_charset(f.read())

    def process(frame, stages):
        found = read_text(det, rec, cls, charset, frame, stages)
        image = frame.copy()
        for box, _, _ in found:
            draw_box(image, box, colour=(0, 160, 255))
        return image, {"text": [t for _, t, _ in found],
                       "lines": [{"box": [float(v) for v in b], "text": t, "confidence": c}
                                 for b, t, c in found]}

    return common.main_loop(args, "ocr", process)


if __name__ == "__main__":
    sys.exit(main())
