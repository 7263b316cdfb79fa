"""CPU-only: the scatter kernels' shaders (codegen/spirv/scatter.py) pass spirv-val: every
combine of tests/e2e/test_scatter_atomics.py on f32 and i32 through the compiler (atomic
instructions, compare-exchange loops, a plain set's two passes), and hand-built unsigned ones
(tests/scatter_cases.py), each with the atomic instruction its op and dtype call for;
tests/e2e/test_scatter_atomics.py runs the compiled ones on Vulkan."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest
from pyree.compiler.codegen.spirv import generate_spirv
from pyree.compiler.codegen.spirv.targets import resolve_target
from scatter_cases import scatter_kernel
from spirv_modules import spirv_binaries, validate, vulkan_vmfb

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "e2e"))
from test_scatter_atomics import scatter_mlir  # noqa: E402

pytestmark = pytest.mark.vulkan

OPS = {"f32": ["add", "mul", "max", "min", "set"],
       "i32": ["add", "mul", "max", "min", "or", "xor", "set"]}
ATOMIC_OPCODES = {"load": 227, "cmpxchg": 230, "iadd": 234, "smin": 236, "umin": 237,
                  "smax": 238, "umax": 239, "and": 240, "or": 241, "xor": 242}


def atomics(code: bytes) -> set[str]:
    """The atomic instructions in a SPIR-V binary."""
    words = struct.unpack(f"<{len(code) // 4}I", code)
    names = {v: k for k, v in ATOMIC_OPCODES.items()}
    found, at = set(), 5  # past the header
    while at < len(words):
        if words[at] & 0xFFFF in names:
            found.add(names[words[at] & 0xFFFF])
        at += words[at] >> 16
    return found


@pytest.mark.parametrize("dtype, op", [(d, op) for d, ops in OPS.items() for op in ops])
def test_scatter_shaders_pass_spirv_val(dtype, op, tmp_path):
    text = scatter_mlir((13, 7), (100, 7), (100, 1), dtype, op)
    (code, _), = spirv_binaries(vulkan_vmfb(text))
    assert validate(code, tmp_path) == ""
    native = {("i32", "add"): "iadd", ("i32", "max"): "smax", ("i32", "min"): "smin",
              ("i32", "or"): "or", ("i32", "xor"): "xor"}
    want = ({native[dtype, op]} if (dtype, op) in native else {"smax"} if op == "set"
            else {"load", "cmpxchg"})  # a set: its winners' pass is an atomic max
    assert atomics(code) == want


@pytest.mark.parametrize("op, want", [("min", "umin"), ("max", "umax"), ("and", "and"),
                                      ("add", "iadd"), ("mul", "cmpxchg")])
def test_unsigned_scatter_shaders_pass_spirv_val(op, want, tmp_path):
    code, _ = generate_spirv([scatter_kernel("ui32", op)], resolve_target(""))
    assert validate(code, tmp_path) == ""
    assert want in atomics(code)
