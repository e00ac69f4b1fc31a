"""The third-party `.tflite` corpus of issue 13: every model inside the `mediapipe` 0.10.14
wheel, and Keras models with random weights converted by TensorFlow's own converter as float32,
float16, dynamic-range and full int8 (int8 inputs and outputs).

    python tools/tflite_corpus.py mediapipe [OUT]        # pip download + unzip (no TensorFlow)
    MP_VENV/bin/python tools/tflite_corpus.py mediapipe-reference [OUT]   # mediapipe's outputs
    /work/venv-tf/bin/python tools/tflite_corpus.py keras [OUT] [--only NAME ...]
    python tools/tflite_corpus.py run [OUT] [--only SUBSTRING ...] [--json FILE] [--repeat N]
    python tools/tflite_corpus.py divergence FILE.tflite  # first ops differing from LiteRT
    python tools/tflite_corpus.py table RUN.json          # the markdown table of a run

OUT defaults to ~/.cache/edgelite-tflite-corpus (models stay out of git). `keras` needs
TensorFlow (its own venv: TensorFlow is never a dependency of edgelite) and writes
keras_<model>.<variant>.tflite plus manifest.json (the conversion error where one failed).
`run` (the dev venv: edgelite and LiteRT) loads, runs and compares every file against LiteRT:

- float32 files: max |ours - LiteRT| <= 1e-5 * max |LiteRT| (LiteRT's default CPU path);
- float16-weight files: <= 1e-4 * max |LiteRT|; where a graph amplifies rounding so much that
  LiteRT's own default and reference kernels differ by more, the gap may be up to theirs (the
  row says so);
- full int8: bit-identical to LiteRT's reference kernels (BUILTIN_REF);
- dynamic-range (hybrid): edgelite's BUILTIN_REF against LiteRT's BUILTIN_REF, passing when the
  gap is no larger than LiteRT's own default-vs-reference gap on the same input (issue 13,
  item 4: on-the-fly input quantization amplifies 1-ulp float differences), or <= 1e-5;
- a file LiteRT cannot run is listed with LiteRT's error, and still run by edgelite
  (face_landmark_with_attention, MediaPipe's CPU custom ops: `mediapipe-reference`, in a venv
  with the mediapipe wheel and numpy < 2, saves what MediaPipe's own runtime gives, which
  tests/interpreter/test_tflite_corpus.py compares).

and the latency of both (one thread each, default kernels: XNNPACK for LiteRT) as the ratio
edgelite / LiteRT of the medians, and of the fastest runs.
"""
from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np

DEFAULT_OUT = Path("~/.cache/edgelite-tflite-corpus").expanduser()
MEDIAPIPE = "mediapipe==0.10.14"
SEED = 0
VARIANTS = ("float32", "float16", "dynamic", "int8")


# -- building: MediaPipe's wheel ---------------------------------------------------------------

def fetch_mediapipe(out: Path) -> list:
    """Every .tflite in the pinned mediapipe wheel, unzipped flat into OUT as mp_<name>."""
    out.mkdir(parents=True, exist_ok=True)
    wheels = sorted((out / "wheel").glob("mediapipe-0.10.14-*.whl"))
    if not wheels:
        subprocess.run([sys.executable, "-m", "pip", "download", MEDIAPIPE, "--no-deps",
                        "--only-binary=:all:", "-d", str(out / "wheel")], check=True)
        wheels = sorted((out / "wheel").glob("mediapipe-0.10.14-*.whl"))
    written = []
    with zipfile.ZipFile(wheels[0]) as z:
        for name in sorted(z.namelist()):
            if name.endswith(".tflite"):
                target = out / f"mp_{Path(name).name}"
                target.write_bytes(z.read(name))
                written.append(target.name)
    print(f"{len(written)} MediaPipe models in {out}")
    return written


# MediaPipe's own runtime on the face landmarker with attention (LiteRT's wheel lacks its custom
# ops): the wheel's InferenceCalculator with MediaPipe's op resolver (TfLiteCustomOpResolver-
# Calculator), as its legacy face mesh with refined landmarks runs the model, on a fixed image.
ATTENTION = "mp_face_landmark_with_attention.tflite"
ATTENTION_REFERENCE = "mp_face_landmark_with_attention.mediapipe.npz"
_MEDIAPIPE_GRAPH = """
input_stream: "image"
output_stream: "input"
%(outputs)s
node {
  calculator: "ImageToTensorCalculator"
  input_stream: "IMAGE:image"
  output_stream: "TENSORS:input_tensors"
  options: { [mediapipe.ImageToTensorCalculatorOptions.ext] {
      output_tensor_width: 192 output_tensor_height: 192
      output_tensor_float_range { min: 0.0 max: 1.0 } } }
}
node { calculator: "TensorsToFloatsCalculator" input_stream: "TENSORS:input_tensors"
       output_stream: "FLOATS:input" }
node { calculator: "TfLiteCustomOpResolverCalculator"
       output_side_packet: "OP_RESOLVER:op_resolver" }
node {
  calculator: "InferenceCalculator"
  input_stream: "TENSORS:input_tensors"
  input_side_packet: "OP_RESOLVER:op_resolver"
  output_stream: "TENSORS:output_tensors"
  options: { [mediapipe.InferenceCalculatorOptions.ext] {
      model_path: "%(model)s" delegate { tflite {} } } }
}
node {
  calculator: "SplitTensorVectorCalculator"
  input_stream: "output_tensors"
  %(split)s
  options: { [mediapipe.SplitVectorCalculatorOptions.ext] { %(ranges)s } }
}
%(floats)s
"""


def mediapipe_reference(out: Path, count: int = 7) -> Path:
    """Runs the face landmarker with attention in the mediapipe wheel's runtime (a venv with
    mediapipe 0.10.14 and numpy < 2) on a fixed image; writes the image, the input tensor
    MediaPipe made of it and the 7 outputs (flattened) to ATTENTION_REFERENCE."""
    import mediapipe as mp
    from mediapipe.python import packet_creator, packet_getter
    graph = _MEDIAPIPE_GRAPH % dict(
        model=str(out / ATTENTION),
        outputs=" ".join(f'output_stream: "o{k}"' for k in range(count)),
        split=" ".join(f'output_stream: "t{k}"' for k in range(count)),
        ranges=" ".join(f"ranges {{ begin: {k} end: {k + 1} }}" for k in range(count)),
        floats="\n".join(f'node {{ calculator: "TensorsToFloatsCalculator" input_stream: '
                         f'"TENSORS:t{k}" output_stream: "FLOATS:o{k}" }}' for k in range(count)))
    g = mp.CalculatorGraph(graph_config=graph)
    got = {}
    def keep(stream, packet):
        got[stream] = packet_getter.get_float_list(packet)
    for name in ["input"] + [f"o{k}" for k in range(count)]:
        g.observe_output_stream(name, keep)
    g.start_run()
    image = np.random.default_rng(SEED).integers(0, 256, (192, 192, 3), dtype=np.uint8)
    g.add_packet_to_input_stream("image", packet_creator.create_image_frame(
        image_format=mp.ImageFormat.SRGB, data=image).at(0))
    g.close()
    target = out / ATTENTION_REFERENCE
    np.savez(target, image=image, mediapipe=mp.__version__,
             **{k: np.asarray(v, np.float32) for k, v in got.items()})
    print(f"wrote {target} (mediapipe {mp.__version__})")
    return target


# -- building: Keras models through TensorFlow's converter -------------------------------------

def keras_models():
    """name -> (builder, input shape without batch); random weights, fixed seeds."""
    import keras
    from keras import layers

    def app(cls, **kw):   # logits (no softmax: a random network's would be nearly uniform)
        return lambda: cls(weights=None, input_shape=(224, 224, 3), classifier_activation=None,
                           **kw)

    def sequence(rnn):
        def build():
            x = keras.Input((20, 16), batch_size=1)
            h = rnn(32, return_sequences=True)(x)
            h = rnn(24)(h)
            return keras.Model(x, layers.Dense(10)(h))
        return build

    def conv1d():
        x = keras.Input((64, 8), batch_size=1)
        h = layers.Conv1D(16, 5, padding="same", activation="relu")(x)
        h = layers.MaxPooling1D(2)(h)
        h = layers.Conv1D(32, 3, dilation_rate=2, activation="relu")(h)
        h = layers.GlobalAveragePooling1D()(h)
        return keras.Model(x, layers.Dense(10, activation="softmax")(h))

    def kws_head():   # openWakeWord's head: 16 frames of 96-d speech embeddings -> a score
        x = keras.Input((16, 96), batch_size=1)
        h = layers.Dense(32)(layers.Flatten()(x))
        h = layers.ReLU()(layers.LayerNormalization()(h))
        h = layers.ReLU()(layers.LayerNormalization()(layers.Dense(32)(h)))
        return keras.Model(x, layers.Dense(1, activation="sigmoid")(h))

    a = keras.applications
    return {   # name -> builder; PIXELS lists the models that take 0..255 pixels
        "kws_head": kws_head,
        "lstm": sequence(layers.LSTM),
        "gru": sequence(layers.GRU),
        "conv1d": conv1d,
        "mobilenet_v3_small": app(a.MobileNetV3Small),
        "mobilenet_v3_large": app(a.MobileNetV3Large),
        "efficientnet_b0": app(a.EfficientNetB0),
        "resnet50": app(a.ResNet50),
        "densenet121": app(a.DenseNet121),
        "nasnet_mobile": app(a.NASNetMobile),
        "convnext_tiny": app(a.ConvNeXtTiny),
    }


# Models with their preprocessing built in take 0..255 pixels; the others [-1, 1].
PIXELS = ("mobilenet_v3_small", "mobilenet_v3_large", "efficientnet_b0", "convnext_tiny")


def input_range(name: str) -> tuple:
    return (0.0, 255.0) if name in PIXELS else (-1.0, 1.0)


def _convert(tf, model, variant: str, sample_shape, value_range=(-1.0, 1.0)) -> bytes:
    conv = tf.lite.TFLiteConverter.from_keras_model(model)   # weights frozen into constants
    if variant != "float32":
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
    if variant == "float16":
        conv.target_spec.supported_types = [tf.float16]
    if variant == "int8":
        rng = np.random.default_rng(SEED + 1)

        def representative():
            for _ in range(8):
                yield [rng.uniform(*value_range, (1,) + tuple(sample_shape)).astype(np.float32)]
        conv.representative_dataset = representative
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        conv.inference_input_type = tf.int8
        conv.inference_output_type = tf.int8
    return conv.convert()


def build_keras(out: Path, only=None) -> None:
    """Every model x variant. A model's variants convert in one child process (TensorFlow's
    calibrator can crash outright: the variant it was on is recorded as crashed, and a new
    child goes on with the rest)."""
    out.mkdir(parents=True, exist_ok=True)
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    for name in keras_models():
        if only and name not in only:
            continue
        todo = list(VARIANTS)
        while todo:
            status = out / f".{name}.status.json"
            status.unlink(missing_ok=True)
            proc = subprocess.run([sys.executable, __file__, "keras-one", str(out), "--only",
                                   name, *todo], capture_output=True, text=True)
            done = json.loads(status.read_text()) if status.exists() else {}
            status.unlink(missing_ok=True)
            for variant, entry in done.items():
                manifest[f"keras_{name}.{variant}.tflite"] = entry
                print(f"keras_{name}.{variant}.tflite", entry, flush=True)
                todo.remove(variant)
            if proc.returncode != 0 and todo:
                lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
                why = (f"exit {proc.returncode}: {lines[-1][:300] if lines else ''}"
                       if proc.returncode > 0 else
                       f"TensorFlow's converter crashed (signal {-proc.returncode})")
                variant = todo.pop(0)
                manifest[f"keras_{name}.{variant}.tflite"] = dict(variant=variant, error=why,
                                                                  producer=_producer())
                (out / f"keras_{name}.{variant}.tflite").unlink(missing_ok=True)
                print(f"keras_{name}.{variant}.tflite", why, flush=True)
            manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True))


def _producer() -> str:
    return "TensorFlow converter (Keras 3, random weights)"


def build_keras_one(out: Path, name: str, *variants: str) -> None:
    """Converts one model's `variants` in order, recording each in .NAME.status.json as it
    ends (a conversion that raises is recorded with its error)."""
    import keras
    import tensorflow as tf
    keras.utils.set_random_seed(SEED)
    model = keras_models()[name]()
    shape = tuple(model.inputs[0].shape[1:])
    status, done = out / f".{name}.status.json", {}
    for variant in variants:
        t0 = time.time()
        entry = dict(variant=variant, producer=f"TensorFlow {tf.__version__} converter "
                                               f"(Keras {keras.__version__}, random weights)",
                     input_range=input_range(name))
        try:
            (out / f"keras_{name}.{variant}.tflite").write_bytes(
                _convert(tf, model, variant, shape, input_range(name)))
        except Exception as e:  # noqa: BLE001  (recorded: the corpus lists failures)
            entry["error"] = f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:300]}"
        entry["seconds"] = round(time.time() - t0, 1)
        done[variant] = entry
        status.write_text(json.dumps(done))


# -- running: edgelite against LiteRT ----------------------------------------------------------

def _ops(path: Path) -> collections.Counter:
    import edgelite.schema as schema
    m = schema.load(str(path))
    ops = collections.Counter()
    for sg in m.subgraphs:
        for op in sg.operators:
            ops[op.opcode.custom_code or op.opcode.builtin] += 1
    return ops


def kind_of(path: Path) -> str:
    """float32 | float16 | dynamic | int8, from the name (Keras files) or the contents: int8
    (or uint8/int16) activations make a full-integer model, int8 weights under float
    activations a hybrid one, float16 weights a float16 one."""
    for v in VARIANTS:
        if path.name.endswith(f".{v}.tflite"):
            return v
    import edgelite.schema as schema
    m = schema.load(str(path))
    weights, activations = set(), set()
    for sg in m.subgraphs:
        for i, t in enumerate(sg.tensors):
            constant = m.constant(sg, i) is not None and i not in sg.inputs
            (weights if constant else activations).add(t.dtype)
    if activations & {"int8", "uint8", "int16"}:
        return "int8"
    if weights & {"int8", "uint8", "int4"}:
        return "dynamic"
    return "float16" if "float16" in weights else "float32"


def example_inputs(details, seed=SEED, value_range=(-1.0, 1.0)) -> list:
    """Deterministic inputs: uniform floats over `value_range` (quantized with the input's
    parameters for integer inputs)."""
    rng = np.random.default_rng(seed)
    feeds = []
    for d in details:
        shape = tuple(d["shape"])
        x = rng.uniform(*value_range, shape).astype(np.float32)
        dt = np.dtype(d["dtype"])
        if dt.kind in "iu":
            scale, zp = d["quantization"]
            info = np.iinfo(dt)
            x = np.clip(np.round(x / (scale or 1.0)) + zp, info.min, info.max)
        feeds.append(x.astype(dt))
    return feeds


def _litert(path, reference: bool, threads=1):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    kind = OpResolverType.BUILTIN_REF if reference else OpResolverType.AUTO
    return Interpreter(model_path=str(path), num_threads=threads,
                       experimental_op_resolver_type=kind)


def _edgelite(path, reference: bool):
    from edgelite.interpreter import Interpreter, OpResolverType
    kind = OpResolverType.BUILTIN_REF if reference else OpResolverType.AUTO
    return Interpreter(model_path=str(path), num_threads=1, experimental_op_resolver_type=kind)


def _invoke(it, feeds) -> list:
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), feeds):
        it.set_tensor(d["index"], x)
    it.invoke()
    return [np.array(it.get_tensor(d["index"])) for d in it.get_output_details()]


def _median_ms(it, feeds, repeat: int) -> tuple:
    """(median, fastest) milliseconds of set_tensor + invoke over `repeat` runs (the fastest
    is the better estimate on a machine others are loading)."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for d, x in zip(it.get_input_details(), feeds):
            it.set_tensor(d["index"], x)
        it.invoke()
        times.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(times)), 1e3 * float(np.min(times))


def max_gap(a: list, b: list) -> tuple:
    """(max |a - b| over all outputs, max |b|), in float64."""
    gap = scale = 0.0
    for x, y in zip(a, b):
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        if x.shape != y.shape:
            return float("inf"), 0.0
        if x.size:
            gap = max(gap, float(np.max(np.abs(x - y))))
            scale = max(scale, float(np.max(np.abs(y))))
    return gap, scale


TOLERANCE = {"float32": 1e-5, "float16": 1e-4}


def litert_outputs(path: Path, feeds: list, mode: str, repeat: int = 0) -> tuple:
    """(outputs, median ms or None) of LiteRT's `mode` ("ref" or "default") kernels, run in a
    child process: LiteRT's reference kernels abort the process on some files (a failed check),
    which must not end the corpus run. Raises RuntimeError with LiteRT's last words."""
    import os
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        np.savez(os.path.join(tmp, "in.npz"), *feeds)
        proc = subprocess.run([sys.executable, __file__, "litert", str(path), "--only", tmp,
                               "--mode", mode, "--repeat", str(repeat)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            lines = [ln for ln in proc.stderr.splitlines()
                     if ln.strip() and not ln.startswith("INFO")]
            how = (f"exit {proc.returncode}" if proc.returncode > 0
                   else f"aborts the process (signal {-proc.returncode})")
            raise RuntimeError(f"LiteRT {mode}: {how}: {lines[-1][:200] if lines else ''}")
        with np.load(os.path.join(tmp, "out.npz")) as z:
            outs = [z[f"arr_{k}"] for k in range(len(z.files) - 1)]
            ms = tuple(float(v) for v in z["ms"])
    return outs, (ms if repeat else None)


def _litert_child(path: Path, tmp: Path, mode: str, repeat: int) -> None:
    with np.load(tmp / "in.npz") as z:
        feeds = [z[f"arr_{k}"] for k in range(len(z.files))]
    it = _litert(path, reference=(mode == "ref"))
    outs = _invoke(it, feeds)
    ms = _median_ms(it, feeds, repeat) if repeat else (0.0, 0.0)
    np.savez(tmp / "out.npz", *outs, ms=np.array(ms))


def check_file(path: Path, repeat: int = 5, value_range=(-1.0, 1.0)) -> dict:
    """One corpus row: loads, runs and compares `path` (see the module's docstring)."""
    kind = kind_of(path)
    ops = _ops(path)
    row = dict(file=path.name, kind=kind, ops=dict(sorted(ops.items())))
    try:
        ours_it = _edgelite(path, reference=(kind in ("int8", "dynamic")))
        feeds = example_inputs(ours_it.get_input_details(), value_range=value_range)
        ours = _invoke(ours_it, feeds)
    except Exception as e:  # noqa: BLE001
        row.update(result="FAIL", error=f"{type(e).__name__}: {str(e).splitlines()[0][:300]}")
        return row
    got = {}
    for mode in ("default", "ref"):
        try:
            got[mode] = litert_outputs(path, feeds, mode, repeat if mode == "default" else 0)
        except RuntimeError as e:
            row[f"litert_{mode}_error"] = str(e)
    if "default" not in got and "ref" not in got:
        row["litert_error"] = row.get("litert_default_error")
        row["result"] = "runs (LiteRT cannot)"
    elif kind == "int8":
        if "ref" in got:
            same = all(np.array_equal(a, b) for a, b in zip(ours, got["ref"][0]))
            row["result"] = "bit-exact" if same else "FAIL"
            if not same:
                row["max_diff"] = max_gap(ours, got["ref"][0])[0]
        else:   # LiteRT's reference kernels cannot run it: its default ones, to 1 LSB
            diff = max_gap(ours, got["default"][0])[0]
            row["max_diff"] = diff
            row["result"] = (f"ok (LiteRT's BUILTIN_REF fails; {diff:.0f} LSB from its default)"
                             if diff <= 1 else "FAIL")
    elif kind == "dynamic":
        gap, scale = max_gap(ours, got["ref"][0])
        own, _ = max_gap(got["default"][0], got["ref"][0])   # LiteRT default vs reference
        row.update(gap=gap / (scale or 1), litert_gap=own / (scale or 1))
        row["result"] = "ok" if gap <= max(own, 1e-5 * scale) else "FAIL"
    else:
        gap, scale = max_gap(ours, got["default"][0])
        row["rel_gap"] = gap / (scale or 1)
        row["result"] = "ok" if gap <= TOLERANCE[kind] * scale else "FAIL"
        if row["result"] == "FAIL" and "ref" in got:
            # A graph that amplifies rounding (pose_landmark_full's segmentation logits):
            # LiteRT's own two kernel sets differ by more than the tolerance there too.
            own, _ = max_gap(got["default"][0], got["ref"][0])
            row["litert_gap"] = own / (scale or 1)
            if gap <= own:
                row["result"] = "ok (within LiteRT's own default-vs-reference gap)"
    if repeat:   # both with their default kernels
        if kind in ("int8", "dynamic"):
            ours_it = _edgelite(path, reference=False)
            _invoke(ours_it, feeds)
        ours_ms, ours_min = _median_ms(ours_it, feeds, repeat)
        row["edgelite_ms"], row["edgelite_min_ms"] = round(ours_ms, 2), round(ours_min, 2)
        if "default" in got:
            theirs_ms, theirs_min = got["default"][1]
            row["litert_ms"], row["litert_min_ms"] = round(theirs_ms, 2), round(theirs_min, 2)
            row["ratio"] = round(ours_ms / theirs_ms, 2)
            row["min_ratio"] = round(ours_min / theirs_min, 2)
    return row


def first_divergence(path: Path, value_range=(-1.0, 1.0), count: int = 5) -> list:
    """The first `count` operators (subgraph 0, in execution order) whose outputs differ
    between edgelite and LiteRT, both on their reference kernels (BUILTIN_REF), every tensor
    kept: [(operator index, op, output name, max |diff|, max |LiteRT|)]. An op whose inputs
    already differ is listed too: the first row is where a difference starts."""
    import edgelite.schema as schema
    from ai_edge_litert.interpreter import Interpreter as LiteRT, OpResolverType
    from edgelite.interpreter import Interpreter
    from edgelite.interpreter import OpResolverType as Ours
    ours = Interpreter(model_path=str(path), experimental_preserve_all_tensors=True,
                       experimental_op_resolver_type=Ours.BUILTIN_REF)
    feeds = example_inputs(ours.get_input_details(), value_range=value_range)
    _invoke(ours, feeds)
    theirs = LiteRT(model_path=str(path), experimental_preserve_all_tensors=True,
                    experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    _invoke(theirs, feeds)
    sg = schema.load(str(path)).subgraphs[0]
    found = []
    for k, op in enumerate(sg.operators):
        for t in op.outputs:
            try:
                a = np.asarray(ours.get_tensor(t), np.float64)
                b = np.asarray(theirs.get_tensor(t), np.float64)
            except ValueError:
                continue
            if a.shape == b.shape and a.size and not np.array_equal(a, b):
                found.append((k, op.opcode.custom_code or op.opcode.builtin, sg.tensors[t].name,
                              float(np.max(np.abs(a - b))), float(np.max(np.abs(b)))))
        if len(found) >= count:
            break
    return found


def run_corpus(out: Path, only=None, repeat: int = 5, json_path=None) -> list:
    files = sorted(out.glob("*.tflite"))
    if only:
        files = [f for f in files if any(s in f.name for s in only)]
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    rows = []
    for f in files:
        row = check_file(f, repeat, tuple(manifest.get(f.name, {}).get("input_range",
                                                                        (-1.0, 1.0))))
        row["producer"] = manifest.get(f.name, {}).get("producer",
                                                       "mediapipe 0.10.14 wheel"
                                                       if f.name.startswith("mp_") else "?")
        rows.append(row)
        print(_table_line(row), flush=True)
    for name, entry in sorted(manifest.items()):
        if "error" in entry:
            rows.append(dict(file=name, producer=entry["producer"], kind=entry["variant"],
                             result="not converted", error=entry["error"]))
            print(_table_line(rows[-1]))
    if json_path:
        Path(json_path).write_text(json.dumps(rows, indent=1))
    passed = sum(r["result"].startswith(("ok", "bit-exact", "runs")) for r in rows)
    print(f"{passed}/{len(rows)} pass")
    return rows


def markdown_table(rows: list) -> str:
    """The corpus table: file, producer, ops, result, latency ratio vs LiteRT."""
    lines = ["| file | producer | ops | result | edgelite / LiteRT (median; fastest) |",
             "|---|---|---|---|---:|"]
    for r in rows:
        ops = ", ".join(f"{k} {v}" for k, v in sorted(r.get("ops", {}).items(),
                                                      key=lambda kv: -kv[1]))
        detail = ""
        if "rel_gap" in r:
            detail = f" (gap {r['rel_gap']:.1e}"
            detail += f"; LiteRT's own {r['litert_gap']:.1e})" if "litert_gap" in r else ")"
        elif "gap" in r:
            detail = f" (gap {r['gap']:.1e}; LiteRT's own {r['litert_gap']:.1e})"
        elif r.get("error") or r.get("litert_error"):
            detail = f" ({r.get('error') or r.get('litert_error')})"
        ratio = f"{r['ratio']:.1f}x; {r['min_ratio']:.1f}x" if "ratio" in r else "-"
        lines.append(f"| {r['file']} | {r.get('producer', '')} | {ops} | {r['result']}{detail} "
                     f"| {ratio} |")
    return "\n".join(lines)


def _table_line(r: dict) -> str:
    detail = r.get("error") or r.get("litert_error") or ""
    if "rel_gap" in r:
        detail = f"rel gap {r['rel_gap']:.1e}"
    if "litert_gap" in r and "rel_gap" in r:
        detail += f" (LiteRT default vs ref {r['litert_gap']:.1e})"
    if "gap" in r:
        detail = f"gap {r['gap']:.1e} (LiteRT default vs ref {r['litert_gap']:.1e})"
    return (f"| {r['file']} | {r.get('kind', '')} | {r['result']} | {r.get('ratio', '-')} "
            f"| {detail} |")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("command", choices=("mediapipe", "mediapipe-reference", "keras", "keras-one",
                                       "run", "litert", "divergence", "table"))
    p.add_argument("out", nargs="?", type=Path, default=DEFAULT_OUT)
    p.add_argument("--only", nargs="*")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--json")
    p.add_argument("--mode", default="default")
    a = p.parse_args(argv)
    if a.command == "mediapipe":
        fetch_mediapipe(a.out)
    elif a.command == "mediapipe-reference":
        mediapipe_reference(a.out)
    elif a.command == "keras":
        build_keras(a.out, a.only)
    elif a.command == "keras-one":
        build_keras_one(a.out, *a.only)
    elif a.command == "divergence":    # OUT is a .tflite here
        manifest = json.loads((a.out.parent / "manifest.json").read_text()) \
            if (a.out.parent / "manifest.json").exists() else {}
        value_range = tuple(manifest.get(a.out.name, {}).get("input_range", (-1.0, 1.0)))
        for row in first_divergence(a.out, value_range):
            print("operator %d %s -> %s: max diff %.3g (max |LiteRT| %.3g)" % row)
    elif a.command == "table":     # OUT is a JSON file `run --json` wrote
        print(markdown_table(json.loads(a.out.read_text())))
    elif a.command == "litert":     # internal: one LiteRT run (see litert_outputs)
        _litert_child(a.out, Path(a.only[0]) if a.only else None, a.mode, a.repeat)
    else:
        rows = run_corpus(a.out, a.only, a.repeat, a.json)
        return 0 if all(r["result"] != "FAIL" for r in rows) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
