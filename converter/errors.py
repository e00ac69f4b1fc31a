"""The converter's errors: one class for everything a user can fix, one message each.

A message that tells how to fix a setting names it as the Python API spells it
(`input_shapes={'x': [1, 3, 224, 224]}`); the same message naming tflite-convert's flag
(`--input-shape x=1,3,224,224`) travels with it, for the command line: `cli_wording(error)` for
an error, `cli_wording(warning)` for one of `Conversion.warnings`.
"""
from __future__ import annotations


class Worded(str):
    """Text naming settings the Python API's way; `.cli` is the same text naming
    tflite-convert's flags instead."""

    def __new__(cls, api: str, cli: str | None = None):
        text = super().__new__(cls, api)
        text.cli = api if cli is None else cli
        return text


def worded(*parts) -> Worded:
    """The parts (plain strings, or Worded ones naming a setting) as one Worded text."""
    return Worded("".join(str(p) for p in parts), "".join(cli_wording(p) for p in parts))


def joined(separator: str, parts) -> Worded:
    parts = list(parts)
    return Worded(separator.join(str(p) for p in parts),
                  separator.join(cli_wording(p) for p in parts))


def cli_wording(text) -> str:
    """An error's or a warning's text as the command line says it, naming its flags."""
    if isinstance(text, BaseException):
        return getattr(text, "cli_message", str(text))
    return getattr(text, "cli", str(text))


def input_shapes_setting(name: str | None = None, dims=None) -> Worded:
    """How to fix an input's shape: `input_shapes={'x': [1, 3, 224, 224]}` or
    `--input-shape x=1,3,224,224`; without dims `input_shapes['x']` or `--input-shape x`;
    without a name the setting itself."""
    if name is None:
        return Worded("input_shapes", "--input-shape")
    if dims is None:
        return Worded(f"input_shapes[{name!r}]", f"--input-shape {name}")
    dims = [str(d) for d in dims]
    return Worded(f"input_shapes={{{name!r}: [{', '.join(dims)}]}}",
                  f"--input-shape {name}={','.join(dims)}")


class ConversionError(ValueError):
    """The model cannot be converted; the message says which node or tensor and why.
    `cli_message`: the same message naming tflite-convert's flags where it names a setting."""

    def __init__(self, message: str = ""):
        super().__init__(str(message))
        self.cli_message = cli_wording(message)


class UnsupportedOpsError(ConversionError):
    """The model uses ONNX nodes the converter cannot lower; the message lists all of them."""

    def __init__(self, problems: list):
        self.problems = list(problems)
        super().__init__(f"{len(self.problems)} ONNX node(s) cannot be converted:\n  "
                         + "\n  ".join(self.problems))
