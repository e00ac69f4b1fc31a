"""What the recurrent sequence kernels share (UNIDIRECTIONAL_SEQUENCE_LSTM/RNN in lstm.py and
rnn.py, the fused Keras loop in rnn_loop.py): the LSTM cell, one copy, and the output rows each
time step writes its h into. Small on purpose: lstm.py and rnn.py import it without loading the
Keras-loop matcher or the hybrid kernels.
"""
from __future__ import annotations

import numpy as np

from .common import clip as _clip
from .geometry import batch_major


def lstm_cell(z, mul, add, views, c, tmp, h_next, ones=None, clip=None, hard=None) -> None:
    """The LSTM cell (the fused Keras loop's and UNIDIRECTIONAL_SEQUENCE_LSTM's): z holds the
    gates' pre-activations with the sigmoid columns scaled by 0.5, `views` its (i, f, g, o)
    parts (i None with CIFG: i = 1 - f, `ones` a buffer of ones); LOGISTIC as 0.5 + 0.5 tanh:
    one tanh for every gate, then z * mul + add. c = f * c + i * g (clipped to `clip`, a pair
    of bounds), h_next = o * tanh(c); `tmp` a buffer like c. `hard`: the gates are Keras's
    hard_sigmoid instead, relu6(z + shift) * scale (z unscaled; per-column arrays: shift, the
    bounds and scale, identities on g's columns). (Outputs as positional arguments:
    a tenth of a ufunc's call cost on rows this small, against out=.)"""
    i, f, g, o = views
    if hard is None:
        np.tanh(z, z)
        np.multiply(z, mul, z)
        np.add(z, add, z)
    else:   # hard_sigmoid gates: relu6(z + shift) * scale (0, -inf..inf, 1 on g), then tanh(g)
        shift, low, high, scale = hard
        np.add(z, shift, z)
        _clip(z, low, high, z)
        np.multiply(z, scale, z)
        np.tanh(g, g)
    np.multiply(f, c, c)
    if i is None:
        np.subtract(ones, f, tmp)
        np.multiply(tmp, g, tmp)
    else:
        np.multiply(i, g, tmp)
    np.add(c, tmp, c)
    if clip is not None:
        np.clip(c, clip[0], clip[1], c)
    np.tanh(c, tmp)
    np.multiply(o, tmp, h_next)


class OutputRows:
    """The [batch, units] views of a sequence output [batch, time, units] (time-major: [time,
    batch, units]) step t writes its h into, made once per output array (the plan's arrays
    stay from invoke to invoke): no slicing and no copy per step."""

    def __init__(self, time_major: bool):
        self.time_major = time_major
        self.out, self.rows = None, ()

    def __call__(self, out: np.ndarray) -> tuple:
        if out is not self.out:
            self.out = out
            self.rows = tuple(batch_major(out, self.time_major)[:, t] for t in range(
                out.shape[0 if self.time_major else 1]))
        return self.rows
