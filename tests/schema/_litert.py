"""Helpers for the schema tests: the shared models, their reference inputs, and LiteRT runs."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from edgelite.schema import Model
from tests.conftest import find_models_dir

# Models, smallest first; the fuzz test and the slower checks pick from the front.
TFLITE_NAMES = ["digits_cnn_int8", "digits_cnn", "mwk_okay_nabu", "mp_face_detection",
                "mp_hand_landmark", "mobilenet_v2_int8", "mobilenet_v2"]


def tflite_files() -> list:
    """Every .tflite in the shared models folder (empty when the folder is missing)."""
    folder = find_models_dir()
    return sorted(folder.glob("*.tflite")) if folder else []


def ref_inputs(path: Path) -> list:
    """The reference inputs (input_0, input_1, ...) of a shared .tflite model."""
    refs = path.parent / "refs"
    ref = refs / f"{path.stem}_tfl.npz"
    if not ref.exists():
        ref = refs / f"{path.stem}.npz"
    data = np.load(ref)
    return [data[f"input_{i}"] for i in range(sum(k.startswith("input_") for k in data))]


def interpreter(content: bytes, preserve: bool = False):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    it = Interpreter(model_content=content,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_REF,
                     experimental_preserve_all_tensors=preserve)
    it.allocate_tensors()
    return it


def run(content: bytes, inputs: list, invokes: int = 1, all_tensors: bool = False) -> list:
    """Per invoke, the outputs (or with `all_tensors`, every readable tensor) as arrays."""
    it = interpreter(content, preserve=all_tensors)
    results = []
    for _ in range(invokes):
        for detail, x in zip(it.get_input_details(), inputs):
            it.set_tensor(detail["index"], x)
        it.invoke()
        details = it.get_tensor_details() if all_tensors else it.get_output_details()
        values = {}
        for d in details:
            if d["dtype"] == np.object_:  # resource handles: reading them crashes LiteRT
                continue
            try:
                values[d["index"]] = np.array(it.get_tensor(d["index"]))
            except ValueError:  # tensors without data (resources, unallocated temporaries)
                pass
        results.append(values)
    return results


def strip_added_runtime_version(original: Model, reloaded: Model) -> Model:
    """`reloaded` without the min_runtime_version entry the writer adds when `original` lacks
    one (it is the last metadata entry and the last buffer)."""
    if original.get_metadata("min_runtime_version") is not None:
        return reloaded
    last = reloaded.metadata[-1]
    assert last.name == "min_runtime_version"
    assert last.buffer == len(reloaded.buffers) - 1
    version = reloaded.buffers[-1].data.tobytes().rstrip(b"\0").decode()
    assert all(part.isdigit() for part in version.split(".")), version
    reloaded.metadata = reloaded.metadata[:-1]
    reloaded.buffers = reloaded.buffers[:-1]
    return reloaded
