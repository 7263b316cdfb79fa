"""Reads the index of an IREE parameter archive (.irpa), as IREE's ``irpa_parser.c`` does.

Layout (``iree/schemas/parameter_archive.h``, all little-endian, packed): a header prefix
(magic "IRPA", version major.minor, header size, next-header offset, flags), for version 0 the
entry count and the entry, metadata and storage segments (offset, length) relative to the
header; entries are 16-byte aligned, each with its size, type (0 skip, 1 splat, 2 data,
3 external), flags, name and metadata ranges of the metadata segment and its minimum alignment;
a data entry adds its range of the storage segment, a splat entry its length and pattern.
Headers may be chained through the next-header offset. Every range is checked against the file.
"""

from __future__ import annotations

import struct

from pyree.runtime.parameters.entry import Entry, ParameterError

MAGIC = b"IRPA"
PREFIX = struct.Struct("<4sHHQQQ")
HEADER_V0 = struct.Struct("<4sHHQQQ" "Q" "QQ" "QQ" "QQ")
ENTRY = struct.Struct("<QIQ" "QQ" "QQ" "Q")  # size, type, flags; name; metadata; alignment
DATA = struct.Struct("<QQ")  # storage range, after ENTRY
SPLAT = struct.Struct("<Q16sB")  # length, pattern, pattern length, after ENTRY
ENTRY_ALIGNMENT = 16
SKIP, SPLAT_TYPE, DATA_TYPE, EXTERNAL = 0, 1, 2, 3


def read_irpa(data, path: str) -> dict[str, Entry]:
    """The archive's entries by key; ParameterError naming the file and the problem. ``data``
    reads like bytes (a ParameterFile reads each slice from the file)."""
    entries: dict[str, Entry] = {}
    base = 0
    while True:  # offsets are unsigned: each linked header lies further into the file
        following = _read_archive(data, base, path, entries)
        if not following:
            return entries
        base += following
        if base + PREFIX.size > len(data):
            raise _damaged(path, f"its linked header at offset {base} is outside the "
                                 f"{len(data)}-byte file")


def _damaged(path: str, what: str) -> ParameterError:
    return ParameterError(f"parameter file '{path}' is not a valid IREE parameter archive: {what}")


def _read_archive(data, base: int, path: str, entries: dict[str, Entry]) -> int:
    """Adds the entries of the archive header at ``base``; returns its next-header offset."""
    size = len(data)
    if base + PREFIX.size > size:
        raise _damaged(path, f"the file is {size} bytes, too short for an archive header "
                             f"(truncated?)")
    header = bytes(data[base:base + HEADER_V0.size])
    magic, major, minor, header_size, following, _ = PREFIX.unpack_from(header)
    if magic != MAGIC:
        raise _damaged(path, f"magic {bytes(magic)!r} at offset {base}, expected b'IRPA'")
    if major != 0 or minor != 0:
        raise ParameterError(f"parameter file '{path}' is IRPA version {major}.{minor}; this "
                             f"runtime reads version 0.0")
    if header_size != HEADER_V0.size or base + header_size > size:
        raise _damaged(path, f"header of {header_size} bytes (version 0 has {HEADER_V0.size}) in "
                             f"a {size}-byte file (truncated?)")
    fields = HEADER_V0.unpack_from(header)
    count = fields[6]
    segments = {"entry": fields[7:9], "metadata": fields[9:11], "storage": fields[11:13]}
    for name, (offset, length) in segments.items():
        if length and base + offset + length > size:
            raise _damaged(path, f"its {name} segment [{base + offset}, +{length}) runs past the "
                                 f"end of the {size}-byte file (truncated?)")
    (table, table_size), metadata, storage = segments["entry"], segments["metadata"], segments["storage"]
    table = bytes(data[base + table:base + table + table_size]) if table_size else b""
    names = bytes(data[base + metadata[0]:base + metadata[0] + metadata[1]]) if metadata[1] else b""
    position, remaining = 0, table_size
    for i in range(count):
        if remaining < ENTRY.size:
            raise _damaged(path, f"its entry table ends before entry {i} of {count}")
        entry_size, kind, _, name_offset, name_length, *_, alignment = ENTRY.unpack_from(table, position)
        if entry_size < ENTRY.size or entry_size > remaining:
            raise _damaged(path, f"entry {i} claims {entry_size} bytes, outside its entry table")
        if name_offset + name_length > metadata[1]:
            raise _damaged(path, f"the name of entry {i} lies outside the metadata segment")
        try:
            key = names[name_offset:name_offset + name_length].decode()
        except UnicodeDecodeError:
            raise _damaged(path, f"the name of entry {i} is not UTF-8") from None
        fixed = position + ENTRY.size
        if kind == DATA_TYPE:
            if entry_size < ENTRY.size + DATA.size:
                raise _damaged(path, f"data entry '{key}' is {entry_size} bytes, too short")
            offset, length = DATA.unpack_from(table, fixed)
            if offset + length > storage[1]:
                raise _damaged(path, f"the data of '{key}' [{offset}, +{length}) lies outside "
                                     f"the {storage[1]}-byte storage segment")
            where = base + storage[0] + offset
            if alignment and where % alignment:
                raise _damaged(path, f"the data of '{key}' at file offset {where} is not "
                                     f"{alignment}-byte aligned as its entry requires")
            _add(entries, key, Entry(where, length), path)
        elif kind == SPLAT_TYPE:
            if entry_size < ENTRY.size + SPLAT.size:
                raise _damaged(path, f"splat entry '{key}' is {entry_size} bytes, too short")
            length, pattern, pattern_length = SPLAT.unpack_from(table, fixed)
            if pattern_length not in (1, 2, 4, 8, 16) or length % pattern_length:
                raise _damaged(path, f"splat entry '{key}' has a {pattern_length}-byte pattern "
                                     f"for {length} bytes")
            _add(entries, key, Entry(0, length, splat=pattern[:pattern_length]), path)
        elif kind == EXTERNAL:
            raise ParameterError(f"parameter file '{path}': entry '{key}' refers to an external "
                                 f"file, which pyree does not read (repack it with "
                                 f"iree-convert-parameters)")
        elif kind != SKIP:
            raise _damaged(path, f"entry {i} ('{key}') has unknown type {kind}")
        step = -(-entry_size // ENTRY_ALIGNMENT) * ENTRY_ALIGNMENT
        position, remaining = position + step, max(remaining - step, 0)
    return following


def _add(entries: dict[str, Entry], key: str, entry: Entry, path: str) -> None:
    if key in entries:
        raise _damaged(path, f"key '{key}' appears twice")
    entries[key] = entry
