"""`tflite-convert MODEL.onnx -o OUT.tflite` (also `edgelite convert`): convert, summarize, and
with `--check` compare onnxruntime, edgelite and LiteRT on the same inputs.

Importing this module stays cheap (typer only); the converter loads when the command runs.
"""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

def convert_command(
    model: Path = typer.Argument(..., help="the ONNX model (.onnx; external data beside it)"),
    output: Optional[Path] = typer.Option(
        None, "-o", "--output", help="the .tflite to write (default: MODEL with .tflite)"),
    input_shape: List[str] = typer.Option(
        [], "--input-shape", metavar="NAME=D0,D1,...",
        help="fix an input's shape (-1 keeps the first dim dynamic); repeatable"),
    keep_io_layout: bool = typer.Option(
        False, "--keep-io-layout", help="keep every input and output in ONNX's layout (NCHW)"),
    check: bool = typer.Option(
        False, "--check", help="run onnxruntime, edgelite and LiteRT on the same inputs and "
                               "print each output's max error; fail if they disagree"),
    inputs: Optional[Path] = typer.Option(
        None, "--inputs", help="an .npz of inputs for --check, keyed by input name or "
                               "input_0, input_1, ... in ONNX layout (default: random)"),
    quantize: Optional[str] = typer.Option(
        None, "--quantize", metavar="dynamic|dynamic-int4|int8|int16x8|float16",
        help="quantize: int8 weights (dynamic; dynamic-int4: int4 for fully-connected and "
             "convolution weights), full integer (int8, int16x8: needs --calibration-data) or "
             "float16 weights"),
    calibration_data: Optional[Path] = typer.Option(
        None, "--calibration-data", help="an .npz of samples for calibration: one array per "
                                         "ONNX input name, samples along the first axis"),
    int8_io: bool = typer.Option(False, "--int8-io", help="int8 model inputs and outputs"),
    calibration: str = typer.Option(
        "minmax", "--calibration", metavar="minmax|percentile|mse",
        help="activation ranges: the extremes seen, 99.99th percentiles, or least error"),
    train: bool = typer.Option(
        False, "--train", help="add train/infer/save/restore signatures: the model fine-tunes "
                               "on the device (edgelite train, or LiteRT's signature runner)"),
    trainable: str = typer.Option(
        "last:1", "--trainable", metavar="last:N|all|PATTERN",
        help="with --train: the weights that train (last N weighted layers, all, or tensor-name "
             "globs, comma-separated)"),
    loss: str = typer.Option(
        "sparse_softmax_cross_entropy", "--loss",
        help="with --train: sparse_softmax_cross_entropy, softmax_cross_entropy, "
             "mean_squared_error or binary_cross_entropy"),
    optimizer: str = typer.Option("adam", "--optimizer", help="with --train: adam or sgd"),
    learning_rate: Optional[float] = typer.Option(
        None, "--learning-rate", help="with --train (default: the optimizer's)"),
) -> None:
    """Convert an ONNX model into a .tflite model."""
    training = (trainable, loss, optimizer, learning_rate) if train else None
    try:
        code = _convert(model, output, input_shape, keep_io_layout, check, inputs,
                        (quantize, calibration_data, int8_io, calibration), training)
    except typer.Exit:
        raise
    except Exception as e:  # noqa: BLE001  every failure is one line on stderr
        from .errors import ConversionError
        if isinstance(e, ConversionError):
            _fail(str(e))
        _fail(f"internal converter error ({type(e).__name__}: {e}); please report it", 2)
    if code:
        raise typer.Exit(code)


def _fail(message: str, code: int = 1) -> None:
    """One `error:` line: a message's list items (its indented lines) joined with "; "."""
    head, *items = message.strip().splitlines() or [""]
    text = " ".join(head.split())
    if items:
        text += " " + "; ".join(" ".join(item.split()) for item in items)
    typer.echo("error: " + text, err=True)
    raise typer.Exit(code)


def parse_input_shapes(specs: list) -> dict:
    from .errors import ConversionError

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


def _convert(model: Path, output, input_shape, keep_io_layout, check, inputs,
             quantization=(None, None, False, "minmax"), training=None) -> int:
    from .api import TFLiteConverter, TrainingOptions
    from .quantize import conversion as quantized   # quantization hook (converter/quantize)

    converter = TFLiteConverter.from_onnx(model, parse_input_shapes(input_shape))
    converter.keep_io_layout = keep_io_layout
    quantized.configure(converter, *quantization)
    if training is not None:
        converter.training = TrainingOptions(*training)
    content = converter.convert()
    result = converter.last_conversion
    output = output or model.with_suffix(".tflite")
    try:
        output.write_bytes(content)
    except OSError as e:
        _fail(f"cannot write {output}: {e.strerror or e}")
    typer.echo("\n".join(summary_lines(model, output, result) + quantized.summary_lines(result)))
    if not check:
        return 0
    if result.quantization is not None:
        lines, failure = quantized.check(result, model, inputs)
        typer.echo("\n".join(lines))
        if failure:
            _fail(failure)
        return 0
    from .check import compare, load_feeds

    feeds = load_feeds(result, inputs) if inputs is not None else None
    rows = compare(result, model, feeds)
    typer.echo("\n".join(check_lines(rows)))
    bad = [r["name"] for r in rows if not r["ok"]]
    if bad:
        from .check import TOLERANCE
        _fail(f"check failed: outputs {', '.join(bad)} differ by more than "
              f"{TOLERANCE:g} x max |reference|")
    return 0


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
    lines += [f"  warning: {w}" for w in result.warnings]
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


def main() -> None:
    """The `tflite-convert` console script."""
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command()(convert_command)
    app()

