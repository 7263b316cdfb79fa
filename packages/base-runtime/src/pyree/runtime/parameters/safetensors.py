"""Reads the index of a safetensors file without the ``safetensors`` package: a u64
little-endian header length, a JSON object mapping each tensor's key to its ``dtype``,
``shape`` and ``data_offsets`` [begin, end) into the data after the header (``__metadata__``:
free-form strings, ignored), then the data.
"""

from __future__ import annotations

import json
import math
import struct

from pyree.runtime.parameters.entry import Entry, ParameterError

ITEMSIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
             "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}
MAX_HEADER = 100 << 20  # the safetensors package's own limit


def read_safetensors(data, path: str) -> dict[str, Entry]:
    """The file's tensors by key; ParameterError naming the file, the key and the problem.
    ``data`` reads like bytes (a ParameterFile reads each slice from the file)."""
    size = len(data)
    if size < 8:
        raise _damaged(path, f"the file is {size} bytes, too short for the 8-byte header length "
                             f"(truncated?)")
    (header_length,) = struct.unpack("<Q", bytes(data[0:8]))
    if header_length > MAX_HEADER or 8 + header_length > size:
        raise _damaged(path, f"its header claims {header_length} bytes but the file has "
                             f"{size - 8} after the length (truncated?)")
    try:
        header = json.loads(bytes(data[8:8 + header_length]).decode(),
                            object_pairs_hook=_unique_keys)
    except _DuplicateKey as e:
        raise _damaged(path, f"its header has the key '{e}' twice") from None
    except (UnicodeDecodeError, ValueError) as e:
        raise _damaged(path, f"its header is not valid JSON ({e})") from None
    except RecursionError:
        raise _damaged(path, "its header nests JSON arrays or objects too deeply") from None
    if not isinstance(header, dict):
        raise _damaged(path, "its header is not a JSON object")
    start, available = 8 + header_length, size - 8 - header_length
    entries = {}
    for key, info in header.items():
        if key == "__metadata__":
            continue
        entries[key] = _entry(key, info, start, available, path)
    return entries


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    """json's object hook: a key twice is refused (json would keep the last one silently, and
    which tensor a reader takes would be the writer's accident)."""
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        raise _DuplicateKey(next(k for k, _ in pairs if k in seen or seen.add(k)))
    return result


def _entry(key: str, info, start: int, available: int, path: str) -> Entry:
    where = f"tensor '{key}'"
    if not isinstance(info, dict):
        raise _damaged(path, f"{where} is not a JSON object")
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if not isinstance(dtype, str) or dtype not in ITEMSIZES:
        raise _damaged(path, f"{where} has unknown dtype {dtype!r}")
    if not (isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape)):
        raise _damaged(path, f"{where} has shape {shape!r}, not a list of sizes")
    if not (isinstance(offsets, list) and len(offsets) == 2
            and all(type(o) is int for o in offsets) and 0 <= offsets[0] <= offsets[1]):
        raise _damaged(path, f"{where} has data_offsets {offsets!r}, not [begin, end]")
    begin, end = offsets
    if end > available:
        raise _damaged(path, f"{where}'s data [{begin}, {end}) runs past the {available} bytes "
                             f"of data in the file (truncated?)")
    if end - begin != math.prod(shape) * ITEMSIZES[dtype]:
        raise _damaged(path, f"{where} is {dtype} {shape} but has {end - begin} bytes of data")
    return Entry(start + begin, end - begin, dtype=dtype, shape=tuple(shape))


def _damaged(path: str, what: str) -> ParameterError:
    return ParameterError(f"parameter file '{path}' is not a valid safetensors file: {what}")
