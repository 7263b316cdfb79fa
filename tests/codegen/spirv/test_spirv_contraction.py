"""CPU-only: the vulkan-spirv target's f16 matmuls take cooperative matrices (tensor cores)
where the target has them, at any size; their shaders pass spirv-val."""

from __future__ import annotations

import pytest
from spirv_modules import compile_case, export_shapes, spirv_binaries, validate
from tooling import missing

pytestmark = pytest.mark.vulkan


@pytest.mark.parametrize("triple", ["hopper-h100-linux", "ampere-rtx3080-windows"])
def test_f16_matmul_uses_cooperative_matrices_where_the_target_has_them(triple, tmp_path):
    (code, _), = spirv_binaries(compile_case("matmul_f16_128x48x192", triple))
    complaint = validate(code, tmp_path)
    if "Invalid capability operand: 6022" in complaint:
        missing("spirv-val predates SPV_KHR_cooperative_matrix (set $SPIRV_VAL to "
                "SPIRV-Tools 2023.4 or later)")
    assert complaint == ""
    assert export_shapes("matmul_f16_128x48x192", triple) == [([6, 1, 1], [128, 1, 1])]
    words = {int.from_bytes(code[i:i + 4], "little") for i in range(0, len(code), 4)}
    assert (6 << 16) | 4459 in words   # OpCooperativeMatrixMulAddKHR (Debian's spirv-dis lacks it)


def test_cooperative_matrices_for_f16_matmuls_of_any_size_on_targets_with_them():
    def uses(name, triple):
        (code, _), = spirv_binaries(compile_case(name, triple))
        return (6022).to_bytes(4, "little") in code  # OpCapability CooperativeMatrixKHR's operand

    assert uses("matmul_f16_128x48x192", "hopper-h100-linux")
    assert not uses("matmul_f16_128x48x192", "turing-t4-linux")      # no cooperative matrices
    assert uses("matmul_f16_67x129x45", "hopper-h100-linux")         # edges zero-filled
    assert not uses("matmul_64x128x96", "hopper-h100-linux")         # f32
