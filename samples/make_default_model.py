"""Build edgelite's default sample model: a small CNN that tells eight stroke shapes apart.

Draws 16x16 grayscale images of strokes (horizontal, vertical, two diagonals, "+" and "x" crosses,
square and circle outlines) at random positions, sizes, thicknesses and brightness over a noisy
background; trains CONV_2D(3x3, SAME, fused RELU) -> MAX_POOL_2D(2x2) -> RESHAPE ->
FULLY_CONNECTED -> SOFTMAX on them in numpy (fixed seed, a few seconds); writes the network with
edgelite's IR as a float32 NHWC `.tflite` model with a `serving_default` signature (input
"image", output "probabilities"), the same network as an ONNX model (`default.onnx`, NCHW: the
input of the README's main job, converted by `tflite-convert`), and the held-out test set as an
`.npz` (`x` NHWC float32, `y` int labels, `probabilities` this script's forward pass on `x`,
`labels` the class names), and the training set as `default_train.npz` (`x`, `y`: what
`edgelite train` fine-tunes on).

    python samples/make_default_model.py [--out DIR]

The numpy forward pass follows TFLite's op semantics exactly (weights [out, kh, kw, in] for
CONV_2D, [out, in] for FULLY_CONNECTED, SAME padding as TFLite computes it), so LiteRT running the
written file must reproduce `probabilities` to float rounding.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

CLASSES = ("horizontal", "vertical", "diagonal", "antidiagonal", "plus", "cross", "square",
           "circle")
SIZE = 16            # images are SIZE x SIZE x 1
CHANNELS = 16        # conv output channels
KERNEL = 3
POOL = 2
SEED = 0
N_TRAIN, N_TEST = 4000, 1000
EPOCHS, BATCH, LEARNING_RATE = 12, 64, 3e-3


# --- data --------------------------------------------------------------------------------------

def _segment_distance(px, py, x0, y0, x1, y1):
    """Distance from each pixel centre (px, py) to the segment (x0, y0)-(x1, y1)."""
    dx, dy = x1 - x0, y1 - y0
    t = np.clip(((px - x0) * dx + (py - y0) * dy) / (dx * dx + dy * dy), 0.0, 1.0)
    return np.hypot(px - (x0 + t * dx), py - (y0 + t * dy))


def _strokes(label: int, cx, cy, r, angle_jitter):
    """The segments (angle in degrees) or outline kind that draw one class."""
    angles = {0: [0], 1: [90], 2: [45], 3: [-45], 4: [0, 90], 5: [45, -45]}
    if label in angles:
        segments = []
        for a in angles[label]:
            a = np.deg2rad(a + angle_jitter)
            ex, ey = r * np.cos(a), r * np.sin(a)
            segments.append((cx - ex, cy - ey, cx + ex, cy + ey))
        return segments
    return CLASSES[label]


def draw(label: int, rng: np.random.Generator) -> np.ndarray:
    """One SIZE x SIZE image of class `label`, values in [0, 1]."""
    py, px = np.mgrid[0:SIZE, 0:SIZE] + 0.5
    r = rng.uniform(3.5, 6.5)
    cx, cy = rng.uniform(r + 1, SIZE - r - 1, size=2)
    thickness = rng.uniform(0.8, 2.0)
    shape = _strokes(label, cx, cy, r, rng.uniform(-12, 12))
    if shape == "square":
        s = r / np.sqrt(2) * rng.uniform(1.0, 1.3)
        dist = np.abs(np.maximum(np.abs(px - cx), np.abs(py - cy)) - s)
    elif shape == "circle":
        dist = np.abs(np.hypot(px - cx, py - cy) - r * rng.uniform(0.8, 1.0))
    else:
        dist = np.min([_segment_distance(px, py, *seg) for seg in shape], axis=0)
    ink = np.clip(thickness / 2 + 0.5 - dist, 0.0, 1.0) * rng.uniform(0.6, 1.0)
    background = rng.uniform(0.0, 0.3)
    noise = rng.normal(0.0, rng.uniform(0.05, 0.2), size=ink.shape)
    return np.clip(background + ink + noise, 0.0, 1.0)


def make_dataset(n: int, rng: np.random.Generator):
    """`n` images, NHWC float32, with balanced int labels in random order."""
    y = rng.permutation(np.arange(n) % len(CLASSES))
    x = np.stack([draw(int(label), rng) for label in y]).astype(np.float32)[..., None]
    return x, y.astype(np.int64)


# --- the network, with TFLite's semantics --------------------------------------------------------

def same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """TFLite's SAME padding: output ceil(size / stride), the odd pixel of padding at the end."""
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def im2col(x: np.ndarray, kernel: int) -> np.ndarray:
    """NHWC -> [N, H, W, kh*kw*C] patches for a stride-1 SAME convolution."""
    n, h, w, c = x.shape
    (top, bottom), (left, right) = same_padding(h, kernel, 1), same_padding(w, kernel, 1)
    xp = np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)))
    patches = np.lib.stride_tricks.sliding_window_view(xp, (kernel, kernel), axis=(1, 2))
    # [N, H, W, C, kh, kw] -> [N, H, W, kh, kw, C], the order of CONV_2D's [out, kh, kw, in]
    return patches.transpose(0, 1, 2, 4, 5, 3).reshape(n, h, w, kernel * kernel * c)


def init_params(rng: np.random.Generator) -> dict:
    flat = (SIZE // POOL) ** 2 * CHANNELS
    fan_in = KERNEL * KERNEL
    return {
        "conv_w": (rng.normal(size=(CHANNELS, KERNEL, KERNEL, 1)) * np.sqrt(2 / fan_in)),
        "conv_b": np.zeros(CHANNELS),
        "fc_w": rng.normal(size=(len(CLASSES), flat)) * np.sqrt(1 / flat),
        "fc_b": np.zeros(len(CLASSES)),
    }


def forward(params: dict, x: np.ndarray, keep: bool = False):
    """Probabilities [N, classes]; with `keep`, also the intermediates backward() needs."""
    n = x.shape[0]
    cols = im2col(x, KERNEL)                                             # CONV_2D
    conv = cols @ params["conv_w"].reshape(CHANNELS, -1).T + params["conv_b"]
    relu = np.maximum(conv, 0)                                           # fused RELU
    h = SIZE // POOL                                                     # MAX_POOL_2D, VALID
    windows = relu.reshape(n, h, POOL, h, POOL, CHANNELS)
    pooled = windows.max(axis=(2, 4))
    flat = pooled.reshape(n, -1)                                         # RESHAPE
    logits = flat @ params["fc_w"].T + params["fc_b"]                    # FULLY_CONNECTED
    e = np.exp(logits - logits.max(axis=1, keepdims=True))               # SOFTMAX
    probs = e / e.sum(axis=1, keepdims=True)
    if keep:
        return probs, (cols, conv, windows, pooled, flat)
    return probs


def backward(params: dict, probs, y, saved) -> dict:
    """Gradients of the mean cross-entropy."""
    cols, conv, windows, pooled, flat = saved
    n = y.shape[0]
    d_logits = probs.copy()
    d_logits[np.arange(n), y] -= 1
    d_logits /= n
    grads = {"fc_w": d_logits.T @ flat, "fc_b": d_logits.sum(0)}
    d_pooled = (d_logits @ params["fc_w"]).reshape(pooled.shape)
    # The gradient goes to the window maximum (ties share it; they are rare on noisy data).
    is_max = windows == pooled[:, :, None, :, None, :]
    d_relu = (is_max * d_pooled[:, :, None, :, None, :]).reshape(conv.shape)
    d_conv = (d_relu * (conv > 0)).reshape(-1, CHANNELS)
    grads["conv_w"] = (d_conv.T @ cols.reshape(-1, cols.shape[-1])).reshape(params["conv_w"].shape)
    grads["conv_b"] = d_conv.sum(0)
    return grads


def train(x, y, rng: np.random.Generator) -> dict:
    """Adam on mini-batches; returns float32 parameters."""
    params = init_params(rng)
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v = {k: np.zeros_like(p) for k, p in params.items()}
    step = 0
    for _epoch in range(EPOCHS):
        order = rng.permutation(len(x))
        for start in range(0, len(x), BATCH):
            idx = order[start:start + BATCH]
            probs, saved = forward(params, x[idx].astype(np.float64), keep=True)
            grads = backward(params, probs, y[idx], saved)
            step += 1
            for k in params:
                m[k] = 0.9 * m[k] + 0.1 * grads[k]
                v[k] = 0.999 * v[k] + 0.001 * grads[k] ** 2
                m_hat, v_hat = m[k] / (1 - 0.9 ** step), v[k] / (1 - 0.999 ** step)
                params[k] -= LEARNING_RATE * m_hat / (np.sqrt(v_hat) + 1e-8)
    return {k: p.astype(np.float32) for k, p in params.items()}


# --- the .tflite model -------------------------------------------------------------------------

def build_model(params: dict):
    """The trained network as an edgelite IR `Model` (float32, NHWC, batch dimension dynamic)."""
    from edgelite.schema import (Model, Operator, OperatorCode, SignatureDef, Subgraph, Tensor,
                                 default_options)
    from edgelite.schema.ops import Activation
    from edgelite.schema.options import PADDINGS

    same, valid = (next(c for c, n in PADDINGS.items() if n == name) for name in ("SAME", "VALID"))
    relu = int(Activation.RELU)

    model = Model(description="edgelite default sample: 16x16 stroke-shape classifier "
                              f"({len(CLASSES)} classes), trained in numpy")
    sg = Subgraph(name="main")
    model.subgraphs.append(sg)

    def activation(name, shape):
        return sg.add_tensor(Tensor(name, (1, *shape), "float32",
                                    shape_signature=(-1, *shape)))

    def constant(name, value):
        value = np.ascontiguousarray(value)
        dtype = "int32" if value.dtype == np.int32 else "float32"
        return sg.add_tensor(Tensor(name, value.shape, dtype, buffer=model.add_buffer(value)))

    def op(name, inputs, outputs, **options):
        sg.operators.append(Operator(OperatorCode(name), inputs, outputs,
                                     default_options(name, **options)))

    h, flat = SIZE // POOL, (SIZE // POOL) ** 2 * CHANNELS
    image = activation("image", (SIZE, SIZE, 1))
    conv = activation("conv/relu", (SIZE, SIZE, CHANNELS))
    pool = activation("pool", (h, h, CHANNELS))
    flattened = activation("flatten", (flat,))
    logits = activation("logits", (len(CLASSES),))
    probabilities = activation("probabilities", (len(CLASSES),))

    op("CONV_2D", [image, constant("conv/weights", params["conv_w"]),
                   constant("conv/bias", params["conv_b"])], [conv],
       padding=same, stride_w=1, stride_h=1, fused_activation_function=relu)
    op("MAX_POOL_2D", [conv], [pool], padding=valid, stride_w=POOL, stride_h=POOL,
       filter_width=POOL, filter_height=POOL)
    op("RESHAPE", [pool, constant("flatten/shape", np.array([-1, flat], np.int32))], [flattened],
       new_shape=(-1, flat))
    op("FULLY_CONNECTED", [flattened, constant("dense/weights", params["fc_w"]),
                           constant("dense/bias", params["fc_b"])], [logits])
    op("SOFTMAX", [logits], [probabilities], beta=1.0)

    sg.inputs, sg.outputs = [image], [probabilities]
    model.signature_defs.append(SignatureDef("serving_default", 0, {"image": image},
                                             {"probabilities": probabilities}))
    model.set_metadata("edgelite_labels", "\n".join(CLASSES).encode())
    return model


def build_onnx(params: dict):
    """The same trained network as an ONNX model (NCHW, opset 17, dynamic batch): the input of
    the README's main job, which converts it with `tflite-convert` and runs the result."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    h, flat = SIZE // POOL, (SIZE // POOL) ** 2 * CHANNELS
    # ONNX flattens NCHW as (C, H, W); the trained dense weights expect (H, W, C).
    fc_w = params["fc_w"].reshape(len(CLASSES), h, h, CHANNELS).transpose(0, 3, 1, 2)
    weights = {
        "conv_w": params["conv_w"].transpose(0, 3, 1, 2),   # [out, kh, kw, in] -> OIHW
        "conv_b": params["conv_b"], "fc_w": fc_w.reshape(len(CLASSES), flat),
        "fc_b": params["fc_b"],
    }
    pad = same_padding(SIZE, KERNEL, 1)
    nodes = [
        helper.make_node("Conv", ["image", "conv_w", "conv_b"], ["conv"], kernel_shape=[3, 3],
                         pads=[pad[0], pad[0], pad[1], pad[1]]),
        helper.make_node("Relu", ["conv"], ["relu"]),
        helper.make_node("MaxPool", ["relu"], ["pool"], kernel_shape=[POOL, POOL],
                         strides=[POOL, POOL]),
        helper.make_node("Flatten", ["pool"], ["flat"]),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], transB=1),
        helper.make_node("Softmax", ["logits"], ["probabilities"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "edgelite_default_sample",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 1, SIZE, SIZE])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT,
                                       ["batch", len(CLASSES)])],
        [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="edgelite samples/make_default_model.py")
    onnx.checker.check_model(model)
    return model


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent,
                        help="folder for the model files and .npz data sets (default: samples/)")
    args = parser.parse_args(argv)

    from edgelite.schema import save

    started = time.perf_counter()
    rng = np.random.default_rng(SEED)
    x_train, y_train = make_dataset(N_TRAIN, rng)
    x_test, y_test = make_dataset(N_TEST, rng)
    params = train(x_train, y_train, rng)
    exact = {k: p.astype(np.float64) for k, p in params.items()}   # the float32 weights, in float64
    probs = forward(exact, x_test.astype(np.float64)).astype(np.float32)
    accuracy = float(np.mean(probs.argmax(axis=1) == y_test))
    train_accuracy = float(np.mean(forward(params, x_train).argmax(axis=1) == y_train))

    args.out.mkdir(parents=True, exist_ok=True)
    model_path, test_path = args.out / "default.tflite", args.out / "default_test.npz"
    train_path = args.out / "default_train.npz"
    model_path.write_bytes(save(build_model(params)))
    onnx_path = args.out / "default.onnx"
    onnx_path.write_bytes(build_onnx(params).SerializeToString())
    np.savez_compressed(test_path, x=x_test, y=y_test, probabilities=probs,
                        labels=np.array(CLASSES))
    np.savez_compressed(train_path, x=x_train, y=y_train)   # for `edgelite train`
    print(f"train accuracy: {train_accuracy:.4f} (n={N_TRAIN})")
    print(f"test accuracy: {accuracy:.4f} (n={N_TEST})")
    print(f"wrote {model_path} ({model_path.stat().st_size:,} bytes), {onnx_path}, {test_path} "
          f"and {train_path} in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
