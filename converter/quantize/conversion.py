"""Quantization inside an ONNX conversion: `TFLiteConverter`'s TensorFlow-style settings (and
`tflite-convert`'s flags, which set them) become a `Request`; `Request.apply` quantizes the
converted model; `summary_lines` and `check_lines` report on it.

The settings, as in TensorFlow:
- optimizations=[Optimize.DEFAULT] alone: dynamic range (int8 weights); with
  target_spec.supported_types={"int4"} (edgelite's own): int4 weights for FULLY_CONNECTED and
  CONV_2D;
- ... with target_spec.supported_types={float16}: float16 weights;
- ... with representative_dataset: full integer int8 (supported_ops={TFLITE_BUILTINS_INT8}: every
  op must be integer, else the conversion fails naming them), or 16x8 with supported_ops=
  {EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8};
- inference_input_type / inference_output_type: numpy.int8 (int16 for 16x8) for integer
  inputs and outputs.
The representative dataset yields samples in the ONNX model's layout (a list of arrays in input
order, or a dict by input name); they are laid out as the .tflite inputs are
(`edgelite.io_layout`). `--calibration-data FILE.npz` holds one array per ONNX input name
(or input_0, ...), samples along the first axis.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

MODES = ("dynamic", "dynamic-int4", "int8", "int16x8", "float16")
CHECK_SAMPLES = 16     # calibration samples `check` runs


@dataclass
class Request:
    mode: str
    dataset: object = None
    input_type: str = "float32"
    output_type: str = "float32"
    strict: bool = False            # TFLITE_BUILTINS_INT8 only: no float fallback
    calibration: str = "minmax"

    def apply(self, conversion) -> None:
        """Quantize `conversion.model` in place of the float one (content, model, op counts)."""
        from collections import Counter

        from edgelite.schema import save

        from ..errors import ConversionError
        from . import quantize

        layout = conversion.io_layout
        from edgelite.converter.check import onnx_input_specs

        data = None
        if self.dataset is not None:
            data, notes = _tflite_layout(self.dataset, layout, onnx_input_specs(conversion))
            conversion.notes += notes
        try:
            q = quantize(conversion.model, self.mode, data, progress=True,
                         inference_input_type=self.input_type,
                         inference_output_type=self.output_type, calibration=self.calibration)
        except ValueError as e:
            raise ConversionError(f"quantization: {e}") from None
        if self.strict and q.report.float_ops:
            ops = ", ".join(f"{op} (operator {i}: {why})" for i, op, why in q.report.float_ops)
            raise ConversionError("target_spec.supported_ops={TFLITE_BUILTINS_INT8} asks for "
                                  f"integer ops only; these would stay float: {ops}. Allow "
                                  "float fallback with supported_ops={TFLITE_BUILTINS}")
        conversion.model = q.model
        conversion.content = save(q.model)
        ops = Counter(op.op for sg in q.model.subgraphs for op in sg.operators)
        conversion.ops_out = dict(sorted(ops.items()))
        conversion.quantization = q.report
        if data:   # a few calibration samples in ONNX layout, for --check
            back = [np.argsort(e["perm"]) for e in layout["inputs"]]
            q.report.samples = [[np.transpose(a, p) for a, p in zip(sample, back)]
                                for sample in data[:CHECK_SAMPLES]]
        conversion.warnings += [f"kept float: {op} (operator {i}): {why}"
                                for i, op, why in q.report.float_ops
                                if self.mode in ("int8", "int16x8")]


# -- TFLiteConverter's settings -----------------------------------------------------------------

def _name(value) -> str | None:
    """A dtype-like (numpy type, tf.DType, string) as a numpy dtype name."""
    if value is None:
        return None
    name = getattr(value, "name", None)
    if isinstance(name, str) and not isinstance(value, np.dtype):
        try:
            return np.dtype(name).name
        except TypeError:
            pass
    if isinstance(value, str) and value == "int4":   # no numpy dtype: edgelite's own name
        return value
    return np.dtype(value).name


def _enum_names(values) -> set:
    return {getattr(v, "value", v) for v in values}


def request_from(converter) -> Request | None:
    """The quantization `converter`'s settings ask for (None: a float model); ConversionError
    naming every inconsistent setting."""
    opts = _enum_names(converter.optimizations)
    ops = _enum_names(converter.target_spec.supported_ops)
    types = {_name(t) for t in converter.target_spec.supported_types}
    dataset = converter.representative_dataset
    io = {k: _name(getattr(converter, f"inference_{k}_type")) or "float32"
          for k in ("input", "output")}
    problems = []
    if "EXPERIMENTAL_SPARSITY" in opts:
        problems.append("optimizations EXPERIMENTAL_SPARSITY is not supported")
    if "SELECT_TF_OPS" in ops:
        problems.append("supported_ops SELECT_TF_OPS: edgelite writes builtin ops only")
    if not opts & {"DEFAULT", "OPTIMIZE_FOR_SIZE", "OPTIMIZE_FOR_LATENCY"}:
        asked = [n for n, v in (("representative_dataset", dataset is not None),
                                ("target_spec.supported_types", bool(types)),
                                ("inference_input_type", io["input"] != "float32"),
                                ("inference_output_type", io["output"] != "float32"),
                                ("target_spec.supported_ops", bool(ops - {"TFLITE_BUILTINS"})))
                 if v]
        if asked:
            problems.append(f"{', '.join(asked)} need optimizations=[Optimize.DEFAULT]")
        _raise(problems)
        return None
    int16 = "EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8" in ops
    strict = ops == {"TFLITE_BUILTINS_INT8"}
    if "float16" in types and not int16 and not strict:
        mode = "float16"
    elif "int4" in types and dataset is None and not int16 and not strict:
        mode = "dynamic-int4"       # edgelite's own setting: target_spec.supported_types={"int4"}
    elif dataset is None:
        if int16 or strict or "int8" in types:
            problems.append("integer-only quantization needs a representative_dataset to "
                            "calibrate the activations")
        mode = "dynamic"
    else:
        mode = "int16x8" if int16 else "int8"
    act = "int16" if mode == "int16x8" else "int8"
    for k, value in io.items():
        if value != "float32" and (mode not in ("int8", "int16x8") or value != act):
            problems.append(f"inference_{k}_type={value} does not fit {mode} quantization "
                            f"(float32{' or ' + act if mode in ('int8', 'int16x8') else ''})")
    _raise(problems)
    return Request(mode, dataset if mode in ("int8", "int16x8") else None, io["input"],
                   io["output"], strict, getattr(converter, "calibration", "minmax"))


def _raise(problems: list) -> None:
    if problems:
        from ..errors import ConversionError
        raise ConversionError("quantization settings: " + "; ".join(problems))


# -- tflite-convert's flags ---------------------------------------------------------------------

def configure(converter, mode: str | None, calibration_data, int8_io: bool,
              calibration: str = "minmax") -> None:
    """Set `converter`'s TensorFlow-style settings from --quantize, --calibration-data,
    --int8-io and --calibration."""
    from ..api import Optimize, OpsSet
    from ..errors import ConversionError
    from .calibrate import METHODS

    if calibration not in METHODS:
        raise ConversionError(f"--calibration {calibration!r}: choose one of "
                              f"{', '.join(METHODS)}")
    converter.calibration = calibration
    if mode is None:
        if calibration_data is not None or int8_io:
            raise ConversionError("--calibration-data and --int8-io need --quantize int8 "
                                  "(or int16x8 for --calibration-data)")
        return
    if mode not in MODES:
        raise ConversionError(f"--quantize {mode!r}: choose one of {', '.join(MODES)}")
    if (calibration_data is None) != (mode not in ("int8", "int16x8")):
        raise ConversionError(f"--quantize {mode} " + (
            "needs --calibration-data FILE.npz (samples of each input, ONNX layout)"
            if calibration_data is None else "takes no --calibration-data"))
    if int8_io and mode != "int8":
        raise ConversionError(f"--int8-io needs --quantize int8, not {mode}")
    converter.optimizations = [Optimize.DEFAULT]
    if mode == "float16":
        converter.target_spec.supported_types = {np.float16}
    if mode == "dynamic-int4":
        converter.target_spec.supported_types = {"int4"}
    if mode == "int16x8":
        converter.target_spec.supported_ops = {
            OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8}
    if calibration_data is not None:
        converter.representative_dataset = _read_npz(calibration_data)
    if int8_io:
        converter.inference_input_type = converter.inference_output_type = np.int8


def _read_npz(path) -> dict:
    from ..errors import ConversionError

    try:
        with np.load(path, allow_pickle=False) as npz:
            return {k: npz[k] for k in npz.files}
    except Exception as e:  # noqa: BLE001  BadZipFile, EOFError...: one refusal for any of them
        raise ConversionError(f"--calibration-data {path}: cannot read it as an .npz ({e})") \
            from None


# -- the samples, laid out for the .tflite ------------------------------------------------------

def _tflite_layout(dataset, layout: dict, onnx_specs: list) -> tuple:
    """(samples, notes): the representative dataset as samples in the .tflite inputs' layout:
    lists of arrays with a batch of one. Samples with a larger batch are split. Arrays may come
    in ONNX's layout or the .tflite's (`edgelite.interpreter.feeds`)."""
    from edgelite.interpreter.feeds import find_key, input_keys, inverse, to_layout

    from ..errors import ConversionError

    specs = layout["inputs"]
    names = [e["name"] for e in specs]
    notes: dict = {}

    def arrays(item) -> list:
        if isinstance(item, Mapping):
            keys = [find_key(item, input_keys([n], k, len(names))) for k, n in enumerate(names)]
            missing = [n for n, key in zip(names, keys) if key is None]
            if missing:
                raise ConversionError(f"a calibration sample has no array for input "
                                 f"{', '.join(map(repr, missing))} (it has "
                                 f"{', '.join(map(str, item))})")
            return [np.asarray(item[key]) for key in keys]
        if isinstance(item, np.ndarray):
            return [item]
        return [np.asarray(a) for a in item]

    def laid_out(item) -> list:
        values = arrays(item)
        if len(values) != len(specs):
            raise ValueError(f"a calibration sample holds {len(values)} arrays; the model has "
                             f"{len(specs)} inputs ({', '.join(names)})")
        out = []
        for v, e, (_, shape, _) in zip(values, specs, onnx_specs):
            perm = list(e["perm"])
            v, note = to_layout(v, shape, inverse(perm), "ONNX layout", "the .tflite's layout")
            if note:
                notes[e["name"]] = f"calibration input {e['name']!r}{note}"
            if v.ndim == len(perm) - 1:
                v = v[None]
            if v.ndim != len(perm):
                raise ValueError(f"calibration input {e['name']!r} has rank {v.ndim}; the "
                                 f"model's has {len(perm)}")
            out.append(np.ascontiguousarray(np.transpose(v, perm)))
        return [[a[i:i + 1] for a in out] for i in range(out[0].shape[0])]

    if isinstance(dataset, Mapping):   # {name: samples along the first axis}
        columns = arrays(dataset)
        samples = [s for i in range(min(len(c) for c in columns))
                   for s in laid_out([c[i] for c in columns])]
    else:
        items = dataset() if isinstance(dataset, Callable) else dataset
        samples = [s for item in items for s in laid_out(item)]
    return samples, list(notes.values())


# -- the summary and --check ---------------------------------------------------------------------

def summary_lines(conversion) -> list:
    report = getattr(conversion, "quantization", None)
    return [] if report is None else ["  " + line for line in report.lines()]


def check(conversion, source, inputs=None) -> tuple:
    """(lines, failure message or None) for `--check` of a quantized conversion: edgelite
    against LiteRT's reference kernels (identical bits for integer models), and both against
    onnxruntime's float result (the quantization error, reported). Inputs: `inputs` (an .npz
    by ONNX input name), else the first calibration samples, else seeded random values."""
    from edgelite.converter import check as float_check

    layout = conversion.io_layout
    report = conversion.quantization
    names = [e["name"] for e in layout["inputs"]]
    outs = [e["name"] for e in layout["outputs"]]
    notes: list = []
    if inputs is not None:
        feeds, notes = float_check.load_feeds(conversion, inputs)
        samples = [[np.asarray(f, np.float32) for f in feeds]]
        where = f"--inputs {inputs}"
    elif report.samples:
        samples, where = report.samples, f"{len(report.samples)} calibration samples"
    else:
        rng = np.random.default_rng(float_check.SEED)
        samples = [[rng.standard_normal(shape).astype(np.float32)
                    for _, shape, _ in float_check.onnx_input_specs(conversion)]]
        where = "random normal inputs"
    integer = report.mode in ("int8", "int16x8")
    worst = {n: [0.0, 0.0, 0.0] for n in outs}        # |edgelite - LiteRT|, |error|, |float|
    have_litert = have_ort = True
    for feeds in samples:
        reference = float_check.run_onnxruntime(source, dict(zip(names, feeds)), outs)
        tflite_feeds = float_check.to_tflite_layout(feeds, layout)
        ours = _run(conversion.content, tflite_feeds, "edgelite")
        theirs = _run(conversion.content, tflite_feeds, "litert")
        have_litert, have_ort = theirs is not None, reference is not None
        for k, name in enumerate(outs):
            back = np.argsort(layout["outputs"][k]["perm"])
            mine = np.transpose(ours[k], back)
            w = worst[name]
            if theirs is not None:
                w[0] = max(w[0], float(np.abs(mine - np.transpose(theirs[k], back)).max(
                    initial=0.0)))
            if reference is not None:
                ref = np.asarray(reference[k], np.float64)
                w[1] = max(w[1], float(np.abs(mine - ref).max(initial=0.0)))
                w[2] = max(w[2], float(np.abs(ref).max(initial=0.0)))
    lines = [f"check ({report.mode}, on {where}): edgelite vs LiteRT's reference kernels"
             f"{'; quantization error vs onnxruntime' if have_ort else ''}"]
    bad = []
    for name, (diff, err, scale) in worst.items():
        parts = []
        if have_litert:
            parts.append("identical to LiteRT" if diff == 0 else f"LiteRT differs by {diff:.3g}")
            tolerance = 0.0 if integer else float_check.RTOL * max(scale, 1.0)
            if diff > tolerance:
                bad.append(name)
        if have_ort:
            parts.append(f"quantization error {err:.3g} (max |float| {scale:.3g})")
        lines.append(f"  {name}: {', '.join(parts) or 'no other runtime'}"
                     f"{'  MISMATCH' if name in bad else ''}")
    failure = f"check failed: edgelite and LiteRT differ on {', '.join(bad)}" if bad else None
    return lines + [f"  note: {n}" for n in notes], failure


def _run(content: bytes, feeds: list, runtime: str):
    """Float outputs of edgelite or LiteRT, both with the reference kernels' arithmetic
    (BUILTIN_REF), on float feeds, quantizing integer inputs and dequantizing integer outputs;
    None without LiteRT."""
    from edgelite.converter.check import interpreter_of
    from edgelite.interpreter.kernels.fixed_point import round_half_away

    it = interpreter_of(content, runtime, reference=True)
    if it is None:
        return None
    for d, x in zip(it.get_input_details(), feeds):
        if np.dtype(d["dtype"]).kind in "iu" and x.dtype.kind == "f":
            scale, zp = d["quantization"]
            info = np.iinfo(d["dtype"])
            q = round_half_away(x / scale) + zp
            x = np.clip(q, info.min, info.max).astype(d["dtype"])
        it.set_tensor(d["index"], x)
    it.invoke()
    outs = []
    for d in it.get_output_details():
        y = np.array(it.get_tensor(d["index"]))
        if y.dtype.kind in "iu" and d["quantization"][0] > 0:
            scale, zp = d["quantization"]
            y = (y.astype(np.float64) - zp) * scale
        outs.append(y.astype(np.float64))
    return outs
