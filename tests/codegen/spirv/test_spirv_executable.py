"""CPU-only: the vulkan-spirv target's executable needs no GPU: every shader of the numerics
table passes spirv-val, within the default target's limits, and the kernels of a module share
one set of workgroup-memory variables."""

from __future__ import annotations

import struct

import numerics_cases as C
import pytest
from pyree.compiler import CompileOptions, compile_str
from spirv_modules import compile_case, spirv_binaries, validate

pytestmark = pytest.mark.vulkan


@pytest.mark.parametrize("name", sorted(C.CASES))
def test_every_case_passes_spirv_val(name, tmp_path):
    (code, executable), = spirv_binaries(compile_case(name))
    assert validate(code, tmp_path) == ""
    for export in executable.exports:
        assert len(export.gridSize) == 3 and len(export.blockSize) == 3
        assert 1 <= export.blockSize[0] <= 128  # the default target's workgroup limit
        assert export.sharedMemoryBytes <= 16384


def _workgroup_bytes(code: bytes) -> int:
    """Bytes of all Workgroup (shared) variables a SPIR-V module declares: what a driver that
    cannot tell which entry point uses which may give every kernel."""
    words = struct.unpack(f"<{len(code) // 4}I", code)
    types, pointers, total, i = {}, {}, 0, 5
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        ops = words[i + 1:i + count]
        if opcode in (21, 22):  # OpTypeInt, OpTypeFloat: result, width
            types[ops[0]] = ops[1] // 8
        elif opcode == 23:  # OpTypeVector
            types[ops[0]] = types[ops[1]] * ops[2]
        elif opcode == 43:  # OpConstant (32-bit): remember values for array lengths
            types[("const", ops[1])] = ops[2]
        elif opcode == 28:  # OpTypeArray
            types[ops[0]] = types[ops[1]] * types[("const", ops[2])]
        elif opcode == 32:  # OpTypePointer
            pointers[ops[0]] = (ops[1], ops[2])
        elif opcode == 59 and ops[2] == 4:  # OpVariable in Workgroup storage
            total += types[pointers[ops[0]][1]]
        i += count
    return total


def test_kernels_share_workgroup_memory(tmp_path):
    """Eight matmuls and two long reductions in one module: their shared tiles are one set of
    variables (the largest of each), not one per kernel. One per kernel added up past 48 KB in
    the GPT-2 block and hung NVIDIA's Vulkan driver."""
    sizes = [(64 + 3 * i, 96 + 5 * i, 80 + 7 * i) for i in range(8)]
    body, args = [], []
    for i, (m, k, n) in enumerate(sizes):
        args += [f"%a{i}: tensor<{m}x{k}xf32>", f"%b{i}: tensor<{k}x{n}xf32>"]
        body += [f"%e{i} = tensor.empty() : tensor<{m}x{n}xf32>",
                 f"%f{i} = linalg.fill ins(%z : f32) outs(%e{i} : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>",
                 f"%r{i} = linalg.matmul ins(%a{i}, %b{i} : tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>) "
                 f"outs(%f{i} : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>"]
    results = ", ".join(f"%r{i}" for i in range(len(sizes)))
    types = ", ".join(f"tensor<{m}x{n}xf32>" for m, _, n in sizes)
    mlir = (f"func.func @f({', '.join(args)}) -> ({types}) {{\n  %z = arith.constant 0.0 : f32\n  "
            + "\n  ".join(body) + f"\n  return {results} : {types}\n}}")
    options = CompileOptions(target_backends=["vulkan-spirv"], vulkan_target="hopper-h100-linux")
    (code, executable), = spirv_binaries(compile_str(mlir, options))
    assert validate(code, tmp_path) == ""
    largest = max(e.sharedMemoryBytes for e in executable.exports)
    assert largest > 0
    assert _workgroup_bytes(code) <= largest
