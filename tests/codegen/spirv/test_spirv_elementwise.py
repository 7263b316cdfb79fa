"""CPU-only: the vulkan-spirv target's elementwise template: one vec4 (16-byte accesses) per
invocation where the data is contiguous and sized for it, one point per invocation elsewhere."""

from __future__ import annotations

import pytest
from spirv_modules import compile_case, export_shapes, spirv_binaries

pytestmark = pytest.mark.vulkan


def test_contiguous_elementwise_uses_one_vec4_per_invocation(tmp_path):
    (code, _), = spirv_binaries(compile_case("add_52x37"))
    words = [int.from_bytes(code[i:i + 4], "little") for i in range(0, len(code), 4)]
    vec4 = [i for i in range(len(words) - 3) if words[i] == (4 << 16) | 23 and words[i + 3] == 4]
    assert vec4 and (4 << 16) | 246 not in words  # OpTypeVector of 4 (16-byte accesses), no OpLoopMerge
    # 481 vectors: four 128-invocation workgroups; odd sizes keep one invocation per point.
    assert export_shapes("add_52x37", "") == [([4, 1, 1], [128, 1, 1])]
    assert export_shapes("add_37x53", "") == [([16, 1, 1], [128, 1, 1])]
