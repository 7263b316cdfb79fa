"""What a CPU kernel library must be before it is written out and dlopen'ed.

An ELF shared object for the executable's machine, whole (``elf.read_elf``), and every export a
kernel the library itself defines. ``dlsym`` on the library's handle also finds what its
dependencies define, so a symbol is looked up in the library's own dynamic symbol table first:
it must be a function defined there, named as a C identifier, and not one of the names kept for
the runtime: C's reserved names (``_init``, ``_fini``, ...) and local-task's worker loop
(``pyree_local_task_*``), which the runtime calls itself with other arguments. A module naming
``abort``, ``free`` or the worker loop as a kernel is refused here.

Libraries from pyree-compile also carry, per kernel ``S``, a data symbol ``S.pyree_export``:
``uint64_t[]`` {version 1, workgroup count, binding count, then access and byte length per
binding} -- the export as the compiler compiled the kernel. ``export_records`` reads them, so the
verifier can hold the module's export table to what the code was built for.
"""

from __future__ import annotations

import struct

from pyree.runtime.hal.images import ImageError
from pyree.runtime.hal.images.elf import EM_AARCH64, EM_X86_64, ET_DYN, STT_FUNC, ElfImage, read_elf

MACHINES = {"elf-x86_64": EM_X86_64, "elf-aarch64": EM_AARCH64}
RESERVED_PREFIXES = ("_", "pyree_local_task_")
RECORD_SUFFIX = ".pyree_export"
RECORD_VERSION = 1


class ExportRecord:
    """An export as the library's own record states it."""

    __slots__ = ("workgroup_count", "bindings")

    def __init__(self, workgroup_count: int, bindings: tuple[tuple[int, int], ...]):
        self.workgroup_count = workgroup_count
        self.bindings = bindings   # (access, byte length) per binding, as BindingLayout has them


def read_library(image, target: str) -> ElfImage:
    """Checks ``image`` as a shared object for ``target`` ("elf-x86_64", ...)."""
    if target not in MACHINES:
        raise ImageError(f"its format '{target}' is not one of {', '.join(MACHINES)}")
    return read_elf(image, (MACHINES[target],), (ET_DYN,))


def check_kernel_symbols(library: ElfImage, names: list[str]) -> dict:
    """Raises ImageError for the first name that is not a kernel of ``library``; returns the
    library's defined dynamic symbols."""
    symbols = library.dynamic_symbols()
    for k, name in enumerate(names):
        if not (name.isascii() and name.isidentifier()) or name.startswith(RESERVED_PREFIXES):
            raise ImageError(f"export {k} names '{name}', which is not a kernel's name (a C "
                             f"identifier, not reserved for the runtime or the C library)")
        symbol = symbols.get(name)
        if symbol is None or symbol.type != STT_FUNC:
            raise ImageError(f"export {k} names '{name}', which is not a function the library "
                             f"defines (a name from another library, or none)")
    return symbols


def export_records(library: ElfImage, symbols: dict, names: list[str]) -> list[ExportRecord] | None:
    """Each export's record, in export order; None for a library without records (older
    compilers, libraries not built by pyree-compile). A library with records has one for every
    export."""
    if not any(name.endswith(RECORD_SUFFIX) for name in symbols):
        return None
    records = []
    for k, name in enumerate(names):
        symbol = symbols.get(name + RECORD_SUFFIX)
        if symbol is None:
            raise ImageError(f"export {k} ('{name}') has no export record, which every kernel of "
                             f"this library has")
        data = library.object_bytes(symbol)
        words = struct.unpack(f"<{len(data) // 8}Q", data[:len(data) // 8 * 8])
        if len(data) % 8 or len(words) < 3 or words[0] != RECORD_VERSION \
                or len(words) != 3 + 2 * words[2]:
            raise ImageError(f"export {k} ('{name}') has a malformed export record")
        records.append(ExportRecord(words[1], tuple(zip(words[3::2], words[4::2]))))
    return records
