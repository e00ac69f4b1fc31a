"""Selfie segmentation with MediaPipe's selfie segmenter: a person mask a frame, the background
blurred (or replaced with --background IMAGE).

    python segment.py --input photo.jpg

The model ends with MediaPipe's custom op Convolution2DTransposeBias, which edgelite's interpreter
(and its OpenCL delegate) and LiteRT's Python wheel all run."""
from __future__ import annotations

import sys

import numpy as np

import common
from edgelite.tasks.image import blend, box_blur, input_size, load_image, resize


def person_mask(it, frame: np.ndarray, stages) -> np.ndarray:
    """The person probability (H, W) in [0, 1] at the frame's size."""
    detail = it.get_input_details()[0]
    height, width, _ = input_size(detail)
    with stages("preprocess"):
        x = (resize(frame, height, width) / 255.0)[None].astype(np.float32)
    with stages("inference"):
        (mask, *_) = common.run(it, x)
    with stages("postprocess"):
        return np.clip(resize(mask[0, :, :, 0], *frame.shape[:2]), 0, 1)


def main(argv=None) -> int:
    p = common.parser(__doc__.splitlines()[0], "selfie_segmentation.tflite")
    p.add_argument("--background", help="an image to put behind the person (default: blur)")
    p.add_argument("--threshold", type=float, default=0.5, help="mask level counted as person")
    args = p.parse_args(argv)
    it = common.make_interpreter(args)
    replacement = load_image(args.background) if args.background else None

    def process(frame, stages):
        mask = person_mask(it, frame, stages)
        with stages("compose"):
            if replacement is not None:
                background = resize(replacement, *frame.shape[:2])
            else:
                background = box_blur(frame, max(frame.shape[:2]) // 40 + 1)
            image = blend(frame, background, mask)
        person = mask >= args.threshold
        ys, xs = np.nonzero(person)
        box = [int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1] \
            if len(xs) else None
        return image, {"person_fraction": float(person.mean()), "person_box": box,
                       "mask_mean": float(mask.mean())}

    return common.main_loop(args, "segmentation", process)


if __name__ == "__main__":
    sys.exit(main())
