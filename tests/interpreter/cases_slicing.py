"""Cases for the slicing kernels (see test_ops.py): SLICE STRIDED_SLICE GATHER GATHER_ND
EMBEDDING_LOOKUP TOPK_V2 PAD PADV2 MIRROR_PAD."""
import numpy as np

from tests.interpreter.cases_shape_ops import DTYPES, data, i32, typed
from tests.opmodel import In, Out, case


def i64(*values):
    return np.array(values, np.int64)


def strided(id, shape, begin, end, strides, feeds=None, **masks):
    """A STRIDED_SLICE case on a float32 input of `shape`; masks as keyword options."""
    return case(f"strided_slice_{id}", "STRIDED_SLICE",
                [In(shape), i32(*begin), i32(*end), i32(*strides)],
                feeds or [data(shape)], options=masks)


x234 = data((2, 3, 4))
x46 = data((4, 6))
ids = np.array([[2, 0], [1, 2]], np.int32)

CASES = []
for dt in DTYPES:
    i, o = typed((2, 3, 4), dt)
    x = data((2, 3, 4), dt)
    CASES += [
        case(f"slice_{dt}", "SLICE", [i, i32(0, 1, 1), i32(2, -1, 2)], [x], outputs=[o]),
        case(f"strided_slice_{dt}", "STRIDED_SLICE", [i, i32(1, 2, 0), i32(2, -4, 4),
                                                      i32(1, -1, 2)], [x], outputs=[o]),
        case(f"gather_{dt}", "GATHER", [i, In((2, 2), "int32")], [x, ids], outputs=[o],
             options=dict(axis=1)),
        case(f"gather_nd_{dt}", "GATHER_ND", [i, In((3, 2), "int32")],
             [x, np.array([[1, 2], [0, 0], [1, 1]], np.int32)], outputs=[o]),
        case(f"pad_{dt}", "PAD", [i, np.int32([[0, 1], [2, 0], [1, 1]])], [x], outputs=[o]),
        case(f"mirror_pad_{dt}", "MIRROR_PAD", [i, np.int32([[1, 0], [0, 2], [3, 2]])], [x],
             outputs=[o], options=dict(mode=0)),
    ]
    if dt != "bool":
        CASES += [
            case(f"topk_v2_{dt}", "TOPK_V2", [i, i32(3)], [x], outputs=[o, Out((), "int32")]),
            case(f"padv2_{dt}", "PADV2", [i, np.int32([[1, 1], [0, 1], [2, 0]]),
                                          np.array(7, dt)], [x], outputs=[o],
                 const_quant={2: typed((), dt)[0].quant} if dt in ("int8", "uint8", "int16")
                 else None),
        ]
# (op, dtype) pairs LiteRT's kernels reject: edgelite computes them too, untested here.
LITERT_LACKS = {("pad", "bool"), ("mirror_pad", "bool"), ("gather_nd", "bool"),
                ("topk_v2", "int16"), ("topk_v2", "float16")}
CASES = [c for c in CASES if tuple(c.id.rsplit("_", 1)) not in LITERT_LACKS]

CASES += [
    # SLICE: int64 begin and size, the whole tensor, begin given at run time.
    case("slice_int64_begin_size", "SLICE", [In((4, 6)), i64(1, 2), i64(3, -1)], [x46]),
    case("slice_whole", "SLICE", [In((4, 6)), i32(0, 0), i32(-1, -1)], [x46]),
    case("slice_runtime_begin", "SLICE", [In((4, 6)), In((2,), "int32"), i32(2, 3)],
         [x46, i32(1, 3)]),
    case("slice_5d", "SLICE", [In((2, 1, 3, 2, 2)), i32(1, 0, 1, 0, 1), i32(1, 1, 2, -1, 1)],
         [data((2, 1, 3, 2, 2))]),
    # STRIDED_SLICE: every mask, negative indices and strides, clamping, offset.
    strided("plain", (4, 6), (1, 0), (3, 6), (1, 2)),
    strided("negative_indices", (4, 6), (-3, -5), (-1, -1), (1, 1)),
    strided("reverse", (4, 6), (-1, 5), (-5, -7), (-1, -2)),
    strided("reverse_partial", (4, 6), (2, 4), (0, 1), (-1, -1)),
    strided("clamped", (4, 6), (-10, 2), (10, 100), (1, 3)),
    strided("clamped_reverse", (4, 6), (10, 100), (-10, -100), (-2, -1)),
    strided("empty", (4, 6), (3, 0), (1, 6), (1, 1)),
    strided("begin_mask", (4, 6), (2, 3), (4, 5), (1, 1), begin_mask=0b11),
    strided("end_mask", (4, 6), (1, 3), (2, 4), (1, 1), end_mask=0b10),
    strided("masks_reverse", (4, 6), (1, 3), (2, 4), (-1, -2), begin_mask=0b01, end_mask=0b10),
    strided("shrink", (4, 6), (1, 2), (2, 3), (1, 1), shrink_axis_mask=0b01),
    strided("shrink_all", (4, 6), (-1, -2), (0, 0), (1, 1), shrink_axis_mask=0b11),
    strided("fewer_indices", (2, 3, 4), (1,), (2,), (1,)),
    strided("ellipsis", (2, 3, 4), (0, 1), (0, 3), (1, 1), ellipsis_mask=0b01),
    strided("ellipsis_middle", (2, 3, 4), (1, 0, 1), (2, 0, 3), (1, 1, 1), ellipsis_mask=0b010),
    strided("ellipsis_shrink", (2, 3, 4), (0, 2), (0, 3), (1, 1), ellipsis_mask=0b01,
            shrink_axis_mask=0b10),
    strided("new_axis", (4, 6), (0, 1, 0), (0, 3, 6), (1, 1, 2), new_axis_mask=0b001),
    strided("new_axis_middle", (4, 6), (1, 0, 2), (3, 0, 5), (1, 1, 1), new_axis_mask=0b010),
    strided("new_axis_ellipsis", (2, 3, 4), (0, 0, 1), (0, 0, 3), (1, 1, 1),
            ellipsis_mask=0b001, new_axis_mask=0b010),
    strided("offset", (4, 6), (1, 2), (2, 3), (1, 1), offset=True),
    strided("offset_strided", (4, 6), (0, 1), (4, 4), (2, 2), offset=True),
    strided("offset_negative_begin", (4, 6), (-3, -4), (2, 3), (1, 1), offset=True),
    case("strided_slice_offset_runtime_begin", "STRIDED_SLICE",
         [In((4, 6)), In((2,), "int32"), i32(2, 3), i32(1, 1)], [x46, i32(1, 2)],
         options=dict(offset=True)),
    case("strided_slice_5d", "STRIDED_SLICE",
         [In((2, 3, 2, 3, 4)), i32(1, 0, 1, 2, 0), i32(2, 3, 2, 0, 4), i32(1, 2, 1, -1, 3)],
         [data((2, 3, 2, 3, 4))]),
    # GATHER: axes, negative axis, batch_dims, index types, scalar index, constant params.
    case("gather_axis0", "GATHER", [In((4, 6)), In((3,), "int32")], [x46, i32(3, 0, 3)]),
    case("gather_axis_negative", "GATHER", [In((2, 3, 4)), In((2,), "int32")],
         [x234, i32(3, 1)], options=dict(axis=-1)),
    case("gather_scalar_index", "GATHER", [In((4, 6)), In((), "int32")], [x46, np.int32(2)]),
    case("gather_int64_indices", "GATHER", [In((4, 6)), In((2, 2), "int64")],
         [x46, np.array([[5, 0], [1, 1]], np.int64)], options=dict(axis=1)),
    case("gather_int16_indices", "GATHER", [In((4, 6)), In((2,), "int16")],
         [x46, np.array([1, 3], np.int16)]),
    case("gather_batch_dims", "GATHER", [In((2, 3, 4)), In((2, 2), "int32")],
         [x234, np.array([[0, 2], [1, 1]], np.int32)], options=dict(axis=1, batch_dims=1)),
    case("gather_batch_dims_axis2", "GATHER", [In((2, 3, 4)), In((2, 3), "int32")],
         [x234, np.array([[0, 3, 1], [2, 2, 0]], np.int32)], options=dict(axis=2, batch_dims=1)),
    case("gather_batch_dims_negative", "GATHER", [In((2, 3, 4)), In((2, 3, 1), "int32")],
         [x234, np.array([[[0], [3], [1]], [[2], [2], [0]]], np.int32)],
         options=dict(axis=2, batch_dims=-1)),
    case("gather_constant_params", "GATHER", [data((5, 3)), In((4,), "int32")], [i32(4, 0, 2, 2)]),
    # GATHER_ND: whole elements, slices, int64 and int16 indices, batched indices.
    case("gather_nd_slices", "GATHER_ND", [In((2, 3, 4)), In((2, 1), "int32")],
         [x234, np.array([[1], [0]], np.int32)]),
    case("gather_nd_elements", "GATHER_ND", [In((2, 3, 4)), In((2, 3), "int64")],
         [x234, np.array([[1, 2, 3], [0, 0, 1]], np.int64)]),
    case("gather_nd_batched", "GATHER_ND", [In((4, 6)), In((2, 2, 2), "int32")],
         [x46, np.array([[[0, 1], [3, 5]], [[2, 2], [1, 0]]], np.int32)]),
    case("gather_nd_int16_indices", "GATHER_ND", [In((4, 6)), In((2, 1), "int16")],
         [x46, np.array([[3], [1]], np.int16)]),
    # EMBEDDING_LOOKUP: float and int tables, and int8/uint8 tables read as float (hybrid).
    case("embedding_lookup", "EMBEDDING_LOOKUP", [In((3,), "int32"), data((5, 4))], [i32(4, 0, 4)]),
    case("embedding_lookup_3d_table", "EMBEDDING_LOOKUP", [In((2,), "int32"), In((3, 2, 2))],
         [i32(2, 1), data((3, 2, 2))]),
    case("embedding_lookup_int32", "EMBEDDING_LOOKUP", [In((2,), "int32"), data((3, 4), "int32")],
         [i32(1, 2)], outputs=[Out((), "int32")]),
    case("embedding_lookup_hybrid_int8", "EMBEDDING_LOOKUP",
         [In((3,), "int32"), data((5, 4), "int8")], [i32(4, 0, 1)], const_quant={1: (0.37, 0)}),
    case("embedding_lookup_hybrid_per_row", "EMBEDDING_LOOKUP",
         [In((3,), "int32"), data((4, 3), "int8")], [i32(3, 0, 3)],
         const_quant={1: ([0.1, 0.2, 0.3, 0.45], [0, 0, 0, 0], 0)}),
    case("embedding_lookup_hybrid_uint8", "EMBEDDING_LOOKUP",
         [In((2,), "int32"), data((3, 4), "uint8")], [i32(2, 1)], const_quant={1: (0.5, 0)}),
    # TOPK_V2: ties go to the lower index; k = 1 and k = n; 1-D; int64.
    case("topk_v2_ties", "TOPK_V2", [In((2, 6)), i32(4)],
         [np.array([[1, 3, 3, 0, 3, 1], [2, 2, 2, 2, 2, 2]], np.float32)],
         outputs=[Out(), Out((), "int32")]),
    case("topk_v2_k1", "TOPK_V2", [In((3, 5)), i32(1)], [data((3, 5))],
         outputs=[Out(), Out((), "int32")]),
    case("topk_v2_all_1d", "TOPK_V2", [In((7,), "int32"), i32(7)],
         [np.array([5, -1, 5, 9, 0, -1, 9], np.int32)],
         outputs=[Out((), "int32"), Out((), "int32")]),
    case("topk_v2_4d", "TOPK_V2", [In((2, 1, 2, 5), "uint8"), i32(2)],
         [np.array([[[[1, 200, 200, 3, 0], [7, 7, 7, 8, 8]]], [[[0, 0, 0, 0, 0],
                                                                [9, 1, 9, 1, 9]]]], np.uint8)],
         outputs=[Out((), "uint8"), Out((), "int32")]),
    # PAD / PADV2: int64 paddings, zero padding, quantized fills (PAD uses the zero point).
    case("pad_int64_paddings", "PAD", [In((2, 3)), np.int64([[1, 2], [0, 3]])], [data((2, 3))]),
    case("pad_nothing", "PAD", [In((2, 3)), np.int32([[0, 0], [0, 0]])], [data((2, 3))]),
    case("pad_4d", "PAD", [In((1, 2, 2, 3)), np.int32([[0, 0], [1, 1], [2, 1], [0, 0]])],
         [data((1, 2, 2, 3))]),
    case("pad_uint8_zero_point", "PAD",
         [In((2, 2), "uint8", (0.5, 131)), np.int32([[1, 1], [1, 1]])],
         [data((2, 2), "uint8")], outputs=[Out((), "uint8", (0.5, 131))]),
    case("pad_int8_zero_point", "PAD", [In((2, 2), "int8", (0.5, -7)), np.int32([[1, 0], [0, 2]])],
         [data((2, 2), "int8")], outputs=[Out((), "int8", (0.5, -7))]),
    case("padv2_runtime_value", "PADV2",
         [In((2, 3)), np.int32([[1, 0], [1, 2]]), In((), "float32")],
         [data((2, 3)), np.float32(-2.5)]),
    case("padv2_int8_value", "PADV2", [In((2, 2), "int8", (0.5, -7)), np.int32([[1, 1], [0, 1]]),
                                       np.array(100, np.int8)],
         [data((2, 2), "int8")], outputs=[Out((), "int8", (0.5, -7))],
         const_quant={2: (0.5, -7)}),
    # MIRROR_PAD: REFLECT and SYMMETRIC, the largest pads each allows, int64 paddings.
    case("mirror_pad_symmetric", "MIRROR_PAD", [In((2, 3, 4)), np.int32([[2, 1], [3, 0], [0, 4]])],
         [x234], options=dict(mode=1)),
    case("mirror_pad_reflect_max", "MIRROR_PAD", [In((3, 4)), np.int32([[2, 2], [3, 1]])],
         [data((3, 4))], options=dict(mode=0)),
    case("mirror_pad_int64_paddings", "MIRROR_PAD", [In((3, 4)), np.int64([[1, 2], [0, 3]])],
         [data((3, 4))], options=dict(mode=1)),
    case("mirror_pad_1d", "MIRROR_PAD", [In((5,)), np.int32([[4, 3]])], [data((5,))],
         options=dict(mode=0)),
    case("mirror_pad_4d", "MIRROR_PAD",
         [In((1, 3, 3, 2)), np.int32([[0, 0], [1, 2], [2, 1], [0, 0]])],
         [data((1, 3, 3, 2))], options=dict(mode=1)),
]
