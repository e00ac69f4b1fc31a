"""Single-op models written with the schema writer, and running them in edgelite and LiteRT.

    model = op_model("CONV_2D", [In((1, 8, 8, 3)), w, b], options=dict(stride_w=2, ...))
    ours, theirs = run_both(model, [x])

`In(shape, dtype, quant)` is a graph input; a numpy array is a constant; None is an omitted
optional input. Outputs default to one float32 tensor (kernels infer its shape).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edgelite.schema import (Model, Operator, OperatorCode, QuantizationParameters, Subgraph,
                             Tensor, default_options, dtype_name, save)


@dataclass
class In:
    shape: tuple
    dtype: str = "float32"
    quant: tuple | None = None  # (scale, zero_point) or (scales, zero_points, axis)


@dataclass
class Out:
    shape: tuple = ()
    dtype: str = "float32"
    quant: tuple | None = None


def _quant(q):
    if q is None:
        return None
    if len(q) == 3:
        return QuantizationParameters(scale=q[0], zero_point=q[1], quantized_dimension=q[2])
    return QuantizationParameters(scale=[q[0]], zero_point=[q[1]])


def operator(name: str, ins, outs, **options) -> Operator:
    """A builtin operator (version 0) of `name` on tensor indices, with its default options."""
    return Operator(OperatorCode(name, 0), list(ins), list(outs), default_options(name, **options))


def const_tensor(model: Model, sg: Subgraph, name: str, value) -> int:
    """The index of a new constant tensor of `sg` holding `value` (in a new buffer of `model`)."""
    value = np.asarray(value)
    return sg.add_tensor(Tensor(name, value.shape, str(value.dtype), model.add_buffer(value)))


def op_model(op: str, inputs: list, outputs=None, options: dict | None = None,
             custom_code: str | None = None, custom_options: bytes | None = None,
             extra_subgraphs: list | None = None, const_quant: dict | None = None) -> bytes:
    """The bytes of a model holding one `op`. `const_quant` maps an input position to the
    quantization of that constant input."""
    model = Model()
    sg = Subgraph(name="main")
    ins = []
    for k, spec in enumerate(inputs):
        if spec is None:
            ins.append(-1)
        elif isinstance(spec, In):
            t = sg.add_tensor(Tensor(f"input_{k}", spec.shape, spec.dtype,
                                     quantization=_quant(spec.quant)))
            sg.inputs.append(t)
            ins.append(t)
        else:
            value = np.asarray(spec)
            q = _quant((const_quant or {}).get(k))
            ins.append(sg.add_tensor(Tensor(f"const_{k}", value.shape, dtype_name(value.dtype),
                                            buffer=model.add_buffer(value), quantization=q)))
    outs = []
    for k, spec in enumerate(outputs or [Out()]):
        t = sg.add_tensor(Tensor(f"output_{k}", spec.shape, spec.dtype,
                                 quantization=_quant(spec.quant)))
        sg.outputs.append(t)
        outs.append(t)
    if custom_code is not None:
        code, opts = OperatorCode("CUSTOM", 1, custom_code), None
    else:
        code, opts = OperatorCode(op, 0), default_options(op, **(options or {}))
    sg.operators.append(Operator(code, ins, outs, opts, custom_options=custom_options))
    model.subgraphs.append(sg)
    model.subgraphs.extend(extra_subgraphs or [])
    return save(model)


def run_edgelite(content: bytes, feeds: list, **kwargs) -> list:
    from edgelite.interpreter import Interpreter
    it = Interpreter(model_content=content, **kwargs)
    return run_interpreter(it, feeds)


def run_litert(content: bytes, feeds: list, reference: bool = True) -> list:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    kind = OpResolverType.BUILTIN_REF if reference else OpResolverType.AUTO
    it = Interpreter(model_content=content, experimental_op_resolver_type=kind)
    return run_interpreter(it, feeds)


def run_interpreter(it, feeds: list) -> list:
    """Outputs of one invoke of an interpreter (edgelite's or LiteRT's) on `feeds`, its inputs
    resized to their shapes."""
    details = it.get_input_details()
    for d, x in zip(details, feeds):
        if tuple(d["shape"]) != np.shape(x):
            it.resize_tensor_input(d["index"], np.shape(x))
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), feeds):
        it.set_tensor(d["index"], np.asarray(x))
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


def run_steps(module, content: bytes, feeds_per_step: list, **options) -> list:
    """Outputs of consecutive invokes on one interpreter of `module` (edgelite's or LiteRT's
    interpreter module; `options` to its constructor): state (variables) carries over between
    steps."""
    return invokes(module.Interpreter(model_content=content, **options), feeds_per_step)


def invokes(it, feeds_per_step: list) -> list:
    """Outputs (copies) of consecutive invokes of a built interpreter, after allocate."""
    it.allocate_tensors()
    results = []
    for feeds in feeds_per_step:
        for d, value in zip(it.get_input_details(), feeds):
            it.set_tensor(d["index"], value)
        it.invoke()
        results.append([np.array(it.get_tensor(d["index"])) for d in it.get_output_details()])
    return results


def run_both(content: bytes, feeds: list, reference: bool = True) -> tuple:
    """edgelite and LiteRT, both with the reference kernels (or both with their defaults)."""
    from edgelite.interpreter import OpResolverType
    kind = OpResolverType.BUILTIN_REF if reference else OpResolverType.AUTO
    return (run_edgelite(content, feeds, experimental_op_resolver_type=kind),
            run_litert(content, feeds, reference))


def assert_close(ours: list, theirs: list, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """Same count, shapes and dtypes; values within tolerance (exact for non-float)."""
    assert len(ours) == len(theirs)
    for k, (a, b) in enumerate(zip(ours, theirs)):
        assert a.shape == b.shape, f"output {k}: shape {a.shape} vs LiteRT {b.shape}"
        assert a.dtype == b.dtype, f"output {k}: dtype {a.dtype} vs LiteRT {b.dtype}"
        if np.issubdtype(a.dtype, np.inexact):  # float and complex
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"output {k}")
        else:
            np.testing.assert_array_equal(a, b, err_msg=f"output {k}")


@dataclass
class Case:
    """One single-op check against LiteRT: a model, its inputs, and the tolerance."""

    id: str
    model: bytes
    feeds: list
    rtol: float = 1e-5
    atol: float = 1e-6


def case(id: str, op: str, inputs: list, feeds: list, rtol: float = 1e-5, atol: float = 1e-6,
         **kwargs) -> Case:
    """A Case for `op_model(op, inputs, **kwargs)` run on `feeds`."""
    return Case(id, op_model(op, inputs, **kwargs), [np.asarray(f) for f in feeds], rtol, atol)
