"""Image classification with any classifier .tflite and a labels file: top-k labels a frame.

    python classify.py --model classifier.tflite --labels labels.txt --input photo.jpg

Float models get (pixel - mean) / std (default: [0, 1]; MobileNets want --mean 127.5 --std 127.5);
integer-input models get that quantized with their input's scale and zero point."""
from __future__ import annotations

import sys

import numpy as np

import common
from edgelite.tasks.image import input_size, resize, to_input


def load_labels(path) -> list:
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


def layout_of(detail: dict) -> str:
    """NCHW when the shape reads (1, C, H, W) with C 1 or 3 and the last dimension wider."""
    shape = list(detail["shape"])
    return "NCHW" if len(shape) == 4 and shape[1] in (1, 3) and shape[3] > 3 else "NHWC"


def scores_of(it, output: np.ndarray) -> np.ndarray:
    """Class probabilities: dequantized, softmaxed when the model gives logits."""
    s = common.dequantize(output, it.get_output_details()[0]).reshape(-1).astype(np.float64)
    if s.min() < 0 or s.max() > 1 or not np.isclose(s.sum(), 1, atol=1e-2):
        s = np.exp(s - s.max())
        s /= s.sum()
    return s


def main(argv=None) -> int:
    p = common.parser(__doc__.splitlines()[0], "classifier.tflite")
    p.add_argument("--labels", help="one label a line (default: class numbers)")
    p.add_argument("--top-k", type=int, default=3)
    p.add_argument("--mean", type=float, default=0.0)
    p.add_argument("--std", type=float, default=255.0)
    args = p.parse_args(argv)
    it = common.make_interpreter(args)
    detail = it.get_input_details()[0]
    layout = layout_of(detail)
    height, width, channels = input_size(detail, layout)
    outputs = it.get_output_details()
    labels = load_labels(args.labels) if args.labels else \
        [str(k) for k in range(int(np.prod(outputs[0]["shape"])))]

    def process(frame, stages):
        with stages("preprocess"):
            image = resize(frame, height, width)
            if channels == 1:
                image = image @ np.float32([0.299, 0.587, 0.114])
            x = to_input(image, detail, args.mean, args.std, layout)
        with stages("inference"):
            (y, *_) = common.run(it, x)
        with stages("postprocess"):
            scores = scores_of(it, y)
            top = np.argsort(-scores, kind="stable")[:args.top_k]
        record = {"top": [[labels[k], float(scores[k])] for k in top]}
        if args.json:      # the model's own output values for those classes (integers: int8)
            record["raw"] = y.reshape(-1)[top].tolist()
        return None, record

    return common.main_loop(args, "classify", process)


if __name__ == "__main__":
    sys.exit(main())
