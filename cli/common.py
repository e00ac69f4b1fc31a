"""What the commands share: failing with one message, printing, loading a model, reading .npz.

Cheap to import (no numpy, no edgelite parts): commands import those inside their bodies.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import NoReturn


class CliError(Exception):
    """A command's failure: its message is printed as one `error: ...` line on stderr, and the
    process exits with `code` (1: the input or the model was refused; 2: an internal error)."""

    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.code = code


def fail(message: str, code: int = 1) -> NoReturn:
    raise CliError(message, code)


def echo(text: str = "", err: bool = False) -> None:
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n")
    stream.flush()


def error_line(message: str) -> str:
    """A message as one line: a list's items (its indented lines) joined with "; "."""
    head, *items = str(message).strip().splitlines() or [""]
    text = " ".join(head.split())
    if items:
        text += " " + "; ".join(" ".join(item.split()) for item in items if item.strip())
    return text


def load_model(path: Path):
    """The model file at `path` as the in-memory model (`edgelite.schema.Model`)."""
    from edgelite.schema import ModelError, load

    check_file(path, "model")
    try:
        return load(path)
    except ModelError as e:
        fail(f"{path}: {e}")


def check_file(path: Path, what: str = "file") -> None:
    if path.is_dir():
        fail(f"{path} is a directory, not a {what}{'' if what == 'file' else ' file'}")
    if not path.exists():
        fail(f"no such file: {path}")


ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")   # a zip's first entry, or an empty zip


def read_npz(path: Path, flag: str = "--data") -> dict:
    """The arrays of an .npz (no pickles), by name."""
    import numpy as np

    check_file(path)
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError as e:
        fail(f"cannot read {flag} {path}: {e.strerror or e}")
    if head not in ZIP_MAGIC:
        fail(f"cannot read {flag} {path}: not an .npz (a zip of .npy arrays, as numpy.savez "
             "writes): " + ("it is empty" if not head else "it does not start as a zip archive"))
    try:
        with np.load(path, allow_pickle=False) as npz:
            return {k: npz[k] for k in npz.files}
    except Exception as e:  # noqa: BLE001  any unreadable file is the same one-line refusal
        fail(f"cannot read {flag} {path} as an .npz: {one_line(e)}")


def positive_number(value, flag: str):
    """`value` when it is None or a positive finite number, else one error line."""
    import math

    if value is not None and not (math.isfinite(value) and value > 0):
        fail(f"{flag} {value}: expected a positive finite number")
    return value


def check_writable(path: Path, flag: str) -> None:
    """Fail now (before any work) when `path` cannot be an output file: a directory, or in a
    folder that does not exist."""
    if path.is_dir():
        fail(f"cannot write {flag} {path}: it is a directory")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        fail(f"cannot write {flag} {path}: no such folder {parent}")


def write_output(path: Path, content: bytes, flag: str) -> None:
    """Write `content` to `path` atomically (a temporary file beside it, flushed to disk, then
    renamed over it: the old file stays whole if anything fails); one error line naming the
    flag and the path."""
    from edgelite.interpreter.training.checkpoint import atomic_write

    check_writable(path, flag)
    try:
        atomic_write(path, lambda f: f.write(content))
    except OSError as e:
        fail(f"cannot write {flag} {path}: {e.strerror or e}")


def one_line(e: Exception) -> str:
    """An exception as one line; the interpreter's list of unsupported operators grouped by op."""
    from edgelite.interpreter import UnsupportedOpsError

    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()] or [type(e).__name__]
    if not isinstance(e, UnsupportedOpsError) or len(lines) == 1:
        return " ".join(lines) if isinstance(e, (ValueError, RuntimeError)) \
            else f"{type(e).__name__}: {' '.join(lines)}"
    where: dict = {}   # what is missing -> operators
    for ln in lines[1:]:
        m = re.fullmatch(r"subgraph (\d+) operator (\d+): (.*)", ln)
        what, op = (m[3], m[2] if m[1] == "0" else f"{m[1]}:{m[2]}") if m else (ln, None)
        where.setdefault(what, []).extend([op] if op else [])
    parts = [f"{what} at operator{'s' if len(ops) > 1 else ''} {', '.join(ops)}" if ops else what
             for what, ops in where.items()]
    return f"{lines[0].rstrip(':')}: " + "; ".join(parts)


def installed(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def needs(module: str, extra: str, what: str) -> None:
    """Fail with what to install when `module` (a dependency of an extra) is missing."""
    if not installed(module):
        fail(f"{what} needs {module}, which the runtime install leaves out: "
             f"pip install 'edgelite[{extra}]'")
