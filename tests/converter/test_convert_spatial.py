"""Pools and transposed convolutions TFLite's 2-D ops cannot run as they are: dilated and 3-D pools
and MaxPool's Indices (one strided slice per kernel tap), 1-D, grouped and dilated ConvTranspose.
Against onnxruntime, through edgelite and LiteRT."""
from __future__ import annotations

import numpy as np
import pytest

from tests.converter.test_convert_ops import check, model, node, w

POOLS = {
    "max_2d_dilated": ("MaxPool", [1, 2, 7, 8], dict(kernel_shape=[2, 3], dilations=[2, 2])),
    "max_3d": ("MaxPool", [1, 2, 5, 6, 4], dict(kernel_shape=[2, 2, 2], strides=[2, 1, 2])),
    "max_3d_dilated_ceil": ("MaxPool", [1, 1, 9, 9, 9], dict(kernel_shape=[3, 3, 3],
                                                              dilations=[2, 2, 2],
                                                              strides=[2, 2, 2], ceil_mode=1)),
    "avg_2d_dilated_pads": ("AveragePool", [1, 2, 7, 8], dict(kernel_shape=[3, 3],
                                                               dilations=[2, 1],
                                                               pads=[1, 1, 2, 1])),
    "avg_3d_include_pad": ("AveragePool", [1, 2, 4, 5, 6], dict(kernel_shape=[3, 3, 3],
                                                                 pads=[1, 1, 1, 1, 1, 1],
                                                                 count_include_pad=1)),
    "avg_3d_ceil": ("AveragePool", [1, 1, 6, 7, 5], dict(kernel_shape=[2, 3, 2],
                                                          strides=[2, 2, 2], ceil_mode=1)),
}


@pytest.mark.parametrize("case", list(POOLS))
def test_pool_by_taps(case):
    op, shape, attrs = POOLS[case]
    conversion = check(model([node(op, ["x"], ["y"], **attrs)], [("x", shape)], ["y"], opset=19))
    assert "STRIDED_SLICE" in conversion.ops_out


@pytest.mark.parametrize("storage_order", [0, 1])
def test_max_pool_indices(storage_order):
    proto = model([node("MaxPool", ["x"], ["y", "i"], kernel_shape=[3, 3], strides=[2, 2],
                        pads=[1, 1, 1, 1], storage_order=storage_order)],
                  [("x", [2, 3, 6, 5])], ["y", ("i", np.int64)])
    check(proto)


CONV_TRANSPOSES = {
    "1d": ([1, 3, 7], (3, 2, 4), dict(strides=[2], pads=[1, 2])),
    "group_2": ([1, 4, 5, 6], (4, 3, 3, 3), dict(group=2, strides=[2, 1])),
    "dilated": ([1, 2, 5, 5], (2, 3, 3, 2), dict(dilations=[2, 3], pads=[1, 0, 1, 2])),
    "1d_group_dilated": ([2, 4, 6], (4, 1, 3), dict(group=4, dilations=[2])),
}


@pytest.mark.parametrize("case", list(CONV_TRANSPOSES))
def test_conv_transpose_forms(case):
    x_shape, w_shape, attrs = CONV_TRANSPOSES[case]
    group = attrs.get("group", 1)
    proto = model([node("ConvTranspose", ["x", "W", "B"], ["y"], **attrs)], [("x", x_shape)],
                  ["y"], {"W": w(*w_shape), "B": w(w_shape[1] * group)})
    check(proto)


@pytest.mark.parametrize("attrs", [dict(pads=[1, 0, 1, 1, 2, 1]), dict(strides=[2, 1, 2]),
                                   dict(group=2, dilations=[1, 2, 1])])
def test_conv_3d(attrs):
    group = attrs.get("group", 1)
    proto = model([node("Conv", ["x", "W", "B"], ["y"], **attrs)], [("x", [1, 4, 5, 6, 7])],
                  ["y"], {"W": w(6, 4 // group, 3, 2, 3), "B": w(6)})
    conversion = check(proto)
    assert "CONV_3D" in conversion.ops_out and conversion.transposes == 0


@pytest.mark.parametrize("attrs", [dict(strides=[2, 1, 2], pads=[1, 0, 0, 0, 1, 1]),
                                   dict(output_padding=[1, 0, 1], strides=[2, 2, 2])])
def test_conv_transpose_3d(attrs):
    proto = model([node("ConvTranspose", ["x", "W", "B"], ["y"], **attrs)],
                  [("x", [1, 3, 3, 4, 2])], ["y"], {"W": w(3, 2, 2, 3, 2), "B": w(2)})
    assert "CONV_3D_TRANSPOSE" in check(proto).ops_out
