"""Walks a FlatBuffer against the schema layout before anything unpacks it.

The generated Python readers trust every offset and length. A hostile file could point outside
the buffer, claim vectors of 2^32 elements, or share one table from many places so that unpacking
blows up exponentially. This walk checks every offset and length against the buffer and caps the
number of objects visited at what an unshared buffer of this size can hold, so the object-API
unpack that follows is bounded by the file size. A table type that holds tables of its own type
(a CPU executable's variants) could nest as deep as the file allows, past Python's recursion
limit in this walk and in the unpack: tables deeper than ``MAX_DEPTH`` are refused.
"""

from __future__ import annotations

import struct

from pyree.runtime.errors import ModuleError
from pyree.runtime.module.layout import ROOT, TABLES, inline_size

# Deeper than any table of a module the compiler writes (Module, Executable, CpuExecutable, its
# variant, CpuExport, BindingLayout, SizeExpr: 7).
MAX_DEPTH = 16

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")


class _Walker:
    def __init__(self, buf: bytes | memoryview):
        self.buf = buf
        self.size = len(buf)
        self.budget = self.size // 4 + 16
        self.depth = 0

    def fail(self, what: str, where: str) -> ModuleError:
        return ModuleError(f"module file is malformed: {what} at {where}")

    def spend(self, count: int, where: str) -> None:
        self.budget -= count
        if self.budget < 0:
            raise self.fail("more objects than the file can hold (shared or looping references)",
                            where)

    def u32(self, pos: int, where: str) -> int:
        if pos < 0 or pos + 4 > self.size:
            raise self.fail(f"offset {pos} outside the {self.size}-byte FlatBuffer", where)
        return _U32.unpack_from(self.buf, pos)[0]

    def target(self, pos: int, where: str) -> int:
        """The position a uoffset at ``pos`` points to; it must leave room for a length word."""
        dest = pos + self.u32(pos, where)
        if dest + 4 > self.size:
            raise self.fail(f"reference to {dest} outside the {self.size}-byte FlatBuffer", where)
        return dest

    def vector(self, pos: int, element_size: int, where: str) -> tuple[int, int]:
        start = self.target(pos, where)
        count = _U32.unpack_from(self.buf, start)[0]
        if start + 4 + count * element_size > self.size:
            raise self.fail(f"vector of {count} elements runs past the end of the FlatBuffer", where)
        return start + 4, count

    def string(self, pos: int, where: str) -> None:
        start, length = self.vector(pos, 1, where)
        if start + length >= self.size:
            raise self.fail("string without its terminating zero", where)
        self.spend(1, where)

    def table(self, pos: int, name: str, where: str) -> None:
        self.spend(1, where)
        if self.depth == MAX_DEPTH:
            raise self.fail(f"tables nested more than {MAX_DEPTH} deep", where)
        self.depth += 1
        try:
            self._fields(pos, name, where)
        finally:
            self.depth -= 1

    def _fields(self, pos: int, name: str, where: str) -> None:
        if pos + 4 > self.size:
            raise self.fail(f"table {name} at {pos} outside the FlatBuffer", where)
        vtable = pos - _I32.unpack_from(self.buf, pos)[0]
        if vtable < 0 or vtable + 4 > self.size:
            raise self.fail(f"table {name} has its vtable outside the FlatBuffer", where)
        vtable_size, table_size = struct.unpack_from("<HH", self.buf, vtable)
        if vtable_size < 4 or vtable_size % 2 or vtable + vtable_size > self.size:
            raise self.fail(f"table {name} has a bad vtable (size {vtable_size})", where)
        if table_size < 4 or pos + table_size > self.size:
            raise self.fail(f"table {name} of {table_size} bytes runs past the FlatBuffer", where)
        for slot, kind, inline in _FIELDS[name]:
            entry = 4 + 2 * slot
            if entry + 2 > vtable_size:
                break
            field = _U16.unpack_from(self.buf, vtable + entry)[0]
            if field == 0:
                continue
            here = f"{where}.{name}[field {slot}]"
            if field + (inline or 4) > table_size:
                raise self.fail(f"field {slot} of table {name} lies outside the table", here)
            if inline is None:
                self.field(pos + field, kind, here)

    def field(self, pos: int, kind, where: str) -> None:
        if kind == "string":
            self.string(pos, where)
        elif kind[0] == "vector":
            self.vector(pos, inline_size(kind[1]), where)
            self.spend(1, where)
        elif kind[0] == "table":
            self.table(self.target(pos, where), kind[1], where)
        else:
            start, count = self.vector(pos, 4, where)
            self.spend(count, where)
            for i in range(count):
                element = start + 4 * i
                if kind[0] == "strings":
                    self.string(element, f"{where}[{i}]")
                else:
                    self.table(self.target(element, where), kind[1], f"{where}[{i}]")


# table -> (slot, kind, its inline size or None) per field
_FIELDS = {name: [(slot, kind, inline_size(kind)) for slot, (_, kind) in enumerate(fields)]
           for name, fields in TABLES.items()}


def check_bounds(buf: bytes | memoryview) -> None:
    """Raises ModuleError unless every table, vector and string of the Module root is in bounds."""
    walker = _Walker(buf)
    walker.table(walker.target(0, "root"), ROOT, "root")
