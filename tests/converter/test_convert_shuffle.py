"""Transposes through reshapes and slices: ShuffleNet's channel shuffle (Reshape -> Transpose ->
Reshape between NCHW convs) keeps one TRANSPOSE, in NHWC; transposes pass Split, Slice and
Gather; `reshape_through` against numpy."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.converter.pass_layout import reshape_through
from tests.converter.onnx_cases import check, model, node, w

I64 = np.int64


def _shuffle(x: str, out: str, c: int, h: int, groups: int = 2) -> list:
    return [node("Reshape", [x, f"{out}_s5"], [f"{out}_r"]),
            node("Transpose", [f"{out}_r"], [f"{out}_t"], perm=[0, 2, 1, 3, 4]),
            node("Reshape", [f"{out}_t", f"{out}_s4"], [out])], {
        f"{out}_s5": np.array([1, groups, c // groups, h, h], I64),
        f"{out}_s4": np.array([1, c, h, h], I64)}


def _shufflenet_units(units: int, split: str):
    """ShuffleNetV2 stride-1 units: split channels in two, conv one half, concat, shuffle."""
    c, h = 8, 5
    nodes = [node("Conv", ["x", "W0"], ["u0"])]
    inits = {"W0": w(c, 3, 1, 1)}
    for k in range(units):
        x, a, b = f"u{k}", f"a{k}", f"b{k}"
        if split == "split":
            nodes.append(node("Split", [x, f"sizes{k}"], [a, b], axis=1))
            inits[f"sizes{k}"] = np.array([c // 2, c // 2], I64)
        else:
            nodes += [node("Slice", [x, "s0", "s1", "ax"], [a]),
                      node("Slice", [x, "s1", "s2", "ax"], [b])]
            inits.update({"s0": np.array([0], I64), "s1": np.array([c // 2], I64),
                          "s2": np.array([c], I64), "ax": np.array([1], I64)})
        nodes += [node("Conv", [b, f"W{k}a", f"B{k}"], [f"c{k}"]),
                  node("Relu", [f"c{k}"], [f"r{k}"]),
                  node("Conv", [f"r{k}", f"W{k}b"], [f"d{k}"], pads=[1, 1, 1, 1], group=c // 2),
                  node("Concat", [a, f"d{k}"], [f"cat{k}"], axis=1)]
        inits.update({f"W{k}a": w(c // 2, c // 2, 1, 1), f"B{k}": w(c // 2),
                      f"W{k}b": w(c // 2, 1, 3, 3)})
        shuffle, shapes = _shuffle(f"cat{k}", f"u{k + 1}", c, h)
        nodes += shuffle
        inits.update(shapes)
    nodes.append(node("Conv", [f"u{units}", "Wout"], ["y"]))
    inits["Wout"] = w(4, c, 1, 1)
    return model(nodes, [("x", [1, 3, h, h])], ["y"], inits)


@pytest.mark.parametrize("split", ["split", "slice"])
def test_channel_shuffle_keeps_one_transpose(split):
    units = 3
    conversion = check(_shufflenet_units(units, split))
    assert conversion.transposes <= units, conversion.ops_out
    assert conversion.io_layout["inputs"][0]["perm"] == [0, 2, 3, 1]


@pytest.mark.parametrize("h", [4, 16])   # 16: big enough for the kernel's copy per row
def test_lone_channel_shuffle(h):
    """Conv -> shuffle -> Conv: the shuffle's one TRANSPOSE runs on NHWC data."""
    shuffle, shapes = _shuffle("c", "s", 6, h, groups=3)
    proto = model([node("Conv", ["x", "W"], ["c"]), *shuffle,
                   node("Conv", ["s", "W2"], ["y"])], [("x", [1, 2, h, h])], ["y"],
                  {"W": w(6, 2, 1, 1), "W2": w(3, 6, 1, 1), **shapes})
    conversion = check(proto)
    assert conversion.ops_out["TRANSPOSE"] == 1 and conversion.transposes == 1
    sg = conversion.model.subgraphs[0]
    (op,) = [op for op in sg.operators if op.op == "TRANSPOSE"]
    shape = sg.tensors[op.inputs[0]].shape       # channels last, split 3 x 2 (pixels: one dim)
    assert shape[-2:] == (3, 2) and int(np.prod(shape[:-2])) == h * h


def test_gather_of_a_transposed_tensor():
    """Conv -> Gather(channel) -> Relu: the gather reads the NHWC conv output directly."""
    proto = model([node("Conv", ["x", "W"], ["c"]),
                   node("Gather", ["c", "idx"], ["g"], axis=1),
                   node("Relu", ["g"], ["y"])], [("x", [1, 3, 4, 4])], ["y"],
                  {"W": w(5, 3, 1, 1), "idx": np.array([4, 0, 2], I64)})
    conversion = check(proto)
    assert conversion.transposes <= 1      # at most the output's, which the output layout drops


@pytest.mark.parametrize("x_shape,perm,z_shape", [
    ((1, 5, 5, 8), (0, 3, 1, 2), (1, 2, 4, 5, 5)),       # NHWC -> NCHW, then channel split
    ((1, 4, 4, 6), (0, 3, 1, 2), (1, 6, 16)),            # NHWC -> NCHW, then flatten H W
    ((2, 3, 4), (2, 0, 1), (4, 6)),
    ((1, 3, 1, 4), (0, 2, 3, 1), (4, 3)),                # only size-1 dims around
])
def test_reshape_through_matches_numpy(x_shape, perm, z_shape):
    x = np.arange(np.prod(x_shape)).reshape(x_shape)
    new_shape, out_perm = reshape_through(x_shape, perm, z_shape)
    np.testing.assert_array_equal(x.reshape(new_shape).transpose(out_perm),
                                  x.transpose(perm).reshape(z_shape))


@pytest.mark.parametrize("x_shape,perm,z_shape", [
    ((1, 4, 6), (0, 2, 1), (1, 24)),                     # merges dims the transpose swapped
    ((2, 6), (1, 0), (3, 4)),                            # splits across a moved dim
])
def test_reshape_through_refuses(x_shape, perm, z_shape):
    assert reshape_through(x_shape, perm, z_shape) is None
