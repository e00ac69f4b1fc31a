"""Cases for SPACE_TO_BATCH_ND and BATCH_TO_SPACE_ND (see test_ops.py)."""
from functools import partial

import numpy as np

from tests.interpreter import case_data
from tests.opmodel import In, Out, case

rng = np.random.default_rng(3)
values = partial(case_data.random_values, rng, lo=0)


CASES = []

# Rank 4 with square and uneven blocks, paddings and crops on every side; rank 3 with one
# spatial dimension.
for k, (shape, block, pads) in enumerate((((1, 4, 4, 2), [2, 2], [[0, 0], [0, 0]]),
                                          ((2, 3, 5, 1), [2, 3], [[1, 0], [0, 1]]),
                                          ((1, 5, 2, 3), [3, 2], [[2, 2], [1, 1]]),
                                          ((2, 6, 3), [3], [[0, 0]]),
                                          ((1, 5, 2), [2], [[0, 1]]),
                                          ((3, 2, 2, 2), [1, 2], [[0, 0], [0, 2]]))):
    x = values(shape, "float32")
    CASES.append(case(f"space_to_batch_nd{k}", "SPACE_TO_BATCH_ND",
                      [In(shape), np.int32(block), np.int32(pads)], [x]))
for k, (shape, block, crops) in enumerate((((4, 2, 2, 1), [2, 2], [[0, 0], [0, 0]]),
                                           ((6, 2, 2, 3), [2, 3], [[1, 0], [0, 2]]),
                                           ((4, 3, 3, 1), [2, 2], [[1, 1], [2, 1]]),
                                           ((6, 2, 3), [3], [[0, 1]]),
                                           ((2, 3, 1, 2), [2, 1], [[0, 0], [0, 0]]))):
    x = values(shape, "float32")
    CASES.append(case(f"batch_to_space_nd{k}", "BATCH_TO_SPACE_ND",
                      [In(shape), np.int32(block), np.int32(crops)], [x]))

# Every type; quantized inputs pad with the zero point.
for dt in ("float16", "int8", "uint8", "int16", "int32", "int64", "bool"):
    CASES.append(case(f"space_to_batch_nd_{dt}", "SPACE_TO_BATCH_ND",
                      [In((1, 3, 4, 2), dt), np.int32([2, 2]), np.int32([[1, 0], [0, 0]])],
                      [values((1, 3, 4, 2), dt)], outputs=[Out(dtype=dt)]))
    CASES.append(case(f"batch_to_space_nd_{dt}", "BATCH_TO_SPACE_ND",
                      [In((4, 2, 2, 2), dt), np.int32([2, 2]), np.int32([[1, 0], [0, 1]])],
                      [values((4, 2, 2, 2), dt)], outputs=[Out(dtype=dt)]))
for dt, zp in (("int8", -5), ("uint8", 130)):
    CASES.append(case(f"space_to_batch_nd_{dt}_zero_point", "SPACE_TO_BATCH_ND",
                      [In((1, 3, 3, 1), dt, (0.5, zp)), np.int32([2, 2]),
                       np.int32([[1, 0], [0, 1]])],
                      [values((1, 3, 3, 1), dt)], outputs=[Out(dtype=dt, quant=(0.5, zp))]))

# Block shape and paddings given as graph inputs: the output shape is known only at run time.
CASES.append(case("space_to_batch_nd_input_block", "SPACE_TO_BATCH_ND",
                  [In((1, 4, 2, 1)), In((2,), "int32"), In((2, 2), "int32")],
                  [values((1, 4, 2, 1), "float32"), np.int32([2, 2]), np.int32([[0, 0], [1, 1]])],
                  outputs=[Out((4, 2, 2, 1))]))
CASES.append(case("batch_to_space_nd_input_block", "BATCH_TO_SPACE_ND",
                  [In((4, 2, 2, 1)), In((2,), "int32"), In((2, 2), "int32")],
                  [values((4, 2, 2, 1), "float32"), np.int32([2, 2]), np.int32([[0, 1], [1, 0]])],
                  outputs=[Out((1, 3, 3, 1))]))
