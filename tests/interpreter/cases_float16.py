"""Cases for the float16 elementwise kernels (see test_ops.py): results must be bit-identical to
LiteRT's (the tolerance is zero), across the whole half range, overflow and broadcasting."""
import numpy as np

from tests.opmodel import In, Out, case

rng = np.random.default_rng(17)
H = "float16"


def halves(*shape, scale=4.0):
    return (rng.standard_normal(shape) * scale).astype(np.float16)


# Every 16th finite half value, both signs: the math functions over the whole range.
_bits = np.arange(0, 65536, 16, dtype=np.uint16).view(np.float16)
SWEEP = _bits[np.isfinite(_bits)].reshape(-1, 4)
# Large operands: sums and products that overflow the half range.
BIG = np.clip(rng.standard_normal((64,)) * 30000, -65000, 65000).astype(np.float16)


def exact(*args, **kwargs):
    return case(*args, rtol=0, atol=0, **kwargs)


CASES = []
for op in ("ADD", "MUL"):
    name = op.lower()
    for code, act in ((0, "none"), (1, "relu"), (2, "relu_n1_to_1"), (3, "relu6"), (4, "tanh")):
        a, b = halves(3, 1, 4), halves(5, 1)
        CASES.append(exact(f"{name}_{act}", op, [In(a.shape, H), In(b.shape, H)], [a, b],
                           outputs=[Out(dtype=H)], options=dict(fused_activation_function=code)))
    a, b = BIG, BIG[::-1].copy()
    CASES.append(exact(f"{name}_overflow", op, [In(a.shape, H), In(b.shape, H)], [a, b],
                       outputs=[Out(dtype=H)]))
    CASES.append(exact(f"{name}_overflow_relu", op, [In(a.shape, H), In(b.shape, H)], [a, b],
                       outputs=[Out(dtype=H)], options=dict(fused_activation_function=1)))
    CASES.append(exact(f"{name}_const", op, [In((2, 3), H), np.float16([0.5, -2, 3])],
                       [halves(2, 3)], outputs=[Out(dtype=H)]))

for op in ("MAXIMUM", "MINIMUM"):
    a, b = halves(2, 3, 4), halves(3, 1)
    CASES.append(exact(f"{op.lower()}_broadcast", op, [In(a.shape, H), In(b.shape, H)], [a, b],
                       outputs=[Out(dtype=H)]))

for op in ("LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "EQUAL", "NOT_EQUAL"):
    a = np.round(halves(4, 5, scale=2))
    b = np.round(halves(5, scale=2))
    CASES.append(exact(f"{op.lower()}_broadcast", op, [In(a.shape, H), In(b.shape, H)], [a, b],
                       outputs=[Out(dtype="bool")]))

for op in ("NEG", "FLOOR", "SIN", "COS", "TANH", "LOGISTIC"):
    CASES.append(exact(f"{op.lower()}_sweep", op, [In(SWEEP.shape, H)], [SWEEP],
                       outputs=[Out(dtype=H)]))

a, b = halves(6, 7), halves(6, 7)
CASES.append(exact("atan2", "ATAN2", [In(a.shape, H), In(b.shape, H)], [a, b],
                   outputs=[Out(dtype=H)]))
for beta in (1.0, 0.3):
    x = halves(3, 10)
    CASES.append(exact(f"softmax_beta{beta}", "SOFTMAX", [In(x.shape, H)], [x],
                       outputs=[Out(dtype=H)], options=dict(beta=beta)))
