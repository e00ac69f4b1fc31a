"""What the imports of one conversion share: the initializers' arrays and the constants made
from them.

A model with dynamic dims is imported several times, at other sizes (two to six imports, see
convert.py). Its weights are the same at every size, and so is what the lowerings and passes
make of them alone (a transposed weight, a weight with an attention scale folded in): made once,
they are read-only arrays the next import gets back. For a 330 MB ViT-B/16 that was most of each
import's time. Outside a conversion (`conversion()`), nothing is kept.

A key names the arrays it was made from by their memory (the data pointer, shape, strides and
dtype of an array the memo holds, so no other array can take that address) and small values by
their contents; the parameters by their whole contents (`_param_key`: not repr, which prints a
numpy array past 1000 elements with "...").
"""
from __future__ import annotations

import contextlib
import contextvars

import numpy as np

_MEMO: contextvars.ContextVar = contextvars.ContextVar("edgelite_conversion_memo",
                                                       default=None)
SMALL = 64   # elements: a value this small is part of a key by its contents


class Memo:
    def __init__(self):
        self.initializers: dict = {}
        self.made: dict = {}      # key -> (the arrays it was made from, the values made)
        self.held: set = set()    # ids of the memory the memo keeps alive
        self.answers: dict = {}   # (tag, key) -> (the objects the key names by id, the answer)

    def keep(self, value: np.ndarray) -> None:
        value.flags.writeable = False
        self.held.add(id(_root(value)))


@contextlib.contextmanager
def conversion():
    token = _MEMO.set(Memo())
    try:
        yield
    finally:
        _MEMO.reset(token)


def initializer(init) -> np.ndarray:
    """The array of ONNX initializer `init` (read-only while a conversion shares it)."""
    from onnx import numpy_helper

    memo = _MEMO.get()
    if memo is None:
        return numpy_helper.to_array(init)
    # The proto object itself is the key (protobuf gives the same object for the same element
    # of the model, which all imports of a conversion read): names may repeat in subgraphs.
    # Holding it keeps its id from being reused.
    hit = memo.initializers.get(id(init))
    if hit is None:
        value = numpy_helper.to_array(init)
        memo.keep(value)
        hit = memo.initializers[id(init)] = (init, value)
    return hit[1]


def answer(tag, key, held, make):
    """`make()`, or what it gave for the same tag and key earlier in this conversion (the
    answer is shared: callers only read it). `held`: the objects `key` names by their id, kept
    alive so that no other object takes it."""
    memo = _MEMO.get()
    if memo is None:
        return make()
    hit = memo.answers.get((tag, key))
    if hit is None:
        hit = memo.answers[(tag, key)] = (held, make())
    return hit[1]


def _part(value):
    if value is None:
        return None
    if not isinstance(value, np.ndarray):
        return ("obj", repr(value))
    if value.size <= SMALL:
        return ("value", value.dtype.str, value.shape, value.tobytes())
    return ("array", value.__array_interface__["data"][0], value.shape, value.strides,
            value.dtype.str)


def made(tag, arrays, params, make) -> list:
    """`make()` (a list of arrays made from `arrays` alone, with `params`), or what it gave
    for the same arrays and params earlier in this conversion. Values are read-only."""
    memo = _MEMO.get()
    if memo is None:
        return make()
    parts = tuple(_part(a) for a in arrays)
    if any(p is not None and p[0] == "array" and id(_root(a)) not in memo.held
           for p, a in zip(parts, arrays)):
        return make()     # an array the memo cannot vouch for: its address may be reused
    key = (tag, _param_key(params), parts)
    hit = memo.made.get(key)
    if hit is not None:
        return hit[1]
    values = make()
    for v in values:
        if isinstance(v, np.ndarray):
            memo.keep(v)
    memo.made[key] = (tuple(arrays), values)
    return values


_SCALARS = (type(None), bool, int, float, complex, str, bytes, np.generic)


def _param_key(value):
    """`value` (scalars, numpy arrays, an op's Options, slices, and tuples, lists and dicts of
    them) as a hashable key that tells any two different values apart; TypeError for others."""
    from edgelite.schema import Options

    if isinstance(value, _SCALARS):
        return type(value).__name__, repr(value)   # repr: -0.0 and 0.0 are other keys
    if isinstance(value, np.ndarray) and not value.dtype.hasobject:
        return "ndarray", value.dtype.str, value.shape, value.tobytes()
    if isinstance(value, (tuple, list)):
        return type(value).__name__, tuple(_param_key(v) for v in value)
    if isinstance(value, dict):
        return "dict", tuple((_param_key(k), _param_key(v)) for k, v in value.items())
    if isinstance(value, Options):
        return "Options", value.kind, _param_key(value.fields)
    if isinstance(value, slice):
        return "slice", _param_key((value.start, value.stop, value.step))
    raise TypeError(f"memo.made: a parameter of type {type(value).__name__} cannot be part of "
                    "a key (scalars, numpy arrays, Options, slices, and tuples, lists and "
                    "dicts of them can)")


def _root(array):
    """The object that owns `array`'s memory (itself, or the end of its chain of bases)."""
    while getattr(array, "base", None) is not None:
        array = array.base
    return array
