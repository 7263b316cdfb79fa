"""ELF images (CPU libraries, cubins, AMDGPU code objects): headers checked against the length.

Every program header's file range, every section's and the header tables themselves must lie in
the image, and a dynamic section must lie in a loaded segment: a library cut short would
otherwise be mapped past its end (SIGBUS on first touch) or read through a dangling pointer by
the dynamic loader. Only 64-bit little-endian ELF is accepted: every target pyree compiles for.
The dynamic symbol table is read for the CPU libraries, whose exports must be functions the
library itself defines (``defined_functions``), and whose kernels may carry an export record
(``object_bytes``).
"""

from __future__ import annotations

import struct

from pyree.runtime.hal.images import ImageError

ELF_MAGIC = b"\x7fELF"
ET_EXEC, ET_DYN = 2, 3
EM_X86_64, EM_AARCH64, EM_CUDA, EM_AMDGPU = 62, 183, 190, 224
MACHINE_NAMES = {EM_X86_64: "x86-64", EM_AARCH64: "aarch64", EM_CUDA: "CUDA",
                 EM_AMDGPU: "AMDGPU"}
PT_LOAD, PT_DYNAMIC = 1, 2
SHT_NOBITS, SHT_DYNSYM = 8, 11
STT_OBJECT, STT_FUNC = 1, 2
STB_GLOBAL, STB_WEAK = 1, 2
SHN_UNDEF, SHN_LORESERVE = 0, 0xFF00

_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")     # Elf64_Ehdr
_PROGRAM = struct.Struct("<IIQQQQQQ")            # Elf64_Phdr
_SECTION = struct.Struct("<IIQQQQIIQQ")          # Elf64_Shdr
_SYMBOL = struct.Struct("<IBBHQQ")               # Elf64_Sym


class Section:
    __slots__ = ("type", "address", "offset", "size", "link", "entry_size")

    def __init__(self, type_, address, offset, size, link, entry_size):
        self.type, self.address, self.offset, self.size = type_, address, offset, size
        self.link, self.entry_size = link, entry_size


class Symbol:
    __slots__ = ("name", "type", "section", "value", "size")

    def __init__(self, name: str, type_: int, section: int, value: int, size: int):
        self.name, self.type, self.section, self.value, self.size = name, type_, section, value, size


class ElfImage:
    """A checked image: its machine, type, sections and defined global dynamic symbols."""

    def __init__(self, image, machine: int, type_: int, sections: list[Section]):
        self.image, self.machine, self.type, self.sections = image, machine, type_, sections

    def dynamic_symbols(self) -> dict[str, Symbol]:
        """The global (or weak) symbols of .dynsym that this image defines, by name."""
        table = next((s for s in self.sections if s.type == SHT_DYNSYM), None)
        if table is None:
            raise ImageError("the library has no dynamic symbol table")
        if table.entry_size != _SYMBOL.size or table.size % _SYMBOL.size:
            raise ImageError(f"its dynamic symbol table has {table.entry_size}-byte entries")
        if table.link >= len(self.sections) or self.sections[table.link].type == SHT_NOBITS:
            raise ImageError("its dynamic symbol table names no string table")
        strings = self.sections[table.link]
        names = bytes(self.image[strings.offset:strings.offset + strings.size])
        out = {}
        for name_at, info, _other, section, value, size in _SYMBOL.iter_unpack(
                self.image[table.offset:table.offset + table.size]):
            if info >> 4 not in (STB_GLOBAL, STB_WEAK) or section == SHN_UNDEF:
                continue
            end = names.find(b"\0", name_at)
            if name_at >= len(names) or end < 0:
                raise ImageError(f"a dynamic symbol's name at {name_at} lies outside its "
                                 f"{len(names)}-byte string table")
            name = names[name_at:end].decode("utf-8", "replace")
            out[name] = Symbol(name, info & 0xF, section, value, size)
        return out

    def object_bytes(self, symbol: Symbol) -> bytes:
        """The initialized bytes of a data symbol, from the section that holds it."""
        if symbol.type != STT_OBJECT or symbol.section >= min(len(self.sections), SHN_LORESERVE):
            raise ImageError(f"'{symbol.name}' is not a data symbol of a section")
        s = self.sections[symbol.section]
        start = symbol.value - s.address
        if s.type == SHT_NOBITS or start < 0 or start + symbol.size > s.size:
            raise ImageError(f"'{symbol.name}' lies outside the initialized section that holds it")
        return bytes(self.image[s.offset + start:s.offset + start + symbol.size])


def read_elf(image, machines: tuple[int, ...], types: tuple[int, ...]) -> ElfImage:
    """Checks ``image`` (bytes-like) as a 64-bit little-endian ELF of one of ``machines`` and
    ``types``; raises ImageError saying what contradicts its length or structure."""
    size = len(image)
    if size < _HEADER.size or bytes(image[:4]) != ELF_MAGIC:
        raise ImageError(f"it is not an ELF image ({size} bytes, no ELF magic)")
    (ident, type_, machine, _version, _entry, phoff, shoff, _flags, _ehsize, phentsize, phnum,
     shentsize, shnum, shstrndx) = _HEADER.unpack_from(image)
    if ident[4] != 2 or ident[5] != 1:
        raise ImageError("it is not a 64-bit little-endian ELF image")
    if machine not in machines or type_ not in types:
        want = " or ".join(MACHINE_NAMES.get(m, str(m)) for m in machines)
        raise ImageError(f"it is an ELF image for machine {MACHINE_NAMES.get(machine, machine)} "
                         f"of type {type_}, not a {want} image")
    segments = _table(image, phoff, phnum, phentsize, _PROGRAM, "program header")
    for i, (p_type, _, offset, _, _, filesz, memsz, _) in enumerate(segments):
        if offset + filesz > size:
            raise ImageError(f"segment {i} covers bytes [{offset}, {offset + filesz}) of an image "
                             f"of {size} bytes: the image is cut short")
        if p_type == PT_LOAD and filesz > memsz:
            raise ImageError(f"loaded segment {i} has more file bytes than memory bytes")
    loads = [(v, v + filesz) for t, _, _, v, _, filesz, _, _ in segments if t == PT_LOAD]
    for i, (p_type, _, _, vaddr, _, filesz, _, _) in enumerate(segments):
        if p_type == PT_DYNAMIC and not any(lo <= vaddr and vaddr + filesz <= hi
                                            for lo, hi in loads):
            raise ImageError(f"its dynamic segment {i} lies outside every loaded segment")
    sections = []
    for i, (_, s_type, _, address, offset, s_size, link, _, _, entry_size) in enumerate(
            _table(image, shoff, shnum, shentsize, _SECTION, "section header")):
        if s_type != SHT_NOBITS and offset + s_size > size:
            raise ImageError(f"section {i} covers bytes [{offset}, {offset + s_size}) of an image "
                             f"of {size} bytes: the image is cut short")
        sections.append(Section(s_type, address, offset, s_size, link, entry_size))
    if shnum and shstrndx >= shnum:
        raise ImageError(f"its section-name table {shstrndx} is not one of its {shnum} sections")
    return ElfImage(image, machine, type_, sections)


def _table(image, offset: int, count: int, entry_size: int, layout: struct.Struct, what: str):
    if count == 0:
        return []
    if entry_size != layout.size:
        raise ImageError(f"its {what}s are {entry_size} bytes, not {layout.size}")
    if offset + count * entry_size > len(image):
        raise ImageError(f"its {count} {what}s at {offset} run past the end of an image of "
                         f"{len(image)} bytes: the image is cut short")
    return [layout.unpack_from(image, offset + i * entry_size) for i in range(count)]
