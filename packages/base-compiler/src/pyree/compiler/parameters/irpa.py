"""Writes IREE parameter archives (.irpa) laid out byte for byte as IREE's archive builder lays
them out (``iree/schemas/parameter_archive.h``, ``iree/io/formats/irpa/irpa_builder.c``), so
``iree-dump-parameters``, ``iree-run-module --parameters`` and ``iree.runtime.ParameterIndex``
read what pyree writes.

    [v0 header, 88 B] [pad to 16] [entry table: 76-byte data / 85-byte splat entries, each
    16-aligned] [metadata segment: the keys, back to back] [pad to 64 when there is data]
    [storage segment: each data entry's bytes at a 64-aligned offset] [zeros to a 4096-byte size]

Every offset in the header is relative to the header (at file offset 0); an entry's name is a
range of the metadata segment and its data a range of the storage segment. A splat entry has
no data: ``length`` bytes of a repeated 1-16 byte pattern.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import BinaryIO

MAGIC = 0x41505249  # "IRPA"
HEADER = struct.Struct("<IHHQQQ" "Q" "QQ" "QQ" "QQ")  # prefix; entry count; 3 segments
# size, type, flags; name; metadata; minimum alignment; then a data entry's storage range, or
# a splat entry's length, pattern and pattern length.
ENTRY = "<QIQ" "QQ" "QQ" "Q"
DATA_ENTRY = struct.Struct(ENTRY + "QQ")
SPLAT_ENTRY = struct.Struct(ENTRY + "Q16sB")
SPLAT, DATA = 1, 2
HEADER_ALIGNMENT = ENTRY_ALIGNMENT = 16
DATA_ALIGNMENT = 64
FILE_ALIGNMENT = 4096


@dataclass(frozen=True)
class Splat:
    """An entry of ``length`` bytes that repeat ``pattern`` (1, 2, 4, 8 or 16 bytes)."""

    pattern: bytes
    length: int


def _align(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment


def write_irpa(f: BinaryIO, entries: list[tuple[str, object]]) -> None:
    """Writes an archive of (key, value) entries to the binary stream ``f``: a value is a Splat
    or anything with the buffer protocol (bytes, a contiguous array), stored as data."""
    entries = [(key, v if isinstance(v, Splat) else memoryview(v).cast("B")) for key, v in entries]
    names = [key.encode() for key, _ in entries]
    entry_table = _align(HEADER.size, ENTRY_ALIGNMENT)
    entry_size = 0
    for _, value in entries:
        entry_size = _align(entry_size, ENTRY_ALIGNMENT) + (
            SPLAT_ENTRY.size if isinstance(value, Splat) else DATA_ENTRY.size)
    metadata = entry_table + entry_size
    metadata_size = sum(map(len, names))
    data = [(i, v) for i, (_, v) in enumerate(entries) if not isinstance(v, Splat)]
    storage = _align(metadata + metadata_size, DATA_ALIGNMENT if data else 1)
    offsets, storage_size = {}, 0
    for i, value in data:
        offsets[i] = _align(storage_size, DATA_ALIGNMENT)
        storage_size = offsets[i] + len(value)
    total = _align(storage + storage_size, FILE_ALIGNMENT)

    out = bytearray(HEADER.pack(MAGIC, 0, 0, HEADER.size, 0, 0, len(entries), entry_table,
                                entry_size, metadata, metadata_size, storage, storage_size))
    name_offset = 0
    for i, (name, (_, value)) in enumerate(zip(names, entries)):
        out += bytes(_align(len(out), ENTRY_ALIGNMENT) - len(out))
        if isinstance(value, Splat):
            out += SPLAT_ENTRY.pack(SPLAT_ENTRY.size, SPLAT, 0, name_offset, len(name), 0, 0, 0,
                                    value.length, value.pattern, len(value.pattern))
        else:
            out += DATA_ENTRY.pack(DATA_ENTRY.size, DATA, 0, name_offset, len(name), 0, 0,
                                   DATA_ALIGNMENT, offsets[i], len(value))
        name_offset += len(name)
    out += b"".join(names)
    f.write(out)
    written = len(out)
    for i, value in data:
        f.write(bytes(storage + offsets[i] - written))
        f.write(value)
        written = storage + offsets[i] + len(value)
    f.write(bytes(total - written))
