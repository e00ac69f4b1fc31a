"""Checking a conversion: run onnxruntime on the ONNX model and edgelite and LiteRT on the
`.tflite` with the same inputs (laid out per `edgelite.io_layout`), and measure the errors.

Used by `tflite-convert --check` and by the tests. onnxruntime and LiteRT are optional: a runtime
that is not installed is left out.
"""
from __future__ import annotations

import numpy as np

SEED = 0
ATOL = 1e-5          # an output passes when max abs error <= ATOL + RTOL x max |reference|
RTOL = 1e-4
ORACLES = {"onnxruntime": "onnxruntime", "LiteRT": "ai_edge_litert"}   # name -> module
PACKAGES = {"onnxruntime": "onnxruntime", "LiteRT": "ai-edge-litert"}


def onnx_input_specs(conversion) -> list:
    """[(name, ONNX-layout shape, numpy dtype)] of the converted model's inputs."""
    sg = conversion.model.subgraphs[0]
    specs = []
    for entry, t in zip(conversion.io_layout["inputs"], sg.inputs):
        tensor = sg.tensors[t]
        perm = list(entry["perm"])
        shape = tuple(tensor.shape[perm.index(i)] for i in range(len(tensor.shape)))
        specs.append((entry["name"], shape, tensor.np_dtype))
    return specs


def random_feeds(conversion, seed: int = SEED) -> list:
    """Inputs in ONNX layout: standard normal floats, 0/1 integers and booleans."""
    rng = np.random.default_rng(seed)
    feeds = []
    for _, shape, dtype in onnx_input_specs(conversion):
        if dtype.kind == "f":
            feeds.append(rng.standard_normal(shape).astype(dtype))
        else:
            feeds.append(rng.integers(0, 2, shape).astype(dtype))
    return feeds


def load_feeds(conversion, path) -> tuple:
    """(inputs in ONNX layout, notes) from an .npz keyed by ONNX input name or input_0, ...;
    arrays in the .tflite's layout are transposed (`edgelite.interpreter.feeds`)."""
    from edgelite.interpreter.feeds import find_key, input_keys, inverse, to_layout

    from .errors import ConversionError, Worded

    try:
        npz = np.load(path, allow_pickle=False)
        if hasattr(npz, "files"):
            with npz:       # closed even when reading an array fails
                data = {k: npz[k] for k in npz.files}
    except Exception as e:  # noqa: BLE001  BadZipFile, EOFError...: one refusal for any of them
        raise ConversionError(Worded(f"cannot read the inputs file {path} ({e})",
                                     f"--inputs {path}: cannot read it ({e})")) from None
    if not hasattr(npz, "files"):
        raise ConversionError(Worded(f"the inputs file {path} holds one array, not an .npz of "
                                     "arrays by input name", f"--inputs {path}: one array, not "
                                     "an .npz of arrays by input name"))
    feeds, notes = [], []
    entries = conversion.io_layout["inputs"]
    specs = onnx_input_specs(conversion)
    for k, ((name, shape, dtype), entry) in enumerate(zip(specs, entries)):
        keys = input_keys([name], k, len(specs))
        key = find_key(data, keys)
        if key is None:
            tried = " or ".join(map(repr, keys))
            raise ConversionError(Worded(f"the inputs file {path} has no {tried}",
                                         f"--inputs {path} has no {tried}"))
        value, note = to_layout(np.asarray(data[key], dtype), shape, inverse(entry["perm"]),
                                "ONNX layout", "the .tflite's layout")
        if value.ndim == len(shape) - 1:
            value = value[None]
        if value.ndim == len(shape) and value.shape[1:] == tuple(shape[1:]) and \
                value.shape[0] > shape[0] == 1:
            note += f" (the first of its {value.shape[0]} samples)"
            value = value[:1]
        if value.shape != tuple(shape):
            takes = (f"has shape {list(value.shape)}; input {name!r} takes {list(shape)} "
                     f"(ONNX layout) or {[shape[p] for p in entry['perm']]} (the .tflite's)")
            raise ConversionError(Worded(f"{key!r} in the inputs file {path} {takes}",
                                         f"--inputs {key!r} {takes}"))
        feeds.append(value)
        if note:
            notes.append(f"--inputs {key!r}{note}")
    return feeds, notes


def to_tflite_layout(feeds: list, io_layout: dict) -> list:
    return [np.array(np.transpose(x, e["perm"]), order="C")
            for x, e in zip(feeds, io_layout["inputs"])]


def to_onnx_layout(outputs: list, io_layout: dict) -> list:
    return [np.transpose(y, np.argsort(e["perm"])) for y, e in zip(outputs, io_layout["outputs"])]


def run_onnxruntime(source, feeds: dict, output_names: list):
    """Outputs of onnxruntime on `source` (path or ModelProto), or None without onnxruntime."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    options = ort.SessionOptions()
    options.log_severity_level = 3
    # The model as written, not onnxruntime's CPU-specific fused kernels: above ENABLE_BASIC
    # its QDQ rewrites (QLinearConv, ...) differ by CPU (37 LSB on an AVX2 CPU without VNNI).
    # One thread: the same numbers on any core count; edgelite's run takes far longer anyway.
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.intra_op_num_threads = 1
    model = source.SerializeToString() if hasattr(source, "SerializeToString") else str(source)
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    return session.run(output_names, feeds)


def quiet_litert():
    """A context without LiteRT's INFO lines ("INFO: Created TensorFlow Lite XNNPACK delegate
    for CPU.", printed by its C++ side when a model is prepared); its warnings and errors stay."""
    from edgelite.interpreter.native_stderr import filtered_stderr

    return filtered_stderr(r"INFO: .*")


def interpreter_of(content: bytes, runtime: str = "edgelite", reference: bool = False):
    """An allocated interpreter of `runtime` ("edgelite" or "litert") on the .tflite, with the
    reference kernels (BUILTIN_REF) when asked; None when LiteRT is not installed."""
    if runtime == "edgelite":
        from edgelite.interpreter import Interpreter, OpResolverType
    else:
        try:
            from ai_edge_litert.interpreter import Interpreter, OpResolverType
        except ImportError:
            return None
    kind = OpResolverType.BUILTIN_REF if reference else OpResolverType.AUTO
    with quiet_litert():
        it = Interpreter(model_content=content, experimental_op_resolver_type=kind)
        it.allocate_tensors()
    return it


def run_tflite(content: bytes, feeds: list, runtime: str = "edgelite"):
    """Outputs of `runtime` ("edgelite" or "litert") on the .tflite; None when LiteRT is not
    installed."""
    it = interpreter_of(content, runtime)
    if it is None:
        return None
    for detail, x in zip(it.get_input_details(), feeds):
        it.set_tensor(detail["index"], x)
    it.invoke()
    return [np.array(it.get_tensor(d["index"])) for d in it.get_output_details()]


def max_error(got: np.ndarray, ref: np.ndarray) -> float:
    """Max abs difference; inf where NaN or infinities do not match."""
    got, ref = got.astype(np.float64), ref.astype(np.float64)
    if not ref.size:
        return 0.0
    finite = np.isfinite(ref)
    if not np.array_equal(np.isnan(got), np.isnan(ref)) or \
            not np.array_equal(got[~finite & ~np.isnan(ref)], ref[~finite & ~np.isnan(ref)]):
        return float("inf")
    if not finite.any():
        return 0.0
    return float(np.abs(got[finite] - ref[finite]).max())


def missing_oracles() -> list:
    """What `compare` could not run, each with the package that provides it."""
    import importlib.util

    def installed(module: str) -> bool:
        try:
            return importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            return False

    return [f"{name} is not installed (pip install {PACKAGES[name]}): it was left out"
            for name, module in ORACLES.items() if not installed(module)]


def compare(conversion, source, feeds: list | None = None, atol: float = ATOL,
            rtol: float = RTOL) -> list:
    """Per output: max abs error of edgelite and LiteRT against onnxruntime (or of LiteRT
    against edgelite without onnxruntime), and whether it is within atol + rtol x max |ref|."""
    layout = conversion.io_layout
    feeds = random_feeds(conversion) if feeds is None else feeds
    names = [e["name"] for e in layout["inputs"]]
    outs = [e["name"] for e in layout["outputs"]]
    tflite_feeds = to_tflite_layout(feeds, layout)
    runs = {"onnxruntime": run_onnxruntime(source, dict(zip(names, feeds)), outs)}
    for name, runtime in (("edgelite", "edgelite"), ("LiteRT", "litert")):
        result = run_tflite(conversion.content, tflite_feeds, runtime)
        runs[name] = None if result is None else to_onnx_layout(result, layout)
    reference = "onnxruntime" if runs["onnxruntime"] is not None else "edgelite"
    rows = []
    for k, name in enumerate(outs):
        ref = np.asarray(runs[reference][k])
        finite = np.abs(ref.astype(np.float64))[np.isfinite(ref)] if ref.size else ref
        scale = float(finite.max()) if finite.size else 0.0
        row = {"name": name, "reference": reference, "max_abs_ref": scale, "errors": {},
               "ok": True}
        for other in ("edgelite", "LiteRT"):
            if other == reference or runs[other] is None:
                continue
            got = np.asarray(runs[other][k])
            if got.shape != ref.shape:
                row["errors"][other] = float("inf")
                row["ok"] = False
                continue
            err = max_error(got, ref)
            row["errors"][other] = err
            if not err <= atol + rtol * scale:
                row["ok"] = False
        rows.append(row)
    return rows
