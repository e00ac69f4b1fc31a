"""Dynamic dims anywhere (issue 12): models whose height, width, length or batch the ONNX file
leaves open convert with no input shape given, keep those dims as -1 in `shape_signature`, and
after `resize_tensor_input` + `allocate_tensors` match onnxruntime at three sizes, in edgelite
and in stock LiteRT."""
from __future__ import annotations

import numpy as np
import pytest

from edgelite.converter import TFLiteConverter
from edgelite.converter.check import quiet_litert
from tests.converter.dynamic_models import MODELS
from tests.oracles import onnxruntime_run

litert = pytest.importorskip("ai_edge_litert.interpreter")
TOLERANCE = 1e-4   # x max|ref|


def convert(proto, shapes=None):
    converter = TFLiteConverter.from_onnx(proto, shapes)
    converter.convert()
    return converter.last_conversion


def run_at(content: bytes, feeds: list, runtime: str) -> list:
    """Allocate at the file's shapes, resize the inputs to the feeds', allocate again, run."""
    if runtime == "edgelite":
        from edgelite.interpreter import Interpreter
    else:
        Interpreter = litert.Interpreter
    with quiet_litert():
        it = Interpreter(model_content=content)
        it.allocate_tensors()
        for detail, x in zip(it.get_input_details(), feeds):
            it.resize_tensor_input(detail["index"], x.shape)
        it.allocate_tensors()
        for detail, x in zip(it.get_input_details(), feeds):
            it.set_tensor(detail["index"], x)
        it.invoke()
        return [np.array(it.get_tensor(d["index"])) for d in it.get_output_details()]


def feeds_for(proto, shapes, seed: int) -> list:
    rng = np.random.default_rng(seed)
    init = {i.name for i in proto.graph.initializer}
    feeds = []
    for vi, shape in zip([i for i in proto.graph.input if i.name not in init], shapes):
        if vi.type.tensor_type.elem_type == 7:   # int64 ids
            feeds.append(rng.integers(0, 50, shape).astype(np.int64))
        else:
            feeds.append(rng.standard_normal(shape).astype(np.float32))
    return feeds


def check_sizes(proto, conversion, sizes) -> None:
    init = {i.name for i in proto.graph.initializer}
    names = [i.name for i in proto.graph.input if i.name not in init]
    layout = conversion.io_layout
    for seed, shapes in enumerate(sizes):
        feeds = feeds_for(proto, shapes, seed)
        refs = onnxruntime_run(proto, dict(zip(names, feeds)))
        tflite_feeds = [np.ascontiguousarray(np.transpose(x, e["perm"]))
                        for x, e in zip(feeds, layout["inputs"])]
        for runtime in ("edgelite", "litert"):
            outs = run_at(conversion.content, tflite_feeds, runtime)
            for y, ref, e in zip(outs, refs, layout["outputs"]):
                y = np.transpose(y, np.argsort(e["perm"]))
                assert y.shape == ref.shape, (runtime, shapes)
                err = np.abs(y.astype(np.float64) - ref).max() / max(np.abs(ref).max(), 1e-30)
                assert err <= TOLERANCE, (runtime, shapes, err)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_dynamic_model(name):
    proto, sizes = MODELS[name]()
    conversion = convert(proto)
    assert not conversion.warnings
    sg = conversion.model.subgraphs[0]
    for spec, t in zip(proto.graph.input, sg.inputs):
        signature = sg.tensors[t].shape_signature
        open_dims = sum(not d.HasField("dim_value") for d in spec.type.tensor_type.shape.dim)
        assert signature is not None and list(signature).count(-1) == open_dims
    check_sizes(proto, conversion, sizes)


@pytest.mark.parametrize("name", ["text_detector", "text_recognizer", "mel_frontend"])
def test_convnet_keeps_no_transposes(name):
    """The layout work still leaves no TRANSPOSE in a convnet whose size is dynamic (a SHAPE
    reads the channels-last tensor; a reshape to a sequence that drops a size-1 dim is a
    SQUEEZE of it), and an image input becomes channels-last."""
    proto, _ = MODELS[name]()
    conversion = convert(proto)
    assert conversion.transposes == 0
    if name != "mel_frontend":
        assert conversion.io_layout["inputs"][0]["perm"] == [0, 2, 3, 1]


def test_fixed_shapes_fold_everything():
    """With every dim given, nothing of the shape arithmetic stays in the graph."""
    proto, sizes = MODELS["attention_encoder"]()
    conversion = convert(proto, {"ids": sizes[1][0]})
    assert "SHAPE" not in conversion.ops_out
    sg = conversion.model.subgraphs[0]
    assert all(t.shape_signature is None or -1 not in t.shape_signature for t in sg.tensors)


def test_batch_only_graph_is_the_folded_one():
    """A dynamic batch alone converts as before: shapes folded, -1 in the RESHAPE targets."""
    proto, _ = MODELS["text_recognizer"]()
    conversion = convert(proto, {"image": (-1, 3, 32, 100)})
    assert "SHAPE" not in conversion.ops_out
    sg = conversion.model.subgraphs[0]
    assert sg.tensors[sg.inputs[0]].shape_signature[0] == -1
    check_sizes(proto, conversion, [[(1, 3, 32, 100)], [(3, 3, 32, 100)], [(2, 3, 32, 100)]])


def test_input_shape_fixes_one_dim_and_keeps_the_other():
    proto, _ = MODELS["text_recognizer"]()
    conversion = convert(proto, {"image": (1, 3, 32, -1)})
    sg = conversion.model.subgraphs[0]
    signature = sg.tensors[sg.inputs[0]].shape_signature
    assert list(signature).count(-1) == 1
    check_sizes(proto, conversion, [[(1, 3, 32, 64)], [(1, 3, 32, 200)], [(1, 3, 32, 100)]])


@pytest.mark.parametrize("name, sizes", [
    ("ppocr_cls", [[(1, 3, 48, 192)], [(2, 3, 64, 100)], [(1, 3, 80, 320)]]),
    ("silero_vad_seq", [[(1, 576), (1, 1, 128), (1, 1, 128)],
                        [(4, 576), (1, 1, 128), (1, 1, 128)],
                        [(9, 576), (1, 1, 128), (1, 1, 128)]]),
])
def test_shared_model_as_shipped(models_dir, name, sizes):
    """The shared ONNX models with open dims convert with no --input-shape."""
    import onnx

    proto = onnx.load(str(models_dir / f"{name}.onnx"))
    conversion = convert(proto)
    assert not conversion.warnings
    check_sizes(proto, conversion, sizes)


def test_int8_keeps_dynamic_dims():
    """Full-int8 quantization of a model with open dims: calibrated on samples of their real
    size (the interpreter resized to each), the file keeps -1 and equals LiteRT's reference
    kernels bit for bit at two sizes."""
    from edgelite.converter import Optimize

    proto, sizes = MODELS["text_detector"]()
    rng = np.random.default_rng(3)
    converter = TFLiteConverter.from_onnx(proto)
    converter.optimizations = [Optimize.DEFAULT]
    converter.representative_dataset = lambda: (
        [rng.uniform(-1, 1, shape).astype(np.float32) for shape in size] for size in sizes)
    content = converter.convert()
    from edgelite.interpreter import Interpreter, OpResolverType
    detail = Interpreter(model_content=content).get_input_details()[0]
    assert list(detail["shape_signature"]) == [1, -1, -1, 3]
    for shape in ((1, 64, 96, 3), (1, 32, 160, 3)):
        x = rng.uniform(-1, 1, shape).astype(np.float32)
        outs = []
        for make in (lambda: Interpreter(
                model_content=content, experimental_op_resolver_type=OpResolverType.BUILTIN_REF),
                lambda: litert.Interpreter(
                model_content=content,
                experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF)):
            with quiet_litert():
                it = make()
                it.allocate_tensors()
                index = it.get_input_details()[0]["index"]
                it.resize_tensor_input(index, list(shape))
                it.allocate_tensors()
                it.set_tensor(index, x)
                it.invoke()
                outs.append(np.array(it.get_tensor(it.get_output_details()[0]["index"])))
        assert outs[0].shape == (1,) + shape[1:3] + (1,)
        np.testing.assert_array_equal(outs[0], outs[1])


def _batch_model(reshape_to, stale_value_info: bool):
    """x [batch, 4, 6] -> Relu -> Reshape(reshape_to) -> y, as torch's dynamo exporter writes a
    ViT: its value_info may carry the traced batch (1) where the input's dim is open."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Reshape", ["r", "target"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", "m"])],
        [numpy_helper.from_array(np.array(reshape_to, np.int64), "target")])
    if stale_value_info:
        graph.value_info.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, [1, 4, 6]))
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    proto.ir_version = 8
    onnx.checker.check_model(proto)
    return proto


def test_stale_value_info_of_a_traced_batch_is_inferred_again():
    """value_info [1, 4, 6] on a [batch, 4, 6] tensor contradicts shape inference at batch 2:
    the inputs decide, and the batch stays dynamic."""
    proto = _batch_model([-1, 24], stale_value_info=True)
    conversion = convert(proto)
    assert not conversion.warnings
    check_sizes(proto, conversion, [[(1, 4, 6)], [(3, 4, 6)], [(2, 4, 6)]])


def test_a_batch_baked_into_the_graph_is_fixed_with_a_warning():
    """A reshape to [1, 24] (the export traced batch 1) converts at batch 1 only: the file has
    the batch fixed at 1 and the warning names the node."""
    proto = _batch_model([1, 24], stale_value_info=False)
    conversion = convert(proto)
    assert len(conversion.warnings) == 1 and "does not convert at a second size" in \
        conversion.warnings[0] and "Reshape" in conversion.warnings[0]
    sg = conversion.model.subgraphs[0]
    assert sg.tensors[sg.inputs[0]].shape[0] == 1
    assert -1 not in (sg.tensors[sg.inputs[0]].shape_signature or ())
    check_sizes(proto, conversion, [[(1, 4, 6)]])


def test_resize_to_the_size_of_another_tensor():
    """LRASPP / DeepLabV3 through torch's dynamo exporter: F.interpolate(x, size=low.shape[-2:])
    as Resize(sizes=Concat(Shape(y)[:2], Shape(low)[2:])), the output shape not declared: the
    sizes are computed in the graph from the input's dynamic height and width."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Shape", ["y"], ["sy"], end=2),
             helper.make_node("Shape", ["x"], ["sx"], start=2),
             # A Div by 1: ONNX's data propagation stops there, as at dynamo's SymInt
             # arithmetic, so inference declares no output shape.
             helper.make_node("Div", ["sx", "one"], ["sxi"]),
             helper.make_node("Concat", ["sy", "sxi"], ["sizes"], axis=0),
             helper.make_node("Resize", ["y", "", "", "sizes"], ["z"], mode="linear",
                              coordinate_transformation_mode="half_pixel")]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, "h", "w"])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["a", "b", "c", "d"])],
        [numpy_helper.from_array((rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32),
                                 "w"), numpy_helper.from_array(np.array([1], np.int64), "one")])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    proto.ir_version = 8
    onnx.checker.check_model(proto)
    conversion = convert(proto)
    assert not conversion.warnings
    check_sizes(proto, conversion, [[(1, 3, 32, 40)], [(2, 3, 48, 36)], [(1, 3, 20, 20)]])


def test_reshape_keeps_the_models_own_minus_one():
    """Swin's windows reshaped back: [-1, 7, 4] of a [7 * batch, 4] tensor splits the dynamic
    dim into (batch, 7), no regrouping the builder can follow; the model's -1 says which dim
    follows the batch. A class token expanded to the batch (ViT) makes the graph compute its
    shapes, as in torch's dynamo export of Swin-T."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(5)
    inits = {"cls": rng.standard_normal((1, 1, 4)).astype(np.float32),
             "rest": np.array([1, 4], np.int64), "flat": np.array([-1, 4], np.int64),
             "back": np.array([-1, 7, 4], np.int64)}
    nodes = [helper.make_node("Shape", ["x"], ["s"], end=1),
             helper.make_node("Concat", ["s", "rest"], ["es"], axis=0),
             helper.make_node("Expand", ["cls", "es"], ["c"]),
             helper.make_node("Concat", ["c", "x"], ["y"], axis=1),
             helper.make_node("Reshape", ["y", "flat"], ["f"]),
             helper.make_node("Relu", ["f"], ["r"]),
             helper.make_node("Reshape", ["r", "back"], ["z"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 6, 4])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["batch", 7, 4])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    proto.ir_version = 8
    onnx.checker.check_model(proto)
    conversion = convert(proto)
    assert not conversion.warnings
    check_sizes(proto, conversion, [[(1, 6, 4)], [(3, 6, 4)], [(2, 6, 4)]])
