"""Module reading: trailer, digest, identifier, schema version and FlatBuffer bounds."""

from __future__ import annotations

import struct

import pyree.runtime as rt
import pytest
from pyree.runtime.module.reader import TRAILER_SIZE

from .module_factory import restamp


def _root_offset(data: bytes) -> int:
    return struct.unpack_from("<I", data, 0)[0]


def test_reads_a_valid_module(arith_bytes):
    module = rt.read_module(arith_bytes)
    assert module.name == "arith"
    assert [f.name for f in module.tree.functions][:3] == ["add", "add_scaled", "fill_copy"]
    assert module.tree.functions[0].arguments[0].dims == [37, 53]
    assert isinstance(module.tree.executables[0].cpu.exports[0].symbol, str)


@pytest.mark.parametrize("keep", [0, 10, 55, 200, -1, -49])
def test_truncated_file(arith_bytes, keep):
    with pytest.raises(rt.ModuleError, match="too small|no pyree trailer|checksum mismatch"):
        rt.read_module(arith_bytes[:keep])


@pytest.mark.parametrize("position", [0, 5, 100, 1000, -40, -1])
def test_bit_flip_fails_the_digest(arith_bytes, position):
    data = bytearray(arith_bytes)
    data[position] ^= 0x10
    with pytest.raises(rt.ModuleError, match=r"damaged \(checksum mismatch\)|no pyree trailer"):
        rt.read_module(bytes(data))


def test_wrong_identifier(arith_bytes):
    data = bytearray(arith_bytes)
    data[4:8] = b"NOPE"
    with pytest.raises(rt.ModuleError, match="identifier is b'NOPE', expected b'PYRE'"):
        rt.read_module(restamp(data))


def test_unsupported_schema_version(kernel_library, offset_constant):
    from .module_factory import arith_builder

    builder = arith_builder(kernel_library, offset_constant)
    builder.module.schemaVersionMajor, builder.module.schemaVersionMinor = 2, 3
    with pytest.raises(rt.ModuleError, match=r"module schema version 2\.3 is not supported by this "
                                             r"runtime \(supports 1\.x\); recompile"):
        rt.read_module(builder.finish())


def test_newer_minor_schema_version(kernel_library, offset_constant):
    """A minor past the runtime's names what the module needs rather than being misread."""
    from .module_factory import arith_builder

    builder = arith_builder(kernel_library, offset_constant)
    builder.module.schemaVersionMajor, builder.module.schemaVersionMinor = 1, 99
    with pytest.raises(rt.ModuleError, match=r"module schema version 1\.99 is newer than this "
                                             r"runtime reads \(1\.0 to 1\.10\)"):
        rt.read_module(builder.finish())


def test_misaligned_data_offset(arith_bytes):
    data = bytearray(arith_bytes)
    offset = struct.unpack_from("<Q", data, len(data) - TRAILER_SIZE + 8)[0]
    struct.pack_into("<Q", data, len(data) - TRAILER_SIZE + 8, offset + 3)
    with pytest.raises(rt.ModuleError, match="data segment offset .* 64-byte-aligned"):
        rt.read_module(restamp(data))


def test_root_offset_out_of_bounds(arith_bytes):
    data = bytearray(arith_bytes)
    struct.pack_into("<I", data, 0, 0xFFFFFF00)
    with pytest.raises(rt.ModuleError, match="malformed: reference to .* outside"):
        rt.read_module(restamp(data))


def test_huge_vector_length_is_refused_before_iterating(arith_bytes):
    """Point Module.functions at a vector claiming 2^32-1 elements."""
    data = bytearray(arith_bytes)
    root = _root_offset(data)
    vtable = root - struct.unpack_from("<i", data, root)[0]
    functions_field = struct.unpack_from("<H", data, vtable + 4 + 2 * 4)[0]
    vector = root + functions_field + struct.unpack_from("<I", data, root + functions_field)[0]
    struct.pack_into("<I", data, vector, 0xFFFFFFFF)
    with pytest.raises(rt.ModuleError, match="vector of 4294967295 elements runs past the end"):
        rt.read_module(restamp(data))


def _shared_reference_bomb(functions: int, commands: int) -> bytes:
    """A FlatBuffer whose function vector repeats one function whose command vector repeats one
    command: tiny on disk, functions * commands tables to unpack."""
    import flatbuffers
    from pyree.compiler._fb import Command, Function, Module

    b = flatbuffers.Builder(1024)
    Command.Start(b)
    Command.AddKind(b, 3)
    barrier = Command.End(b)
    b.StartVector(4, commands, 4)
    for _ in range(commands):
        b.PrependUOffsetTRelative(barrier)
    command_vector = b.EndVector()
    name = b.CreateString("f")
    Function.Start(b)
    Function.AddName(b, name)
    Function.AddCommands(b, command_vector)
    function = Function.End(b)
    b.StartVector(4, functions, 4)
    for _ in range(functions):
        b.PrependUOffsetTRelative(function)
    function_vector = b.EndVector()
    Module.Start(b)
    Module.AddSchemaVersionMajor(b, 1)
    Module.AddFunctions(b, function_vector)
    b.Finish(Module.End(b), file_identifier=b"PYRE")
    root = bytes(b.Output())
    root += b"\0" * (-len(root) % 64)
    return restamp(root + b"PYRETRL1" + struct.pack("<Q", len(root)) + bytes(32))


def test_shared_references_cannot_explode():
    with pytest.raises(rt.ModuleError, match="more objects than the file can hold"):
        rt.read_module(_shared_reference_bomb(functions=2000, commands=2000))


def test_load_module_reports_unreadable_path(tmp_path):
    with pytest.raises(rt.ModuleError, match="cannot read module file .*missing.vmfb"):
        rt.load_module(tmp_path / "missing.vmfb")
