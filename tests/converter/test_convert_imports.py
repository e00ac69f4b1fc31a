"""How many imports a conversion with dynamic dims does (converter/convert.py): each import of a
large model costs as much as its graph, so none is made twice. Counted, never timed."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgelite.converter import convert
from edgelite.converter.convert import convert_onnx


def _class_token_model(expand: bool = True, through_where: bool = False):
    """ViT's shape as torchvision exports it with a dynamic batch: a class token expanded to the
    batch (a constant that follows it, once folded) and a transpose that moves the batch (a
    RESHAPE at batch 1, so the folded graphs at batch 1 and 2 differ in structure). Without
    `expand` the token is concatenated as an input's slice (nothing folded follows the batch).
    `through_where`: the expanded shape as torchscript writes expand(n, -1, -1), its -1s
    replaced by a Where (ONNX's shape inference leaves that shape open)."""
    rng = np.random.default_rng(0)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [5, "batch", 8])
    inits = [numpy_helper.from_array(rng.standard_normal((1, 1, 8)).astype(np.float32), "cls"),
             numpy_helper.from_array(np.array([0], np.int64), "zero"),
             numpy_helper.from_array(np.array([1], np.int64), "one"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus"),
             numpy_helper.from_array(np.array([1, 1, 1], np.int64), "ones"),
             numpy_helper.from_array(np.array([1, 8], np.int64), "rest"),
             numpy_helper.from_array(rng.standard_normal((8, 8)).astype(np.float32), "w")]
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
             helper.make_node("Concat", ["batch", "rest"], ["cls_shape"], axis=0),
             *([helper.make_node("Concat", ["batch", "minus", "minus"], ["raw"], axis=0),
                helper.make_node("Equal", ["raw", "minus"], ["open"]),
                helper.make_node("Where", ["open", "ones", "raw"], ["cls_shape_where"])]
               if through_where else []),
             helper.make_node("Expand", ["cls", "cls_shape_where" if through_where else
                                         "cls_shape"], ["tokens"]) if expand else
             helper.make_node("Slice", ["x", "zero", "one", "one"], ["tokens"]),
             helper.make_node("Concat", ["tokens", "x"], ["seq"], axis=1),
             helper.make_node("Transpose", ["seq"], ["seq_first"], perm=[1, 0, 2]),
             helper.make_node("MatMul", ["seq_first", "w"], ["y"])]
    proto = helper.make_model(helper.make_graph(nodes, "class_token", [x], [y], inits),
                              opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8
    onnx.checker.check_model(proto, full_check=True)
    return proto


def _counting(monkeypatch) -> list:
    sizes = []
    real = convert.import_onnx

    def counting(proto, input_shapes=None, dynamic_size=1, loops=False, shadow_size=None,
                 **kw):
        sizes.append((dynamic_size("x", 0), None if shadow_size is None else
                      shadow_size("x", 0)))
        return real(proto, input_shapes, dynamic_size, loops, shadow_size, **kw)

    monkeypatch.setattr(convert, "import_onnx", counting)
    return sizes


@pytest.mark.parametrize("through_where", [False, True])
def test_a_batch_that_a_folded_constant_follows_is_imported_for_the_shadow_only(monkeypatch,
                                                                               through_where):
    """The class token expanded to the batch (ONNX's shape inference says so before any import)
    is a constant that differs at any two sizes when folded: the conversions at sizes 2 and 3
    with computed shapes (shadows 3 and 4) are the only imports."""
    proto = _class_token_model(through_where=through_where)
    sizes = _counting(monkeypatch)
    conversion = convert_onnx(proto)
    assert sizes == [(2, 3), (3, 4)], sizes
    assert not conversion.warnings
    sg = conversion.model.subgraphs[0]
    assert sg.tensors[sg.inputs[0]].shape_signature[0] == -1


def test_a_batch_moved_by_a_transpose_imports_each_size_once(monkeypatch):
    """Folded at batch 1 and 2 the graphs differ in structure (the transpose of a size-1 dim
    is a RESHAPE), at 2 and 3 they do not: the size-2 graph compared with size 1 is the one
    compared with size 3, not a second import of it."""
    proto = _class_token_model(expand=False)
    alone = convert_onnx(proto)
    sizes = _counting(monkeypatch)
    conversion = convert_onnx(proto)
    assert sizes == [(1, None), (2, None), (3, None)], sizes
    assert conversion.content == alone.content and not conversion.warnings
    sg = conversion.model.subgraphs[0]
    assert sg.tensors[sg.inputs[0]].shape_signature[0] == -1
