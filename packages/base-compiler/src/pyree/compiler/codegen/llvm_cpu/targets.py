"""Resolves --pyree-llvmcpu-target-cpu to an LLVM CPU name plus the exact ISA extensions to use."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import llvmlite.binding as llvm
from pyree.compiler.codegen.llvm_cpu.cpus import BASELINE, CPUINFO_FLAGS, CPUS
from pyree.compiler.errors import CompileError

TRIPLE = "x86_64-unknown-linux-gnu"


@dataclass(frozen=True)
class CpuTarget:
    cpu: str                      # LLVM -mcpu name (scheduling model)
    features: frozenset[str]      # LLVM feature names the code may use; all others are off
    # False (--iree-llvmcpu-reassociate-fp-reductions=false): float folds run strictly in order
    reassociate: bool = True

    @property
    def cpuinfo_flags(self) -> list[str]:
        """The extensions beyond baseline x86-64, as /proc/cpuinfo spells them."""
        return sorted(CPUINFO_FLAGS[f] for f in self.features if f in CPUINFO_FLAGS
                      and f not in BASELINE)

    @property
    def vector_bits(self) -> int:
        return 512 if "avx512f" in self.features else 256 if "avx" in self.features else 128

    @property
    def vector_registers(self) -> int:
        return 32 if "avx512f" in self.features else 16

    def feature_string(self) -> str:
        """Every known feature switched off, then ours on: "on" wins for implied features."""
        known = set(CPUINFO_FLAGS)
        if llvm.get_process_triple().startswith("x86_64"):
            known |= set(llvm.get_host_cpu_features())
        off = sorted(known - self.features)
        return ",".join([f"-{f}" for f in off] + [f"+{f}" for f in sorted(self.features)])

    def __reduce__(self):
        """Pickled without its target machine, which a code-generation worker builds for itself."""
        return CpuTarget, (self.cpu, self.features)

    @cached_property
    def machine(self) -> llvm.TargetMachine:
        _initialize_llvm()
        return llvm.Target.from_triple(TRIPLE).create_target_machine(
            cpu=self.cpu, features=self.feature_string(), opt=3, reloc="pic", codemodel="default")


def resolve_target(name: str, features: str = "", triple: str = "") -> CpuTarget:
    """``host``: this build machine's CPU; ``generic``: baseline x86-64; else an LLVM CPU name.
    ``features`` (``--iree-llvmcpu-target-cpu-features``) switches extensions on (``+avx2``) or
    off (``-avx512f``) on top of that CPU's set, or is ``host``: this machine's set. ``triple``
    must name x86-64 Linux, the only code pyree generates."""
    _check_triple(triple)
    if name == "host":
        target = CpuTarget(llvm.get_host_cpu_name(), _host_features())
    else:
        if name == "generic":
            name = "x86-64"
        if name not in CPUS:
            examples = ("x86-64-v2, host, generic, haswell, skylake-avx512, icelake-server, "
                        "sapphirerapids, znver4")
            raise CompileError(
                f"unknown --pyree-llvmcpu-target-cpu '{name}'; use one of {examples} "
                f"(all known: {', '.join(sorted(CPUS))})")
        target = CpuTarget(name, frozenset(CPUS[name]))
    return _with_features(target, features)


def resolve_variants(cpu: str, features: str, variants: list[str],
                     triple: str = "") -> tuple[CpuTarget, ...]:
    """The targets an executable carries code for, most portable first (fewest extensions, the
    order given on a tie: the runtime's choice among equals): each of ``variants``
    (``--pyree-llvmcpu-variants``) as ``resolve_target`` reads a CPU name, or, for none, the
    one ``cpu`` (``generic`` where empty) with ``features``."""
    if not variants:
        return (resolve_target(cpu or "generic", features, triple),)
    if cpu or features:
        given = f"--iree-llvmcpu-target-cpu={cpu}" if cpu else \
            f"--iree-llvmcpu-target-cpu-features={features}"
        raise CompileError(
            f"--pyree-llvmcpu-variants={','.join(variants)} cannot be combined with {given}: "
            "list the CPUs in --pyree-llvmcpu-variants, or choose the one CPU and drop the variants")
    seen: dict[frozenset[str], str] = {}
    targets = []
    for name in variants:
        if name not in CPUS and name not in ("host", "generic"):
            raise CompileError(f"unknown CPU '{name}' in --pyree-llvmcpu-variants; use CPU names "
                               f"as --iree-llvmcpu-target-cpu takes them: host, generic, "
                               f"{', '.join(sorted(CPUS))}")
        target = resolve_target(name, "", triple)
        if target.features in seen:
            raise CompileError(
                f"--pyree-llvmcpu-variants: '{name}' has the same CPU features as "
                f"'{seen[target.features]}', so a host could never be told which to load; "
                "list one of them")
        seen[target.features] = name
        targets.append(target)
    return tuple(sorted(targets, key=lambda t: len(t.cpuinfo_flags)))


def _host_features() -> frozenset[str]:
    host = llvm.get_host_cpu_features()
    return frozenset(BASELINE) | {f for f, on in host.items() if on and f in CPUINFO_FLAGS}


def _with_features(target: CpuTarget, features: str) -> CpuTarget:
    if features.strip() == "host":
        return CpuTarget(target.cpu, _host_features())
    enabled = set(target.features)
    for item in (f.strip() for f in features.split(",") if f.strip()):
        sign, feature = (item[0], item[1:]) if item[0] in "+-" else ("+", item)
        if feature not in CPUINFO_FLAGS and feature not in BASELINE:
            raise CompileError(
                f"unknown --pyree-llvmcpu-target-cpu-features entry '{item}'; use +name or -name "
                f"with LLVM's x86 feature names: {', '.join(sorted(CPUINFO_FLAGS))}")
        if sign == "+":
            enabled.add(feature)
        elif feature in BASELINE:
            raise CompileError(f"--pyree-llvmcpu-target-cpu-features '{item}': {feature} is "
                               "part of every x86-64 CPU and cannot be switched off")
        else:
            enabled.discard(feature)
    return CpuTarget(target.cpu, frozenset(enabled))


def _check_triple(triple: str) -> None:
    parts = triple.strip().lower().split("-")
    if triple.strip() in ("", "host") or (parts[0] in ("x86_64", "amd64") and "linux" in parts):
        return
    raise CompileError(
        f"--pyree-llvmcpu-target-triple '{triple}' is not supported: pyree's llvm-cpu backend "
        f"generates x86-64 Linux shared objects only ({TRIPLE}); leave the flag out or use an "
        "x86_64-*-linux-* triple")


def _initialize_llvm() -> None:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
