"""The Android app's LiteRT calls in Python, one for one: what TextDirection.kt and
Personalizer.kt do, driven by the same spec (assets/edgelite_app.json) on the same files.

Kotlin's `interpreter.runSignature(inputs, outputs, key)` is Python's
`interpreter.get_signature_runner(key)(**inputs)`; names, shapes, dtypes, normalization, the
batches a training step takes and the checkpoint file's layout all come from the spec, here as
there. Runs on stock LiteRT (ai_edge_litert) or on edgelite's interpreter (--runtime), needing
only numpy besides the runtime:

    python samples/android/contract.py --assets DIR --data SAMPLES.npz --out RESULT.npz \\
        [--runtime litert|edgelite]

SAMPLES.npz: `x` (drawings as the pad gives them: N x H x W uint8, white on black) and `y`
(labels), and `text` (one text line, H x W x 3 uint8 RGB); RESULT.npz: what each call returned.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

SPEC = "edgelite_app.json"
DTYPES = {"float32": np.float32, "int32": np.int32, "int64": np.int64}


def load_spec(assets: Path) -> dict:
    return json.loads((Path(assets) / SPEC).read_text())


def interpreter_class(runtime: str):
    if runtime == "litert":
        from ai_edge_litert.interpreter import Interpreter
    elif runtime == "edgelite":
        from edgelite.interpreter import Interpreter
    else:
        raise ValueError(f"runtime {runtime!r}: expected litert or edgelite")
    return Interpreter


def _only(d: dict) -> tuple:
    (item,) = d.items()
    return item


def _resize_bilinear(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """Bilinear, pixel centers aligned (as Android's Bitmap.createScaledBitmap with filter)."""
    h, w = image.shape[:2]
    ys = np.clip((np.arange(height) + 0.5) * h / height - 0.5, 0, h - 1)
    xs = np.clip((np.arange(width) + 0.5) * w / width - 0.5, 0, w - 1)
    y0, x0 = np.floor(ys).astype(int), np.floor(xs).astype(int)
    y1, x1 = np.minimum(y0 + 1, h - 1), np.minimum(x0 + 1, w - 1)
    fy, fx = (ys - y0)[:, None, None], (xs - x0)[None, :, None]
    img = image.astype(np.float32).reshape(h, w, -1)
    top = img[y0][:, x0] * (1 - fx) + img[y0][:, x1] * fx
    bottom = img[y1][:, x0] * (1 - fx) + img[y1][:, x1] * fx
    return np.round(top * (1 - fy) + bottom * fy).astype(np.uint8)


class TextDirection:
    """The camera screen: a line of text -> ("0" | "180", scores)."""

    def __init__(self, assets: Path, spec: dict, Interpreter):
        self.spec = spec["camera"]
        self.labels = (Path(assets) / self.spec["labels"]).read_text().split()
        self.interpreter = Interpreter(model_path=str(Path(assets) / self.spec["model"]))
        self.runner = self.interpreter.get_signature_runner(self.spec["signature"])
        sig = self.spec["signatures"][self.spec["signature"]]
        (self.input, info), (self.output, _) = _only(sig["inputs"]), _only(sig["outputs"])
        self.shape = info["shape"]   # [1, H, W, 3]

    def preprocess(self, rgb: np.ndarray) -> np.ndarray:
        image = self.spec["image"]
        _, height, width, _ = self.shape
        w = min(width, int(np.ceil(height * rgb.shape[1] / rgb.shape[0])))
        pixels = _resize_bilinear(rgb, height, w).astype(np.float32)
        if image["channels"] == "BGR":
            pixels = pixels[..., ::-1]
        x = np.full(self.shape, image["pad_value"], np.float32)
        x[0, :, :w] = (pixels - np.float32(image["mean"])) / np.float32(image["std"])
        return x

    def classify(self, rgb: np.ndarray) -> tuple:
        scores = self.runner(**{self.input: self.preprocess(rgb)})[self.output][0]
        return self.labels[int(np.argmax(scores))], scores


class Personalizer:
    """The personalization screen: drawings and their labels -> training steps on the phone."""

    def __init__(self, assets: Path, spec: dict, Interpreter):
        self.spec = spec["personalization"]
        self.labels = (Path(assets) / self.spec["labels"]).read_text().split()
        self.interpreter = Interpreter(model_path=str(Path(assets) / self.spec["model"]))
        self.keys = self.spec["keys"]    # role (infer, train, save, restore) -> signature key
        self.sigs = {role: self.spec["signatures"][key] for role, key in self.keys.items()}
        self.image_name, image = _only(self.sigs["infer"]["inputs"])
        _, self.height, self.width, _ = image["shape"]
        self.label_name = next(n for n in self.sigs["train"]["inputs"] if n != self.image_name)
        self.output_name, _ = _only(self.sigs["infer"]["outputs"])
        self.loss_name, _ = _only(self.sigs["train"]["outputs"])

    def _run(self, role: str, inputs: dict) -> dict:
        return self.interpreter.get_signature_runner(self.keys[role])(**inputs)

    def preprocess(self, drawing: np.ndarray) -> np.ndarray:
        """A pad's drawing (H x W uint8, any multiple of the input's size) -> 1 x h x w x 1."""
        image = self.spec["image"]
        fh, fw = drawing.shape[0] // self.height, drawing.shape[1] // self.width
        area = drawing[:self.height * fh, :self.width * fw].astype(np.float32)
        area = area.reshape(self.height, fh, self.width, fw).mean(axis=(1, 3))
        pixels = np.round(area)          # the pad stores the averaged pixel as a byte
        x = (pixels - np.float32(image["mean"][0])) / np.float32(image["std"][0])
        return x.astype(np.float32)[None, :, :, None]

    def infer(self, images: np.ndarray) -> np.ndarray:
        return self._run("infer", {self.image_name: images})[self.output_name]

    def batch(self, n: int, step: int) -> np.ndarray:
        """The samples step `step` trains on: batch_size of them, round robin (no RNG, so Kotlin
        and Python take the same)."""
        b = self.spec["batch_size"]
        return np.array([(step * b + j) % n for j in range(b)])

    def train_step(self, images: np.ndarray, labels: np.ndarray, step: int) -> float:
        pick = self.batch(len(images), step)
        dtype = DTYPES[self.sigs["train"]["inputs"][self.label_name]["dtype"]]
        out = self._run("train", {self.image_name: images[pick],
                                  self.label_name: labels[pick].astype(dtype)})
        return float(out[self.loss_name])

    def save(self, path: Path) -> dict:
        """Run `save` and write its outputs in the order of restore's inputs in the spec, each
        its float32 values little-endian."""
        feed = {self.spec["save_input"]: np.zeros(1, np.float32)}
        values = self._run("save", feed)
        with open(path, "wb") as f:
            for name in self.sigs["restore"]["inputs"]:
                f.write(np.asarray(values[name], "<f4").tobytes())
        return values

    def restore(self, path: Path) -> None:
        data, offset, feed = Path(path).read_bytes(), 0, {}
        for name, info in self.sigs["restore"]["inputs"].items():
            n = int(np.prod(info["shape"], dtype=np.int64)) * 4
            if offset + n > len(data):
                raise ValueError(f"{path}: {len(data)} bytes, too short for {name!r}")
            feed[name] = np.frombuffer(data, "<f4", n // 4, offset).reshape(info["shape"])
            offset += n
        if offset != len(data):
            raise ValueError(f"{path}: {len(data)} bytes, expected {offset}")
        self._run("restore", feed)


def exercise(assets: Path, Interpreter, drawings: np.ndarray, labels: np.ndarray,
             text: np.ndarray, workdir: Path) -> dict:
    """The app's session: classify a text line and its 180-degree turn; then personalize:
    infer, `steps` training steps, save, train on, restore, infer again."""
    spec = load_spec(assets)
    camera = TextDirection(assets, spec, Interpreter)
    upright, up_scores = camera.classify(text)
    turned, turned_scores = camera.classify(text[::-1, ::-1])

    app = Personalizer(assets, spec, Interpreter)
    images = np.concatenate([app.preprocess(d) for d in drawings])
    before = app.infer(images)
    losses = [app.train_step(images, labels, s) for s in range(spec["personalization"]["steps"])]
    trained = app.infer(images)
    checkpoint = Path(workdir) / spec["personalization"]["checkpoint"]
    saved = app.save(checkpoint)
    for s in range(5):                          # the user trains on, then restores
        app.train_step(images, labels, s)
    drifted = app.infer(images)
    app.restore(checkpoint)
    restored = app.infer(images)
    return {"text_labels": np.array([upright, turned]),
            "text_scores": np.stack([up_scores, turned_scores]), "images": images,
            "before": before, "losses": np.array(losses, np.float32), "trained": trained,
            "drifted": drifted, "restored": restored,
            "checkpoint_bytes": np.array(checkpoint.stat().st_size),
            **{f"saved/{k}": np.asarray(v) for k, v in saved.items()}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assets", type=Path, required=True)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--runtime", default="litert", choices=["litert", "edgelite"])
    args = parser.parse_args(argv)
    data = np.load(args.data)
    result = exercise(args.assets, interpreter_class(args.runtime), data["x"], data["y"],
                      data["text"], args.out.parent)
    np.savez(args.out, **result)
    print(f"text: {list(result['text_labels'])}; loss {result['losses'][0]:.4f} -> "
          f"{result['losses'][-1]:.4f} in {len(result['losses'])} steps ({args.runtime})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
