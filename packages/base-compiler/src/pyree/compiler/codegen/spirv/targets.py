"""``--pyree-vulkan-target`` triples (IREE's spelling ``<arch>-<product>-<os>``) resolved to what a
shader may assume: subgroup size, workgroup and shared-memory limits, optional features.

The default is a safe Vulkan 1.2 baseline: the limits every conformant driver meets, 64-bit
integers (loop indices), 8/16-bit storage, no float16 arithmetic. A triple for a known GPU family
unlocks that family's features; an unknown architecture is refused with the list of known ones.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pyree.compiler.errors import CompileError


@dataclass(frozen=True)
class VulkanTarget:
    triple: str
    subgroup_size: int
    max_workgroup_invocations: int
    max_shared_memory_bytes: int
    float16: bool                # float16 arithmetic (shaderFloat16)
    float64: bool                # shaderFloat64
    int64: bool                  # shaderInt64
    storage_8_16_bit: bool       # 8/16-bit storage buffers + Int8/Int16 arithmetic
    cooperative_matrix: bool     # VK_KHR_cooperative_matrix
    # shaderDenormPreserveFloat16/32/64: subnormals kept, as IEEE and the CPU keep them. Without
    # it a driver may flush them to zero (NVIDIA's does: abs of a subnormal came back 0).
    denorm_preserve: bool = False


DEFAULT_TRIPLE = "unknown-unknown-unknown"

_BASELINE = VulkanTarget(DEFAULT_TRIPLE, subgroup_size=32, max_workgroup_invocations=128,
                         max_shared_memory_bytes=16384, float16=False, float64=False, int64=True,
                         storage_8_16_bit=True, cooperative_matrix=False)

# Per architecture: what IREE's Vulkan target table assumes for that family.
_ARCHITECTURES = {
    "unknown": _BASELINE,
    "valhall": replace(_BASELINE, subgroup_size=16, max_workgroup_invocations=512,
                       max_shared_memory_bytes=32768, float16=True),
    "adreno": replace(_BASELINE, subgroup_size=64, max_workgroup_invocations=1024,
                      max_shared_memory_bytes=32768, float16=True),
    "rdna1": replace(_BASELINE, denorm_preserve=True, subgroup_size=64, max_workgroup_invocations=1024,
                     max_shared_memory_bytes=65536, float16=True, float64=True),
    "rdna2": replace(_BASELINE, denorm_preserve=True, subgroup_size=64, max_workgroup_invocations=1024,
                     max_shared_memory_bytes=65536, float16=True, float64=True),
    "rdna3": replace(_BASELINE, denorm_preserve=True, subgroup_size=64, max_workgroup_invocations=1024,
                     max_shared_memory_bytes=65536, float16=True, float64=True,
                     cooperative_matrix=True),
    "turing": replace(_BASELINE, denorm_preserve=True, subgroup_size=32, max_workgroup_invocations=1024,
                      max_shared_memory_bytes=49152, float16=True, float64=True),
    "ampere": replace(_BASELINE, denorm_preserve=True, subgroup_size=32, max_workgroup_invocations=1024,
                      max_shared_memory_bytes=49152, float16=True, float64=True,
                      cooperative_matrix=True),
    "ada": replace(_BASELINE, denorm_preserve=True, subgroup_size=32, max_workgroup_invocations=1024,
                   max_shared_memory_bytes=49152, float16=True, float64=True,
                   cooperative_matrix=True),
    "hopper": replace(_BASELINE, denorm_preserve=True, subgroup_size=32, max_workgroup_invocations=1024,
                      max_shared_memory_bytes=49152, float16=True, float64=True,
                      cooperative_matrix=True),
    # SwiftShader and lavapipe: CPU implementations with every feature but small subgroups.
    "cpu": replace(_BASELINE, denorm_preserve=True, subgroup_size=4, max_workgroup_invocations=256,
                   max_shared_memory_bytes=16384, float64=True),
}


def resolve_target(triple: str) -> VulkanTarget:
    """``"ampere-rtx3080-windows"`` -> its VulkanTarget; ``""`` -> the safe default."""
    triple = triple or DEFAULT_TRIPLE
    parts = triple.split("-")
    if len(parts) != 3 or not all(parts):
        raise CompileError(f"--pyree-vulkan-target '{triple}' is not a triple "
                           "<arch>-<product>-<os> (e.g. 'ampere-rtx3080-windows', "
                           "'rdna1-5700xt-linux', 'cpu-swiftshader-unknown')")
    arch = _ARCHITECTURES.get(parts[0])
    if arch is None:
        raise CompileError(f"--pyree-vulkan-target '{triple}': unknown architecture "
                           f"'{parts[0]}'; known: {', '.join(sorted(_ARCHITECTURES))}")
    return replace(arch, triple=triple)
