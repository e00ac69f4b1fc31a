"""Face detection with MediaPipe's BlazeFace (short range): the frame letterboxed to 128x128,
896 SSD anchors decoded, weighted non-maximum suppression, boxes and six keypoints drawn.

    python detect_faces.py --input photo.jpg          # or no --input: the camera"""
from __future__ import annotations

import sys

import numpy as np

import common
from edgelite.tasks import detection
from edgelite.tasks.image import draw_box, draw_points, input_size, letterbox, unletterbox

KEYPOINTS = ("right_eye", "left_eye", "nose", "mouth", "right_ear", "left_ear")


def detect(it, frame: np.ndarray, anchors: np.ndarray, stages, min_score: float,
           iou_threshold: float) -> list:
    """[(box x0, y0, x1, y1 in frame pixels, score, keypoints (6, 2) in frame pixels)]."""
    detail = it.get_input_details()[0]
    size, _, _ = input_size(detail)
    with stages("preprocess"):
        image, transform = letterbox(frame, size, size)
        x = (image / 127.5 - 1.0)[None].astype(np.float32)
    with stages("inference"):
        outputs = dict(zip((d["name"] for d in it.get_output_details()), common.run(it, x)))
    with stages("postprocess"):
        raw, logits = outputs["regressors"][0], outputs["classificators"][0, :, 0]
        boxes, keypoints = detection.decode_boxes(raw, anchors, size, len(KEYPOINTS))
        scores = detection.sigmoid(logits)
        keep = scores >= min_score
        faces = detection.weighted_nms(boxes[keep], scores[keep], iou_threshold, keypoints[keep])
        return [(unletterbox(box * size, transform), score,
                 unletterbox(points * size, transform)) for box, score, points in faces]


def main(argv=None) -> int:
    p = common.parser(__doc__.splitlines()[0], "face_detection_short_range.tflite")
    p.add_argument("--min-score", type=float, default=0.5)
    p.add_argument("--iou", type=float, default=0.3, help="suppression IoU threshold")
    args = p.parse_args(argv)
    it = common.make_interpreter(args)
    anchors = detection.ssd_anchors(detection.FACE_SHORT_RANGE)

    def process(frame, stages):
        faces = detect(it, frame, anchors, stages, args.min_score, args.iou)
        image = frame.copy()
        for box, _, points in faces:
            draw_box(image, box)
            draw_points(image, points)
        return image, {"faces": [{"box": [float(v) for v in box], "score": score,
                                  "keypoints": points.tolist()} for box, score, points in faces]}

    return common.main_loop(args, "faces", process)


if __name__ == "__main__":
    sys.exit(main())
