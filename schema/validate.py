"""Consistency checks of a model: what a loaded file must satisfy before anything trusts it, and
what the writer checks before it serializes."""
from __future__ import annotations

import math

from .errors import ModelError
from .model import NUMPY_DTYPES, Model, Subgraph, int4_bytes
from .ops import facts
from .options import OPERATOR_CODES, options_kind

# Largest tensor edgelite accepts: 2**31 elements (8 GiB of float32). A shape beyond it is absurd.
MAX_ELEMENTS = 2 ** 31
INT32_MAX = 2 ** 31 - 1   # the largest int32: a .tflite dim, option or index (the converter too)

SUBGRAPH_FIELDS = ("then_subgraph_index", "else_subgraph_index", "cond_subgraph_index",
                    "body_subgraph_index", "init_subgraph_index", "subgraph")


def validate(model: Model) -> None:
    """Raise `ModelError` for the first inconsistency found; return None when the model is sound."""
    nbuf = len(model.buffers)
    nsub = len(model.subgraphs)
    if nsub == 0:
        raise ModelError("the model has no subgraphs")
    for si, sg in enumerate(model.subgraphs):
        _check_tensors(model, si, sg)
        _check_operators(si, sg, nsub)
    for m in model.metadata:
        if not 0 <= m.buffer < nbuf:
            raise ModelError(f"metadata {m.name!r}: buffer {m.buffer} out of range "
                             f"(the model has {nbuf} buffers)")
    for sig in model.signature_defs:
        if not 0 <= sig.subgraph_index < nsub:
            raise ModelError(f"signature {sig.signature_key!r}: subgraph {sig.subgraph_index} out "
                             f"of range (the model has {nsub} subgraphs)")
        n = len(model.subgraphs[sig.subgraph_index].tensors)
        for kind, io in (("input", sig.inputs), ("output", sig.outputs)):
            for name, t in io.items():
                if not 0 <= t < n:
                    raise ModelError(f"signature {sig.signature_key!r} {kind} {name!r}: tensor "
                                     f"{t} out of range (subgraph has {n} tensors)")


def _at(si: int, ti: int, t) -> str:
    return f"subgraph {si} tensor {ti} {t.name!r}"


def _check_tensors(model: Model, si: int, sg: Subgraph) -> None:
    nbuf = len(model.buffers)
    for ti, t in enumerate(sg.tensors):
        if any(d < 0 for d in t.shape):
            raise ModelError(f"{_at(si, ti, t)}: negative dimension in shape {list(t.shape)}")
        if any(d > INT32_MAX for d in t.shape):
            raise ModelError(f"{_at(si, ti, t)}: dimension beyond int32 in shape {list(t.shape)}")
        count = math.prod(t.shape)
        if count > MAX_ELEMENTS:
            raise ModelError(f"{_at(si, ti, t)}: shape {list(t.shape)} has {count} elements, an "
                             f"absurd size (limit {MAX_ELEMENTS})")
        if t.shape_signature is not None and any(d < -1 for d in t.shape_signature):
            raise ModelError(f"{_at(si, ti, t)}: invalid shape_signature {list(t.shape_signature)}")
        if not 0 <= t.buffer < nbuf:
            raise ModelError(f"{_at(si, ti, t)}: buffer {t.buffer} out of range "
                             f"(the model has {nbuf} buffers)")
        size = model.buffers[t.buffer].nbytes
        if size and t.sparsity is not None:  # the stored values only (checked by DENSIFY)
            if t.dtype in NUMPY_DTYPES and size % NUMPY_DTYPES[t.dtype].itemsize:
                raise ModelError(f"{_at(si, ti, t)}: buffer {t.buffer} of {size} bytes is no whole "
                                 f"number of {t.dtype} values")
        elif size and t.dtype == "int4":
            if size != int4_bytes(count):
                raise ModelError(f"{_at(si, ti, t)}: buffer {t.buffer} holds {size} bytes but "
                                 f"shape {list(t.shape)} of int4 needs {int4_bytes(count)} (two "
                                 "values a byte)")
        elif size and t.dtype in NUMPY_DTYPES and t.dtype not in ("resource", "variant"):
            need = count * NUMPY_DTYPES[t.dtype].itemsize
            if size != need:
                raise ModelError(f"{_at(si, ti, t)}: buffer {t.buffer} holds {size} bytes but "
                                 f"shape {list(t.shape)} of {t.dtype} needs {need}")
        q = t.quantization
        if q is not None and q.scale.size:
            if q.scale.size > 1:
                if not 0 <= q.quantized_dimension < len(t.shape):
                    raise ModelError(f"{_at(si, ti, t)}: quantized_dimension "
                                     f"{q.quantized_dimension} out of range for shape "
                                     f"{list(t.shape)}")
                if q.scale.size != t.shape[q.quantized_dimension]:
                    raise ModelError(f"{_at(si, ti, t)}: {q.scale.size} per-channel scales for "
                                     f"dimension {q.quantized_dimension} of size "
                                     f"{t.shape[q.quantized_dimension]}")
            if q.zero_point.size not in (0, q.scale.size):
                raise ModelError(f"{_at(si, ti, t)}: {q.zero_point.size} zero points for "
                                 f"{q.scale.size} scales")
    n = len(sg.tensors)
    for kind, ids in (("input", sg.inputs), ("output", sg.outputs)):
        for t in ids:
            if not 0 <= t < n:
                raise ModelError(f"subgraph {si}: graph {kind} tensor {t} out of range "
                                 f"(subgraph has {n} tensors)")


def _check_operators(si: int, sg: Subgraph, nsub: int) -> None:
    n = len(sg.tensors)
    produced_by: dict = {}
    for oi, op in enumerate(sg.operators):
        where = f"subgraph {si} operator {oi} ({op.op})"
        for kind, ids, optional in (("input", op.inputs, True), ("output", op.outputs, False),
                                    ("intermediate", op.intermediates, False)):
            for k, t in enumerate(ids):
                if (t == -1 and optional) or 0 <= t < n:
                    continue
                raise ModelError(f"{where}: {kind} {k} is tensor {t}, out of range "
                                 f"(subgraph has {n} tensors)")
        if op.opcode.builtin not in OPERATOR_CODES:
            raise ModelError(f"{where}: unknown builtin operator {op.opcode.builtin!r}")
        if op.opcode.builtin == "CUSTOM" and not op.opcode.custom_code:
            raise ModelError(f"{where}: a CUSTOM operator needs a custom_code")
        expected = options_kind(op.opcode.builtin) if op.opcode.builtin != "CUSTOM" else None
        if op.options is None:
            if facts(op.opcode.builtin).options_required:
                raise ModelError(f"{where}: missing its options table {expected}")
        else:
            if expected is not None and op.options.kind != expected:
                raise ModelError(f"{where}: has {op.options.kind}, expected {expected}")
            for name in SUBGRAPH_FIELDS:
                idx = op.options.fields.get(name)
                if isinstance(idx, int) and not 0 <= idx < nsub:
                    raise ModelError(f"{where}: {name} {idx} out of range "
                                     f"(the model has {nsub} subgraphs)")
        for t in op.outputs:
            if t in produced_by:
                raise ModelError(f"{where}: tensor {t} {sg.tensors[t].name!r} is also written by "
                                 f"operator {produced_by[t]}")
            produced_by[t] = oi
    # A read of a tensor that a later op writes is a cycle in the graph.
    for oi, op in enumerate(sg.operators):
        for t in op.inputs:
            p = produced_by.get(t)
            if p is not None and p >= oi:
                raise ModelError(f"subgraph {si} operator {oi} ({op.op}): reads tensor {t} "
                                 f"{sg.tensors[t].name!r}, which operator {p} "
                                 f"({sg.operators[p].op}) writes later: the graph has a cycle "
                                 "or is out of order")
