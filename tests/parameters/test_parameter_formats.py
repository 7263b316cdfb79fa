"""The parameter file formats byte for byte: pyree's .irpa writer against IREE's own output,
pyree's reader on an archive IREE wrote (data and splat entries), safetensors round trips, and
module constants that name a parameter (schema 1.3)."""

from __future__ import annotations

import io
import os
import struct

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler._fb.Constant import ConstantT
from pyree.compiler._fb.Parameter import ParameterT
from pyree.compiler.host.program import tensor_type
from pyree.compiler.module_writer import SCHEMA_VERSION, ModuleBuilder
from pyree.compiler.parameters import write_irpa, write_parameters
from pyree.compiler.parameters.irpa import Splat
from pyree.compiler.tensor_program import Value
from pyree.runtime import ModuleError, read_module
from pyree.runtime.parameters import ParameterError, ParameterIndex
from pyree.runtime.parameters.irpa import read_irpa
from pyree.runtime.parameters.safetensors import read_safetensors

# `iree-create-parameters --data=alpha=3x5xf32 --data=b.c=7xi16 --data=zz=100xf32` (IREE 3.13):
# the file's first 342 bytes; the rest, to 4096, is zeros (the entries' data included).
IREE_THREE_ZEROED = bytes.fromhex(
    "4952504100000000580000000000000000000000000000000000000000000000030000000000000060000000"
    "00000000ec000000000000004c010000000000000a0000000000000080010000000000001002000000000000"
    "00000000000000004c0000000000000002000000000000000000000000000000000000000500000000000000"
    "00000000000000000000000000000000400000000000000000000000000000003c0000000000000000000000"
    "4c00000000000000020000000000000000000000050000000000000003000000000000000000000000000000"
    "0000000000000000400000000000000040000000000000000e00000000000000000000004c00000000000000"
    "0200000000000000000000000800000000000000020000000000000000000000000000000000000000000000"
    "400000000000000080000000000000009001000000000000616c706861622e637a7a")
# `iree-create-parameters --splat=s=3x5xf32=1.5 --data=d=2x4xi16` (IREE 3.13): first 270 bytes.
IREE_SPLAT_AND_DATA = bytes.fromhex(
    "4952504100000000580000000000000000000000000000000000000000000000020000000000000060000000"
    "00000000ac000000000000000c01000000000000020000000000000040010000000000001000000000000000"
    "0000000000000000550000000000000001000000000000000000000000000000000000000100000000000000"
    "0000000000000000000000000000000000000000000000003c000000000000000000c03f0000000000000000"
    "000000000400000000000000000000004c000000000000000200000000000000000000000100000000000000"
    "0100000000000000000000000000000000000000000000004000000000000000000000000000000010000000"
    "000000007364")
ENTRY0, ENTRY2 = 0x60, 0x100  # where entries 0 and 2 of IREE_THREE_ZEROED start


def _pad(prefix: bytes) -> bytes:
    return prefix + bytes(4096 - len(prefix))


def test_irpa_writer_matches_iree_byte_for_byte():
    out = io.BytesIO()
    write_irpa(out, [("alpha", np.zeros(15, np.float32)), ("b.c", np.zeros(7, np.int16)),
                     ("zz", np.zeros(100, np.float32))])
    assert out.getvalue() == _pad(IREE_THREE_ZEROED)


def test_irpa_writer_matches_iree_with_splat_entries():
    out = io.BytesIO()
    write_irpa(out, [("s", Splat(struct.pack("<f", 1.5), 60)), ("d", np.zeros(8, np.int16))])
    assert out.getvalue() == _pad(IREE_SPLAT_AND_DATA)


def test_reader_reads_an_archive_iree_wrote():
    entries = read_irpa(memoryview(_pad(IREE_SPLAT_AND_DATA)), "iree.irpa")
    assert entries["s"].splat == struct.pack("<f", 1.5) and entries["s"].length == 60
    assert (entries["d"].offset, entries["d"].length, entries["d"].splat) == (320, 16, None)


def test_a_splat_entry_expands_to_its_pattern(tmp_path):
    (tmp_path / "s.irpa").write_bytes(_pad(IREE_SPLAT_AND_DATA))
    index = ParameterIndex([tmp_path / "s.irpa"])
    value = np.frombuffer(index.resolve("", "s", 0, [3, 5], "constant 0"), np.float32)
    assert (value == 1.5).all() and value.size == 15


@pytest.mark.parametrize("dtype, array", [
    ("f32", np.array([[1.5, -0.0, np.nan], [np.inf, -np.inf, 3.0]], np.float32)),
    ("i1", np.array([True, False, True])),
    ("ui16", np.arange(9, dtype=np.uint16).reshape(3, 3)),
    ("i64", np.array(-(2 ** 62), np.int64)),
])
@pytest.mark.parametrize("suffix", [".irpa", ".safetensors"])
def test_round_trip_bit_for_bit(tmp_path, dtype, array, suffix):
    path = tmp_path / f"t{suffix}"
    with open(path, "wb") as f:
        write_parameters(f, suffix, [("t", dtype, array.shape, array), ("pad", "i8", (3,),
                                                                         np.zeros(3, np.int8))])
    element = {"f32": 0, "i1": 4, "ui16": 10, "i64": 8}[dtype]
    got = ParameterIndex([f"s={path}"]).resolve("s", "t", element, list(array.shape), "c")
    assert bytes(got) == array.tobytes()


def test_safetensors_tensors_of_whole_64_byte_blocks_are_aligned(tmp_path):
    path = tmp_path / "a.safetensors"
    with open(path, "wb") as f:
        write_parameters(f, ".safetensors", [("odd", "f32", (3,), np.ones(3, np.float32)),
                                             ("a", "f32", (16,), np.ones(16, np.float32)),
                                             ("b", "f32", (32,), np.ones(32, np.float32))])
    entries = read_safetensors(memoryview(path.read_bytes()), str(path))
    assert entries["a"].offset % 64 == 0 and entries["b"].offset % 64 == 0


def test_safetensors_metadata_is_ignored_and_integers_match_by_width(tmp_path):
    header = (b'{"__metadata__": {"format": "pt"}, "u": {"dtype": "U8", "shape": [4], '
              b'"data_offsets": [0, 4]}}')
    path = tmp_path / "m.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + bytes([1, 2, 3, 250]))
    index = ParameterIndex([path])
    assert bytes(index.resolve("", "u", 5, [4], "an i8 constant")) == bytes([1, 2, 3, 250])
    with pytest.raises(ParameterError, match="is U8 \\[4\\], but an f32 constant is 1xf32"):
        index.resolve("", "u", 0, [1], "an f32 constant")


def _patched(fields: dict[int, tuple[str, int]]) -> bytes:
    data = bytearray(_pad(IREE_THREE_ZEROED))
    for offset, (fmt, value) in fields.items():
        struct.pack_into(fmt, data, offset, value)
    return bytes(data)


@pytest.mark.parametrize("fields, fragment", [
    ({4: ("<H", 1)}, "IRPA version 1.0"),
    ({8: ("<Q", 99)}, "header of 99 bytes"),
    ({ENTRY0 + 8: ("<I", 3)}, "'alpha' refers to an external file"),
    ({ENTRY0 + 8: ("<I", 9)}, "entry 0 \\('alpha'\\) has unknown type 9"),
    ({ENTRY0 + 60: ("<Q", 8000)}, "the data of 'alpha' \\[8000, \\+60\\) lies outside"),
    ({ENTRY0: ("<Q", 4000)}, "entry 0 claims 4000 bytes"),
    ({ENTRY0 + 20: ("<Q", 900)}, "the name of entry 0 lies outside the metadata segment"),
    ({ENTRY2 + 20: ("<Q", 0), ENTRY2 + 28: ("<Q", 5)}, "key 'alpha' appears twice"),
    ({0x10: ("<Q", 0x2000)}, "linked header at offset 8192 is outside the 4096-byte file"),
    ({0x10: ("<Q", 0x200)}, "magic b'\\\\x00\\\\x00\\\\x00\\\\x00' at offset 512"),
    ({0x30: ("<Q", 9000)}, "its entry segment .* runs past the end"),
])
def test_damaged_archives_are_refused_by_name(fields, fragment):
    with pytest.raises(ParameterError, match=fragment):
        read_irpa(memoryview(_patched(fields)), "x.irpa")


def _module_with(constant: ConstantT) -> bytes:
    builder = ModuleBuilder("m", "test")
    builder.module.constants.append(constant)
    return builder.finish()


def _constant(data=None, parameter=None) -> ConstantT:
    c = ConstantT()
    c.type = tensor_type(Value("f32", (2, 3)))
    c.data, c.parameter = data, parameter
    if parameter is not None:
        c.parameter = ParameterT()
        c.parameter.scope, c.parameter.key = parameter
    return c


def test_a_parameter_constant_reads_back():
    module = read_module(_module_with(_constant(parameter=("model", "w"))))
    (constant,) = module.tree.constants
    assert (constant.parameter.scope, constant.parameter.key) == ("model", "w")
    assert (module.tree.schemaVersionMajor, module.tree.schemaVersionMinor) == SCHEMA_VERSION


def test_a_constant_with_data_and_a_parameter_is_refused():
    builder = ModuleBuilder("m", "test")
    c = _constant(parameter=("model", "w"))
    c.data = builder.add_data(np.zeros(6, np.float32))
    builder.module.constants.append(c)
    with pytest.raises(ModuleError, match="constant 0: has both inline data and a parameter"):
        read_module(builder.finish())


def test_a_parameter_without_a_key_is_refused():
    with pytest.raises(ModuleError, match="constant 0: parameter key is empty"):
        read_module(_module_with(_constant(parameter=("model", ""))))


def _header(path, header: bytes) -> str:
    path.write_bytes(struct.pack("<Q", len(header)) + header + bytes(16))
    return str(path)


@pytest.mark.parametrize("make, fragment", [
    (lambda d: "/dev/zero", "parameter file '/dev/zero' is not a regular file"),
    (lambda d: (os.mkfifo(d / "fifo"), str(d / "fifo"))[1], "is not a regular file"),
    (lambda d: _header(d / "deep.safetensors", b"[" * 100_000 + b"]" * 100_000),
     "its header nests JSON arrays or objects too deeply"),
    (lambda d: _header(d / "list.safetensors",
                       b'{"t": {"dtype": ["F32"], "shape": [4], "data_offsets": [0, 16]}}'),
     "tensor 't' has unknown dtype \\['F32'\\]"),
    (lambda d: _header(d / "twice.safetensors",
                       b'{"t": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}, '
                       b'"t": {"dtype": "I32", "shape": [4], "data_offsets": [0, 16]}}'),
     "its header has the key 't' twice"),
])
def test_hostile_files_are_a_parameter_error(tmp_path, make, fragment):
    with pytest.raises(ParameterError, match=fragment):
        ParameterIndex([make(tmp_path)])


def test_a_module_path_that_is_not_a_regular_file_is_refused():
    with pytest.raises(ModuleError, match="module file '/dev/zero' is not a regular file"):
        rt.load_module("/dev/zero", device="local-sync")
