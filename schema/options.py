"""Builtin operators, their options tables, and conversion between the IR's `Options` and the
flatc object API of the generated code."""
from __future__ import annotations

import re
from functools import lru_cache

import numpy as np

from . import bindings as fb
from .model import Options


def _enum(cls) -> dict:
    return {v: k for k, v in vars(cls).items() if not k.startswith("_") and isinstance(v, int)}


OPERATOR_NAMES = _enum(fb.BuiltinOperator)            # code -> "CONV_2D"
OPERATOR_CODES = {n: c for c, n in OPERATOR_NAMES.items()}
OPTIONS_NAMES = _enum(fb.BuiltinOptions)              # union value -> "Conv2DOptions"
OPTIONS_CODES = {n: c for c, n in OPTIONS_NAMES.items()}
OPTIONS2_NAMES = _enum(fb.BuiltinOptions2)
OPTIONS2_CODES = {n: c for c, n in OPTIONS2_NAMES.items()}
ACTIVATIONS = _enum(fb.ActivationFunctionType)        # 0 -> "NONE", 1 -> "RELU", ...
PADDINGS = _enum(fb.Padding)

# Ops whose options table is not named after the op.
_SHARED_OPTIONS = {
    "AVERAGE_POOL_2D": "Pool2DOptions", "MAX_POOL_2D": "Pool2DOptions",
    "L2_POOL_2D": "Pool2DOptions", "MEAN": "ReducerOptions", "SUM": "ReducerOptions",
    "REDUCE_MAX": "ReducerOptions", "REDUCE_MIN": "ReducerOptions",
    "REDUCE_PROD": "ReducerOptions", "REDUCE_ANY": "ReducerOptions",
    "REDUCE_ALL": "ReducerOptions", "L2_NORMALIZATION": "L2NormOptions",
    "MAXIMUM": "MaximumMinimumOptions", "MINIMUM": "MaximumMinimumOptions",
    "CONV_3D_TRANSPOSE": "Conv3DOptions", "RANDOM_UNIFORM": "RandomOptions",
    "RANDOM_STANDARD_NORMAL": "RandomOptions", "MULTINOMIAL": "RandomOptions",
    "UNIDIRECTIONAL_SEQUENCE_RNN": "SequenceRNNOptions",
    "LOCAL_RESPONSE_NORMALIZATION": "LocalResponseNormalizationOptions",
    "EMBEDDING_LOOKUP_SPARSE": "EmbeddingLookupSparseOptions",
}
# Ops whose options TFLite's own converter never writes (no table, or one nobody reads).
_NO_OPTIONS = {"RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", "LOGISTIC", "TANH", "PRELU",
               "ELU", "FLOOR", "CEIL", "ROUND", "SIN", "COS", "LOG", "SQRT", "RSQRT",
               "EMBEDDING_LOOKUP", "CUSTOM", "DELEGATE", "BROADCAST_ARGS"}


def _squash(name: str) -> str:
    return name.replace("_", "").lower()


_BY_SQUASHED = {_squash(n[:-len("Options")]): n for n in OPTIONS_CODES if n.endswith("Options")}
_BY_SQUASHED2 = {_squash(n[:-len("Options")]): n for n in OPTIONS2_CODES if n.endswith("Options")}


@lru_cache(maxsize=None)
def options_kind(op: str) -> str | None:
    """The options table an op takes ("Conv2DOptions"), or None if it has none."""
    if op in _NO_OPTIONS:
        return None
    if op in _SHARED_OPTIONS:
        return _SHARED_OPTIONS[op]
    return _BY_SQUASHED.get(_squash(op)) or _BY_SQUASHED2.get(_squash(op))


def is_options2(kind: str) -> bool:
    """True for tables of the second options union (`builtin_options_2`, StableHLO ops)."""
    return kind in OPTIONS2_CODES and kind not in OPTIONS_CODES


def _snake(name: str) -> str:
    """The .fbs field name of a flatc object-API attribute: flatc capitalizes every word of the
    snake_case name, so each capital starts a word ("dilationWFactor" -> "dilation_w_factor")."""
    return re.sub(r"([A-Z])", r"_\1", name).lower()


@lru_cache(maxsize=None)
def _field_names(kind: str) -> tuple:
    """(snake_case, camelCase) pairs of an options table's fields, in declaration order."""
    cls = getattr(fb, kind + "T", None)
    if cls is None:
        raise KeyError(f"unknown options table {kind!r}")
    return tuple((_snake(camel), camel) for camel in vars(cls()))


def _from_value(v):
    if isinstance(v, bytes):  # a string field (flatc's Python object API gives bytes)
        return v.decode("utf-8", "replace")
    if isinstance(v, np.ndarray):
        return tuple(v.tolist())
    if isinstance(v, list):
        return tuple(_from_value(x) for x in v)
    return v


def options_from_table(kind: str, buf, pos: int) -> Options:
    """Read an options table at `pos` of the file into an `Options`."""
    obj = getattr(fb, kind + "T").InitFromBuf(buf, pos)
    return Options(kind, **{snake: _from_value(getattr(obj, camel))
                            for snake, camel in _field_names(kind)})


def default_options(op: str, **fields) -> Options | None:
    """The options of `op` with TFLite's defaults, overridden by `fields`."""
    kind = options_kind(op)
    if kind is None:
        if fields:
            raise ValueError(f"{op} takes no options, got {', '.join(fields)}")
        return None
    obj = getattr(fb, kind + "T")()
    opts = Options(kind, **{snake: _from_value(getattr(obj, camel))
                            for snake, camel in _field_names(kind)})
    return opts.replace(**fields) if fields else opts


def options_to_object(options: Options):
    """The generated object-API instance for `options`, ready to `Pack` into a builder."""
    obj = getattr(fb, options.kind + "T")()
    for snake, camel in _field_names(options.kind):
        value = options.fields.get(snake)
        if isinstance(value, tuple):
            value = list(value)
        setattr(obj, camel, value)
    return obj
