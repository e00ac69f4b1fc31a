"""Cases for the layout kernels (see test_ops.py): TRANSPOSE CONCATENATION PACK UNPACK SPLIT
SPLIT_V TILE REVERSE_V2."""
import numpy as np

from tests.interpreter.cases_shape_ops import DTYPES, data, i32, typed
from tests.opmodel import In, Out, case

# (op, dtype) pairs LiteRT's kernels reject: edgelite copies them too, untested here.
LITERT_LACKS = {("UNPACK", "int64"), ("PACK", "bool"), ("SPLIT", "bool"), ("SPLIT_V", "bool"),
                ("PACK", "float16"), ("SPLIT", "float16"), ("SPLIT_V", "float16")}

CASES = []
for dt in DTYPES:
    i, o = typed((2, 3, 4), dt)
    x = data((2, 3, 4), dt)
    CASES += [
        case(f"transpose_{dt}", "TRANSPOSE", [i, i32(2, 0, 1)], [x], outputs=[o]),
        case(f"concatenation_{dt}", "CONCATENATION", [i, typed((2, 1, 4), dt)[0]],
             [x, data((2, 1, 4), dt)], outputs=[o], options=dict(axis=1)),
        case(f"pack_{dt}", "PACK", [i, i], [x, data((2, 3, 4), dt)], outputs=[o],
             options=dict(values_count=2, axis=1)),
        case(f"unpack_{dt}", "UNPACK", [i], [x], outputs=[o, o, o],
             options=dict(num=3, axis=1)),
        case(f"split_{dt}", "SPLIT", [i32(2), i], [x], outputs=[o, o],
             options=dict(num_splits=2)),
        case(f"split_v_{dt}", "SPLIT_V", [i, i32(1, -1), i32(-1)], [x], outputs=[o, o],
             options=dict(num_splits=2)),
        case(f"tile_{dt}", "TILE", [i, i32(2, 1, 3)], [x], outputs=[o]),
        case(f"reverse_v2_{dt}", "REVERSE_V2", [i, i32(1)], [x], outputs=[o]),
    ]
CASES = [c for c in CASES if tuple(c.id.rsplit("_", 1)) not in
         {(op.lower(), dt) for op, dt in LITERT_LACKS}]

x234 = data((2, 3, 4))
x5 = data((1, 2, 3, 2, 2))
CASES += [
    # TRANSPOSE: identity, 2-D, 5-D, 6-D.
    case("transpose_identity", "TRANSPOSE", [In((2, 3, 4)), i32(0, 1, 2)], [x234]),
    case("transpose_2d", "TRANSPOSE", [In((3, 5)), i32(1, 0)], [data((3, 5))]),
    case("transpose_negative_perm", "TRANSPOSE", [In((2, 3, 4)), i32(-1, 0, -2)], [x234]),
    case("transpose_5d", "TRANSPOSE", [In((1, 2, 3, 2, 2)), i32(4, 2, 0, 3, 1)], [x5]),
    case("transpose_6d", "TRANSPOSE", [In((2, 1, 2, 3, 1, 2)), i32(5, 3, 1, 0, 4, 2)],
         [data((2, 1, 2, 3, 1, 2))]),
    # CONCATENATION: every axis incl. negative ones, three inputs, a constant input.
    case("concatenation_axis0", "CONCATENATION", [In((2, 3, 4)), In((1, 3, 4))],
         [x234, data((1, 3, 4))], options=dict(axis=0)),
    case("concatenation_axis_last_negative", "CONCATENATION",
         [In((2, 3, 4)), In((2, 3, 1)), In((2, 3, 2))],
         [x234, data((2, 3, 1)), data((2, 3, 2))], options=dict(axis=-1)),
    case("concatenation_axis_minus2_const", "CONCATENATION", [In((2, 3, 4)), data((2, 2, 4))],
         [x234], options=dict(axis=-2)),
    case("concatenation_one_input", "CONCATENATION", [In((2, 3))], [data((2, 3))],
         options=dict(axis=1)),
    # uint8 with differing scales and zero points: TFLite requantizes each input.
    case("concatenation_uint8_requantize", "CONCATENATION",
         [In((2, 8), "uint8", (0.5, 128)), In((2, 8), "uint8", (0.1, 10)),
          In((2, 8), "uint8", (0.25, 128))],
         [np.arange(0, 256, 16, dtype=np.uint8).reshape(2, 8),
          np.arange(3, 256, 16, dtype=np.uint8).reshape(2, 8),
          np.arange(5, 256, 16, dtype=np.uint8).reshape(2, 8)],
         outputs=[Out((), "uint8", (0.25, 128))], options=dict(axis=1)),
    case("concatenation_uint8_requantize_halves", "CONCATENATION",
         [In((1, 256), "uint8", (0.3, 7)), In((1, 256), "uint8", (1.0, 0))],
         [np.arange(256, dtype=np.uint8)[None], np.arange(256, dtype=np.uint8)[None]],
         outputs=[Out((), "uint8", (0.6, 3))], options=dict(axis=0)),
    # PACK / UNPACK: axis 0, last, negative; num inferred by UNPACK.
    case("pack_axis0", "PACK", [In((3,)), In((3,)), In((3,))],
         [data((3,)), data((3,)), data((3,))], options=dict(values_count=3, axis=0)),
    case("pack_axis_last", "PACK", [In((2, 3)), In((2, 3))], [data((2, 3)), data((2, 3))],
         options=dict(values_count=2, axis=2)),
    case("pack_axis_negative", "PACK", [In((2, 3)), In((2, 3))], [data((2, 3)), data((2, 3))],
         options=dict(values_count=2, axis=-2)),
    case("pack_scalars", "PACK", [In((), "int32"), In((), "int32")], [np.int32(4), np.int32(-1)],
         outputs=[Out((), "int32")], options=dict(values_count=2, axis=0)),
    case("unpack_axis0", "UNPACK", [In((2, 3))], [data((2, 3))], outputs=[Out(), Out()],
         options=dict(num=2, axis=0)),
    case("unpack_axis_negative", "UNPACK", [In((2, 3, 2))], [data((2, 3, 2))],
         outputs=[Out(), Out()], options=dict(num=2, axis=-1)),
    # SPLIT / SPLIT_V: negative axes, one piece, zero-size pieces left out.
    case("split_axis_negative", "SPLIT", [i32(-1), In((2, 3, 4))], [x234],
         outputs=[Out()] * 4, options=dict(num_splits=4)),
    case("split_one", "SPLIT", [i32(0), In((2, 3))], [data((2, 3))], options=dict(num_splits=1)),
    case("split_v_three", "SPLIT_V", [In((2, 6)), i32(3, 1, 2), i32(1)], [data((2, 6))],
         outputs=[Out()] * 3, options=dict(num_splits=3)),
    case("split_v_int64_sizes", "SPLIT_V", [In((4, 3)), np.array([-1, 3], np.int64), i32(0)],
         [data((4, 3))], outputs=[Out()] * 2, options=dict(num_splits=2)),
    # TILE: int64 multiples, a multiple of 1 everywhere, 1-D.
    case("tile_int64_multiples", "TILE", [In((2, 3)), np.array([3, 2], np.int64)],
         [data((2, 3))]),
    case("tile_ones", "TILE", [In((2, 3)), i32(1, 1)], [data((2, 3))]),
    case("tile_1d", "TILE", [In((3,)), i32(4)], [data((3,))]),
    # REVERSE_V2: first, last, negative axes; several axes at once.
    case("reverse_v2_axis0", "REVERSE_V2", [In((2, 3, 4)), i32(0)], [x234]),
    case("reverse_v2_negative", "REVERSE_V2", [In((2, 3, 4)), i32(-1)], [x234]),
    case("reverse_v2_two_axes", "REVERSE_V2", [In((2, 3, 4)), i32(1, 2)], [x234]),
    case("reverse_v2_all_axes", "REVERSE_V2", [In((2, 3, 4)), i32(0, 1, 2)], [x234]),
    case("reverse_v2_1d", "REVERSE_V2", [In((5,)), i32(0)], [data((5,))]),
]
