"""``--pyree-vulkan-target`` values resolved to what a shader may assume: subgroup size, workgroup
and shared-memory limits, optional features. A value is a triple (IREE's older spelling
``<arch>-<product>-<os>``, ``--iree-vulkan-target-triple``) or one name, as IREE's current
``--iree-vulkan-target`` takes it: an architecture (``ampere``, ``rdna3``, ``valhall``), a chip
(``sm_86``, ``gfx1100``) or a product (``rtx4090``, ``rx7900xtx``, ``mali-g78``, ``adreno-740``).

The default is a safe Vulkan 1.2 baseline: the limits every conformant driver meets (lavapipe's
65535 loop steps an invocation among them), 64-bit integers (loop indices), 8/16-bit storage,
no float16 arithmetic. A triple for a known GPU family
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
    # VK_KHR_shader_bfloat16's shaderBFloat16CooperativeMatrix: bf16 fragments (NVIDIA's driver
    # lists 16x16x16 bf16 x bf16 -> f32 on the H200; other cards unverified)
    bfloat16_cooperative_matrix: bool = False
    # shaderDenormPreserveFloat16/32/64: subnormals kept, as IEEE and the CPU keep them. Without
    # it a driver may flush them to zero (NVIDIA's does: abs of a subnormal came back 0).
    denorm_preserve: bool = False
    # The loop steps one invocation may run in all: Mesa's llvmpipe (lavapipe) ends every loop
    # of a shader once their shared counter reaches 65535, with no error, so a longer serial
    # fold returned a partial sum (a top_k of 100003 ranked by the first 65535). None: no limit.
    loop_limit: int | None = None

    def runs(self, passes: int) -> bool:
        """Whether an invocation's loop passes (every loop's trips and its exit) stay within
        ``loop_limit``: Mesa counts down from it and ends the loops at 0, which the last pass,
        the outermost loop's own exit, may reach unharmed (a loop of 65535 trips is whole)."""
        return self.loop_limit is None or passes <= self.loop_limit + 1


DEFAULT_TRIPLE = "unknown-unknown-unknown"
LAVAPIPE_LOOP_LIMIT = 65535  # Mesa's LP_MAX_TGSI_LOOP_ITERATIONS

_BASELINE = VulkanTarget(DEFAULT_TRIPLE, subgroup_size=32, max_workgroup_invocations=128,
                         max_shared_memory_bytes=16384, float16=False, float64=False, int64=True,
                         storage_8_16_bit=True, cooperative_matrix=False)

# Per architecture: what IREE's Vulkan target table assumes for that family.
_ARCHITECTURES = {
    "unknown": replace(_BASELINE, loop_limit=LAVAPIPE_LOOP_LIMIT),  # lavapipe is conformant
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
                      cooperative_matrix=True, bfloat16_cooperative_matrix=True),
    "rdna4": replace(_BASELINE, denorm_preserve=True, subgroup_size=64, max_workgroup_invocations=1024,
                     max_shared_memory_bytes=65536, float16=True, float64=True,
                     cooperative_matrix=True),
    # SwiftShader and lavapipe: CPU implementations with every feature but small subgroups.
    "cpu": replace(_BASELINE, denorm_preserve=True, subgroup_size=4, max_workgroup_invocations=256,
                   max_shared_memory_bytes=16384, float64=True, loop_limit=LAVAPIPE_LOOP_LIMIT),
}


# One-name targets (IREE's KnownTargets spellings) -> architecture. Prefix rules below cover the
# families of gfx chips and RTX products.
_NAMES = {
    "valhall1": "valhall", "valhall2": "valhall", "valhall3": "valhall", "valhall4": "valhall",
    "mali-g57": "valhall", "mali-g77": "valhall", "mali-g78": "valhall", "mali-g310": "valhall",
    "mali-g510": "valhall", "mali-g710": "valhall", "mali-g615": "valhall", "mali-g715": "valhall",
    "sm_75": "turing", "sm_80": "ampere", "sm_86": "ampere", "sm_87": "ampere", "sm_89": "ada",
    "sm_90": "hopper", "a100": "ampere", "l4": "ada", "l40s": "ada", "h100": "hopper",
    "rx7900xtx": "rdna3", "rx7900xt": "rdna3", "rx7800xt": "rdna3", "rx7700xt": "rdna3",
    "w7900": "rdna3", "w7800": "rdna3", "w7700": "rdna3", "v710": "rdna3",
    "rx9070xt": "rdna4", "rx9070": "rdna4", "rx9060xt": "rdna4", "r9700": "rdna4",
    "vp_android_baseline_2022": "unknown", "swiftshader": "cpu", "lavapipe": "cpu",
}
_PREFIXES = (("gfx101", "rdna1"), ("gfx103", "rdna2"), ("gfx11", "rdna3"), ("gfx12", "rdna4"),
             ("rtx20", "turing"), ("rtx30", "ampere"), ("rtx40", "ada"), ("adreno-", "adreno"))


def resolve_target(triple: str) -> VulkanTarget:
    """``"ampere-rtx3080-windows"``, ``"rtx4090"`` or ``"rdna3"`` -> its VulkanTarget; ``""`` ->
    the safe default."""
    triple = (triple or DEFAULT_TRIPLE).strip()
    name = triple.lower()
    arch = name if name in _ARCHITECTURES else _NAMES.get(name) or next(
        (a for prefix, a in _PREFIXES if name.startswith(prefix) and "-" not in name[len(prefix):]),
        None)
    if arch is not None:
        return replace(_ARCHITECTURES[arch], triple=triple)
    parts = triple.split("-")
    if len(parts) != 3 or not all(parts):
        raise CompileError(f"--pyree-vulkan-target '{triple}' is not a known architecture "
                           f"({', '.join(sorted(_ARCHITECTURES))}), chip or product (sm_86, "
                           "gfx1100, rtx4090, rx7900xtx, mali-g78, adreno-740), and it "
                           "is not a triple <arch>-<product>-<os> (e.g. 'ampere-rtx3080-windows', "
                           "'rdna1-5700xt-linux', 'cpu-swiftshader-unknown')")
    arch = _ARCHITECTURES.get(parts[0])
    if arch is None:
        raise CompileError(f"--pyree-vulkan-target '{triple}': unknown architecture "
                           f"'{parts[0]}'; known: {', '.join(sorted(_ARCHITECTURES))}")
    return replace(arch, triple=triple)
