"""Cases for AVERAGE_POOL_2D, MAX_POOL_2D and L2_POOL_2D (see test_ops.py)."""
import numpy as np

from tests.opmodel import In, case

rng = np.random.default_rng(3)
POOLS = ("AVERAGE_POOL_2D", "MAX_POOL_2D", "L2_POOL_2D")
# Float pools clamp to the activation's range: TANH (4) and SIGN_BIT (5) do nothing in LiteRT.
ACTS = {"relu": 1, "relu_n1": 2, "relu6": 3, "tanh": 4}


def pool(op, id, shape, fh, fw, sh=1, sw=1, padding=0, act=0):
    x = (rng.standard_normal(shape) * 2).astype(np.float32)
    opts = dict(filter_height=fh, filter_width=fw, stride_h=sh, stride_w=sw, padding=padding,
                fused_activation_function=act)
    return case(f"{op.lower()}_{id}", op, [In(shape)], [x], options=opts)


CASES = [c for op in POOLS for c in [
    pool(op, "2x2_s2_valid", (1, 6, 8, 3), 2, 2, 2, 2, padding=1),
    pool(op, "2x2_s2_same_odd", (1, 7, 5, 3), 2, 2, 2, 2),
    pool(op, "3x3_s1_same", (2, 5, 6, 2), 3, 3),
    pool(op, "3x3_s2_same", (1, 7, 8, 4), 3, 3, 2, 2),
    pool(op, "3x2_s_2x1_valid", (1, 7, 6, 2), 3, 2, 2, 1, padding=1),
    pool(op, "global_valid", (2, 4, 5, 3), 4, 5, 1, 1, padding=1),
    pool(op, "1x1", (1, 3, 3, 2), 1, 1),
    pool(op, "5x5_s3_same", (1, 8, 9, 2), 5, 5, 3, 3),
    *[pool(op, f"act_{name}", (1, 4, 4, 2), 2, 2, 2, 2, act=code) for name, code in ACTS.items()],
]]
