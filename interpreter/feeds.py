"""One rule for arrays that users hand to a model in either layout.

A `.tflite` converted from ONNX takes NHWC images where the ONNX model took NCHW ones, and users
hold data in both. Every place that reads user arrays (`edgelite run --data`, `edgelite compare
--data`, `edgelite train --data`, `tflite-convert --inputs` and `--calibration-data`, the
converter's `representative_dataset`) applies `to_layout`: an array that fits the wanted shape is
taken as it is; one that fits only after moving its channel axis is transposed, and the note says
so; one that fits both ways (a square image with as many channels as rows) is taken as it is,
and the note says that too.

Each input is looked up by `input_keys`: its names, then input_0, input_1, ..., then x for a
one-input model.

"Fits" allows a leading axis of samples where the wanted batch is 1 or unknown, and unknown
(-1) dimensions. The channel move is given as a permutation `perm` that takes an array in the
other layout to the wanted one (as numpy.transpose takes it); the converter knows it exactly
(`edgelite.io_layout`), and for other models `channels_last(rank)` is the usual guess.
"""
from __future__ import annotations

import json

import numpy as np

IO_LAYOUT_KEY = "edgelite.io_layout"    # metadata: each input's permutation from ONNX's layout


def input_keys(names, k: int, count: int) -> list:
    """The keys that may hold input `k` of `count`, in the order they are tried: its `names`
    (tensor, signature or ONNX names), `input_K`, and `x` when the model has one input."""
    return list(dict.fromkeys([*names, f"input_{k}"] + (["x"] if count == 1 else [])))


def find_key(arrays, keys) -> str | None:
    """The first of `keys` that `arrays` (a mapping) holds, or None."""
    return next((key for key in keys if key in arrays), None)


def guess_perm(rank: int, is_float: bool) -> tuple | None:
    """The other layout's permutation for an input with no record of it: channels-first ->
    channels-last for float images and volumes, none for anything else."""
    return channels_last(rank) if is_float else None


def channels_last(rank: int) -> tuple | None:
    """The permutation taking a channels-first array (N, C, ...) to channels-last (N, ..., C)
    for images and volumes (rank 4 and 5); None for other ranks."""
    return (0, *range(2, rank), 1) if rank in (4, 5) else None


def inverse(perm) -> tuple | None:
    return None if perm is None else tuple(int(i) for i in np.argsort(perm))


def fits(got: tuple, want: tuple) -> bool:
    """`got` is `want` (-1: any size), or samples of it along the first axis when `want`'s first
    dimension is 1 or unknown."""
    if len(got) != len(want):
        return False
    first = (want[0] < 0 or got[0] == want[0] or want[0] == 1) if want else True
    return first and all(w < 0 or g == w for g, w in zip(got[1:], want[1:]))


def to_layout(value: np.ndarray, want, perm, here: str = "NHWC", there: str = "NCHW") -> tuple:
    """(array, note): `value` for an input of shape `want`, moved from the other layout (`perm`)
    when only that fits. A value one rank short (one sample without its batch axis) is judged
    with a batch axis added, and returned as it came when nothing moves."""
    want = tuple(int(d) for d in want)
    short = value.ndim == len(want) - 1 and want and want[0] in (1, -1)
    probe = value[None] if short else value
    if perm is None or len(perm) != probe.ndim or list(perm) == sorted(perm):
        return value, ""
    moved = tuple(probe.shape[p] for p in perm)
    direct, other = fits(probe.shape, want), fits(moved, want)
    if other and not direct:
        result = np.ascontiguousarray(np.transpose(probe, perm))
        return (result[0] if short else result), f" ({there}, transposed to {here})"
    if other and direct:
        return value, f" (taken as {here}: it also fits as {there})"
    return value, ""


def model_perms(model) -> list:
    """Per input of subgraph 0 of a loaded model (`edgelite.schema.Model`): the permutation from
    the other layout. A model converted by edgelite records it (from ONNX's layout); for others,
    float images and volumes are guessed channels-first -> channels-last."""
    sg = model.subgraphs[0]
    text = model.get_metadata(IO_LAYOUT_KEY)
    if text:
        try:
            entries = json.loads(text)["inputs"]
            if len(entries) == len(sg.inputs):
                return [tuple(e["perm"]) for e in entries]
        except (ValueError, KeyError, TypeError):
            pass     # a damaged entry: fall back to the guess
    return [guess_perm(len(sg.tensors[t].shape), sg.tensors[t].dtype.startswith("float"))
            for t in sg.inputs]
