"""ONNX models with open input dims, in the shapes torch's exporter writes them (Shape -> Gather
-> Unsqueeze -> Concat -> Reshape; Resize by scales; Range over a length; a transpose per
attention head): a text detector and a recognizer whose height and width vary, an attention
encoder, BERT-style embeddings and a mel-spectrogram front end whose length varies, a detector
head whose grid follows the image size. Weights are random (fixed seed); each builder returns
(ModelProto, sizes), the input shapes the tests run at."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = np.float32
_ELEM = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64}


def _graph(name, nodes, inputs, outputs, inits, opset=17):
    ins = [helper.make_tensor_value_info(n, _ELEM[np.dtype(dt)], dims) for n, dims, dt in inputs]
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs]
    init = [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()]
    proto = helper.make_model(helper.make_graph(nodes, name, ins, outs, init),
                              opset_imports=[helper.make_opsetid("", opset)])
    proto.ir_version = 8
    inferred = onnx.shape_inference.infer_shapes(proto)   # outputs get their (symbolic) shapes
    del proto.graph.output[:]
    proto.graph.output.extend(inferred.graph.output)
    onnx.checker.check_model(proto, full_check=True)
    return proto


class _Net:
    """Nodes and weights, added with helpers that name their outputs uniquely."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.count = [], {}, 0

    def name(self, base: str) -> str:
        self.count += 1
        return f"{base}_{self.count}"

    def const(self, value, base="c") -> str:
        name = self.name(base)
        self.inits[name] = np.asarray(value)
        return name

    def op(self, op, inputs, n_out=1, **attrs):
        outs = [self.name(op.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, list(inputs), outs, **attrs))
        return outs[0] if n_out == 1 else outs

    def conv(self, x, cin, cout, k=3, stride=1, groups=1, relu=True):
        w = (self.rng.standard_normal((cout, cin // groups, k, k)) *
             np.sqrt(2.0 / (cin // groups * k * k))).astype(F)
        b = (self.rng.standard_normal(cout) * 0.1).astype(F)
        y = self.op("Conv", [x, self.const(w, "w"), self.const(b, "b")], kernel_shape=[k, k],
                    strides=[stride, stride], pads=[k // 2] * 4, group=groups)
        return self.op("Relu", [y]) if relu else y

    def linear(self, x, cin, cout):
        w = (self.rng.standard_normal((cin, cout)) / np.sqrt(cin)).astype(F)
        return self.op("Add", [self.op("MatMul", [x, self.const(w, "w")]),
                               self.const((self.rng.standard_normal(cout) * 0.1).astype(F))])

    def dim(self, x, axis: int) -> str:
        """Shape(x)[axis] as a 1-element int64 vector (torch: Shape, Gather, Unsqueeze)."""
        g = self.op("Gather", [self.op("Shape", [x]), self.const(np.array(axis, np.int64))],
                    axis=0)
        return self.op("Unsqueeze", [g, self.const(np.array([0], np.int64))])

    def vec(self, *parts) -> str:
        """Concat of 1-element vectors and ints (torch's shape lists)."""
        names = [p if isinstance(p, str) else self.const(np.array([p], np.int64)) for p in parts]
        return self.op("Concat", names, axis=0)


def text_detector():
    """DBNet-like: a stride-8 backbone, a top-down path upsampled by Resize (scales 2) with
    skip adds, a probability map at 1/4 size upsampled to the input size by Resize to sizes
    computed from Shape(image)."""
    net = _Net(1)
    c1 = net.conv("image", 3, 8, stride=2)        # 1/2
    c2 = net.conv(c1, 8, 16, stride=2)            # 1/4
    c3 = net.conv(c2, 16, 16, stride=2)           # 1/8
    up = net.op("Resize", [c3, "", net.const(np.array([1, 1, 2, 2], F))], mode="nearest")
    p2 = net.op("Add", [up, c2])
    prob = net.op("Sigmoid", [net.conv(p2, 16, 1, k=1, relu=False)])
    hw = net.op("Slice", [net.op("Shape", ["image"]), net.const(np.array([2], np.int64)),
                          net.const(np.array([4], np.int64))])
    sizes = net.op("Concat", [net.const(np.array([1, 1], np.int64)), hw], axis=0)
    full = net.op("Resize", [prob, "", "", sizes], mode="linear",
                  coordinate_transformation_mode="half_pixel")
    net.nodes.append(helper.make_node("Identity", [full], ["prob"]))
    proto = _graph("text_detector", net.nodes, [("image", [1, 3, "height", "width"], F)],
                   ["prob"], net.inits)
    return proto, [[(1, 3, 64, 96)], [(1, 3, 32, 160)], [(1, 3, 96, 64)]]


def text_recognizer():
    """CRNN-like: convs down to height 1, the width as a sequence (Squeeze, Transpose), a
    linear layer per step and a log-softmax over classes; [batch, 3, 32, width]."""
    net = _Net(2)
    x = net.conv("image", 3, 8, stride=2)                    # h 16
    x = net.conv(x, 8, 16, stride=2)                         # h 8
    x = net.op("MaxPool", [x], kernel_shape=[8, 1], strides=[8, 1])   # h 1
    b, c, w = net.dim(x, 0), net.dim(x, 1), net.dim(x, 3)
    seq = net.op("Reshape", [x, net.vec(b, c, w)])           # [b, c, w]
    seq = net.op("Transpose", [seq], perm=[0, 2, 1])         # [b, w, c]
    logits = net.linear(seq, 16, 11)
    out = net.op("LogSoftmax", [logits], axis=-1)
    net.nodes.append(helper.make_node("Identity", [out], ["logits"]))
    proto = _graph("text_recognizer", net.nodes, [("image", ["batch", 3, 32, "width"], F)],
                   ["logits"], net.inits)
    return proto, [[(1, 3, 32, 100)], [(2, 3, 32, 48)], [(3, 3, 32, 320)]]


def attention_encoder(heads: int = 2, d: int = 16):
    """One transformer encoder layer as torch exports it: token embeddings plus positions
    gathered by Range(seq), heads split by Reshape to [b, s, h, d/h] from Shape, K transposed,
    Softmax, heads merged back, LayerNormalization, a GELU feed-forward; ids [batch, seq]."""
    net = _Net(3)
    table = (net.rng.standard_normal((50, d)) * 0.5).astype(F)
    pos_table = (net.rng.standard_normal((64, d)) * 0.5).astype(F)
    x = net.op("Gather", [net.const(table, "emb"), "ids"], axis=0)      # [b, s, d]
    seq_len = net.op("Gather", [net.op("Shape", ["ids"]), net.const(np.array(1, np.int64))],
                     axis=0)
    positions = net.op("Range", [net.const(np.array(0, np.int64)), seq_len,
                                 net.const(np.array(1, np.int64))])
    x = net.op("Add", [x, net.op("Gather", [net.const(pos_table, "pos"), positions], axis=0)])
    b, s = net.dim(x, 0), net.dim(x, 1)
    split = net.vec(b, s, heads, d // heads)

    def heads_of(t, perm):
        return net.op("Transpose", [net.op("Reshape", [t, split])], perm=perm)

    q = heads_of(net.linear(x, d, d), [0, 2, 1, 3])          # [b, h, s, dh]
    k = heads_of(net.linear(x, d, d), [0, 2, 3, 1])          # [b, h, dh, s]
    v = heads_of(net.linear(x, d, d), [0, 2, 1, 3])
    scores = net.op("Div", [net.op("MatMul", [q, k]),
                            net.const(np.array(np.sqrt(d // heads), F))])
    attn = net.op("MatMul", [net.op("Softmax", [scores], axis=-1), v])  # [b, h, s, dh]
    merged = net.op("Reshape", [net.op("Transpose", [attn], perm=[0, 2, 1, 3]),
                                net.vec(b, s, d)])
    x = net.op("Add", [x, net.linear(merged, d, d)])
    gamma, beta = net.const(np.ones(d, F)), net.const(np.zeros(d, F))
    x = net.op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=1e-5)
    hidden = net.linear(x, d, 2 * d)
    gelu = net.op("Mul", [net.op("Mul", [hidden, net.const(np.array(0.5, F))]), net.op(
        "Add", [net.op("Erf", [net.op("Div", [hidden, net.const(np.array(np.sqrt(2), F))])]),
                net.const(np.array(1.0, F))])])
    x = net.op("Add", [x, net.linear(gelu, 2 * d, d)])
    net.nodes.append(helper.make_node("Identity", [x], ["hidden"]))
    proto = _graph("attention_encoder", net.nodes, [("ids", ["batch", "seq"], np.int64)],
                   ["hidden"], net.inits)
    return proto, [[(1, 7)], [(2, 33)], [(3, 64)]]


def mel_frontend(n_fft: int = 64, hop: int = 16, mels: int = 8):
    """A log-mel spectrogram of [batch, samples] audio: the STFT as a strided Conv of windowed
    cosines and sines, power, a mel matrix, log; frames = (samples - n_fft) // hop + 1."""
    net = _Net(4)
    t = np.arange(n_fft)
    window = 0.5 - 0.5 * np.cos(2 * np.pi * t / n_fft)
    bins = n_fft // 2 + 1
    freqs = np.arange(bins)[:, None]
    basis = np.concatenate([np.cos(2 * np.pi * freqs * t / n_fft),
                            -np.sin(2 * np.pi * freqs * t / n_fft)]) * window
    x = net.op("Unsqueeze", ["audio", net.const(np.array([1], np.int64))])    # [b, 1, n]
    spec = net.op("Conv", [x, net.const(basis[:, None, :].astype(F), "stft")],
                  kernel_shape=[n_fft], strides=[hop])                       # [b, 2*bins, f]
    re, im = net.op("Split", [spec, net.const(np.array([bins, bins], np.int64))], n_out=2,
                    axis=1)
    power = net.op("Add", [net.op("Mul", [re, re]), net.op("Mul", [im, im])])
    mel = np.abs(net.rng.standard_normal((mels, bins))).astype(F)
    melspec = net.op("MatMul", [net.const(mel, "mel"), power])               # [b, mels, f]
    out = net.op("Log", [net.op("Add", [melspec, net.const(np.array(1e-6, F))])])
    net.nodes.append(helper.make_node("Identity", [out], ["logmel"]))
    proto = _graph("mel_frontend", net.nodes, [("audio", ["batch", "samples"], F)],
                   ["logmel"], net.inits)
    return proto, [[(1, 400)], [(2, 1000)], [(1, 1600)]]


def detector_head(anchors: int = 2, classes: int = 3):
    """A YOLO-style head: stride-4 features, per cell `anchors` boxes of 5 + classes values,
    reshaped [b, a, 5 + c, h * w] from Shape, decoded against a grid made by Range over the
    feature map's height and width; [batch, 3, height, width] -> [b, a * h * w, 5 + c]."""
    net = _Net(5)
    f = net.conv(net.conv("image", 3, 8, stride=2), 8, 16, stride=2)
    head = net.conv(f, 16, anchors * (5 + classes), k=1, relu=False)     # [b, a*(5+c), h, w]
    b, h, w = net.dim(head, 0), net.dim(head, 2), net.dim(head, 3)
    hw = net.op("Mul", [h, w])
    y = net.op("Reshape", [head, net.vec(b, anchors, 5 + classes, hw)])
    y = net.op("Transpose", [y], perm=[0, 1, 3, 2])                        # [b, a, hw, 5+c]
    y = net.op("Reshape", [y, net.vec(b, -1, 5 + classes)])                # [b, a*hw, 5+c]
    xy, rest = net.op("Split", [y, net.const(np.array([2, 3 + classes], np.int64))], n_out=2,
                      axis=2)
    zero, one = net.const(np.array(0, F)), net.const(np.array(1, F))
    h_f = net.op("Cast", [net.op("Squeeze", [h, net.const(np.array([0], np.int64))])],
                 to=TensorProto.FLOAT)
    w_f = net.op("Cast", [net.op("Squeeze", [w, net.const(np.array([0], np.int64))])],
                 to=TensorProto.FLOAT)
    gx = net.op("Range", [zero, w_f, one])                                  # [w]
    gy = net.op("Range", [zero, h_f, one])                                  # [h]
    grid_shape = net.op("Concat", [h, w], axis=0)
    gx2 = net.op("Expand", [net.op("Unsqueeze", [gx, net.const(np.array([0], np.int64))]),
                            grid_shape])                                    # [h, w]
    gy2 = net.op("Expand", [net.op("Unsqueeze", [gy, net.const(np.array([1], np.int64))]),
                            grid_shape])
    grid = net.op("Concat", [net.op("Unsqueeze", [gx2, net.const(np.array([2], np.int64))]),
                             net.op("Unsqueeze", [gy2, net.const(np.array([2], np.int64))])],
                  axis=2)                                                   # [h, w, 2]
    grid = net.op("Reshape", [grid, net.const(np.array([1, -1, 2], np.int64))])
    grid = net.op("Tile", [grid, net.vec(1, anchors, 1)])                   # [1, a*hw, 2]
    centers = net.op("Mul", [net.op("Add", [net.op("Sigmoid", [xy]), grid]),
                             net.const(np.array(4.0, F))])
    out = net.op("Concat", [centers, net.op("Sigmoid", [rest])], axis=2)
    net.nodes.append(helper.make_node("Identity", [out], ["boxes"]))
    proto = _graph("detector_head", net.nodes, [("image", ["batch", 3, "height", "width"], F)],
                   ["boxes"], net.inits)
    return proto, [[(1, 3, 32, 48)], [(2, 3, 64, 64)], [(1, 3, 96, 32)]]


def token_embeddings(d: int = 8):
    """BERT's embeddings as Hugging Face writes them: token-type ids taken from a buffer by
    GatherElements at positions Range(seq) expanded to [batch, seq], position embeddings
    sliced to the sequence's length; ids [batch, seq]."""
    net = _Net(6)
    words = (net.rng.standard_normal((50, d)) * 0.5).astype(F)
    types = (net.rng.standard_normal((2, d)) * 0.5).astype(F)
    positions = (net.rng.standard_normal((64, d)) * 0.5).astype(F)
    buffer = (np.arange(64) % 2).astype(np.int64).reshape(1, 64)
    b, s = net.dim("ids", 0), net.dim("ids", 1)
    seq = net.op("Squeeze", [s, net.const(np.array([0], np.int64))])
    steps = net.op("Range", [net.const(np.array(0, np.int64)), seq,
                             net.const(np.array(1, np.int64))])               # [seq]
    index = net.op("Expand", [net.op("Unsqueeze", [steps, net.const(np.array([0], np.int64))]),
                              net.vec(b, s)])                                 # [b, seq]
    table = net.op("Expand", [net.const(buffer, "token_types"), net.vec(b, 64)])
    type_ids = net.op("GatherElements", [table, index], axis=1)               # [b, seq]
    pos = net.op("Slice", [net.const(positions, "pos"), net.const(np.array([0], np.int64)),
                           s, net.const(np.array([0], np.int64))])            # [seq, d]
    x = net.op("Add", [net.op("Gather", [net.const(words, "words"), "ids"], axis=0),
                       net.op("Gather", [net.const(types, "types"), type_ids], axis=0)])
    x = net.op("Add", [x, pos])
    net.nodes.append(helper.make_node("Identity", [x], ["embeddings"]))
    proto = _graph("token_embeddings", net.nodes, [("ids", ["batch", "seq"], np.int64)],
                   ["embeddings"], net.inits)
    return proto, [[(1, 5)], [(2, 17)], [(3, 64)]]


MODELS = {f.__name__: f for f in (text_detector, text_recognizer, attention_encoder,
                                  mel_frontend, detector_head, token_embeddings)}
