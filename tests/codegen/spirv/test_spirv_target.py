"""CPU-only: the vulkan-spirv target's triples (<arch>-<product>-<os>): each gives valid shaders
within its limits, its subgroup size and features (float16 arithmetic only where it has it);
a bad triple is refused by name."""

from __future__ import annotations

import pytest
from pyree.compiler import CompileError
from pyree.compiler.codegen.spirv import resolve_target
from spirv_modules import compile_case, spirv_binaries, validate

pytestmark = pytest.mark.vulkan


TRIPLES = ["", "valhall-g78-android30", "adreno-unknown-android30", "rdna1-5700xt-linux",
           "ampere-rtx3080-windows", "cpu-swiftshader-unknown"]


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
