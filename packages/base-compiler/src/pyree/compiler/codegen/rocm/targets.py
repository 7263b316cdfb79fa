"""``--pyree-rocm-target-chip`` names (also ``--iree-rocm-target-chip``, ``--iree-rocm-target``,
``--iree-hip-target``): gfx names and AMD product names, as in IREE's ROCm guide, optionally with
target features ``:sramecc+``/``:sramecc-``/``:xnack+``/``:xnack-`` (``gfx90a:xnack+``).

Every name resolves to one ``RocmTarget``. An unknown chip or a feature the chip lacks is refused
with the accepted list here, before LLVM sees it (LLVM only warns on an unknown CPU, and emits code
for a generic one). gfx9 (GCN/CDNA) chips run wave64 and gfx10+ (RDNA) wave32; the kernel
templates size their subgroup reductions from ``RocmTarget.wave_size``.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyree.compiler.errors import CompileError

# chip -> ELF e_flags EF_AMDGPU_MACH (llvm/BinaryFormat/ELF.h), wave size, its feature switches.
CHIPS = {
    "gfx900": (0x02C, 64, ("xnack",)),
    "gfx906": (0x02F, 64, ("sramecc", "xnack")),
    "gfx908": (0x030, 64, ("sramecc", "xnack")),
    "gfx90a": (0x03F, 64, ("sramecc", "xnack")),
    "gfx942": (0x04C, 64, ("sramecc", "xnack")),
    "gfx950": (0x04F, 64, ("sramecc", "xnack")),
    "gfx1030": (0x036, 32, ()),
    "gfx1100": (0x041, 32, ()),
    "gfx1101": (0x046, 32, ()),
    "gfx1200": (0x048, 32, ()),
    "gfx1201": (0x04E, 32, ()),
}

# Products (SKUs) and architecture code names of IREE's current ROCm guide -> chip; a code name
# is its family's first chip, as IREE translates it.
PRODUCTS = {
    "mi25": "gfx900", "mi50": "gfx906", "mi60": "gfx906", "mi100": "gfx908",
    "mi210": "gfx90a", "mi250": "gfx90a", "mi250x": "gfx90a", "mi300x": "gfx942",
    "mi300a": "gfx942", "mi308x": "gfx942", "mi325x": "gfx942", "mi350x": "gfx950",
    "mi355x": "gfx950", "rx7900xtx": "gfx1100", "rx7900xt": "gfx1100", "w7900": "gfx1100",
    "w7800": "gfx1100", "rx7800xt": "gfx1101", "rx7700xt": "gfx1101", "v710": "gfx1101",
    "w7700": "gfx1101", "rx9070xt": "gfx1201", "rx9070": "gfx1201", "r9700": "gfx1201",
    "rx9060xt": "gfx1200",
    "cdna1": "gfx908", "cdna2": "gfx90a", "cdna3": "gfx942", "cdna4": "gfx950",
    "rdna2": "gfx1030", "rdna3": "gfx1100", "rdna4": "gfx1200",
}

DEFAULT_TARGET = "gfx908"


@dataclass(frozen=True)
class RocmTarget:
    chip: str                            # "gfx942"
    features: tuple[tuple[str, bool], ...] = ()  # (("sramecc", True), ("xnack", False))

    @property
    def wave_size(self) -> int:
        return CHIPS[self.chip][1]

    @property
    def mach(self) -> int:
        """The ELF e_flags EF_AMDGPU_MACH value of the chip."""
        return CHIPS[self.chip][0]

    @property
    def llvm_features(self) -> str:
        flags = [f"{'+' if on else '-'}{name}" for name, on in self.features]
        flags.append(f"+wavefrontsize{self.wave_size}")
        return ",".join(flags)

    @property
    def arch(self) -> str:
        """The target id as ROCm spells it: ``gfx90a:sramecc+:xnack-``."""
        return self.chip + "".join(f":{n}{'+' if on else '-'}" for n, on in self.features)


def accepted_names() -> list[str]:
    return sorted(CHIPS) + sorted(PRODUCTS)


def _refuse(name: str, why: str) -> CompileError:
    return CompileError(
        f"{why} --pyree-rocm-target-chip '{name}'; accepted: chips {', '.join(CHIPS)}; products "
        f"{', '.join(sorted(PRODUCTS))}; optional features :sramecc+/- and :xnack+/- "
        f"(default {DEFAULT_TARGET})")


def resolve_target(name: str) -> RocmTarget:
    """The target a chip name names; an unknown one lists the accepted names."""
    parts = name.strip().lower().replace(" ", "").split(":")
    key = parts[0].replace("-", "").replace("_", "")
    chip = PRODUCTS.get(key) or (key if key in CHIPS else None)
    if chip is None:
        raise _refuse(name, "unknown")
    features: dict[str, bool] = {}
    for part in parts[1:]:
        feature, sign = part[:-1], part[-1:]
        if sign not in "+-" or not sign or feature not in ("sramecc", "xnack"):
            raise _refuse(name, f"unknown feature '{part}' in")
        if feature not in CHIPS[chip][2]:
            raise _refuse(name, f"{chip} has no {feature} feature:")
        features[feature] = sign == "+"
    return RocmTarget(chip, tuple(sorted(features.items())))
