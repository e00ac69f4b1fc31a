"""Cases for the shape kernels (see test_ops.py): RESHAPE SQUEEZE EXPAND_DIMS SHAPE RANK
BROADCAST_TO FILL ZEROS_LIKE RANGE."""
import dataclasses

import numpy as np

from edgelite.schema import load, save
from tests.opmodel import In, Out, case

rng = np.random.default_rng(0)

# Every dtype LiteRT's data-movement kernels take, with the quantization of the 8/16-bit ones.
DTYPES = ("float32", "float16", "int8", "uint8", "int16", "int32", "int64", "bool")
QUANT = {"int8": (0.5, -3), "uint8": (0.25, 128), "int16": (0.125, 0)}


def data(shape, dtype="float32"):
    """Random values of `dtype` (both signs, the type's extremes included for integers)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    lo, hi = max(info.min, -1000), min(info.max, 1000)
    x = rng.integers(lo, hi, size=shape, endpoint=True).astype(dtype)
    if x.size > 2:
        x.flat[0], x.flat[-1] = info.min, info.max
    return x


def typed(shape, dtype):
    """(In, Out) of `dtype`, quantized for int8/uint8/int16."""
    q = QUANT.get(dtype)
    return In(shape, dtype, q), Out((), dtype, q)


def versioned(c, version: int):
    """`c` with its op's version set: some ops start above version 1 in TFLite (BROADCAST_TO at
    2), which the writer's automatic versions do not know."""
    model = load(c.model)
    op = model.subgraphs[0].operators[0]
    op.opcode = dataclasses.replace(op.opcode, version=version)
    c.model = save(model)
    return c


def i32(*values):
    return np.array(values, np.int32)


CASES = []
for dt in DTYPES:
    i, o = typed((2, 3, 4), dt)
    CASES += [
        case(f"reshape_{dt}", "RESHAPE", [i, i32(4, -1)], [data((2, 3, 4), dt)], outputs=[o]),
        case(f"squeeze_{dt}", "SQUEEZE", [typed((1, 3, 1, 2), dt)[0]], [data((1, 3, 1, 2), dt)],
             outputs=[o]),
        case(f"expand_dims_{dt}", "EXPAND_DIMS", [i, i32(-1)], [data((2, 3, 4), dt)],
             outputs=[o]),
        versioned(case(f"broadcast_to_{dt}", "BROADCAST_TO", [typed((3, 1), dt)[0],
                                                              i32(2, 3, 4)],
                       [data((3, 1), dt)], outputs=[o]), 2),
    ]

x234 = data((2, 3, 4))
CASES += [
    # RESHAPE: the shape from options, legacy [0] for a scalar, several forms of -1.
    case("reshape_options", "RESHAPE", [In((2, 3, 4))], [x234],
         options=dict(new_shape=(3, 8))),
    case("reshape_options_stretch", "RESHAPE", [In((2, 3, 4))], [x234],
         options=dict(new_shape=(-1, 2, 3))),
    case("reshape_legacy_scalar", "RESHAPE", [In((1, 1))], [data((1, 1))],
         options=dict(new_shape=(0,))),
    case("reshape_to_scalar", "RESHAPE", [In((1, 1, 1)), np.zeros(0, np.int32)], [data((1, 1, 1))]),
    case("reshape_runtime_shape_with_options", "RESHAPE", [In((2, 3, 4)), In((2,), "int32")],
         [x234, i32(6, 4)], options=dict(new_shape=(6, 4))),
    case("reshape_stretch_first", "RESHAPE", [In((2, 3, 4)), i32(-1, 12)], [x234]),
    # SQUEEZE with listed dims, negative ones included.
    case("squeeze_dims", "SQUEEZE", [In((1, 3, 1, 2))], [data((1, 3, 1, 2))],
         options=dict(squeeze_dims=(0,))),
    case("squeeze_negative_dims", "SQUEEZE", [In((1, 3, 1, 2))], [data((1, 3, 1, 2))],
         options=dict(squeeze_dims=(-2, 0))),
    # EXPAND_DIMS at each end, int64 axis.
    case("expand_dims_front", "EXPAND_DIMS", [In((2, 3)), i32(0)], [data((2, 3))]),
    case("expand_dims_middle_int64", "EXPAND_DIMS", [In((2, 3)), np.array([1], np.int64)],
         [data((2, 3))]),
    case("expand_dims_negative", "EXPAND_DIMS", [In((2, 3)), i32(-2)], [data((2, 3))]),
    # SHAPE and RANK: values known before running.
    case("shape_int32", "SHAPE", [In((2, 3, 4))], [x234], outputs=[Out((), "int32")],
         options=dict(out_type=2)),
    case("shape_int64", "SHAPE", [In((5, 1), "int8", (0.5, 0))], [data((5, 1), "int8")],
         outputs=[Out((), "int64")], options=dict(out_type=4)),
    case("rank", "RANK", [In((2, 3, 4))], [x234], outputs=[Out((), "int32")]),
    case("rank_bool", "RANK", [In((7,), "bool")], [data((7,), "bool")],
         outputs=[Out((), "int32")]),
    # BROADCAST_TO: rank growth, int64 shape, nothing to broadcast.
    versioned(case("broadcast_to_int64_shape", "BROADCAST_TO",
                   [In((4,)), np.array([3, 2, 4], np.int64)], [data((4,))]), 2),
    versioned(case("broadcast_to_same", "BROADCAST_TO", [In((2, 3)), i32(2, 3)],
                   [data((2, 3))]), 2),
    # FILL: value given at run time, several value types, int64 dims.
    case("fill_float32", "FILL", [i32(2, 3), In((), "float32")], [np.float32(1.5)]),
    case("fill_int32_int64_dims", "FILL", [np.array([4, 1, 2], np.int64), In((), "int32")],
         [np.int32(-7)], outputs=[Out((), "int32")]),
    case("fill_int64", "FILL", [i32(3), In((), "int64")], [np.int64(2**40)],
         outputs=[Out((), "int64")]),
    case("fill_bool", "FILL", [i32(2, 2), In((), "bool")], [np.bool_(True)],
         outputs=[Out((), "bool")]),
    case("fill_float16", "FILL", [i32(3, 1), In((), "float16")], [np.float16(-0.75)],
         outputs=[Out((), "float16")]),
    case("fill_constant", "FILL", [i32(2, 2), np.float32(3.25)], []),
]
for dt in ("float32", "int32", "int64"):
    CASES += [
        case(f"zeros_like_{dt}", "ZEROS_LIKE", [In((2, 3), dt)], [data((2, 3), dt)],
             outputs=[Out((), dt)]),
        case(f"zeros_like_scalar_{dt}", "ZEROS_LIKE", [In((), dt)], [data((), dt)],
             outputs=[Out((), dt)]),
    ]
# RANGE with constant inputs (the output size is their value): counting up, down, by fractions.
for name, (start, limit, delta, dt) in {
        "int32": (0, 10, 3, np.int32), "int32_down": (5, -4, -2, np.int32),
        "int64": (2**33, 2**33 + 5, 1, np.int64), "float32": (0.0, 1.0, 0.1, np.float32),
        "float32_down": (3.0, -1.5, -0.7, np.float32)}.items():
    CASES.append(case(f"range_{name}", "RANGE", [dt(start), dt(limit), dt(delta)], [],
                      outputs=[Out((), np.dtype(dt).name)]))
