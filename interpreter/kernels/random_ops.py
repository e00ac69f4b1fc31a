"""RANDOM_UNIFORM, bit-exact with TFLite: TensorFlow's Philox4x32-10 generator seeded from the
options, one float per 32 random bits.

The generator is (re)seeded at prepare and advances across invokes, as in TFLite, where each
invoke draws whole blocks of 4 values. RANDOM_STANDARD_NORMAL is not here: its Box-Muller step
goes through the C library's sinf/cosf, which numpy cannot reproduce to the last bit.
"""
from __future__ import annotations

import numpy as np

from .registry import register

_MUL_A, _MUL_B = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_KEY_A, _KEY_B = 0x9E3779B9, 0xBB67AE85
_LOW = np.uint64(0xFFFFFFFF)
_32 = np.uint64(32)


def philox(key: int, counter_hi: int, start: int, blocks: int) -> np.ndarray:
    """`blocks` outputs of Philox4x32-10 (4 uint32 each) for the counters start, start + 1, ...
    (low 64 bits; the high 64 bits are `counter_hi`) under the 64-bit `key`."""
    counter = np.arange(start, start + blocks, dtype=np.uint64)
    c0, c1 = counter & _LOW, counter >> _32
    c2 = np.full(blocks, counter_hi & 0xFFFFFFFF, np.uint64)
    c3 = np.full(blocks, (counter_hi >> 32) & 0xFFFFFFFF, np.uint64)
    k0, k1 = key & 0xFFFFFFFF, (key >> 32) & 0xFFFFFFFF
    for _ in range(10):
        p0, p1 = _MUL_A * c0, _MUL_B * c2
        c0, c1, c2, c3 = ((p1 >> _32) ^ c1 ^ np.uint64(k0), p1 & _LOW,
                          (p0 >> _32) ^ c3 ^ np.uint64(k1), p0 & _LOW)
        k0, k1 = (k0 + _KEY_A) & 0xFFFFFFFF, (k1 + _KEY_B) & 0xFFFFFFFF
    return np.stack([c0, c1, c2, c3], axis=1).reshape(-1).astype(np.uint32)


def uniform_floats(bits: np.ndarray) -> np.ndarray:
    """[0, 1) floats from 23 random mantissa bits (TensorFlow's Uint32ToFloat)."""
    return ((bits & np.uint32(0x7FFFFF)) | np.uint32(0x3F800000)).view(np.float32) - np.float32(1)


def _tflite_seed(value) -> int:
    """TFLite keeps the seeds in C ints: truncated to 32 bits, then sign-extended to 64."""
    s = (int(value or 0) + 2 ** 31) % 2 ** 32 - 2 ** 31
    return s % 2 ** 64


@register("RANDOM_UNIFORM", "int32")
def random_uniform(node):
    node.expect_inputs(1)
    shape_t = node.input(0)
    if node.outputs[0].type_name != "float32":
        raise node.fail(f"the output must be float32, got {node.outputs[0].type_name}")
    if len(shape_t.shape) != 1:   # as LiteRT (a 0-d shape reached iteration while running)
        raise node.fail(f"the shape (input 0) must be a vector, got a tensor of rank "
                        f"{len(shape_t.shape)}")
    seed, seed2 = _tflite_seed(node.options.seed), _tflite_seed(node.options.seed2)
    if seed == 0 and seed2 == 0:  # unseeded: a different sequence each time, as TFLite
        seed, seed2 = (int(v) for v in np.random.SeedSequence().generate_state(2, np.uint64))
    state = {"next": 0}

    def draw(size: int) -> np.ndarray:
        blocks = -(-size // 4)
        values = uniform_floats(philox(seed, seed2, state["next"], blocks))
        state["next"] += blocks
        return values[:size]

    if shape_t.data is None:
        node.dynamic = True

        def run_dynamic(shape):
            dims = tuple(int(d) for d in shape)
            if any(d < 0 for d in dims):
                raise node.fail(f"the shape {list(dims)} has a negative dimension")
            return [draw(int(np.prod(dims, dtype=np.int64))).reshape(dims)]
        return run_dynamic
    dims = tuple(int(d) for d in np.asarray(shape_t.data).reshape(-1))
    if any(d < 0 for d in dims):
        raise node.fail(f"the shape {list(dims)} has a negative dimension")
    node.outputs[0].shape = dims

    def run(_shape, out):
        out.reshape(-1)[...] = draw(out.size)
    return run
