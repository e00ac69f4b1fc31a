"""The generated FlatBuffers bindings (`tflite_generated.py`), compiled one class at a time.

`tflite_generated.py` is flatc's output for the whole schema: 1,100 classes and functions, 680 kB
of source, about 0.2-0.3 s of CPU to compile when no bytecode is cached, while loading a model
reads a dozen tables and the options tables of its ops. This module serves the same names
(`bindings.Model`, `bindings.Conv2DOptionsT`, `from .bindings import Padding`) and compiles each
top-level class or function of the generated file on first use, with what its code refers to.
The generated file stays flatc's exact output (schema/generate.py checks it) and stays importable
as a whole (the writer uses it so).

How: the file's top-level statements are found by their first column (flatc writes one per
`class`/`def` and a few imports, which run at once). Asking for a name compiles that statement's
source, and every statement whose name its code reads as a global (`SubGraph` inside
`Model.Subgraphs`), in one shared namespace, the
globals of all of them; a name is published here only after everything it can reach is defined,
under a lock, so a thread never calls into a half-loaded class. Code keeps the generated file's
name and line numbers (tracebacks; the loader's test of where a read error was raised).
"""
from __future__ import annotations

import dis
import re
import sys
import threading
from pathlib import Path

SOURCE = str(Path(__file__).with_name("tflite_generated.py"))

# A top-level statement starts in column 0 with anything but a comment, blank or the rest of a
# compound statement (flatc's `try: from typing import List / except: pass`).
_TOP = re.compile(r"^(?:(?:class|def) (\w+)|(?!except\b|else\b|finally\b|elif\b)[^\s#])", re.M)

_lock = threading.RLock()
_namespace: dict = {"__name__": __name__, "__builtins__": __builtins__}
_chunks: dict = {}      # name -> (first line, source) of its statement, until compiled
_defined: set = set()   # names defined in _namespace


def _index() -> bool:
    """Split the generated file into its statements; False where its source cannot be read
    (an install without .py files): then the whole module serves every name."""
    try:
        with open(SOURCE, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return False
    starts = list(_TOP.finditer(text))
    prelude = []
    line, counted = 0, 0
    for k, m in enumerate(starts):
        end = starts[k + 1].start() if k + 1 < len(starts) else len(text)
        line += text.count("\n", counted, m.start())
        counted = m.start()
        if m.group(1):
            _chunks[m.group(1)] = (line, text[m.start():end])
        else:
            prelude.append((line, text[m.start():end]))
    for line, source in prelude:   # imports (flatbuffers, numpy, typing): cheap, needed by all
        exec(compile("\n" * line + source, SOURCE, "exec"), _namespace)
    return True


# The opcodes that read a global name, and how their argument indexes co_names: LOAD_GLOBAL's
# carries a flag in its low bit from Python 3.11.
_READS = {dis.opmap[name]: shift for name, shift in (
    ("LOAD_GLOBAL", 1 if sys.version_info >= (3, 11) else 0), ("LOAD_NAME", 0),
    ("LOAD_FROM_DICT_OR_GLOBALS", 0)) if name in dis.opmap}


def _names(code) -> set:
    """The global names the code object and the code nested in it read, from the raw bytecode
    (dis.get_instructions, which tests/schema/test_bindings.py compares it with, is 10x
    slower)."""
    raw, co_names, found, ext = code.co_code, code.co_names, set(), 0
    for i in range(0, len(raw), 2):
        op, arg = raw[i], raw[i + 1] | ext
        ext = arg << 8 if op == dis.EXTENDED_ARG else 0
        shift = _READS.get(op)
        if shift is not None:
            found.add(co_names[arg >> shift])
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            found |= _names(const)
    return found


def _define(name: str, compiled: list) -> None:
    """Compile `name` and what it mentions, then define them in order (a class body may use a
    name defined earlier in the file; flatc's define nothing they mention at class time)."""
    if name not in _chunks:   # defined already, or being compiled in this call
        return
    line, source = _chunks.pop(name)
    code = compile("\n" * line + source, SOURCE, "exec")
    compiled.append((name, code))
    for other in sorted(_names(code)):
        _define(other, compiled)


def _load(name: str):
    if _whole is not None:
        return getattr(_whole, name)
    with _lock:
        if name not in _defined:
            if name not in _chunks:
                raise AttributeError(f"the generated tflite bindings have no {name!r}")
            compiled: list = []
            _define(name, compiled)
            for _, code in compiled:
                exec(code, _namespace)
            for other, _ in compiled:
                _defined.add(other)
                globals()[other] = _namespace[other]
        return _namespace[name]


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    return _load(name)


def __dir__():
    return sorted(set(globals()) | set(_chunks) | _defined)


_whole = None
if not _index():
    from . import tflite_generated as _whole
