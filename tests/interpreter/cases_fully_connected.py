"""Cases for FULLY_CONNECTED and BATCH_MATMUL (see test_ops.py)."""
import numpy as np

from tests.opmodel import In, case

rng = np.random.default_rng(2)
TOL = dict(rtol=1e-5, atol=1e-5)  # sums of products: different accumulation orders
ACTS = {"none": 0, "relu": 1, "relu_n1": 2, "relu6": 3}


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def fc(id, x_shape, w_shape, bias=True, **options):
    inputs = [In(x_shape), f32(*w_shape), f32(w_shape[0]) if bias else None]
    return case(f"fully_connected_{id}", "FULLY_CONNECTED", inputs, [f32(*x_shape)],
                options=options, **TOL)


def bmm(id, x_shape, y_shape, const_y=False, **options):
    y = f32(*y_shape)
    inputs = [In(x_shape), y if const_y else In(y_shape)]
    feeds = [f32(*x_shape)] + ([] if const_y else [y])
    return case(f"batch_matmul_{id}", "BATCH_MATMUL", inputs, feeds, options=options, **TOL)


CASES = [
    fc("2d", (3, 8), (5, 8)),
    fc("1_row", (1, 16), (4, 16)),
    fc("no_bias", (2, 6), (3, 6), bias=False),
    fc("no_bias_omitted", (2, 6), (3, 6), bias=False, fused_activation_function=3),
    fc("flatten_4d", (2, 3, 2, 4), (5, 24)),
    fc("flatten_rows", (2, 3, 4), (5, 4)),
    fc("flatten_across_dims", (2, 3, 4), (5, 6), bias=False),
    fc("keep_num_dims", (2, 3, 4), (5, 4), keep_num_dims=True),
    *[fc(f"act_{name}", (2, 6), (4, 6), fused_activation_function=code)
      for name, code in ACTS.items()],
    case("fully_connected_weights_as_input", "FULLY_CONNECTED",
         [In((2, 6)), In((4, 6)), In((4,))], [f32(2, 6), f32(4, 6), f32(4)], **TOL),

    bmm("2d", (3, 4), (4, 5)),
    bmm("3d", (2, 3, 4), (2, 4, 5)),
    bmm("adj_x", (2, 4, 3), (2, 4, 5), adj_x=True),
    bmm("adj_y", (2, 3, 4), (2, 5, 4), adj_y=True),
    bmm("adj_both", (2, 4, 3), (2, 5, 4), adj_x=True, adj_y=True),
    bmm("broadcast_batch", (2, 1, 3, 4), (3, 4, 5)),
    bmm("broadcast_both", (2, 1, 3, 4), (1, 3, 4, 2)),
    bmm("rank5", (1, 2, 2, 3, 4), (2, 1, 4, 3)),
    bmm("const_rhs", (2, 3, 4), (4, 5), const_y=True),
]
