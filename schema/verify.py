"""The FlatBuffers verifier, as LiteRT runs it on every model before reading it
(`flatbuffers::Verifier` with its default options, through `VerifyModelBuffer`): every offset,
vtable, vector, string and union of the file, checked against the schema (`tflite.fbs`, read
here once) before any of it is trusted. The checks are those of the C++ verifier:

- the identifier `TFL3`; the root offset in the file;
- a table: its offset aligned to 4 and in the file; its vtable (the table's position minus the
  soffset it starts with) aligned to 2, its size even and the whole vtable in the file; at most
  64 tables deep and 1,000,000 tables in all;
- a scalar field: in the file and aligned to its size;
- an offset field (table, vector, string, union value): aligned to 4, in the file, not 0, not
  negative as an int32, pointing inside the file;
- a vector: its length field aligned to 4, the length times the element size plus 4 within the
  file; a string: the same, plus a 0 byte after its last character;
- a union: its value verified as the table its type names (an unknown type is not checked, as
  the generated C++ code does).

`verify(buf)` raises ModelError naming the first fault (which field of which table, where);
`schema.load` calls it before reading. Only the FlatBuffer part of a large-format file is
checked here (its buffers are bounds-checked by the loader).
"""
from __future__ import annotations

import re
import struct
from pathlib import Path

from .errors import ModelError

MAX_DEPTH = 64
MAX_TABLES = 1_000_000
MAX_SIZE = 2 ** 31 - 1      # FLATBUFFERS_MAX_BUFFER_SIZE (32-bit offsets)

_SCALARS = {"bool": 1, "byte": 1, "ubyte": 1, "int8": 1, "uint8": 1, "short": 2, "ushort": 2,
            "int16": 2, "uint16": 2, "int": 4, "uint": 4, "int32": 4, "uint32": 4, "float": 4,
            "float32": 4, "long": 8, "ulong": 8, "int64": 8, "uint64": 8, "double": 8,
            "float64": 8}


class _Schema:
    """tables: name -> [(name, slot, kind, type)] with kind scalar/string/vector/table/union;
    unions: name -> {code: table name}; enums: name -> byte size."""

    def __init__(self, text: str):
        text = re.sub(r"//[^\n]*", "", text)
        self.enums = {m.group(1): _SCALARS[m.group(2)]
                      for m in re.finditer(r"\benum\s+(\w+)\s*:\s*(\w+)\s*\{", text)}
        self.unions = {}
        for m in re.finditer(r"\bunion\s+(\w+)\s*\{([^}]*)\}", text):
            members = {}
            for k, item in enumerate(x.strip() for x in m.group(2).split(",")):
                if not item:
                    continue
                name, _, code = item.partition("=")
                code = code.split("(")[0].strip()
                members[int(code) if code else k + 1] = name.strip()
            self.unions[m.group(1)] = members
        self.tables = {}
        for m in re.finditer(r"\btable\s+(\w+)[^{]*\{([^}]*)\}", text):
            fields = []
            for decl in m.group(2).split(";"):
                f = re.match(r"\s*(\w+)\s*:\s*(\[?\s*\w+\s*\]?)\s*(?:=\s*[^(]*)?(\((.*)\))?",
                             decl)
                if not f:
                    continue
                attrs = f.group(4) or ""
                if "deprecated" in attrs:
                    continue
                fid = int(re.search(r"id:\s*(\d+)", attrs).group(1))
                fields.append((f.group(1), 4 + 2 * fid, re.sub(r"\s", "", f.group(2))))
            self.tables[m.group(1)] = fields
        self.root = re.search(r"\broot_type\s+(\w+)", text).group(1)

    def element(self, type_name: str) -> tuple:
        """(kind, size or table/union name) of a type."""
        if type_name in _SCALARS:
            return "scalar", _SCALARS[type_name]
        if type_name in self.enums:
            return "scalar", self.enums[type_name]
        if type_name == "string":
            return "string", None
        if type_name in self.unions:
            return "union", type_name
        if type_name in self.tables:
            return "table", type_name
        raise ValueError(f"tflite.fbs: unknown type {type_name}")


_schema = None


def schema() -> _Schema:
    global _schema
    if _schema is None:
        _schema = _Schema((Path(__file__).resolve().parent / "tflite.fbs").read_text())
    return _schema


class _Verifier:
    def __init__(self, buf):
        self.buf = buf
        self.size = min(len(buf), MAX_SIZE)
        self.depth = 0
        self.tables = 0
        self.s = schema()

    def fail(self, where: str, what: str) -> ModelError:
        return ModelError(f"corrupt .tflite file (the FlatBuffers verifier refuses it, as "
                          f"LiteRT does): {where}: {what}")

    def span(self, pos: int, n: int, align: int, where: str, what: str) -> None:
        if align > 1 and pos % align:
            raise self.fail(where, f"{what} at byte {pos} is not aligned to {align}")
        if pos < 0 or n < 0 or pos + n > self.size:
            raise self.fail(where, f"{what} at byte {pos} ({n} bytes) lies outside the "
                                   f"{self.size}-byte file")

    def u32(self, pos):
        return struct.unpack_from("<I", self.buf, pos)[0]

    def offset(self, pos: int, where: str) -> int:
        """The target of the uoffset at `pos` (VerifyOffset)."""
        self.span(pos, 4, 4, where, "an offset")
        o = self.u32(pos)
        if o == 0:
            raise self.fail(where, f"the offset at byte {pos} is 0 (points at itself)")
        if o >= 2 ** 31:
            raise self.fail(where, f"the offset at byte {pos} is negative as an int32")
        self.span(pos + o, 1, 1, where, "the offset's target")
        return pos + o

    def vector(self, pos: int, elem: int, where: str) -> int:
        """Check the vector at `pos` of `elem`-byte elements; its length."""
        self.span(pos, 4, 4, where, "a vector's length")
        n = self.u32(pos)
        if n >= MAX_SIZE // elem:
            raise self.fail(where, f"a vector of {n} elements is larger than any file")
        self.span(pos, 4 + n * elem, 1, where, f"a vector of {n} elements")
        return n

    def string(self, pos: int, where: str) -> None:
        n = self.vector(pos, 1, where)
        self.span(pos + 4 + n, 1, 1, where, "a string's terminating 0")
        if self.buf[pos + 4 + n] != 0:
            raise self.fail(where, f"the string at byte {pos} has no terminating 0")

    def table(self, pos: int, name: str, where: str) -> None:
        self.depth += 1
        self.tables += 1
        if self.depth > MAX_DEPTH:
            raise self.fail(where, f"tables nested more than {MAX_DEPTH} deep")
        if self.tables > MAX_TABLES:
            raise self.fail(where, f"more than {MAX_TABLES} tables")
        self.span(pos, 4, 4, where, f"table {name}")
        vt = pos - struct.unpack_from("<i", self.buf, pos)[0]
        self.span(vt, 2, 2, where, f"{name}'s vtable")
        vsize = struct.unpack_from("<H", self.buf, vt)[0]
        if vsize & 1:
            raise self.fail(where, f"{name}'s vtable has an odd size {vsize}")
        self.span(vt, vsize, 1, where, f"{name}'s vtable of {vsize} bytes")
        for field, slot, type_name in self.s.tables[name]:
            if slot >= vsize:
                continue
            off = struct.unpack_from("<H", self.buf, vt + slot)[0]
            if not off:
                continue
            at = pos + off
            here = f"{where}.{field}"
            if type_name.startswith("["):
                kind, arg = self.s.element(type_name[1:-1])
                target = self.offset(at, here)
                if kind == "scalar":
                    self.vector(target, arg, here)
                    continue
                n = self.vector(target, 4, here)
                for i in range(n):
                    elem = target + 4 + 4 * i
                    item = elem + self.u32(elem)
                    if kind == "string":
                        self.string(item, f"{here}[{i}]")
                    elif kind == "table":
                        self.table(item, arg, f"{here}[{i}]")
                    else:
                        raise self.fail(here, "a vector of unions (not in the schema)")
                continue
            kind, arg = self.s.element(type_name)
            if kind == "scalar":
                self.span(at, arg, arg, here, "a field")
            elif kind == "string":
                self.string(self.offset(at, here), here)
            elif kind == "table":
                self.table(self.offset(at, here), arg, here)
            else:   # union: the type field is the slot before
                type_slot = slot - 2
                code = 0
                if type_slot < vsize:
                    toff = struct.unpack_from("<H", self.buf, vt + type_slot)[0]
                    if toff:
                        self.span(pos + toff, 1, 1, f"{here}_type", "a field")
                        code = self.buf[pos + toff]
                target = self.offset(at, here)
                member = self.s.unions[arg].get(code)
                if member is not None:
                    self.table(target, member, f"{here}<{member}>")
        self.depth -= 1


def verify(buf) -> None:
    """Raise ModelError unless `buf` (bytes, mmap, memoryview of bytes) passes LiteRT's
    FlatBuffers verification of a Model."""
    v = _Verifier(buf)
    if len(buf) < 8 or bytes(buf[4:8]) != b"TFL3":
        raise v.fail("header", "no TFL3 identifier")
    v.table(v.offset(0, "root"), v.s.root, v.s.root)
