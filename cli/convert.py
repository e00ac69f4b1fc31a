"""`tflite-convert MODEL.onnx -o OUT.tflite` (also `edgelite convert`): convert, summarize, and
with `--check` compare onnxruntime, edgelite and LiteRT on the same inputs. MODEL may be a
torch.export program (`torch.export.save`'s .pt2): torch's ONNX exporter makes the ONNX model.

Needs the `convert` extra (onnx); the converter loads when the command runs.
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated

from .choices import Calibration, Loss, Optimizer, Quantize, value
from .common import (CliError, check_writable, echo, error_line, fail, needs, positive_number,
                     write_output)
from .params import Arg, Opt

def convert_command(
    model: Annotated[Path, Arg("the ONNX model (.onnx; external data beside it), or a "
                               "torch.export program (.pt2, needs torch)")],
    output: Annotated[Path | None, Opt(
        "-o", "--output", help="the .tflite to write (default: MODEL with .tflite)")] = None,
    input_shape: Annotated[list[str], Opt(
        "--input-shape", metavar="NAME=D0,D1,...",
        help="fix an input's shape (-1: a dim stays dynamic, as open dims do); repeatable")] = (),
    keep_io_layout: Annotated[bool, Opt(
        "--keep-io-layout", help="keep every input and output in ONNX's layout (NCHW)")] = False,
    check: Annotated[bool, Opt(
        "--check", help="run onnxruntime, edgelite and LiteRT on the same inputs and print each "
        "output's max error; fail if they disagree")] = False,
    atol: Annotated[float, Opt(
        "--atol", min=0, help="--check passes an output whose max abs error is at most "
        "atol + rtol x max |reference|")] = 1e-5,
    rtol: Annotated[float, Opt(
        "--rtol", min=0, help="--check's tolerance relative to the output's largest value")] = 1e-4,
    inputs: Annotated[Path | None, Opt(
        "--inputs", help="an .npz of inputs for --check, keyed by input name or input_0, "
        "input_1, ...; ONNX (NCHW) or model (NHWC) layout (default: random)")] = None,
    quantize: Annotated[Quantize | None, Opt(
        "--quantize", help="dynamic: int8 weights; dynamic-int4: int4 fully-connected and "
        "convolution weights; int8, int16x8: full integer (needs --calibration-data); float16: "
        "float16 weights")] = None,
    calibration_data: Annotated[Path | None, Opt(
        "--calibration-data", help="an .npz of samples for calibration: one array per input "
        "name, samples along the first axis, ONNX (NCHW) or model (NHWC) layout")] = None,
    int8_io: Annotated[bool, Opt("--int8-io", help="int8 model inputs and outputs")] = False,
    calibration: Annotated[Calibration, Opt(
        "--calibration", help="activation ranges: the extremes seen (minmax), 99.99th "
        "percentiles, or least error (mse)")] = Calibration.minmax,
    train: Annotated[bool, Opt(
        "--train", help="add train/infer/save/restore signatures: the model fine-tunes on the "
        "device (edgelite train, or LiteRT's signature runner)")] = False,
    trainable: Annotated[str, Opt(
        "--trainable", metavar="last:N|all|PATTERN",
        help="with --train: the weights that train (last N weighted layers, all, or tensor-name "
        "globs, comma-separated)")] = "last:1",
    loss: Annotated[Loss, Opt("--loss", help="with --train: the loss")] = \
        Loss.sparse_softmax_cross_entropy,
    optimizer: Annotated[Optimizer, Opt("--optimizer", help="with --train: the optimizer")] = \
        Optimizer.adam,
    learning_rate: Annotated[float | None, Opt(
        "--learning-rate", help="with --train: the optimizer's step size (default: the "
        "optimizer's own)")] = None,
    labels: Annotated[Path | None, Opt(
        "--labels", help="TFLite Metadata: a labels file (one a line) for the first output, "
        "packed into the model")] = None,
    mean: Annotated[str | None, Opt(
        "--mean", metavar="M[,M...]", help="TFLite Metadata: the inputs' normalization "
        "(x - mean) / std, one value or one a channel")] = None,
    std: Annotated[str | None, Opt("--std", metavar="S[,S...]", help="TFLite Metadata: see "
                                   "--mean")] = None,
    description: Annotated[str | None, Opt(
        "--description", help="TFLite Metadata: what the model does")] = None,
) -> None:
    """Convert an ONNX model into a .tflite model."""
    needs("onnx", "convert", "converting an ONNX model")
    from edgelite.converter import ConversionError

    positive_number(learning_rate, "--learning-rate")
    training = (trainable, value(loss), value(optimizer), learning_rate) if train else None
    quantization = (value(quantize), calibration_data, int8_io, value(calibration))
    try:
        _convert(model, output, input_shape, keep_io_layout, check, inputs, quantization,
                 training, (atol, rtol), (labels, mean, std, description))
    except ConversionError as e:
        fail(getattr(e, "cli_message", str(e)))   # the message naming this command's flags
    except CliError:
        raise
    except Exception as e:  # noqa: BLE001  every failure is one line on stderr
        fail(f"internal converter error ({type(e).__name__}: {error_line(str(e))}); please "
             "report it", 2)


def parse_input_shapes(specs: list) -> dict:
    from edgelite.converter import ConversionError

    shapes = {}
    for spec in specs:
        name, sep, dims = spec.rpartition("=")
        try:
            shape = [int(d) for d in dims.split(",")] if sep and name else None
        except ValueError:
            shape = None
        if shape is None:
            raise ConversionError(f"--input-shape {spec!r}: expected NAME=D0,D1,... "
                                  "(e.g. x=1,3,224,224)")
        shapes[name] = shape
    return shapes


def output_path(model: Path, output: Path | None) -> Path:
    """Where the .tflite goes: `output`, or MODEL with .tflite; never over MODEL itself."""
    target = output or model.with_suffix(".tflite")
    if _same_file(model, target):
        fail(f"refusing to write over the input {model}: "
             + ("name another output with -o" if output is None else "-o names the input"))
    check_writable(target, "-o")
    return target


def _same_file(a: Path, b: Path) -> bool:
    try:
        return b.exists() and a.samefile(b)
    except OSError:
        return a.resolve() == b.resolve()


def _convert(model: Path, output, input_shape, keep_io_layout, check, inputs,
             quantization, training, tolerance, metadata=(None,) * 4) -> None:
    from edgelite.converter import TFLiteConverter, TrainingOptions
    from edgelite.converter.quantize import conversion as quantized

    output = output_path(model, output)
    if model.suffix == ".pt2":      # torch.export.save's program: exported to ONNX in memory
        converter = TFLiteConverter.from_exported_program(model, parse_input_shapes(input_shape))
        model_source = converter.onnx_model
    else:
        converter = TFLiteConverter.from_onnx(model, parse_input_shapes(input_shape))
        model_source = model
    converter.keep_io_layout = keep_io_layout
    quantized.configure(converter, *quantization)
    if training is not None:
        converter.training = TrainingOptions(*training)
    content = _with_metadata(converter.convert(), model.stem, *metadata)
    result = converter.last_conversion
    write_output(output, content, "-o")
    echo("\n".join(summary_lines(model, output, result) + quantized.summary_lines(result)))
    if not check:
        return
    written = f"({output} was written; the check failed)"
    if result.quantization is not None:
        lines, failure = quantized.check(result, model_source, inputs)
        echo("\n".join(lines))
        if failure:
            fail(f"{failure} {written}")
        return
    from edgelite.converter.check import compare, load_feeds, missing_oracles

    feeds, notes = load_feeds(result, inputs) if inputs is not None else (None, [])
    rows = compare(result, model_source, feeds, *tolerance)
    missing = missing_oracles()
    echo("\n".join(check_lines(rows) + [f"  note: {m}" for m in notes + missing]))
    if len(missing) == 2:
        fail(f"--check had nothing to compare edgelite with: {'; '.join(missing)} {written}")
    bad = [r["name"] for r in rows if not r["ok"]]
    if bad:
        fail(f"check failed: outputs {', '.join(bad)} differ by more than --atol {tolerance[0]:g}"
             f" + --rtol {tolerance[1]:g} x max |reference| {written}")


# -- the summary ---------------------------------------------------------------------------------

def _counts(counts: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "none"


def summary_lines(model: Path, output: Path, result) -> list:
    sg = result.model.subgraphs[0]
    layout = result.io_layout
    lines = [f"{model.name} -> {output}  ({len(result.content):,} bytes, "
             f"{result.seconds:.2f} s)",
             f"  ops in   ({sum(result.ops_in.values())}): {_counts(result.ops_in)}",
             f"  ops out  ({sum(result.ops_out.values())}): {_counts(result.ops_out)}",
             f"  transposes left: {result.transposes}"]
    for kind, tensors in (("inputs", sg.inputs), ("outputs", sg.outputs)):
        for entry, t in zip(layout[kind], tensors):
            tensor = sg.tensors[t]
            shape = list(tensor.shape_signature or tensor.shape)
            perm = entry["perm"]
            note = "" if perm == sorted(perm) else f"  (ONNX layout permuted by {perm})"
            lines.append(f"  {kind[:-1]:<7}  {entry['name']}: {tensor.dtype} {shape}{note}")
    lines += [f"  note: {n}" for n in result.notes]
    lines += [f"  warning: {getattr(w, 'cli', w)}" for w in result.warnings]
    return lines


# -- --check -------------------------------------------------------------------------------------

def check_lines(rows: list) -> list:
    if not rows:
        return ["check: the model has no outputs"]
    lines = [f"check (max abs error vs {rows[0]['reference']}):"]
    for r in rows:
        errs = ", ".join(f"{k} {v:.3g}" for k, v in r["errors"].items()) or "no other runtime"
        lines.append(f"  {r['name']}: {errs}  (max |ref| {r['max_abs_ref']:.3g})"
                     f"{'' if r['ok'] else '  MISMATCH'}")
    return lines


def _with_metadata(content: bytes, name: str, labels, mean, std, description) -> bytes:
    """The converted model with TFLite Metadata (edgelite.schema.metadata) when any of --labels,
    --mean, --std, --description is given."""
    if (labels, mean, std, description) == (None,) * 4:
        return content
    from edgelite.schema.metadata import add_metadata

    try:
        names = labels and [x.strip() for x in labels.read_text().splitlines() if x.strip()]
        values = [None if v is None else [float(x) for x in v.split(",")] for v in (mean, std)]
        return add_metadata(content, labels=names, labels_file=labels and labels.name,
                            mean=values[0], std=values[1], description=description, name=name)
    except OSError as e:
        fail(f"cannot read --labels {labels}: {e.strerror or e}")
    except ValueError as e:   # a bad number, or labels/normalization that do not fit the model
        fail(f"--labels/--mean/--std: {e}")
