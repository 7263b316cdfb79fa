"""CPU-only: the vulkan-spirv compiler target needs no GPU. Every shader passes spirv-val."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numerics_cases as C  # noqa: E402
from pyree.compiler import CompileError, CompileOptions, compile_str  # noqa: E402
from pyree.compiler.codegen.spirv import resolve_target  # noqa: E402
from spirv_modules import spirv_binaries, validate  # noqa: E402
from tooling import missing  # noqa: E402

pytestmark = pytest.mark.vulkan
TRIPLES = ["", "valhall-g78-android30", "adreno-unknown-android30", "rdna1-5700xt-linux",
           "ampere-rtx3080-windows", "cpu-swiftshader-unknown"]


def compile_case(name: str, triple: str = "") -> bytes:
    options = CompileOptions(target_backends=["vulkan-spirv"], vulkan_target=triple)
    return compile_str(C.CASES[name]().mlir, options)


@pytest.mark.parametrize("name", sorted(C.CASES))
def test_every_case_passes_spirv_val(name, tmp_path):
    (code, executable), = spirv_binaries(compile_case(name))
    assert validate(code, tmp_path) == ""
    for export in executable.exports:
        assert len(export.gridSize) == 3 and len(export.blockSize) == 3
        assert 1 <= export.blockSize[0] <= 128  # the default target's workgroup limit
        assert export.sharedMemoryBytes <= 16384


@pytest.mark.parametrize("triple", TRIPLES[1:])
@pytest.mark.parametrize("name", ["matmul_517x45x530", "reduce_long_5x1001", "math_chain_37x53",
                                  "matmul_f16_67x129x45"])
def test_guide_triples_give_valid_shaders_within_their_limits(name, triple, tmp_path):
    target = resolve_target(triple)
    (code, executable), = spirv_binaries(compile_case(name, triple))
    assert executable.target.decode() == triple
    assert validate(code, tmp_path) == ""
    for export in executable.exports:
        assert export.blockSize[0] <= target.max_workgroup_invocations
        assert export.sharedMemoryBytes <= target.max_shared_memory_bytes


def test_float16_arithmetic_only_where_the_target_has_it():
    from pyree.compiler.codegen.spirv.assembler import CAPABILITIES
    float16 = CAPABILITIES["Float16"]

    def capabilities(triple):
        (code, _), = spirv_binaries(compile_case("matmul_f16_67x129x45", triple))
        words = [int.from_bytes(code[i:i + 4], "little") for i in range(0, len(code), 4)]
        return {words[i + 1] for i in range(5, len(words) - 1) if words[i] == (2 << 16) | 17}

    assert float16 in capabilities("ampere-rtx3080-windows")
    assert float16 not in capabilities("")  # the baseline computes f16 in f32, stores f16


@pytest.mark.parametrize("triple, expected", [
    ("ampere-rtx3080-windows", (32, True, True)), ("valhall-g78-android30", (16, True, False)),
    ("adreno-unknown-android30", (64, True, False)), ("rdna1-5700xt-linux", (64, True, False)),
    ("cpu-swiftshader-unknown", (4, False, False)), ("", (32, False, False)),
])
def test_triples_set_subgroup_size_and_features(triple, expected):
    target = resolve_target(triple)
    assert (target.subgroup_size, target.float16, target.cooperative_matrix) == expected


@pytest.mark.parametrize("triple, message", [
    ("nonsense", "is not a triple <arch>-<product>-<os>"),
    ("pascal-gtx1080-linux", "unknown architecture 'pascal'; known: ada, adreno, ampere"),
])
def test_bad_triples_are_refused_by_name(triple, message):
    with pytest.raises(CompileError, match=message):
        compile_case("add_37x53", triple)


def _export_shapes(name: str, triple: str) -> list[tuple[list, list]]:
    (_, executable), = spirv_binaries(compile_case(name, triple))
    return [(list(e.gridSize), list(e.blockSize)) for e in executable.exports]


def test_contiguous_elementwise_uses_one_vec4_per_invocation(tmp_path):
    (code, _), = spirv_binaries(compile_case("add_52x37"))
    words = [int.from_bytes(code[i:i + 4], "little") for i in range(0, len(code), 4)]
    vec4 = [i for i in range(len(words) - 3) if words[i] == (4 << 16) | 23 and words[i + 3] == 4]
    assert vec4 and (4 << 16) | 246 not in words  # OpTypeVector of 4 (16-byte accesses), no OpLoopMerge
    # 481 vectors: four 128-invocation workgroups; odd sizes keep one invocation per point.
    assert _export_shapes("add_52x37", "") == [([4, 1, 1], [128, 1, 1])]
    assert _export_shapes("add_37x53", "") == [([16, 1, 1], [128, 1, 1])]


@pytest.mark.parametrize("triple", ["hopper-h100-linux", "ampere-rtx3080-windows"])
def test_f16_matmul_uses_cooperative_matrices_where_the_target_has_them(triple, tmp_path):
    (code, _), = spirv_binaries(compile_case("matmul_f16_128x48x192", triple))
    complaint = validate(code, tmp_path)
    if "Invalid capability operand: 6022" in complaint:
        missing("spirv-val predates SPV_KHR_cooperative_matrix (set $SPIRV_VAL to "
                "SPIRV-Tools 2023.4 or later)")
    assert complaint == ""
    assert _export_shapes("matmul_f16_128x48x192", triple) == [([6, 1, 1], [128, 1, 1])]
    words = {int.from_bytes(code[i:i + 4], "little") for i in range(0, len(code), 4)}
    assert (6 << 16) | 4459 in words   # OpCooperativeMatrixMulAddKHR (Debian's spirv-dis lacks it)


def test_cooperative_matrices_only_for_plain_f16_matmuls_on_targets_with_them():
    def uses(name, triple):
        (code, _), = spirv_binaries(compile_case(name, triple))
        return (6022).to_bytes(4, "little") in code  # OpCapability CooperativeMatrixKHR's operand

    assert uses("matmul_f16_128x48x192", "hopper-h100-linux")
    assert not uses("matmul_f16_128x48x192", "turing-t4-linux")      # no cooperative matrices
    assert not uses("matmul_f16_67x129x45", "hopper-h100-linux")     # not a multiple of the tile
    assert not uses("matmul_64x128x96", "hopper-h100-linux")         # f32


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
