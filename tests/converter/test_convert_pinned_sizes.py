"""An export that wrote the image size it traced into a Reshape's target (HF MobileViT's patch
unfolding, both torch exporters): its height and width cannot stay dynamic, so they are fixed at
the first sizes the converter tries when the model converts there, else at those sizes scaled to
the element count the target asks for, with one warning naming the node and the dims; the batch
stays dynamic. Where neither converts, one error names the node and the setting that fixes the
sizes."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgelite.converter.convert import Sizes, convert_onnx
from edgelite.converter.errors import ConversionError
from tests.converter.test_convert_dynamic import check_sizes

pytest.importorskip("ai_edge_litert.interpreter",
                    reason="LiteRT (ai-edge-litert) is the oracle: pip install -e '.[dev]'")

NOMINAL = Sizes.LADDERS[0][0]   # the first height and width a conversion tries


def _pinned_model(pixels: int):
    """x [batch, 2, h, w] -> Conv 1x1 -> Reshape to [batch, 2, pixels] (batch computed from
    Shape, the rest a constant: h * w as traced) -> ReduceMean over the pixels."""
    rng = np.random.default_rng(0)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 2, "h", "w"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 2])
    inits = [numpy_helper.from_array(rng.standard_normal((2, 2, 1, 1)).astype(np.float32), "w"),
             numpy_helper.from_array(np.array([0], np.int64), "zero"),
             numpy_helper.from_array(np.array([2, pixels], np.int64), "pixels")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[1, 1]),
             helper.make_node("Shape", ["c"], ["shape"]),
             helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
             helper.make_node("Concat", ["batch", "pixels"], ["target"], axis=0),
             helper.make_node("Reshape", ["c", "target"], ["flat"], name="unfold"),
             helper.make_node("ReduceMean", ["flat"], ["y"], axes=[2], keepdims=0)]
    proto = helper.make_model(helper.make_graph(nodes, "pinned", [x], [y], inits),
                              opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8
    onnx.checker.check_model(proto, full_check=True)
    return proto


@pytest.mark.parametrize("side", [NOMINAL, 48])
def test_sizes_a_reshape_pins_are_fixed_with_one_warning_and_the_batch_stays_dynamic(side):
    proto = _pinned_model(side * side)
    conversion = convert_onnx(proto)
    assert len(conversion.warnings) == 1, conversion.warnings
    warning = conversion.warnings[0]
    assert "'unfold'" in warning and f"fixed at x[2]={side}, x[3]={side}:" in warning, warning
    assert "x[0]" not in warning   # the batch is not fixed
    sg = conversion.model.subgraphs[0]
    x = sg.tensors[sg.inputs[0]]
    layout = conversion.io_layout["inputs"][0]["perm"]
    assert [x.shape_signature[layout.index(a)] for a in range(4)] == [-1, 2, side, side]
    check_sizes(proto, conversion, [[(1, 2, side, side)], [(3, 2, side, side)]])


def test_sizes_a_reshape_pins_out_of_reach_are_one_error_naming_the_node_and_the_setting():
    proto = _pinned_model(1000)   # no square image: h and w are not determinable
    with pytest.raises(ConversionError) as e:
        convert_onnx(proto)
    text = str(e.value)
    assert "'unfold'" in text and "input_shapes={'x': [-1, 2, h, w]}" in text, text
    assert text.count("cannot reshape") <= 2, text   # one error, not one per size tried
