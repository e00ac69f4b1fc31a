"""One allocation rule (issues 12 and 19): the converter folds constants with the interpreter's
kernels through the interpreter's budget of bytes actually allocated (interpreter/budget.py;
one budget per conversion: 256 MiB + 64 bytes per byte of the ONNX file, EDGELITE_MEMORY_LIMIT).
A fold past it is refused before it allocates, naming the ONNX node, the op and the size, also
where converter/guards.py cannot see the size (a shape computed from constants) or where each
output passes the guards' 1 GiB per tensor and their sum does not fit; a real model's folding
(DeepLabV3's dilated ASPP convolutions) fits."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgelite.converter.convert import convert_onnx
from edgelite.converter.errors import ConversionError
from tests.converter.onnx_cases import check

F, I64 = TensorProto.FLOAT, TensorProto.INT64
vi = helper.make_tensor_value_info


def _model(nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _const(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


def tile_of_computed_repeats(rows: int):
    """Tile of a constant [1, 1024] by repeats Mul([1, 1], [rows, 1]): the guards see no
    constant repeats (they are computed), the fold makes [rows, 1024] float32."""
    nodes = [helper.make_node("Mul", ["r0", "r1"], ["reps"], name="reps"),
             helper.make_node("Tile", ["c", "reps"], ["t"], name="big_tile"),
             helper.make_node("Add", ["x", "t"], ["y"], name="add")]
    return _model(nodes, [vi("x", F, [1, 1024])], [vi("y", F, [None, 1024])],
                  [_const("c", np.ones([1, 1024], np.float32)),
                   _const("r0", np.array([1, 1], np.int64)),
                   _const("r1", np.array([rows, 1], np.int64))])


def constant_chain(elements: int, links: int):
    """ConstantOfShape [elements] float32, then `links` Adds of it to itself: every output
    under the guards' 1 GiB, all of them together past the budget."""
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["c0"], name="fill",
                              value=numpy_helper.from_array(np.ones([1], np.float32)))]
    for k in range(links):
        nodes.append(helper.make_node("Add", [f"c{k}", f"c{k}"], [f"c{k + 1}"], name=f"add{k}"))
    nodes.append(helper.make_node("Add", ["x", f"c{links}"], ["y"], name="use"))
    return _model(nodes, [vi("x", F, [1])], [vi("y", F, [None])],
                  [_const("shape", np.array([elements], np.int64))])


def test_a_fold_of_a_computed_shape_past_the_budget_is_refused(monkeypatch):
    monkeypatch.setenv("EDGELITE_MEMORY_LIMIT", "16M")
    with pytest.raises(ConversionError, match=r"big_tile.*\(TILE\): folding output 0 "
                                              r"\[8192, 1024\] of float32 needs 32\.0 MiB "
                                              r".*memory budget of 16\.0 MiB") as info:
        convert_onnx(tile_of_computed_repeats(8192))
    assert "Error:" not in str(info.value)
    monkeypatch.setenv("EDGELITE_MEMORY_LIMIT", "64M")     # the same model fits a larger one
    convert_onnx(tile_of_computed_repeats(8192))


def test_folds_that_each_fit_are_counted_together(monkeypatch):
    """A ConstantOfShape of 8 MiB and Adds of it: each fits a 32 MiB budget, and the fourth
    value with the three before it does not; it is refused, naming its node."""
    monkeypatch.setenv("EDGELITE_MEMORY_LIMIT", "32M")
    with pytest.raises(ConversionError, match=r"add2.*\(ADD\): folding output 0 \[2097152\] of "
                                              r"float32 needs 8\.0 MiB .*with the 24\.0 MiB "
                                              r"already allocated that passes this model's "
                                              r"memory budget of 32\.0 MiB"):
        convert_onnx(constant_chain(1 << 21, 3))
    monkeypatch.setenv("EDGELITE_MEMORY_LIMIT", "40M")
    convert_onnx(constant_chain(1 << 21, 3))


def test_a_conversion_has_the_interpreter_default_budget(monkeypatch):
    """Without the variable, a conversion's budget is the interpreter's rule for a model of the
    ONNX file's size and its inputs (256 MiB + 64 bytes per byte, at most the machine's), and
    every fold and constant of the conversion is held in it."""
    from edgelite.interpreter import budget
    monkeypatch.delenv("EDGELITE_MEMORY_LIMIT", raising=False)
    seen = []
    fold = budget.fold

    def spy(node, run, key=None):
        seen.append(budget.of(node))
        return fold(node, run, key)
    monkeypatch.setattr(budget, "fold", spy)
    proto = constant_chain(1000, 3)
    convert_onnx(proto)
    assert len(seen) == 3 and all(b is seen[0] for b in seen)
    assert seen[0].limit == budget.default_limit(proto.ByteSize(), 4)   # x: 1 float32
    assert seen[0].held["folded"] >= 4 * 4000      # the ConstantOfShape and three Adds
    assert budget.conversion_owner() is None       # no budget outside a conversion


def test_a_fold_within_the_budget_converts_and_matches():
    check(constant_chain(1000, 3), {"x": np.float32([0.5])})
    check(tile_of_computed_repeats(3), {"x": np.linspace(-1, 1, 1024, dtype=np.float32)
                                        .reshape(1, 1024)})


def test_a_large_input_counts_as_in_the_interpreter():
    """A 3x3 convolution of a 2048x2048 image with 324 bytes of weights: its work buffers
    (453 MiB of im2col patches) pass the budget of a file of its size only with the input's
    bytes counted, as the interpreter counts them (64 bytes per byte of model and inputs)."""
    w = _const("w", np.ones([4, 3, 3, 3], np.float32))
    proto = _model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[1] * 4)],
                   [vi("x", F, [1, 3, 2048, 2048])], [vi("y", F, [1, 4, 2048, 2048])], [w])
    assert convert_onnx(proto).ops_out == {"CONV_2D": 1}


def test_deeplab_aspp_dilated_convolutions_convert_and_match():
    """DeepLabV3's ASPP head on a 65x65 feature map: 3x3 convolutions at dilations 12, 24 and 36
    (padding = dilation), a 1x1 branch and image pooling, concatenated and projected."""
    rng = np.random.default_rng(36)
    cin, cout = 32, 16

    def w(name, *shape):
        return _const(name, (rng.standard_normal(shape) * 0.1).astype(np.float32))

    nodes = [helper.make_node("Conv", ["x", "w1"], ["b1"], name="aspp_1x1")]
    inits = [w("w1", cout, cin, 1, 1)]
    for d in (12, 24, 36):
        nodes.append(helper.make_node("Conv", ["x", f"w{d}", f"bias{d}"], [f"b{d}"],
                                      name=f"aspp_d{d}", kernel_shape=[3, 3],
                                      dilations=[d, d], pads=[d, d, d, d]))
        inits += [w(f"w{d}", cout, cin, 3, 3), w(f"bias{d}", cout)]
    nodes += [helper.make_node("GlobalAveragePool", ["x"], ["gap"], name="pool"),
              helper.make_node("Conv", ["gap", "wp"], ["gp"], name="pool_conv"),
              helper.make_node("Expand", ["gp", "size"], ["b_pool"], name="upsample"),
              helper.make_node("Concat", ["b1", "b12", "b24", "b36", "b_pool"], ["cat"],
                               name="cat", axis=1),
              helper.make_node("Relu", ["cat"], ["r"], name="relu"),
              helper.make_node("Conv", ["r", "wproj"], ["y"], name="project")]
    inits += [w("wp", cout, cin, 1, 1), _const("size", np.array([1, cout, 65, 65], np.int64)),
              w("wproj", cout, 5 * cout, 1, 1)]
    proto = _model(nodes, [vi("x", F, [1, cin, 65, 65])], [vi("y", F, [None] * 4)],
                   inits)
    x = rng.standard_normal((1, cin, 65, 65)).astype(np.float32)
    check(proto, {"x": x})
