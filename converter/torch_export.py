"""A torch module as an ONNX model, through torch's own ONNX exporter, in memory: what
`TFLiteConverter.from_torch` converts. torch is an optional extra (`pip install
"edgelite[torch]"`); this module imports it only when called.
"""
from __future__ import annotations

import inspect
import io
import logging
import os
import warnings

from .errors import ConversionError

EXPORTERS = ("torchscript", "dynamo")
OPSET = 18


def _torch(what: str = "from_torch"):
    try:
        import torch
    except ImportError:
        raise ConversionError(f"{what} needs torch (pip install \"edgelite[torch]\", or "
                              "torch itself); without it convert an ONNX file with "
                              "from_onnx") from None
    return torch


PROGRAM = "converting a torch.export program (.pt2)"


def load_program(path):
    """The torch.export.ExportedProgram that `torch.export.save` wrote to `path` (a .pt2)."""
    torch = _torch(PROGRAM)
    logger = logging.getLogger("torch.export")   # its traceback of a failed first attempt
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        return torch.export.load(str(path))
    except FileNotFoundError:
        raise ConversionError(f"{path}: no such file") from None
    except Exception as e:      # a zip that is not a program, a program of another torch
        first = (str(e).strip().splitlines() or [""])[0][:200]
        raise ConversionError(f"{path} is not a torch.export program that this torch "
                              f"({torch.__version__}) loads (torch.export.save writes one): "
                              f"{type(e).__name__}: {first}") from None
    finally:
        logger.setLevel(level)


def export_program(program, opset: int = OPSET):
    """A torch.export program (an ExportedProgram, or the path of a .pt2) as an
    onnx.ModelProto, through torch's dynamo ONNX exporter: the program's dynamic dims (its
    torch.export.Dim) stay open dims of the ONNX model, its inputs keep forward's names."""
    torch = _torch(PROGRAM)
    if not isinstance(program, torch.export.ExportedProgram):
        if isinstance(program, (str, os.PathLike)):
            program = load_program(program)
        else:
            raise ConversionError(f"expected a torch.export.ExportedProgram or the path of a "
                                  f".pt2, not {type(program).__name__}")
    try:
        import onnxscript  # noqa: F401  torch's dynamo exporter writes ONNX through it
    except ImportError:
        raise ConversionError(f"{PROGRAM} needs onnxscript (pip install onnxscript): torch's "
                              "ONNX exporter for programs uses it") from None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.onnx.export(program, (), dynamo=True, opset_version=opset,
                                     verbose=False).model_proto
    except Exception as e:      # torch's exporter raises many kinds; one message for them
        first = (str(e).strip().splitlines() or [""])[0]
        raise ConversionError(f"torch's ONNX exporter failed on the program: "
                              f"{type(e).__name__}: {first}") from e


def input_names_of(module, count: int) -> list:
    """The names of forward's first `count` positional parameters (input_K past them)."""
    try:
        params = [p.name for p in inspect.signature(module.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return [params[k] if k < len(params) else f"input_{k}" for k in range(count)]


def dynamic_axes_of(dynamic_shapes, names: list) -> dict:
    """{input name: {axis: dim name}} from `dynamic_shapes`: a dict by input name, or a
    sequence in input order, of {axis: name} (a torch.export.Dim is named by its __name__),
    or of a sequence of axes; None for an input with none."""
    if dynamic_shapes is None:
        return {}
    if isinstance(dynamic_shapes, dict):
        unknown = sorted(set(dynamic_shapes) - set(names))
        if unknown:
            raise ConversionError(f"dynamic_shapes names {unknown}, which are not inputs; the "
                                  f"inputs are {names}")
        per_input = [dynamic_shapes.get(n) for n in names]
    else:
        per_input = list(dynamic_shapes)
        if len(per_input) != len(names):
            raise ConversionError(f"dynamic_shapes has {len(per_input)} entries for "
                                  f"{len(names)} inputs {names}")
    axes = {}
    for name, spec in zip(names, per_input):
        if spec is None:
            continue
        if not isinstance(spec, dict):
            spec = {int(a): f"{name}_dim{int(a)}" for a in spec}
        axes[name] = {int(a): (d if isinstance(d, str) else
                               getattr(d, "__name__", f"{name}_dim{int(a)}"))
                      for a, d in spec.items() if d is not None}
    return axes


def dynamic_kwargs(exporter: str, module, dynamic_shapes, axes: dict, names: list) -> dict:
    """The exporter's argument for the dynamic axes. The TorchScript exporter takes
    `dynamic_axes`; the dynamo exporter wants torch.export's `dynamic_shapes` (it refuses to
    convert `dynamic_axes` for most models): one entry per positional input in order, under the
    name of forward's *args where it has one. Dims named by a string become Dim.DYNAMIC there;
    a torch.export.Dim (its bounds) is passed as given."""
    if exporter == "torchscript":
        return {"dynamic_axes": axes}
    if isinstance(dynamic_shapes, dict):
        given = [dynamic_shapes.get(n) for n in names]
    else:
        given = list(dynamic_shapes)
    per_input = tuple(spec if isinstance(spec, dict) or spec is None else axes.get(name)
                      for name, spec in zip(names, given))
    try:
        params = inspect.signature(module.forward).parameters.values()
    except (TypeError, ValueError):
        params = []
    star = [p.name for p in params if p.kind is p.VAR_POSITIONAL]
    return {"dynamic_shapes": {star[0]: per_input} if star else per_input}


def export_onnx(module, example_inputs, dynamic_shapes=None, input_names=None,
                exporter: str = "torchscript", opset: int = OPSET):
    """`module` (a torch.nn.Module) exported at `example_inputs` (a tensor or a tuple of them)
    as an onnx.ModelProto; `dynamic_shapes` marks the input axes that stay dynamic."""
    import onnx

    torch = _torch()
    if exporter not in EXPORTERS:
        raise ConversionError(f"exporter {exporter!r} is not one of {', '.join(EXPORTERS)}")
    if not isinstance(module, torch.nn.Module):
        raise ConversionError(f"from_torch takes a torch.nn.Module, not "
                              f"{type(module).__name__}")
    args = (example_inputs,) if isinstance(example_inputs, torch.Tensor) else \
        tuple(example_inputs)
    bad = [k for k, a in enumerate(args) if not isinstance(a, torch.Tensor)]
    if bad:
        raise ConversionError(f"example_inputs {bad} are not tensors: from_torch takes a "
                              "tensor or a tuple of tensors")
    names = list(input_names) if input_names is not None else input_names_of(module, len(args))
    if len(names) != len(args):
        raise ConversionError(f"{len(names)} input_names for {len(args)} example inputs")
    kwargs = dict(input_names=names, opset_version=opset)
    axes = dynamic_axes_of(dynamic_shapes, names)
    if axes:
        kwargs.update(dynamic_kwargs(exporter, module, dynamic_shapes, axes, names))
    was_training = module.training
    module.eval()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # the exporters' deprecation chatter
            if exporter == "torchscript":
                buffer = io.BytesIO()
                torch.onnx.export(module, args, buffer, dynamo=False, **kwargs)
                return onnx.load_from_string(buffer.getvalue())
            program = torch.onnx.export(module, args, dynamo=True, verbose=False, **kwargs)
            return program.model_proto
    except ConversionError:
        raise
    except Exception as e:      # torch's exporters raise many kinds; one message for them
        first = (str(e).strip().splitlines() or [""])[0]
        raise ConversionError(f"torch's {exporter} ONNX exporter failed on "
                              f"{type(module).__name__}: {type(e).__name__}: {first}") from e
    finally:
        module.train(was_training)
