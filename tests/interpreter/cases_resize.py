"""Cases for RESIZE_BILINEAR, RESIZE_NEAREST_NEIGHBOR, DEPTH_TO_SPACE, SPACE_TO_DEPTH."""
import numpy as np

from tests.opmodel import In, Out, case

rng = np.random.default_rng(4)
MODES = {"default": {}, "align_corners": dict(align_corners=True),
         "half_pixel": dict(half_pixel_centers=True)}


def resize(op, id, shape, size, **options):
    x = rng.standard_normal(shape).astype(np.float32)
    return case(f"{op.lower()}_{id}", op, [In(shape), np.array(size, np.int32)], [x],
                options=options)


def block(op, id, shape, bs, dtype=np.float32):
    x = (rng.standard_normal(shape) * 100).astype(dtype)
    name = np.dtype(dtype).name
    return case(f"{op.lower()}_{id}", op, [In(shape, name)], [x], outputs=[Out(dtype=name)],
                options=dict(block_size=bs))


CASES = [c for op in ("RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR") for mode, opts in MODES.items()
         for c in [
             resize(op, f"up_{mode}", (1, 3, 4, 2), (7, 9), **opts),
             resize(op, f"down_{mode}", (2, 8, 7, 3), (3, 5), **opts),
             resize(op, f"to_1x1_{mode}", (1, 4, 4, 1), (1, 1), **opts),
             resize(op, f"x2_{mode}", (1, 4, 5, 2), (8, 10), **opts),
         ]] + [
    resize("RESIZE_NEAREST_NEIGHBOR", "align_and_half_pixel", (1, 5, 4, 2), (9, 7),
           align_corners=True, half_pixel_centers=True),
    block("DEPTH_TO_SPACE", "bs2", (1, 3, 4, 8), 2),
    block("DEPTH_TO_SPACE", "bs3_batch2", (2, 2, 3, 18), 3),
    block("DEPTH_TO_SPACE", "int32", (1, 2, 2, 12), 2, np.int32),
    block("DEPTH_TO_SPACE", "int64", (1, 2, 2, 4), 2, np.int64),
    block("SPACE_TO_DEPTH", "bs2", (1, 4, 6, 3), 2),
    block("SPACE_TO_DEPTH", "bs3_batch2", (2, 6, 3, 2), 3),
    block("SPACE_TO_DEPTH", "int32", (1, 4, 4, 1), 2, np.int32),
    block("SPACE_TO_DEPTH", "int64", (1, 2, 4, 2), 2, np.int64),
]
