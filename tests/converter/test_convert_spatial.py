"""Spatial ops: ConvTranspose, Resize, DepthToSpace and SpaceToDepth as TFLite has them, and the
pools and transposed convolutions TFLite's 2-D ops cannot run as they are: dilated and 3-D pools
and MaxPool's Indices (one strided slice per kernel tap), 1-D, grouped and dilated ConvTranspose.
Against onnxruntime, through edgelite and LiteRT."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from tests.converter.onnx_cases import F, check, model, node, w

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


# -- ConvTranspose, Resize, DepthToSpace, SpaceToDepth as TFLite has them --------------------------

CONV_TRANSPOSES_2D = {
    "s2_k3_p1_op1": dict(strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1]),
    "s2_k3_valid": dict(strides=[2, 2]),
    "s1_k3_p1": dict(pads=[1, 1, 1, 1]),
    "s2_output_shape": dict(strides=[2, 2], output_shape=[10, 12]),
    "s2_same_upper": dict(strides=[2, 2], auto_pad="SAME_UPPER"),
}


@pytest.mark.parametrize("case", list(CONV_TRANSPOSES_2D))
def test_conv_transpose(case):
    proto = model([node("ConvTranspose", ["x", "W", "B"], ["y"], **CONV_TRANSPOSES_2D[case])],
                  [("x", [1, 4, 5, 6])], ["y"], {"W": w(4, 3, 3, 3), "B": w(3)})
    assert check(proto).transposes == 0


RESIZES = {
    "nearest_asym_floor_x2": dict(mode="nearest", coordinate_transformation_mode="asymmetric",
                                  nearest_mode="floor"),
    "nearest_default_x2": dict(mode="nearest"),
    "nearest_half_pixel_ceil": dict(mode="nearest", nearest_mode="round_prefer_ceil"),
    "linear_half_pixel": dict(mode="linear"),
    "linear_pytorch": dict(mode="linear", coordinate_transformation_mode="pytorch_half_pixel"),
    "linear_align_corners": dict(mode="linear", coordinate_transformation_mode="align_corners"),
    "linear_asymmetric": dict(mode="linear", coordinate_transformation_mode="asymmetric"),
}


@pytest.mark.parametrize("case", list(RESIZES))
def test_resize_scales(case):
    proto = model([node("Resize", ["x", "", "scales"], ["y"], **RESIZES[case])],
                  [("x", [1, 3, 4, 5])], ["y"], {"scales": np.array([1, 1, 2, 2], F)})
    assert check(proto).transposes == 0


def test_resize_sizes_after_conv():
    proto = model([node("Conv", ["x", "W"], ["c"]),
                   node("Resize", ["c", "", "", "sizes"], ["y"], mode="linear")],
                  [("x", [1, 3, 4, 5])], ["y"],
                  {"W": w(2, 3, 1, 1), "sizes": np.array([1, 2, 7, 9], np.int64)})
    assert check(proto).transposes == 0


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space(mode):
    proto = model([node("DepthToSpace", ["x"], ["y"], blocksize=2, mode=mode)],
                  [("x", [1, 8, 3, 4])], ["y"])
    check(proto)


def test_space_to_depth():
    proto = model([node("SpaceToDepth", ["x"], ["y"], blocksize=2)], [("x", [1, 3, 4, 6])],
                  ["y"])
    check(proto)


def test_space_to_depth_crd():
    proto = model([node("SpaceToDepth", ["x"], ["y"], blocksize=2, mode="CRD")],
                  [("x", [1, 3, 4, 6])], ["y"], opset=onnx.defs.onnx_opset_version())
    check(proto)


def test_conv_transpose_output_shape_beyond_full():
    proto = model([node("ConvTranspose", ["x", "W"], ["y"], strides=[3, 2],
                        output_shape=[10, 8])],
                  [("x", [1, 1, 3, 3])], ["y"], {"W": w(1, 2, 3, 3)})
    check(proto)
