"""Refusing hostile or absurd ONNX models before anything is allocated: one clear error naming the
node, the initializer or the input, never an internal error or a memory blow-up.

- `load_checked(path)`: `onnx.load` with every external-data location checked first (relative,
  no `..`, no symlink leaving the model's folder, an existing regular file), whatever onnx's own
  checks in the installed version.
- `check_proto(proto)`: every graph and body graph: initializers of a known type whose data
  matches their dims, input dims that fit .tflite's int32 dims, integer attributes that fit the
  int32 options of .tflite, body graphs nested at most MAX_NESTING deep.
- `before_lowering(b, n)` / `after_lowering(b, n, first_new)`: a node whose output would exceed
  MAX_TENSOR_BYTES (by ONNX's inferred shape, or for ConstantOfShape, Expand, Tile, Range and
  Resize by its constant inputs) is refused before its lowering runs; a tensor a lowering made
  that is over the limit or has a dim beyond int32 is refused after. $EDGELITE_CONVERT_TENSOR_LIMIT
  (bytes) overrides the limit.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from edgelite.schema.validate import INT32_MAX, MAX_ELEMENTS

from .errors import ConversionError
from .lower import body_graphs

MAX_TENSOR_BYTES = 2**30     # one tensor computed while converting (a folded constant, a shape)
LIMIT_VARIABLE = "EDGELITE_CONVERT_TENSOR_LIMIT"   # bytes: overrides MAX_TENSOR_BYTES
MAX_NESTING = 30   # body graphs in body graphs: onnx's shape inference re-parses the model with
                   # protobuf's parser, which stops at 100 message levels (~31 graphs deep)
# Attributes ONNX defines as positive (1) or non-negative (0), in every op or in the listed ones.
_LEAST = {"hidden_size": 1, "kernel_shape": 1, "strides": 1, "dilations": 1, "group": 1,
          "blocksize": 1, "size": 1, "pads": 0, "output_padding": 0}
_WINDOWED = ("Conv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool", "MaxUnpool",
             "ConvInteger", "QLinearConv", "DeformConv")
_LEAST_OPS = {"pads": _WINDOWED, "size": ("LRN",)}
# Integer attributes whose values are data, not .tflite options (int64 is fine there).
_DATA_ATTRIBUTES = frozenset({"value_int", "value_ints", "start", "end", "starts", "ends"})


def _size_text(n: int) -> str:
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


# -- loading -------------------------------------------------------------------------------------

def external_locations(proto) -> list:
    """(tensor name, location) of every tensor in `proto` that keeps its data in another file."""
    from onnx import external_data_helper

    out = []
    for tensor in external_data_helper._get_all_tensors(proto):
        if tensor.HasField("data_location") and \
                tensor.data_location == tensor.EXTERNAL:
            where = {e.key: e.value for e in tensor.external_data}
            out.append((tensor.name, where.get("location", "")))
    return out


def check_external_location(base: Path, name: str, location: str) -> Path:
    """The file `location` names, relative to the model's folder `base`; ConversionError when it
    is absolute, climbs out with `..`, or resolves (through symlinks) outside `base`."""
    what = f"initializer {name!r} keeps its data in {location!r}"
    if not location:
        raise ConversionError(f"initializer {name!r} has external data with no location")
    if os.path.isabs(location) or Path(location).drive or location.startswith(("/", "\\")):
        raise ConversionError(f"{what}: an absolute path (external data must be inside the "
                              "model's folder)")
    parts = Path(location.replace("\\", "/")).parts
    if ".." in parts:
        raise ConversionError(f"{what}: a path with '..' (external data must be inside the "
                              "model's folder)")
    path = base / location
    root = base.resolve()
    resolved = path.resolve()
    if resolved != root and root not in resolved.parents:
        raise ConversionError(f"{what}, which leads outside the model's folder {base} "
                              f"(to {resolved})")
    if not resolved.is_file():
        raise ConversionError(f"{what}, which is not a file in {base}")
    return resolved


def load_checked(path: Path):
    """`onnx.load(path)` with its external data, each location checked before it is read."""
    import onnx
    from onnx import external_data_helper

    try:
        proto = onnx.load(str(path), load_external_data=False)
    except Exception as e:  # protobuf's DecodeError and friends: the file is not ONNX
        raise ConversionError(f"{path} is not an ONNX model ({type(e).__name__}: "
                              f"{str(e).splitlines()[0] if str(e) else 'cannot parse'})") from None
    locations = external_locations(proto)
    if locations:
        base = Path(path).parent
        for name, location in locations:
            check_external_location(base, name, location)
        try:
            external_data_helper.load_external_data_for_model(proto, str(base))
        except (OSError, ValueError) as e:
            raise ConversionError(f"{path}: cannot read its external data ({e})") from None
    return proto


# -- the whole model -----------------------------------------------------------------------------

def check_proto(proto) -> None:
    """ConversionError listing what makes `proto` impossible to convert safely (see the module
    docstring); the list is whole, not the first problem only."""
    problems: list = []
    _check_graph(proto.graph, problems, depth=0, where="")
    if problems:
        shown = problems[:20] + ([f"... and {len(problems) - 20} more"]
                                 if len(problems) > 20 else [])
        raise ConversionError("the model cannot be converted safely:\n  " + "\n  ".join(shown))


def _check_graph(graph, problems: list, depth: int, where: str) -> None:
    initializer_names = {init.name for init in graph.initializer}
    for init in graph.initializer:
        _check_initializer(init, problems, where)
    for vi in graph.input:
        if vi.name in initializer_names or not vi.type.HasField("tensor_type"):
            continue
        dims = [d.dim_value for d in vi.type.tensor_type.shape.dim if d.HasField("dim_value")]
        big = [d for d in dims if d > INT32_MAX]
        if big:
            problems.append(f"{where}input {vi.name!r} has dim {big[0]}: .tflite dims are int32 "
                            f"(at most {INT32_MAX})")
        elif math.prod(dims) > MAX_ELEMENTS:
            problems.append(f"{where}input {vi.name!r} has shape {dims}: {math.prod(dims)} "
                            f"elements, more than a .tflite tensor holds ({MAX_ELEMENTS})")
    for node in graph.node:
        name = node.name or (node.output[0] if node.output else "?")
        label = f"{where}{node.op_type} node {name!r}"
        for a in node.attribute:
            values = [a.i] if a.type == a.INT else list(a.ints) if a.type == a.INTS else []
            least = _LEAST.get(a.name)
            if least is not None and node.op_type in _LEAST_OPS.get(a.name, (node.op_type,)) \
                    and any(v < least for v in values):
                problems.append(f"{label}: attribute {a.name} = "
                                f"{values[0] if a.type == a.INT else values} must be "
                                f"{'positive' if least else 'at least 0'} (ONNX's definition)")
                continue
            if a.type == a.INT and a.name not in _DATA_ATTRIBUTES and abs(a.i) > INT32_MAX:
                problems.append(f"{label}: attribute {a.name} = {a.i} is beyond int32 "
                                "(.tflite options are int32)")
            elif a.type == a.INTS and a.name not in _DATA_ATTRIBUTES and \
                    any(abs(v) > INT32_MAX for v in a.ints):
                problems.append(f"{label}: attribute {a.name} = {list(a.ints)} is beyond int32 "
                                "(.tflite options are int32)")
            elif a.type == a.TENSOR:
                _check_initializer(a.t, problems, f"{label}: attribute {a.name}: ")
        bodies = [g for _, g in body_graphs(node)]
        if bodies and depth + 1 > MAX_NESTING:
            problems.append(f"{node.op_type} node {name!r}: body graphs nested more than "
                            f"{MAX_NESTING} deep (ONNX's shape inference reads no deeper)")
            continue
        for g in bodies:
            _check_graph(g, problems, depth + 1, f"{node.op_type} node {name!r} / ")


def _check_initializer(init, problems: list, where: str) -> None:
    from onnx import helper

    what = f"{where}initializer {init.name!r}" if not where.endswith(": ") else \
        f"{where}tensor"
    try:
        np_dtype = np.dtype(helper.tensor_dtype_to_np_dtype(init.data_type))
    except (KeyError, ValueError, TypeError):
        problems.append(f"{what} has ONNX data type {init.data_type}, which is not a type "
                        "ONNX defines")
        return
    dims = list(init.dims)
    if any(d < 0 or d > INT32_MAX for d in dims):
        problems.append(f"{what} has dims {dims}: each must be 0 .. {INT32_MAX}")
        return
    count = math.prod(dims)
    if init.HasField("data_location") and init.data_location == init.EXTERNAL:
        return   # read by load_checked, which checked where from
    if init.HasField("raw_data") and np_dtype.kind not in "OSU":
        bits = 4 if init.data_type in _FOUR_BIT else np_dtype.itemsize * 8
        want = (count * bits + 7) // 8
        if len(init.raw_data) != want:
            problems.append(f"{what} has dims {dims} ({want} bytes of data) but holds "
                            f"{len(init.raw_data)} bytes")


_FOUR_BIT = frozenset({21, 22, 23})   # UINT4, INT4, FLOAT4E2M1


# -- one node ------------------------------------------------------------------------------------

def _too_big(n, dims, itemsize: int, what: str) -> None:
    dims = [int(d) for d in dims]
    if any(d < 0 for d in dims):
        return   # negative dims are the lowering's to refuse
    if any(d > INT32_MAX for d in dims):
        raise ConversionError(f"{n.label}: {what} would have shape {dims}: .tflite dims are "
                              f"int32 (at most {INT32_MAX})")
    size = math.prod(dims) * itemsize
    limit = tensor_limit()
    if size > limit:
        raise ConversionError(f"{n.label}: {what} would have shape {dims} "
                              f"({_size_text(size)}), over the converter's limit of "
                              f"{_size_text(limit)} for one tensor (${LIMIT_VARIABLE} sets it)")


def tensor_limit() -> int:
    """The most bytes one tensor made while converting may have: MAX_TENSOR_BYTES, or
    $EDGELITE_CONVERT_TENSOR_LIMIT."""
    text = os.environ.get(LIMIT_VARIABLE, "").strip()
    try:
        return int(float(text)) if text else MAX_TENSOR_BYTES
    except ValueError:
        raise ConversionError(f"${LIMIT_VARIABLE}={text!r}: expected a number of bytes") \
            from None


def _itemsize(n, k: int) -> int:
    scope = n.scope
    name = n.proto.output[k] if k < len(n.proto.output) else ""
    dtype = scope.expected.get(name, (None, None))[1] if scope is not None else None
    try:
        return np.dtype(dtype).itemsize if dtype else 4
    except TypeError:
        return 4


def _const(b, n, k: int):
    t = n.input(k)
    if t < 0:
        return None
    value = b.value(t)
    return None if value is None else np.asarray(value)


def before_lowering(b, n) -> None:
    """Refuse `n` before it is lowered when an output would be over the limit."""
    for k, dims in enumerate(n.declared):
        if dims is not None and all(d is not None for d in dims):
            _too_big(n, dims, _itemsize(n, k), f"output {n.proto.output[k]!r}")
    check = _OUTPUT_SIZE.get(n.op_type)
    if check is not None:
        dims = check(b, n)
        if dims is not None:
            _too_big(n, dims, _itemsize(n, 0), f"output {n.proto.output[0]!r}")


def after_lowering(b, n, first_new: int) -> None:
    """Refuse the tensors a lowering made that are over the limit or have dims beyond int32."""
    for t in range(first_new, len(b.sg.tensors)):
        tensor = b.sg.tensors[t]
        _too_big(n, tensor.shape, np.dtype(tensor.np_dtype).itemsize,
                 f"tensor {tensor.name!r}")


def _constant_of_shape(b, n):
    shape = _const(b, n, 0)
    return None if shape is None else shape.reshape(-1).tolist()


def _broadcast(a, c):
    rank = max(len(a), len(c))
    a = [1] * (rank - len(a)) + list(a)
    c = [1] * (rank - len(c)) + list(c)
    return [max(x, y) for x, y in zip(a, c)]


def _expand(b, n):
    shape = _const(b, n, 1)
    if shape is None or n.input(0) < 0:
        return None
    return _broadcast(b.shape(n.input(0)), shape.reshape(-1).tolist())


def _tile(b, n):
    repeats = _const(b, n, 1)
    if repeats is None or n.input(0) < 0:
        return None
    shape = b.shape(n.input(0))
    repeats = repeats.reshape(-1).tolist()
    if len(repeats) != len(shape):
        return None
    return [d * r for d, r in zip(shape, repeats)]


def _range(b, n):
    values = [_const(b, n, k) for k in range(3)]
    if any(v is None or v.size != 1 for v in values):
        return None
    start, limit, delta = (float(v.reshape(-1)[0]) for v in values)
    if delta == 0 or not all(math.isfinite(x) for x in (start, limit, delta)):
        return None
    return [max(0, math.ceil((limit - start) / delta))]


def _resize(b, n):
    if n.input(0) < 0:
        return None
    shape = list(b.shape(n.input(0)))
    sizes = _const(b, n, 3) if len(n.inputs) > 3 else None
    if sizes is not None and sizes.size == len(shape):
        return sizes.reshape(-1).tolist()
    k = 2 if len(n.inputs) > 2 and n.opset >= 11 else 1
    scales = _const(b, n, k)
    if scales is None or scales.size != len(shape):
        return None
    scales = scales.reshape(-1).astype(np.float64)
    if not np.all(np.isfinite(scales)):
        return None
    return [int(math.floor(d * s)) for d, s in zip(shape, scales)]


_OUTPUT_SIZE = {"ConstantOfShape": _constant_of_shape, "Expand": _expand, "Tile": _tile,
                "Range": _range, "Resize": _resize, "Upsample": _resize}
