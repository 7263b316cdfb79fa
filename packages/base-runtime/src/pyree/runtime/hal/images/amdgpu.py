"""An AMDGPU code object's kernels and their explicit arguments, from its metadata note.

HIP has no call that reports a module function's parameters, but every code object carries them:
the NT_AMDGPU_METADATA note ("AMDGPU", type 32) holds a MessagePack map whose
``amdhsa.kernels`` list gives each kernel's ``.name`` and ``.args`` (``.size``,
``.value_kind``); arguments whose kind starts with ``hidden_`` are the runtime's own, not the
launch's. The decoder reads only what that metadata uses and refuses anything else.
"""

from __future__ import annotations

import struct

from pyree.runtime.hal.images import ImageError
from pyree.runtime.hal.images.elf import ElfImage

SHT_NOTE = 7
NT_AMDGPU_METADATA = 32
_MAX_DEPTH = 16


def kernel_arguments(elf: ElfImage) -> dict[str, tuple[int, ...]]:
    """Kernel name -> the byte sizes of its explicit arguments, in order."""
    metadata = None
    for section in elf.sections:
        if section.type == SHT_NOTE:
            for owner, kind, desc in _notes(bytes(elf.image[section.offset:section.offset
                                                             + section.size])):
                if owner == b"AMDGPU" and kind == NT_AMDGPU_METADATA:
                    metadata = _decode(desc)
    if not isinstance(metadata, dict) or not isinstance(metadata.get("amdhsa.kernels"), list):
        raise ImageError("the code object has no AMDGPU kernel metadata")
    out = {}
    try:
        for kernel in metadata["amdhsa.kernels"]:
            out[kernel[".name"]] = tuple(int(a[".size"]) for a in kernel.get(".args", [])
                                         if not str(a[".value_kind"]).startswith("hidden_"))
    except (TypeError, KeyError, ValueError, AttributeError):
        raise ImageError("the code object's kernel metadata is malformed") from None
    return out


def _notes(data: bytes):
    at = 0
    while at + 12 <= len(data):
        namesz, descsz, kind = struct.unpack_from("<III", data, at)
        name_at = at + 12
        desc_at = name_at + (namesz + 3) // 4 * 4
        at = desc_at + (descsz + 3) // 4 * 4
        if desc_at + descsz > len(data):
            raise ImageError("a note of the code object runs past its section")
        yield data[name_at:name_at + namesz].rstrip(b"\0"), kind, data[desc_at:desc_at + descsz]


def _decode(data: bytes):
    try:
        value, _ = _value(data, 0, 0)
    except (IndexError, KeyError, struct.error, UnicodeDecodeError):
        raise ImageError("the code object's metadata is not MessagePack") from None
    return value


def _value(buf: bytes, i: int, depth: int):
    """One MessagePack value at ``buf[i:]``: (value, next offset)."""
    if depth > _MAX_DEPTH:
        raise ImageError("the code object's metadata nests too deep")
    b = buf[i]
    i += 1
    if b <= 0x7F or b >= 0xE0:
        return (b if b <= 0x7F else b - 0x100), i
    if 0x80 <= b <= 0x9F or b in (0xDC, 0xDD, 0xDE, 0xDF):
        is_map = b <= 0x8F or b in (0xDE, 0xDF)
        if b <= 0x9F:
            n = b & 0x0F
        else:
            size = 2 if b in (0xDC, 0xDE) else 4
            n, i = int.from_bytes(buf[i:i + size], "big"), i + size
        if n > len(buf):
            raise ImageError("the code object's metadata claims more entries than it holds")
        items = []
        for _ in range(2 * n if is_map else n):
            item, i = _value(buf, i, depth + 1)
            items.append(item)
        if not is_map:
            return items, i
        keys = items[0::2]
        if not all(isinstance(k, (str, int)) for k in keys):
            raise ImageError("the code object's metadata has a map key that is not a scalar")
        return dict(zip(keys, items[1::2])), i
    if 0xA0 <= b <= 0xBF or b in (0xD9, 0xDA, 0xDB, 0xC4, 0xC5, 0xC6):
        if b <= 0xBF:
            n = b & 0x1F
        else:
            size = {0xD9: 1, 0xDA: 2, 0xDB: 4, 0xC4: 1, 0xC5: 2, 0xC6: 4}[b]
            n, i = int.from_bytes(buf[i:i + size], "big"), i + size
        if i + n > len(buf):
            raise ImageError("a string of the code object's metadata runs past its note")
        raw = buf[i:i + n]
        return (raw if b in (0xC4, 0xC5, 0xC6) else raw.decode()), i + n
    fixed = {0xC0: None, 0xC2: False, 0xC3: True}
    if b in fixed:
        return fixed[b], i
    fmt = {0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: ">b", 0xD1: ">h", 0xD2: ">i",
           0xD3: ">q", 0xCA: ">f", 0xCB: ">d"}[b]
    return struct.unpack_from(fmt, buf, i)[0], i + struct.calcsize(fmt)
