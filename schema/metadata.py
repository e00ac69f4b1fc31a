"""TFLite Metadata: the `TFLITE_METADATA` entry that Android's and MediaPipe's tooling reads.

The entry's buffer is a `ModelMetadata` FlatBuffer of tflite-support's `metadata_schema.fbs`
(file identifier "M001"; the schema is `metadata_schema.fbs` beside this file, taken from the
tflite-support 0.4.4 wheel, schema version 1.5.0); associated files (a labels file) are packed
as an uncompressed zip archive appended to the model file, as tflite-support's
MetadataPopulator packs them (a `.tflite` with metadata is also a zip file).

    content = add_metadata(content, labels=["cat", "dog"], mean=[127.5], std=[127.5],
                           description="my classifier")
    read_metadata(content)        # -> a dict of what the buffer says
    associated_files(content)     # -> {"labels.txt": b"cat\\ndog\\n"}

Written per input: name, description, content (image properties for a 4-D NHWC input with 1 or
3 channels, feature properties otherwise), the normalization (x - mean) / std as a process unit
and the normalized range as stats; per output: name, description, and the labels file
(TENSOR_AXIS_LABELS) on the first output. `metadata_schema_generated.py` is what flatc 25.12.19
(schema/generate.py's pinned version) writes from the .fbs with generate.py's FLATC_ARGS, after
a two-line header (tests/schema/test_metadata.py checks it is current). Needs only flatbuffers
and numpy.
"""
from __future__ import annotations

import io
import zipfile

import flatbuffers

from . import metadata_schema_generated as fb
from .errors import ModelError
from .loader import load
from .writer import save

METADATA_NAME = "TFLITE_METADATA"
FILE_IDENTIFIER = b"M001"
LABELS_FILE = "labels.txt"
# Every field written here exists in metadata schema 1.0.0; a parser of that version or later
# reads them all (tflite-support computes the same value for such a buffer).
MIN_PARSER_VERSION = "1.0.0"

_COLOR_SPACES = {1: fb.ColorSpaceType.GRAYSCALE, 3: fb.ColorSpaceType.RGB}
_FILE_TYPES = {v: k for k, v in vars(fb.AssociatedFileType).items() if not k.startswith("_")}


def add_metadata(content: bytes, *, labels: list | None = None, labels_file: str = LABELS_FILE,
                 mean: list | None = None, std: list | None = None,
                 description: str | None = None, name: str | None = None,
                 version: str | None = None, author: str | None = None,
                 license: str | None = None, input_descriptions: dict | None = None,
                 output_descriptions: dict | None = None) -> bytes:
    """`content` (a .tflite) with a TFLITE_METADATA entry describing its first subgraph, and the
    labels packed as `labels_file` when given. Raises ValueError for labels or mean/std that
    do not fit the model (which tensor, what was expected)."""
    model = load(bytes(content))
    if not model.subgraphs:
        raise ModelError("the model has no subgraph to describe")
    sg = model.subgraphs[0]
    names_in, names_out = _io_names(model)
    mean, std = _normalization(mean, std, sg, sg.inputs)
    if labels is not None:
        labels = [str(x) for x in labels]
        _check_labels(labels, sg.tensors[sg.outputs[0]], names_out[0])

    inputs = []
    for k, t in enumerate(sg.inputs):
        tensor = sg.tensors[t]
        meta = fb.TensorMetadataT()
        meta.name = names_in[k]
        meta.description = (input_descriptions or {}).get(names_in[k]) or _describe_input(tensor)
        meta.content = _content(tensor)
        if mean is not None:
            norm = fb.NormalizationOptionsT()
            norm.mean, norm.std = list(mean), list(std)
            unit = fb.ProcessUnitT()
            unit.optionsType, unit.options = fb.ProcessUnitOptions.NormalizationOptions, norm
            meta.processUnits = [unit]
            if tensor.dtype in ("float32", "float16"):
                stats = fb.StatsT()   # the range of (pixel - mean) / std for pixels in [0, 255]
                stats.min = [(0.0 - m) / s for m, s in zip(mean, std)]
                stats.max = [(255.0 - m) / s for m, s in zip(mean, std)]
                meta.stats = stats
        inputs.append(meta)
    outputs = []
    for k in range(len(sg.outputs)):
        meta = fb.TensorMetadataT()
        meta.name = names_out[k]
        meta.description = ((output_descriptions or {}).get(names_out[k])
                            or (f"scores of the {len(labels)} labels in {labels_file}"
                                if labels is not None and k == 0 else None))
        feature = fb.ContentT()
        feature.contentPropertiesType = fb.ContentProperties.FeatureProperties
        feature.contentProperties = fb.FeaturePropertiesT()
        meta.content = feature
        if labels is not None and k == 0:
            file = fb.AssociatedFileT()
            file.name = labels_file
            file.description = "one label per line, in the order of the output's last axis"
            file.type = fb.AssociatedFileType.TENSOR_AXIS_LABELS
            meta.associatedFiles = [file]
        outputs.append(meta)

    sub = fb.SubGraphMetadataT()
    sub.inputTensorMetadata, sub.outputTensorMetadata = inputs, outputs
    top = fb.ModelMetadataT()
    top.name = name or model.description or "model"
    top.description = description
    top.version, top.author, top.license = version, author, license
    top.subgraphMetadata = [sub]
    top.minParserVersion = MIN_PARSER_VERSION
    builder = flatbuffers.Builder(1024)
    builder.Finish(top.Pack(builder), file_identifier=FILE_IDENTIFIER)
    model.set_metadata(METADATA_NAME, bytes(builder.Output()))
    written = save(model)
    if labels is None:
        return written
    return _append_zip(written, {labels_file: "".join(f"{x}\n" for x in labels).encode()})


def read_metadata(content: bytes) -> dict | None:
    """What the TFLITE_METADATA buffer of `content` says, as plain Python values; None when the
    model has no such entry."""
    buf = load(bytes(content)).get_metadata(METADATA_NAME)
    if buf is None:
        return None
    if not fb.ModelMetadata.ModelMetadataBufferHasIdentifier(buf, 0):
        raise ModelError(f"the {METADATA_NAME} buffer is not a ModelMetadata FlatBuffer (its "
                         f"file identifier is {bytes(buf[4:8])!r}, expected {FILE_IDENTIFIER!r})")
    top = fb.ModelMetadataT.InitFromPackedBuf(buf, 0)
    return {"name": _s(top.name), "description": _s(top.description),
            "version": _s(top.version), "author": _s(top.author), "license": _s(top.license),
            "min_parser_version": _s(top.minParserVersion),
            "subgraphs": [{"inputs": [_tensor_dict(t) for t in s.inputTensorMetadata or []],
                           "outputs": [_tensor_dict(t) for t in s.outputTensorMetadata or []]}
                          for s in top.subgraphMetadata or []]}


def associated_files(content: bytes) -> dict:
    """{name: bytes} of the files packed into `content` (empty when it packs none)."""
    stream = io.BytesIO(bytes(content))
    if not zipfile.is_zipfile(stream):
        return {}
    with zipfile.ZipFile(stream) as archive:
        return {n: archive.read(n) for n in archive.namelist()}


def _io_names(model) -> tuple:
    """Input and output names of subgraph 0 in its tensor order: the signature's names where a
    signature covers them, else the tensors' names."""
    sg = model.subgraphs[0]
    by_tensor = {}
    for sig in model.signature_defs:
        if sig.subgraph_index == 0:
            by_tensor.update({t: n for n, t in {**sig.inputs, **sig.outputs}.items()})
    return ([by_tensor.get(t, sg.tensors[t].name) for t in sg.inputs],
            [by_tensor.get(t, sg.tensors[t].name) for t in sg.outputs])


def _normalization(mean, std, sg, inputs) -> tuple:
    if (mean is None) != (std is None):
        raise ValueError("normalization needs both mean and std (--mean and --std)")
    if mean is None:
        return None, None
    mean, std = [float(m) for m in mean], [float(s) for s in std]
    if not mean or not std:
        raise ValueError("mean and std need at least one value each")
    if any(s == 0 for s in std):
        raise ValueError(f"std {std}: a standard deviation of 0 divides by zero")
    channels = {sg.tensors[t].shape[-1] for t in inputs if len(sg.tensors[t].shape) == 4}
    for values, what in ((mean, "mean"), (std, "std")):
        if len(values) > 1 and channels and len(values) not in channels:
            raise ValueError(f"{what} has {len(values)} values, but the image inputs have "
                             f"{sorted(channels)} channels (give one value, or one a channel)")
    if len(mean) != len(std) and 1 not in (len(mean), len(std)):
        raise ValueError(f"mean has {len(mean)} values and std {len(std)}")
    n = max(len(mean), len(std))   # one value is propagated to every channel, as readers do
    return (mean * n if len(mean) == 1 else mean), (std * n if len(std) == 1 else std)


def _check_labels(labels: list, output, name: str) -> None:
    if not output.shape:
        raise ValueError(f"output {name!r} is a scalar: labels need an axis to annotate")
    if output.shape[-1] != len(labels):
        raise ValueError(f"{len(labels)} labels given, but the last axis of output {name!r} "
                         f"(shape {list(output.shape)}) has {output.shape[-1]} entries")


def _is_image(tensor) -> bool:
    return len(tensor.shape) == 4 and tensor.shape[-1] in _COLOR_SPACES


def _describe_input(tensor) -> str:
    if _is_image(tensor):
        _, h, w, c = tensor.shape
        return f"a {h}x{w} {'grayscale' if c == 1 else 'RGB'} image, NHWC {tensor.dtype}"
    return f"{tensor.dtype} {list(tensor.shape)}"


def _content(tensor):
    content = fb.ContentT()
    if _is_image(tensor):
        image = fb.ImagePropertiesT()
        image.colorSpace = _COLOR_SPACES[tensor.shape[-1]]
        size = fb.ImageSizeT()
        size.height, size.width = int(tensor.shape[1]), int(tensor.shape[2])
        image.defaultSize = size
        content.contentPropertiesType = fb.ContentProperties.ImageProperties
        content.contentProperties = image
    else:
        content.contentPropertiesType = fb.ContentProperties.FeatureProperties
        content.contentProperties = fb.FeaturePropertiesT()
    return content


def _append_zip(content: bytes, files: dict) -> bytes:
    """The model with a zip archive of `files` after it (stored, not compressed: readers may map
    the files in place), entry offsets counted from the start of the model file."""
    stream = io.BytesIO()
    stream.write(content)
    with zipfile.ZipFile(stream, "a", compression=zipfile.ZIP_STORED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return stream.getvalue()


def _s(value) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


def _tensor_dict(meta) -> dict:
    out = {"name": _s(meta.name), "description": _s(meta.description)}
    content = meta.content
    kind = fb.ContentProperties.NONE if content is None else content.contentPropertiesType
    if kind == fb.ContentProperties.ImageProperties:
        image = content.contentProperties
        out["content"] = "image"
        out["color_space"] = {v: k for k, v in vars(fb.ColorSpaceType).items()
                              if not k.startswith("_")}[image.colorSpace]
        if image.defaultSize is not None:
            out["size"] = [image.defaultSize.height, image.defaultSize.width]
    elif kind != fb.ContentProperties.NONE:
        out["content"] = "feature"
    for unit in meta.processUnits or []:
        if unit.optionsType == fb.ProcessUnitOptions.NormalizationOptions:
            out["mean"] = [float(v) for v in unit.options.mean]
            out["std"] = [float(v) for v in unit.options.std]
    if meta.stats is not None:
        out["min"] = [float(v) for v in meta.stats.min]
        out["max"] = [float(v) for v in meta.stats.max]
    files = [{"name": _s(f.name), "type": _FILE_TYPES.get(f.type, f.type)}
             for f in meta.associatedFiles or []]
    if files:
        out["associated_files"] = files
    return out
