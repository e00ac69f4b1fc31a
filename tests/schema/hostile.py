"""Structured hostile `.tflite` files: valid FlatBuffers (or precise corruptions of them) whose
*content* is what only a hostile or broken file has. The mutation fuzzer (fuzz_worker.py) flips
bytes of real models; this one builds models: control flow nested or chained deep, loops whose
condition is malformed, weights without data, window options out of range, op versions no
runtime has, shapes and constants that ask for gigabytes, large-format buffers at odd offsets,
and FlatBuffer structure a verifier must reject.

`NAMED` holds the cases the tests name (each a function returning bytes); `make_case(seed)` is
the structured fuzzer: a seeded choice of a family and its parameters, deterministic, so a seed
replays. `tools/fuzz_hostile_tflite.py` runs many seeds in edgelite and LiteRT and counts the
outcomes; tests/schema/test_hostile_fuzz.py runs a few hundred in CI.
"""
from __future__ import annotations

import random
import struct

import numpy as np

from edgelite.schema import (Model, Operator, OperatorCode, Subgraph, Tensor, default_options,
                             save)
from edgelite.schema import tflite_generated as fb


def _op(name, ins, outs, version=0, **options):
    return Operator(OperatorCode(name, version), list(ins), list(outs),
                    default_options(name, **options))


# -- control flow ------------------------------------------------------------------------------

def if_chain(depth: int, split: bool = False) -> bytes:
    """Subgraph k (k < depth) is IF(c, c, x) with then = else = k+1 (split: else = the last);
    the last subgraph is y = x + x. Preparing each branch separately is 2**depth work."""
    m = Model()
    for k in range(depth + 1):
        sg = Subgraph(name=f"sg{k}")
        c = sg.add_tensor(Tensor("c", (1,), "bool"))
        x = sg.add_tensor(Tensor("x", (2,)))
        y = sg.add_tensor(Tensor("y", (2,)))
        sg.inputs, sg.outputs = [c, x], [y]
        if k < depth:
            sg.operators = [_op("IF", [c, c, x], [y], then_subgraph_index=k + 1,
                                else_subgraph_index=depth if split else k + 1)]
        else:
            sg.operators = [_op("ADD", [x, x], [y])]
        m.subgraphs.append(sg)
    return save(m)


def while_loop(cond_outputs: int = 1, cond_dtype: str = "bool", body_outputs: int = 1,
               cond_shape=()) -> bytes:
    """x -> WHILE(x < 10: x + 1). The condition subgraph gives `cond_outputs` outputs of
    `cond_dtype`; the body gives `body_outputs` outputs (1 is the sound model)."""
    m = Model()
    main = Subgraph(name="main")
    x = main.add_tensor(Tensor("x", (1,)))
    y = main.add_tensor(Tensor("y", (1,)))
    main.inputs, main.outputs = [x], [y]
    main.operators = [_op("WHILE", [x], [y], cond_subgraph_index=1, body_subgraph_index=2)]
    cond = Subgraph(name="cond")
    cx = cond.add_tensor(Tensor("x", (1,)))
    ten = cond.add_tensor(Tensor("ten", (1,), buffer=m.add_buffer(np.float32([10]))))
    outs = [cond.add_tensor(Tensor(f"c{k}", cond_shape, cond_dtype))
            for k in range(cond_outputs)]
    cond.inputs, cond.outputs = [cx], outs
    cond.operators = [_op("LESS" if cond_dtype == "bool" else "SUB", [cx, ten], [o])
                      for o in outs]
    body = Subgraph(name="body")
    bx = body.add_tensor(Tensor("x", (1,)))
    one = body.add_tensor(Tensor("one", (1,), buffer=m.add_buffer(np.float32([1]))))
    bys = [body.add_tensor(Tensor(f"y{k}", (1,))) for k in range(body_outputs)]
    body.inputs, body.outputs = [bx], bys
    body.operators = [_op("ADD", [bx, one], [b]) for b in bys]
    m.subgraphs = [main, cond, body]
    return save(m)


# -- tensors and buffers -----------------------------------------------------------------------

def fully_connected(weights_data: bool = True, large: bool = False) -> Model:
    m = Model()
    sg = Subgraph(name="main")
    x = sg.add_tensor(Tensor("x", (1, 4)))
    w_value = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    w = sg.add_tensor(Tensor("w", (3, 4), buffer=m.add_buffer(w_value if weights_data
                                                              else None)))
    b = sg.add_tensor(Tensor("b", (3,), buffer=m.add_buffer(np.float32([1, 2, 3]))))
    y = sg.add_tensor(Tensor("y", (1, 3)))
    sg.inputs, sg.outputs = [x], [y]
    sg.operators = [_op("FULLY_CONNECTED", [x, w, b], [y])]
    m.subgraphs.append(sg)
    return m


def weight_without_data() -> bytes:
    """FULLY_CONNECTED whose weights' buffer is empty: no op writes them, they are no input."""
    return save(fully_connected(weights_data=False))


def large_format_offset(offset: int, which: int = 0) -> bytes:
    """The large format (buffers after the FlatBuffer) with buffer `which`'s offset set to
    `offset` (1: the value the format reserves; runtimes read no data there)."""
    content = bytearray(save(fully_connected(), large=True))
    root = fb.Model.GetRootAs(content, 0)
    found = [k for k in range(root.BuffersLength()) if root.Buffers(k).Offset() > 1]
    buf = root.Buffers(found[which])._tab
    o = buf.Offset(6)  # Buffer's field 1 (offset: data 4, offset 6, size 8)
    struct.pack_into("<Q", content, buf.Pos + o, offset)
    return bytes(content)


# -- window options ----------------------------------------------------------------------------

def conv(op: str = "CONV_2D", version: int = 0, **options) -> bytes:
    """A 3x3 convolution (or pool) on 1x8x8x2 with `options` overriding the sound ones."""
    m = Model()
    sg = Subgraph(name="main")
    x = sg.add_tensor(Tensor("x", (1, 8, 8, 2)))
    y = sg.add_tensor(Tensor("y", (1, 8, 8, 2)))
    sg.inputs, sg.outputs = [x], [y]
    if op in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        shape = (2, 3, 3, 2) if op == "CONV_2D" else (1, 3, 3, 2)
        w = sg.add_tensor(Tensor("w", shape, buffer=m.add_buffer(
            np.linspace(-1, 1, int(np.prod(shape)), dtype=np.float32).reshape(shape))))
        b = sg.add_tensor(Tensor("b", (2,), buffer=m.add_buffer(np.float32([0.5, -0.5]))))
        sound = dict(padding=0, stride_w=1, stride_h=1, dilation_w_factor=1,
                     dilation_h_factor=1)
        if op == "DEPTHWISE_CONV_2D":
            sound["depth_multiplier"] = 1
        sg.operators = [_op(op, [x, w, b], [y], version, **{**sound, **options})]
    else:
        sound = dict(padding=0, stride_w=1, stride_h=1, filter_width=3, filter_height=3)
        sg.operators = [_op(op, [x], [y], version, **{**sound, **options})]
    m.subgraphs.append(sg)
    return save(m)


# -- sizes ---------------------------------------------------------------------------------------

def range_(limit: int, dtype=np.int32) -> bytes:
    """RANGE(0, limit, 1) of constants: folded at allocate_tensors (2**28 int32 is 1 GiB)."""
    m = Model()
    sg = Subgraph(name="main")
    name = np.dtype(dtype).name
    ts = [sg.add_tensor(Tensor(n, (), name, m.add_buffer(np.array(v, dtype))))
          for n, v in (("start", 0), ("limit", limit), ("delta", 1))]
    y = sg.add_tensor(Tensor("y", (limit,) if limit < 2 ** 31 else (1,), name))
    sg.outputs = [y]
    sg.operators = [_op("RANGE", ts, [y])]
    m.subgraphs.append(sg)
    return save(m)


def corrupt(kind: str) -> bytes:
    """The sound FULLY_CONNECTED model with one structural fault that LiteRT's FlatBuffers
    verifier rejects: "unterminated_name" (tensor 0's name loses its 0 byte), "odd_vtable"
    (the root table's vtable size made odd), "vtable_outside" (a tensor's soffset to its vtable
    points before the file), "shape_past_end" (tensor 0's shape vector longer than the file),
    "name_offset_negative" (tensor 0's name offset negative as an int32)."""
    content = bytearray(save(fully_connected()))
    root = fb.Model.GetRootAs(content, 0)
    tensor = root.Subgraphs(0).Tensors(0)
    tab = tensor._tab
    if kind == "unterminated_name":
        start = tab.Vector(tab.Offset(10))       # Tensor: shape 4, type 6, buffer 8, name 10
        n = struct.unpack_from("<I", content, start - 4)[0]
        content[start + n] = ord("x")
    elif kind == "odd_vtable":
        vt = root._tab.Pos - struct.unpack_from("<i", content, root._tab.Pos)[0]
        struct.pack_into("<H", content, vt, struct.unpack_from("<H", content, vt)[0] + 1)
    elif kind == "vtable_outside":
        struct.pack_into("<i", content, tab.Pos, tab.Pos + 64)
    elif kind == "shape_past_end":
        start = tab.Vector(tab.Offset(4))
        struct.pack_into("<I", content, start - 4, len(content))
    elif kind == "name_offset_negative":
        struct.pack_into("<I", content, tab.Pos + tab.Offset(10), 2 ** 31 + 8)
    else:
        raise ValueError(kind)
    return bytes(content)


CORRUPTIONS = ("unterminated_name", "odd_vtable", "vtable_outside", "shape_past_end",
               "name_offset_negative")

NAMED = {
    "if_chain_18": lambda: if_chain(18),
    "if_chain_50": lambda: if_chain(50),
    "if_nested_300": lambda: if_chain(300, split=True),
    "while_cond_2_outputs": lambda: while_loop(cond_outputs=2),
    "while_cond_float": lambda: while_loop(cond_dtype="float32"),
    "while_body_2_outputs": lambda: while_loop(body_outputs=2),
    "weight_without_data": weight_without_data,
    "large_offset_1": lambda: large_format_offset(1),
    "conv_stride_0": lambda: conv(stride_w=0),
    "conv_dilation_0": lambda: conv(dilation_h_factor=0),
    "conv_padding_99": lambda: conv(padding=99),
    "conv_version_999": lambda: conv(version=999),
    "depthwise_stride_0": lambda: conv("DEPTHWISE_CONV_2D", stride_h=0),
    "pool_stride_0": lambda: conv("MAX_POOL_2D", stride_w=0),
    "pool_filter_0": lambda: conv("AVERAGE_POOL_2D", filter_width=0),
    "range_2_28": lambda: range_(2 ** 28),
    "range_2_31": lambda: range_(2 ** 31 - 1),
}


# -- the structured fuzzer -----------------------------------------------------------------------

def make_case(seed: int) -> tuple:
    """(family, bytes) for `seed`: a family picked by weight and its parameters drawn."""
    rng = random.Random(seed)
    family = rng.choices(list(_FAMILIES), weights=[w for _, w in _FAMILIES.values()])[0]
    return family, _FAMILIES[family][0](rng)


_INTS = (0, 1, 2, 3, -1, -2, 99, 255, 256, 2 ** 15, 2 ** 16, 2 ** 31 - 1, -2 ** 31, 2 ** 24)


def _window_case(rng):
    op = rng.choice(["CONV_2D", "DEPTHWISE_CONV_2D", "MAX_POOL_2D", "AVERAGE_POOL_2D",
                     "L2_POOL_2D"])
    fields = (["padding", "stride_w", "stride_h", "dilation_w_factor", "dilation_h_factor",
               "fused_activation_function"] if "CONV" in op else
              ["padding", "stride_w", "stride_h", "filter_width", "filter_height",
               "fused_activation_function"])
    if op == "DEPTHWISE_CONV_2D":
        fields.append("depth_multiplier")
    options = {f: rng.choice(_INTS if f != "padding" else (0, 1, 2, 3, 99, 255))
               for f in rng.sample(fields, rng.randint(1, 3))}
    for name in ("fused_activation_function", "padding"):   # byte enums: -128..127
        if name in options:
            options[name] = (options[name] + 128) % 256 - 128
    version = rng.choice([0, 0, 0, 1, 2, 7, 99, 999, 2 ** 31 - 1])
    return conv(op, version, **options)


def _if_case(rng):
    return if_chain(rng.choice([1, 2, 8, 30, 60, 120, 250]), split=rng.random() < 0.5)


def _while_case(rng):
    return while_loop(cond_outputs=rng.choice([0, 1, 1, 2, 3]),
                      cond_dtype=rng.choice(["bool", "bool", "float32", "int32"]),
                      body_outputs=rng.choice([0, 1, 1, 2]),
                      cond_shape=rng.choice([(), (), (1,), (2,), (0,)]))


def _range_case(rng):
    limit = rng.choice([0, 1, 1000, 2 ** 20, 2 ** 24, 2 ** 27, 2 ** 28, 2 ** 30, 2 ** 31 - 1])
    return range_(limit, rng.choice([np.int32, np.int32, np.float32, np.int64]))


def _buffer_case(rng):
    kind = rng.choice(["no_data", "offset", "offset", "size"])
    if kind == "no_data":
        return weight_without_data()
    content = bytearray(save(fully_connected(), large=True))
    root = fb.Model.GetRootAs(content, 0)
    found = [k for k in range(root.BuffersLength()) if root.Buffers(k).Offset() > 1]
    tab = root.Buffers(rng.choice(found))._tab
    slot = 6 if kind == "offset" else 8
    o = tab.Offset(slot)
    value = rng.choice([0, 1, 2, 3, 7, 8, 17, len(content) - 4, len(content), len(content) + 1,
                        2 ** 31, 2 ** 63 - 1, 2 ** 64 - 1])
    struct.pack_into("<Q", content, tab.Pos + o, value)
    return bytes(content)


def _shape_case(rng):
    """A tensor shape or an op's shape-giving constant that asks for too much (or is absurd)."""
    m = Model()
    sg = Subgraph(name="main")
    op = rng.choice(["FILL", "BROADCAST_TO", "TILE", "RESHAPE", "PAD", "ZEROS_LIKE"])
    dims = [rng.choice([0, 1, 3, 1024, 2 ** 14, 2 ** 16, 2 ** 20, 2 ** 31 - 1, -1, -5])
            for _ in range(rng.randint(1, 4))]
    x = sg.add_tensor(Tensor("x", (1, 2), buffer=m.add_buffer(np.float32([[1, 2]]))))
    const = lambda name, v, t="int32": sg.add_tensor(  # noqa: E731
        Tensor(name, np.shape(v), t, m.add_buffer(np.array(v, t))))
    y = sg.add_tensor(Tensor("y", (1,)))
    if op == "FILL":
        ins = [const("dims", dims), const("v", 1.0, "float32")]
    elif op == "BROADCAST_TO":
        ins = [x, const("shape", dims)]
    elif op == "TILE":
        ins = [x, const("multiples", (dims + [1, 1])[:2])]
    elif op == "RESHAPE":
        ins = [x, const("shape", dims)]
    elif op == "PAD":
        ins = [x, const("pads", [[0, (dims + [0])[0]], [0, (dims + [0, 0])[1]]])]
    else:
        ins = [x]
    sg.outputs = [y]
    sg.operators = [_op(op, ins, [y])]
    m.subgraphs.append(sg)
    return save(m)


def _version_case(rng):
    m = fully_connected()
    m.subgraphs[0].operators[0].opcode = OperatorCode(
        "FULLY_CONNECTED", rng.choice([1, 5, 12, 13, 14, 50, 999, 2 ** 31 - 1]))
    return save(m)


def _corrupt_case(rng):
    """A sound small model with one precise structural fault: an offset made odd, pointed past
    the end or at the header, a vector length grown, a vtable entry pointed outside its table."""
    content = bytearray(rng.choice([weight_sound, lambda: conv(), lambda: while_loop()])())
    n = len(content)
    sites = []
    for pos in range(8, n - 4, 4):
        v = struct.unpack_from("<I", content, pos)[0]
        if 4 <= v < n and pos + v < n:
            sites.append(pos)        # looks like a uoffset (or a small scalar)
    pos = rng.choice(sites)
    value = rng.choice([1, 2, 3, n, n * 2, 2 ** 31 - 1, 2 ** 32 - 4,
                        struct.unpack_from("<I", content, pos)[0] + rng.choice([1, 2, 4, -4])])
    struct.pack_into("<I", content, pos, value % 2 ** 32)
    return bytes(content)


_DTYPES = ("float32", "float32", "int32", "int8", "uint8", "int64", "bool", "int16",
           "float16")
_VALUES = (0, 1, -1, 2, 3, 7, 127, -128, 255, 2 ** 15, 2 ** 20, 2 ** 31 - 1, -2 ** 31)


def _random_tensor(rng, m: Model, sg: Subgraph, name: str, constant: bool) -> int:
    dtype = rng.choice(_DTYPES)
    shape = tuple(rng.choice((0, 1, 1, 2, 3, 4, 5)) for _ in range(rng.choice((0, 1, 2, 3, 4,
                                                                               4, 5))))
    count = int(np.prod(shape))
    if constant and count:
        info = np.iinfo(dtype) if dtype not in ("float32", "float16", "bool") else None
        raw = [rng.choice(_VALUES) for _ in range(count)]
        if info is not None:
            raw = [min(max(v, info.min), info.max) for v in raw]
        with np.errstate(all="ignore"):   # 2**31 as float16 is inf: a value like any other
            value = np.array(raw, np.float64 if info is None else np.int64).astype(dtype)
        return sg.add_tensor(Tensor(name, shape, dtype, m.add_buffer(value.reshape(shape))))
    return sg.add_tensor(Tensor(name, shape, dtype))


def _op_case(rng):
    """Any op edgelite has a kernel for, with random inputs (count, dtypes, shapes, constant
    or not, values from the edges of their range), outputs and option values: what a kernel's
    checks must catch before its arithmetic does."""
    from edgelite.interpreter.kernels import registry
    skip = {"CUSTOM", "DELEGATE", "IF", "WHILE", "CALL_ONCE"}
    op = rng.choice(sorted(set(registry.KERNELS) - skip))
    for _ in range(20):
        m = Model()
        sg = Subgraph(name="main")
        ins = [_random_tensor(rng, m, sg, f"in{k}", rng.random() < 0.5)
               for k in range(rng.choice((0, 1, 1, 2, 2, 3, 3, 4, 5)))]
        if ins and rng.random() < 0.1:
            ins[rng.randrange(len(ins))] = -1                   # an omitted optional input
        outs = [_random_tensor(rng, m, sg, f"out{k}", False)
                for k in range(rng.choice((1, 1, 1, 2, 0)))]
        sg.inputs = [t for t in ins if t >= 0 and m.buffers[sg.tensors[t].buffer].nbytes == 0]
        sg.outputs = outs
        try:
            options = default_options(op)
            fields = [f for f, v in options.fields.items() if isinstance(v, (int, bool))]
            changed = {f: rng.choice(_VALUES) for f in rng.sample(fields, min(len(fields),
                                                                           rng.randint(0, 2)))}
            for f, v in list(changed.items()):
                if isinstance(options.fields[f], bool):
                    changed[f] = bool(v)
            sg.operators = [Operator(OperatorCode(op), ins, outs,
                                     default_options(op, **changed))]
            m.subgraphs.append(sg)
            return save(m)
        except Exception:  # noqa: BLE001 - a value the writer cannot store: draw again
            continue
    return save(fully_connected())


def weight_sound() -> bytes:
    return save(fully_connected())


_FAMILIES = {  # family -> (generator, weight)
    "window_options": (_window_case, 4),
    "if_nesting": (_if_case, 1),
    "while_shape": (_while_case, 2),
    "range_size": (_range_case, 1),
    "buffers": (_buffer_case, 2),
    "shape_sizes": (_shape_case, 3),
    "op_version": (_version_case, 1),
    "corrupt_structure": (_corrupt_case, 4),
    "any_op": (_op_case, 12),
}
