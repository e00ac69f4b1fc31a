"""Ops that pad a tensor: PAD PADV2 MIRROR_PAD. The paddings set the output shape: read at
prepare when constant, else the kernel is dynamic (`node.dynamic`)."""
from __future__ import annotations

import numpy as np

from .common import DATA_TYPES, constant_value, known_at_run_time
from .registry import register


# -- PAD / PADV2 / MIRROR_PAD --------------------------------------------------------------------

def _paddings(node, rank: int, values=None) -> list:
    """The paddings: input 1's constant value, or `values` (its value while running)."""
    t = node.input(1)
    values = np.asarray(constant_value(node, 1, "the paddings") if values is None else values)
    if t.type_name not in ("int32", "int64") or values.shape != (rank, 2):
        raise node.fail(f"the paddings must be an int32 or int64 [{rank}, 2] tensor, got "
                        f"{t.type_name} {list(values.shape)}")
    if (values < 0).any():
        raise node.fail(f"the paddings {values.tolist()} must not be negative")
    return [(int(a), int(b)) for a, b in values]


def _pad_prepare(node):
    in_shape = tuple(node.input(0).shape)
    pads = _paddings(node, len(in_shape))
    node.outputs[0].shape = tuple(a + n + b for n, (a, b) in zip(in_shape, pads))
    return tuple(slice(a, a + n) for n, (a, _) in zip(in_shape, pads))


def _pad_at_run_time(node, value_of):
    """PAD and PADV2 with paddings that arrive while running: run(x, paddings[, value])
    returns the padded array; `value_of(inputs)` gives the fill."""
    node.dynamic = True
    dtype = node.outputs[0].dtype

    def run(x, paddings, *rest):
        pads = _paddings(node, x.ndim, paddings)
        from ..budget import empty
        out = empty(node, tuple(a + n + b for n, (a, b) in zip(x.shape, pads)), dtype,
                    value_of(rest))
        out[tuple(slice(a, a + n) for n, (a, _) in zip(x.shape, pads))] = x
        return [out]
    return run


def _pad_value(node) -> object:
    """PAD's fill: the output zero point for quantized tensors, else 0."""
    out = node.outputs[0]
    if out.type_name in ("int8", "uint8", "int16") and out.quantization is not None:
        return out.zero_point
    return 0


@register("PAD", *DATA_TYPES)
def pad(node):
    node.expect_inputs(2)
    value = _pad_value(node)
    if known_at_run_time(node, 1):
        return _pad_at_run_time(node, lambda rest: value)
    center = _pad_prepare(node)

    def run(x, _, out):
        out.fill(value)
        out[center] = x
    return run


@register("PADV2", *DATA_TYPES)
def padv2(node):
    node.expect_inputs(2, 3)
    const = node.inputs[2] if len(node.inputs) == 3 else None
    if known_at_run_time(node, 1):
        value = _pad_value(node)
        return _pad_at_run_time(node, lambda rest: rest[0].reshape(()) if rest and
                                rest[0] is not None else value)
    center = _pad_prepare(node)
    if const is None:
        value = _pad_value(node)

        def run(x, _, out):
            out.fill(value)
            out[center] = x
        return run
    if const.type_name != node.input(0).type_name or int(np.prod(const.shape)) != 1:
        raise node.fail(f"the constant value must be one {node.input(0).type_name}, got "
                        f"{const.type_name} {list(const.shape)}")
    out = node.outputs[0]
    if out.type_name in ("int8", "uint8", "int16") and out.quantization is not None and \
            (const.zero_point != out.zero_point or const.scale != out.scale):
        raise node.fail("the constant value must have the output's scale and zero point")

    def run_value(x, _, v, out):
        out.fill(v.reshape(()))
        out[center] = x
    return run_value


@register("MIRROR_PAD", *DATA_TYPES)
def mirror_pad(node):
    node.expect_inputs(2)
    in_shape = tuple(node.input(0).shape)
    mode = int(node.options.mode)  # 0 REFLECT, 1 SYMMETRIC
    if mode not in (0, 1):
        raise node.fail(f"unknown mirror pad mode {mode}")
    if known_at_run_time(node, 1):
        node.dynamic = True  # the output shape depends on the paddings
        dtype = node.outputs[0].dtype

        def run_values(x, paddings):
            pads = _paddings(node, x.ndim, paddings)
            center, fills = _mirror_plan(node, x.shape, pads, mode)
            from ..budget import empty
            out = empty(node, tuple(a + n + b for n, (a, b) in zip(x.shape, pads)), dtype)
            _mirror(x, center, fills, out)
            return [out]
        return run_values
    center = _pad_prepare(node)
    _, fills = _mirror_plan(node, in_shape, _paddings(node, len(in_shape)), mode)

    def run(x, _, out):
        _mirror(x, center, fills, out)
    return run


def _mirror_plan(node, in_shape: tuple, pads: list, mode: int):
    """(center index, [(border index, mirror source index)]) of a mirror pad."""
    center = tuple(slice(a, a + n) for n, (a, _) in zip(in_shape, pads))
    skip = 1 if mode == 0 else 0
    # The center is copied first; then axis by axis, each border copies its mirror image from
    # the region already written (full extent along earlier axes, center along later ones).
    fills = []
    for d, (n, (a, b)) in enumerate(zip(in_shape, pads)):
        if a + b == 0:
            continue
        if max(a, b) > n - skip:
            raise node.fail(f"paddings {a}, {b} of dimension {d} exceed its size {n}"
                            + (" - 1 (REFLECT)" if skip else ""))
        dst = list(range(a)) + list(range(a + n, a + n + b))
        src = [a + (a - i) - 1 + skip for i in range(a)] \
            + [a + n - 1 - j - skip for j in range(b)]
        region = (slice(None),) * d
        after = center[d + 1:]
        fills.append((region + (np.array(dst),) + after, region + (np.array(src),) + after))
    return center, fills


def _mirror(x, center, fills, out) -> None:
    out[center] = x
    for dst, src in fills:
        out[dst] = out[src]
