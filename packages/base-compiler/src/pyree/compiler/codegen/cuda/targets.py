"""``--pyree-cuda-target`` names: ``sm_<N>``, code names and product names, as in IREE's CUDA guide.

Every name resolves to one ``CudaTarget`` (the SM architecture and the PTX ISA version to emit).
The default, ``sm_80``, is PTX that the CUDA driver compiles for any Ampere, Ada or Hopper GPU, plus
an sm_80 cubin when ptxas is present (also valid on sm_86/sm_89). The Hopper names (``hopper``,
``h100``, ``h200``, ...) resolve to ``sm_90a``: Hopper machine code with its arch-specific
instructions (the wgmma matmul), which runs on sm_90 GPUs only; ``sm_90`` is the portable Hopper
target without them. Unlike IREE 3.13, sm_90 and hopper are accepted.

Blackwell: ``sm_100`` (B100/B200/GB200, code name ``blackwell``) and ``sm_120`` (the RTX 50
series, RTX PRO 6000), and their ``a`` forms. They get the templates both have, mma.sync on
tensor cores and SIMT (wgmma is sm_90a's alone, and the newer tcgen05 instructions are not
used); the product names resolve to the portable forms. The cubin is ptxas's where it knows
the arch, and the PTX (ISA 8.6 / 8.7) is the driver's to compile otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyree.compiler.errors import CompileError
from pyree.compiler.options import CUDA_F32_MATMUL

# arch -> the PTX ISA version emitted for it (the lowest the arch allows, but at least 7.0 so that
# cp.async / mma.sync forms are available everywhere LLVM accepts them; sm_90a: 8.3, for the
# wgmma template's tensor maps made in the kernel, tma.py).
_PTX_VERSION = {
    "sm_60": 70, "sm_61": 70, "sm_62": 70, "sm_70": 70, "sm_72": 70, "sm_75": 70,
    "sm_80": 70, "sm_86": 71, "sm_87": 74, "sm_89": 78, "sm_90": 78, "sm_90a": 83,
    "sm_100": 86, "sm_100a": 86, "sm_120": 87, "sm_120a": 87,
}

_CODE_NAMES = {
    "pascal": "sm_60", "volta": "sm_70", "turing": "sm_75", "ampere": "sm_80",
    "ada": "sm_89", "lovelace": "sm_89", "hopper": "sm_90a", "blackwell": "sm_100",
}

_PRODUCTS = {
    "p100": "sm_60", "p40": "sm_61", "p4": "sm_61", "gtx1080": "sm_61", "gtx1080ti": "sm_61",
    "v100": "sm_70", "titanv": "sm_70",
    "t4": "sm_75", "rtx2060": "sm_75", "rtx2070": "sm_75", "rtx2070super": "sm_75",
    "rtx2080": "sm_75", "rtx2080super": "sm_75", "rtx2080ti": "sm_75", "titanrtx": "sm_75",
    "a100": "sm_80", "a30": "sm_80",
    "a10": "sm_86", "a40": "sm_86", "a6000": "sm_86", "rtx3060": "sm_86", "rtx3060ti": "sm_86",
    "rtx3070": "sm_86", "rtx3070ti": "sm_86", "rtx3080": "sm_86", "rtx3080ti": "sm_86",
    "rtx3090": "sm_86", "rtx3090ti": "sm_86",
    "orin": "sm_87",
    "l4": "sm_89", "l40": "sm_89", "l40s": "sm_89", "rtx4060": "sm_89", "rtx4060ti": "sm_89",
    "rtx4070": "sm_89", "rtx4070ti": "sm_89", "rtx4080": "sm_89", "rtx4090": "sm_89",
    "h100": "sm_90a", "h200": "sm_90a", "gh200": "sm_90a", "h800": "sm_90a",
    "b100": "sm_100", "b200": "sm_100", "gb200": "sm_100",
    "rtx5060": "sm_120", "rtx5060ti": "sm_120", "rtx5070": "sm_120", "rtx5070ti": "sm_120",
    "rtx5080": "sm_120", "rtx5090": "sm_120", "rtxpro6000": "sm_120",
}

DEFAULT_TARGET = "sm_80"


@dataclass(frozen=True)
class CudaTarget:
    arch: str          # "sm_90a"
    ptx_version: int   # 78 means PTX ISA 7.8
    f32_matmul: str = "strict"  # --pyree-cuda-f32-matmul: strict, tf32 or 3xtf32

    @property
    def sm(self) -> int:
        """The numeric compute capability (90 for sm_90 and sm_90a)."""
        return int(self.arch[3:].rstrip("a"))

    @property
    def llvm_features(self) -> str:
        return f"+ptx{self.ptx_version}"


def accepted_names() -> list[str]:
    return sorted(_PTX_VERSION) + sorted(_CODE_NAMES) + sorted(_PRODUCTS)


def resolve_target(name: str, f32_matmul: str = "strict") -> CudaTarget:
    """The target a ``--pyree-cuda-target`` value names, multiplying f32 matmuls as
    ``f32_matmul`` says; an unknown name lists the accepted ones, and TF32 is refused on a GPU
    without it (before sm_80), where strict products are all there is."""
    key = name.strip().lower().replace("-", "").replace(" ", "")
    arch = _CODE_NAMES.get(key) or _PRODUCTS.get(key) or (key if key in _PTX_VERSION else None)
    if arch is None:
        raise CompileError(
            f"unknown --pyree-cuda-target '{name}'; accepted: SM architectures "
            f"{', '.join(sorted(_PTX_VERSION))}; code names {', '.join(sorted(_CODE_NAMES))}; "
            f"products {', '.join(sorted(_PRODUCTS))} (default {DEFAULT_TARGET})")
    if f32_matmul not in CUDA_F32_MATMUL:
        raise CompileError(f"unknown --pyree-cuda-f32-matmul '{f32_matmul}'; accepted: "
                           + ", ".join(CUDA_F32_MATMUL))
    target = CudaTarget(arch, _PTX_VERSION[arch], f32_matmul)
    if f32_matmul != "strict" and target.sm < 80:
        raise CompileError(f"--pyree-cuda-f32-matmul={f32_matmul} needs TF32 tensor cores (sm_80 "
                           f"or newer); --pyree-cuda-target={name} is {arch}")
    return target
