"""Parameters that set an output shape (axes, sizes, paddings, multiples, k, ...) given as model
inputs instead of constants: the kernels become dynamic (`node.dynamic`), and edgelite matches
LiteRT on consecutive invokes with different parameter values (new shapes each time)."""
from __future__ import annotations

import numpy as np
import pytest

from tests.interpreter.cases_shape_ops import versioned
from tests.opmodel import In, Out, assert_close, case, run_steps

litert = pytest.importorskip("ai_edge_litert.interpreter",
                             reason="LiteRT (ai-edge-litert) is the oracle: "
                                    "pip install -e '.[dev]'")
from edgelite import interpreter as edgelite_interpreter  # noqa: E402

rng = np.random.default_rng(3)
x234 = rng.standard_normal((2, 3, 4)).astype(np.float32)
img = rng.standard_normal((1, 3, 4, 2)).astype(np.float32)


def i32(*values):
    return np.array(values, np.int32)


def steps(*params):
    """Feeds of consecutive invokes: x234 with each parameter value."""
    return [[x234, p] for p in params]


# id -> (op, inputs, options, feeds per step, outputs)
CASES = {
    "sum_axes": ("SUM", [In((2, 3, 4)), In((2,), "int32")], dict(keep_dims=False),
                 steps(i32(0, 2), i32(-1, 1)), None),
    "sum_axes_keep_dims": ("SUM", [In((2, 3, 4)), In((1,), "int32")], dict(keep_dims=True),
                           steps(i32(1), i32(2)), None),
    "mean_axes": ("MEAN", [In((2, 3, 4)), In((2,), "int32")], dict(keep_dims=True),
                  steps(i32(0, 1), i32(2, 2)), None),
    "reduce_max_axes": ("REDUCE_MAX", [In((2, 3, 4)), In((1,), "int32")], dict(keep_dims=False),
                        steps(i32(0), i32(-1)), None),
    "reduce_prod_axes": ("REDUCE_PROD", [In((2, 3, 4)), In((2,), "int32")], {},
                         steps(i32(1, 2), i32(0, 1)), None),
    "expand_dims_axis": ("EXPAND_DIMS", [In((2, 3, 4)), In((1,), "int32")], {},
                         steps(i32(0), i32(-1)), None),
    "broadcast_to_shape": ("BROADCAST_TO", [In((3, 1)), In((3,), "int32")], {},
                           [[x234[0, :, :1], i32(2, 3, 5)], [x234[0, :, :1], i32(1, 3, 2)]],
                           None),
    "fill_dims": ("FILL", [In((2,), "int32"), np.float32(1.5)], {},
                  [[i32(2, 3)], [i32(4, 1)]], None),
    "range_int32": ("RANGE", [In((), "int32"), In((), "int32"), In((), "int32")], {},
                    [[i32(1)[0], i32(9)[0], i32(3)[0]], [i32(5)[0], i32(-2)[0], i32(-2)[0]]],
                    [Out((), "int32")]),
    "range_float": ("RANGE", [In(()), In(()), In(())], {},
                    [[np.float32(0.5), np.float32(3.0), np.float32(0.7)],
                     [np.float32(-1.0), np.float32(1.0), np.float32(0.25)]], None),
    "slice_size": ("SLICE", [In((2, 3, 4)), i32(0, 1, 1), In((3,), "int32")], {},
                   steps(i32(2, 1, 3), i32(1, -1, 2)), None),
    "slice_begin_to_end": ("SLICE", [In((2, 3, 4)), In((3,), "int32"), i32(1, -1, -1)], {},
                           steps(i32(0, 1, 2), i32(1, 0, 0)), None),
    "strided_slice_end": ("STRIDED_SLICE", [In((2, 3, 4)), i32(0, 0, 0), In((3,), "int32"),
                                            i32(1, 1, 2)], {},
                          steps(i32(2, 2, 4), i32(1, 3, 3)), None),
    "strided_slice_all": ("STRIDED_SLICE", [In((2, 3, 4)), In((3,), "int32"),
                                            In((3,), "int32"), In((3,), "int32")],
                          dict(shrink_axis_mask=1),
                          [[x234, i32(1, 2, 3), i32(2, 0, 0), i32(1, -1, -2)],
                           [x234, i32(0, 0, 0), i32(1, 3, 4), i32(1, 1, 3)]], None),
    "topk_v2_k": ("TOPK_V2", [In((2, 3, 4)), In((), "int32")], {},
                  steps(i32(2)[0], i32(4)[0]), [Out(), Out((), "int32")]),
    "pad_paddings": ("PAD", [In((2, 3, 4)), In((3, 2), "int32")], {},
                     steps(np.int32([[0, 1], [2, 0], [1, 1]]), np.int32([[1, 1], [0, 0], [0, 3]])),
                     None),
    "padv2_paddings": ("PADV2", [In((2, 3, 4)), In((3, 2), "int32"), np.float32(-2.5)], {},
                       steps(np.int32([[0, 1], [2, 0], [1, 1]]),
                             np.int32([[1, 0], [0, 1], [0, 0]])), None),
    "mirror_pad_paddings": ("MIRROR_PAD", [In((2, 3, 4)), In((3, 2), "int32")], dict(mode=0),
                            steps(np.int32([[1, 0], [0, 2], [3, 2]]),
                                  np.int32([[0, 1], [1, 1], [0, 0]])), None),
    "tile_multiples": ("TILE", [In((2, 3, 4)), In((3,), "int32")], {},
                       steps(i32(1, 2, 3), i32(2, 1, 1)), None),
    "split_v_sizes": ("SPLIT_V", [In((2, 3, 4)), In((2,), "int32"), i32(2)], dict(num_splits=2),
                      steps(i32(1, 3), i32(3, -1)), [Out(), Out()]),
    "resize_bilinear_size": ("RESIZE_BILINEAR", [In((1, 3, 4, 2)), In((2,), "int32")],
                             dict(half_pixel_centers=True),
                             [[img, i32(5, 7)], [img, i32(2, 3)]], None),
    "resize_nearest_size": ("RESIZE_NEAREST_NEIGHBOR", [In((1, 3, 4, 2)), In((2,), "int32")], {},
                            [[img, i32(6, 9)], [img, i32(3, 2)]], None),
}


@pytest.mark.parametrize("name", list(CASES))
def test_runtime_parameter_like_litert(name):
    op, inputs, options, feeds, outputs = CASES[name]
    c = case(name, op, inputs, feeds[0], options=options, outputs=outputs)
    model = versioned(c, 2).model if op == "BROADCAST_TO" else c.model
    ours = run_steps(edgelite_interpreter, model, feeds)
    theirs = run_steps(litert, model, feeds)
    for a, b in zip(ours, theirs):
        assert_close(a, b)
    shapes = {tuple(a[0].shape) for a in ours}
    assert len(shapes) == len(feeds), f"the parameter should change the shape: {shapes}"
