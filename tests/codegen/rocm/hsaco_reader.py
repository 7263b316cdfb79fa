"""Reads AMDGPU code objects (hsaco) without LLVM's tools, for the rocm tests' structural checks: a
minimal ELF64 reader (header, symbols, notes) and MessagePack decoder (the AMDGPU metadata note):
machine EM_AMDGPU, the chip in e_flags, one kernel symbol and one ``.kd`` descriptor per export, and
each kernel's kernarg size, wavefront size and work-group size.
"""

from __future__ import annotations

import struct

import pytest
from pyree.compiler._fb.ExecutableFormat import ExecutableFormat
from pyree.compiler._fb.Module import Module, ModuleT
from pyree.compiler.codegen.rocm.targets import CHIPS
from tooling import require_lld

EM_AMDGPU = 224


@pytest.fixture(autouse=True)
def lld():
    """ld.lld links every code object: missing, these tests skip (fail under CI=true)."""
    return require_lld()


# ---- a minimal ELF64 + MessagePack reader ------------------------------------------------------
def _unpack(buf: bytes, i: int = 0):
    """One MessagePack value at ``buf[i:]``: (value, next offset). Enough for AMDGPU metadata."""
    b = buf[i]
    i += 1
    if b <= 0x7F:
        return b, i
    if b >= 0xE0:
        return b - 0x100, i
    if 0x80 <= b <= 0x8F or b in (0xDE, 0xDF):
        n, i = (b & 0x0F, i) if b <= 0x8F else _length(buf, i, 2 if b == 0xDE else 4)
        out = {}
        for _ in range(n):
            k, i = _unpack(buf, i)
            v, i = _unpack(buf, i)
            out[k] = v
        return out, i
    if 0x90 <= b <= 0x9F or b in (0xDC, 0xDD):
        n, i = (b & 0x0F, i) if b <= 0x9F else _length(buf, i, 2 if b == 0xDC else 4)
        out = []
        for _ in range(n):
            v, i = _unpack(buf, i)
            out.append(v)
        return out, i
    if 0xA0 <= b <= 0xBF or b in (0xD9, 0xDA, 0xDB):
        n, i = (b & 0x1F, i) if b <= 0xBF else _length(buf, i, {0xD9: 1, 0xDA: 2, 0xDB: 4}[b])
        return buf[i:i + n].decode(), i + n
    if b in (0xC4, 0xC5, 0xC6):
        n, i = _length(buf, i, {0xC4: 1, 0xC5: 2, 0xC6: 4}[b])
        return buf[i:i + n], i + n
    fixed = {0xC0: None, 0xC2: False, 0xC3: True}
    if b in fixed:
        return fixed[b], i
    fmt = {0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: ">b", 0xD1: ">h", 0xD2: ">i",
           0xD3: ">q", 0xCA: ">f", 0xCB: ">d"}[b]
    return struct.unpack_from(fmt, buf, i)[0], i + struct.calcsize(fmt)


def _length(buf: bytes, i: int, size: int):
    return int.from_bytes(buf[i:i + size], "big"), i + size


def read_hsaco(data: bytes) -> dict:
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, "not a little-endian ELF64"
    osabi, abiversion = data[7], data[8]
    e_type, e_machine, _, _, _, e_shoff, e_flags, _, _, _, e_shentsize, e_shnum, e_shstrndx = \
        struct.unpack_from("<HHIQQQIHHHHHH", data, 16)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, e_shoff + k * e_shentsize)
                for k in range(e_shnum)]
    symbols, notes = [], []
    for _, kind, _, _, off, size, link, _, _, entsize in sections:
        if kind in (2, 11):  # SHT_SYMTAB, SHT_DYNSYM
            strtab = sections[link]
            for at in range(off + entsize, off + size, entsize):
                st_name, st_info = struct.unpack_from("<IB", data, at)
                end = data.index(b"\0", strtab[4] + st_name)
                symbols.append((data[strtab[4] + st_name:end].decode(), st_info & 0xF))
        if kind == 7:  # SHT_NOTE
            at = off
            while at < off + size:
                namesz, descsz, ntype = struct.unpack_from("<III", data, at)
                at += 12
                owner = data[at:at + namesz].rstrip(b"\0").decode()
                at += (namesz + 3) & ~3
                notes.append((owner, ntype, data[at:at + descsz]))
                at += (descsz + 3) & ~3
    metadata = [_unpack(desc)[0] for owner, ntype, desc in notes
                if owner == "AMDGPU" and ntype == 32]  # NT_AMDGPU_METADATA
    assert len(metadata) == 1, notes
    return {"osabi": osabi, "abiversion": abiversion, "type": e_type, "machine": e_machine,
            "flags": e_flags, "symbols": symbols, "metadata": metadata[0]}


def check_hsaco(hsaco: bytes, chip: str, launches, kernels) -> dict:
    elf = read_hsaco(hsaco)
    assert elf["machine"] == EM_AMDGPU and elf["type"] == 3  # ET_DYN, as ld.lld -shared makes
    assert elf["osabi"] == 64 and elf["abiversion"] == 3  # ELFOSABI_AMDGPU_HSA, code object v5
    assert elf["flags"] & 0xFF == CHIPS[chip][0], hex(elf["flags"])
    meta = elf["metadata"]
    assert meta["amdhsa.version"] == [1, 2] and meta["amdhsa.target"].startswith(
        f"amdgcn-amd-amdhsa--{chip}")
    names = [name for name, _ in launches]
    funcs = sorted(n for n, kind in elf["symbols"] if kind == 2)     # STT_FUNC
    objects = sorted(n for n, kind in elf["symbols"] if kind == 1)   # STT_OBJECT
    assert sorted(set(funcs)) == sorted(names)
    assert sorted(set(objects)) == sorted(f"{n}.kd" for n in names)
    by_name = {k[".name"]: k for k in meta["amdhsa.kernels"]}
    assert sorted(by_name) == sorted(names)
    for (name, launch), kernel in zip(launches, kernels):
        k = by_name[name]
        assert k[".symbol"] == f"{name}.kd"
        assert k[".wavefront_size"] == CHIPS[chip][1]
        assert k[".max_flat_workgroup_size"] == launch.block[0]
        assert k[".kernarg_segment_size"] >= 8 * len(kernel.bindings)
        globals_ = [a for a in k[".args"] if a[".value_kind"] == "global_buffer"]
        assert len(globals_) == len(kernel.bindings)
        assert all(a[".address_space"] == "global" and a[".size"] == 8 for a in globals_)
    return meta


def rocm_executables(vmfb: bytes):
    module = ModuleT.InitFromObj(Module.GetRootAs(vmfb, 0))
    execs = module.executables
    assert execs and all(e.format == ExecutableFormat.rocm for e in execs)
    return vmfb, execs


def check_module(vmfb: bytes, chip: str) -> int:
    _, execs = rocm_executables(vmfb)
    # every DataRef is relative to the data segment, named by the module's 48-byte trailer
    (data, ) = struct.unpack_from("<Q", vmfb, len(vmfb) - 48 + 8)
    n = 0
    for e in execs:
        rocm = e.rocm
        assert rocm.targetArch.decode().startswith(chip)
        start = data + rocm.codeObject.offset
        hsaco = vmfb[start:start + rocm.codeObject.length]
        elf = read_hsaco(hsaco)
        assert elf["machine"] == EM_AMDGPU and elf["flags"] & 0xFF == CHIPS[chip][0]
        kernels = {k[".name"]: k for k in elf["metadata"]["amdhsa.kernels"]}
        for export in rocm.exports:
            name = export.name.decode()
            assert len(export.gridSize) == 3 and len(export.blockSize) == 3
            assert kernels[name][".max_flat_workgroup_size"] == export.blockSize[0]
            assert kernels[name][".kernarg_segment_size"] >= 8 * len(export.bindings)
            assert (f"{name}.kd", 1) in elf["symbols"] and (name, 2) in elf["symbols"]
            n += 1
    return n
