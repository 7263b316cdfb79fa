"""Writes safetensors files: a u64 little-endian header length, a JSON header mapping each key
to ``{"dtype", "shape", "data_offsets": [begin, end]}`` (offsets into the data that follows),
then the tensors back to back, as the format requires (no gaps).

The header is padded with spaces (the format allows it) so that the data starts 64-byte aligned,
and tensors whose size is a multiple of 64 bytes come first, so that every one of them starts
64-byte aligned too: those are the tensors a CPU runtime can use in place from a mapped file.
"""

from __future__ import annotations

import json
import struct
from typing import BinaryIO

# pyree dtype names -> safetensors dtype names (an index tensor is stored as its i64).
DTYPES = {"f32": "F32", "f16": "F16", "bf16": "BF16", "f64": "F64", "i1": "BOOL", "i8": "I8",
          "i16": "I16", "i32": "I32", "i64": "I64", "index": "I64", "ui8": "U8", "ui16": "U16",
          "ui32": "U32", "ui64": "U64"}
ALIGNMENT = 64


def write_safetensors(f: BinaryIO, entries: list[tuple[str, str, tuple[int, ...], object]]) -> None:
    """Writes (key, pyree dtype, shape, bytes) tensors to the binary stream ``f``; the bytes
    are anything with the buffer protocol (bytes, a contiguous array)."""
    entries = [(key, dtype, shape, memoryview(data).cast("B")) for key, dtype, shape, data in entries]
    ordered = sorted(entries, key=lambda e: len(e[3]) % ALIGNMENT != 0)  # stable
    header, offset = {}, 0
    for key, dtype, shape, data in ordered:
        header[key] = {"dtype": DTYPES[dtype], "shape": list(shape),
                       "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % ALIGNMENT)
    f.write(struct.pack("<Q", len(text)) + text)
    for *_, data in ordered:
        f.write(data)
