"""The part of the ``flatbuffers`` package that the generated readers (``pyree.runtime._fb``)
call, in one small module that imports only ``struct``.

The package itself imports numpy at its own import whenever numpy is installed
(``flatbuffers.compat.import_numpy``), which was most of a ``pyree-run-module`` process's
time; the runtime only reads. schemas/generate.py points the generated readers
here (``flatbuffers.<module>.<name>`` becomes ``flatbuffers.<name>``, and ``np`` is None, so
scalar vectors unpack as lists). The semantics are the package's (flatbuffers/table.py,
encode.py, number_types.py, util.py), minus the argument type checks: bounds.py has checked
every offset and vtable before anything here runs.
"""

from __future__ import annotations

import struct


class _Scalar:
    """A scalar type as the generated code names it (``Uint16Flags``...): its little-endian
    packer, Python type and width."""

    def __init__(self, code: str, py_type: type):
        self.packer_type = struct.Struct("<" + code)
        self.py_type = py_type
        self.bytewidth = self.packer_type.size


BoolFlags = _Scalar("?", bool)
Uint8Flags, Uint16Flags = _Scalar("B", int), _Scalar("H", int)
Uint32Flags, Uint64Flags = _Scalar("I", int), _Scalar("Q", int)
Int8Flags, Int16Flags = _Scalar("b", int), _Scalar("h", int)
Int32Flags, Int64Flags = _Scalar("i", int), _Scalar("q", int)
Float32Flags, Float64Flags = _Scalar("f", float), _Scalar("d", float)
UOffsetTFlags, SOffsetTFlags, VOffsetTFlags = Uint32Flags, Int32Flags, Uint16Flags
uoffset = UOffsetTFlags.packer_type
FILE_IDENTIFIER_LENGTH = 4

_U32, _I32, _U16 = uoffset.unpack_from, SOffsetTFlags.packer_type.unpack_from, \
    VOffsetTFlags.packer_type.unpack_from


def Get(packer_type: struct.Struct, buf, head: int):
    """The value ``packer_type`` decodes at ``buf[head]``."""
    return packer_type.unpack_from(buf, head)[0]


def BufferHasIdentifier(buf, offset: int, file_identifier: bytes, size_prefixed=False) -> bool:
    start = offset + 4 + (4 if size_prefixed else 0)
    return bytes(buf[start:start + FILE_IDENTIFIER_LENGTH]) == file_identifier


class Table:
    """A table at ``Pos`` in ``Bytes``: vtable lookups, offsets, strings, vectors."""

    __slots__ = ("Bytes", "Pos")

    def __init__(self, buf, pos: int):
        self.Bytes = buf
        self.Pos = pos

    def Offset(self, vtableOffset: int) -> int:
        """The field's offset from the vtable; 0 when the table has no such field."""
        vtable = self.Pos - _I32(self.Bytes, self.Pos)[0]
        if vtableOffset < _U16(self.Bytes, vtable)[0]:
            return _U16(self.Bytes, vtable + vtableOffset)[0]
        return 0

    def Indirect(self, off: int) -> int:
        return off + _U32(self.Bytes, off)[0]

    def String(self, off: int) -> bytes:
        off += _U32(self.Bytes, off)[0]
        start = off + 4
        return bytes(self.Bytes[start:start + _U32(self.Bytes, off)[0]])

    def VectorLen(self, off: int) -> int:
        off += self.Pos
        off += _U32(self.Bytes, off)[0]
        return _U32(self.Bytes, off)[0]

    def Vector(self, off: int) -> int:
        """Where the elements of the vector whose offset is at ``off`` start."""
        off += self.Pos
        return off + _U32(self.Bytes, off)[0] + 4

    def Get(self, flags: _Scalar, off: int):
        return flags.py_type(flags.packer_type.unpack_from(self.Bytes, off)[0])
