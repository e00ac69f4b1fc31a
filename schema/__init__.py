"""edgelite.schema: the `.tflite` format, the in-memory model (the IR), load/save and validation.

Needs only numpy and flatbuffers.
"""
from __future__ import annotations

from .errors import ModelError
from .graph import (consumers, drop_unused_buffers, has_side_effects, order, producers,
                    remove_dead, replace_uses)
from .loader import load
from .model import (Buffer, DimensionMetadata, Metadata, Model, Operator, OperatorCode, Options,
                    QuantizationParameters, SignatureDef, SparsityParameters, Subgraph,
                    Tensor, dtype_name,
                    numpy_dtype)
from .options import default_options, options_kind
from .validate import validate

__all__ = [
    "ModelError", "load", "save", "validate", "Model", "Subgraph", "Tensor", "Operator",
    "OperatorCode", "Buffer", "QuantizationParameters", "SparsityParameters",
    "DimensionMetadata", "SignatureDef", "Metadata", "Options",
    "default_options", "options_kind", "numpy_dtype", "dtype_name", "producers", "consumers",
    "replace_uses", "remove_dead", "order", "has_side_effects", "drop_unused_buffers",
]


def save(model: Model, large: bool | None = None) -> bytes:
    """Serialize `model` to `.tflite` bytes (`edgelite.schema.writer.save`). The writer is
    imported on first use: it builds with the whole generated module, which loading does not
    need."""
    from .writer import save as _save
    return _save(model, large)
