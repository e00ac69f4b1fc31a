"""Float64 numpy forward references of the ops that have gradient rules, for finite differences.

Written from TFLite's definitions (NHWC, SAME/VALID padding, average pools counting only in-bounds
taps); the gradient suite also checks each against edgelite's float32 kernel on the same inputs.
"""
from __future__ import annotations

import math

import numpy as np

_erf = np.vectorize(math.erf, otypes=[np.float64])


def act(y, code: int):
    """A fused activation: 0 none, 1 RELU, 2 RELU_N1_TO_1, 3 RELU6."""
    bounds = {1: (0.0, np.inf), 2: (-1.0, 1.0), 3: (0.0, 6.0)}
    return np.clip(y, *bounds[code]) if code in bounds else y


def fully_connected(x, w, b=None, code=0, keep_num_dims=False):
    rows = x.reshape(-1, w.shape[1]) @ w.T
    if b is not None:
        rows = rows + b
    y = rows.reshape(x.shape[:-1] + (w.shape[0],)) if keep_num_dims else rows
    return act(y, code)


def batch_matmul(a, b, adj_x=False, adj_y=False):
    return np.matmul(np.swapaxes(a, -1, -2) if adj_x else a, np.swapaxes(b, -1, -2) if adj_y else b)


def _axis(size, kernel, stride, dilation, same):
    eff = (kernel - 1) * dilation + 1
    if same:
        out = -(-size // stride)
        before = max((out - 1) * stride + eff - size, 0) // 2
    else:
        out, before = (size - eff) // stride + 1, 0
    after = max((out - 1) * stride + eff - size - before, 0)
    return out, before, after


def _taps(x, kh, kw, stride, dilation, same, fill=0.0):
    """[(i, j, tap [N, OH, OW, C])] of a window over NHWC x, and the in-bounds mask's taps."""
    (oh, pt, pb), (ow, pl, pr) = (_axis(x.shape[1], kh, stride[0], dilation[0], same),
                                  _axis(x.shape[2], kw, stride[1], dilation[1], same))
    pad = ((0, 0), (pt, pb), (pl, pr), (0, 0))
    xp = np.pad(x, pad, constant_values=fill)
    inside = np.pad(np.ones((1,) + x.shape[1:3] + (1,)), pad)
    out = []
    for i in range(kh):
        for j in range(kw):
            r, c = i * dilation[0], j * dilation[1]
            sl = (slice(None), slice(r, r + (oh - 1) * stride[0] + 1, stride[0]),
                  slice(c, c + (ow - 1) * stride[1] + 1, stride[1]))
            out.append((i, j, xp[sl], inside[sl]))
    return out


def conv_2d(x, w, b=None, stride=(1, 1), dilation=(1, 1), same=True, code=0):
    y = sum(tap @ w[:, i, j, :].T for i, j, tap, _ in
            _taps(x, w.shape[1], w.shape[2], stride, dilation, same))
    return act(y + (0 if b is None else b), code)


def depthwise_conv_2d(x, w, b=None, stride=(1, 1), dilation=(1, 1), same=True, code=0):
    m = w.shape[3] // x.shape[3]
    y = sum(np.repeat(tap, m, axis=3) * w[0, i, j] for i, j, tap, _ in
            _taps(x, w.shape[1], w.shape[2], stride, dilation, same))
    return act(y + (0 if b is None else b), code)


def average_pool_2d(x, k=(2, 2), stride=(2, 2), same=False, code=0):
    taps = _taps(x, k[0], k[1], stride, (1, 1), same)
    return act(sum(t for _, _, t, _ in taps) / sum(m for _, _, _, m in taps), code)


def max_pool_2d(x, k=(2, 2), stride=(2, 2), same=False, code=0):
    taps = _taps(x, k[0], k[1], stride, (1, 1), same, fill=-np.inf)
    return act(np.max([t for _, _, t, _ in taps], axis=0), code)


def relu6(x):
    return np.clip(x, 0.0, 6.0)


def leaky_relu(x, alpha):
    return np.where(x > 0, x, alpha * x)


def logistic(x):
    return 1.0 / (1.0 + np.exp(-x))


def gelu(x, approximate=False):
    if approximate:
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


def hard_swish(x):
    return x * np.clip(x + 3, 0, 6) / 6


def softmax(x, beta=1.0):
    z = beta * x - np.max(beta * x, axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(-1, keepdims=True)


def log_softmax(x):
    z = x - np.max(x, axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


# -- losses (means over every example and position) ------------------------------------------

def sparse_softmax_cross_entropy(logits, labels):
    lp = log_softmax(logits)
    return -np.mean(np.take_along_axis(lp, labels[..., None].astype(np.int64), -1))


def softmax_cross_entropy(logits, target):
    return -np.mean(np.sum(target * log_softmax(logits), -1))


def mean_squared_error(pred, target):
    return np.mean((pred - target) ** 2)


def binary_cross_entropy(logits, target):
    p = logistic(logits)
    return -np.mean(target * np.log(p) + (1 - target) * np.log(1 - p))
