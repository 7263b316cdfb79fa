"""The compiler's flag table: ``pyree-compile`` parses its command line with it, and
``compile_str``/``compile_file`` parse their ``extra_args`` with it, so a flag means the same in
both places (docs/FLAGS.md lists every one).

Every ``--pyree-*`` flag has IREE's spellings as aliases (``--iree-*``, ``--mlir-*``,
``--compile-to``), so commands from IREE's deployment guides and developer tips work unchanged.
IREE flags that change nothing in pyree (optimisation levels, tuning switches) are accepted and
validated, and do nothing (``NO_EFFECT`` says why for each); a flag that asks for something pyree
cannot do is refused by name.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from pyree.compiler.errors import CompileError
from pyree.compiler.options import (
    COMPILE_TO_STAGES,
    CUDA_F32_MATMUL,
    DEFAULT_LLVMCPU_TARGET_CPU,
    DEFAULT_LLVMCPU_VARIANTS,
    TARGET_BACKENDS,
)

# IREE's --iree-hal-target-device names -> our backends.
DEVICE_BACKENDS = {"local": "llvm-cpu", "llvm-cpu": "llvm-cpu", "cuda": "cuda", "hip": "rocm",
                   "rocm": "rocm", "vulkan": "vulkan-spirv", "vulkan-spirv": "vulkan-spirv"}
# --iree-hal-target-backends spellings of our backends' names.
_BACKEND_ALIASES = {"hip": "rocm"}

# Type-rewrite flags (IREE's spellings and defaults): flag, CompileOptions field, default.
_DEMOTIONS = (("demote-f64-to-f32", "demote_f64_to_f32",
               "true for a module with f64 inside its functions only, where a target lacks f64"),
              ("demote-i64-to-i32", "demote_i64_to_i32", "true for StableHLO input, else false"),
              ("promote-bf16-to-f32", "promote_bf16_to_f32", "false"))

# --iree-hal-dump-executable-*-to: flag suffix -> the kinds of file it writes.
_DUMP_KINDS = {"files": ("sources", "intermediates", "binaries"), "sources": ("sources",),
               "intermediates": ("intermediates",), "binaries": ("binaries",)}

_BOOL = "BOOL"
_INT = "N"
_OPT_LEVELS = ("O0", "O1", "O2", "O3")
_NOTHING_TO_TUNE = "pyree has no such transformation to switch"
# IREE flags accepted with no effect in pyree: flag, accepted values (_BOOL, _INT or a tuple of
# choices), why nothing changes.
NO_EFFECT = (
    ("--iree-opt-level", _OPT_LEVELS, "pyree runs all of its optimisations at every level"),
    ("--iree-global-optimization-opt-level", _OPT_LEVELS, "as --iree-opt-level"),
    ("--iree-dispatch-creation-opt-level", _OPT_LEVELS, "as --iree-opt-level"),
    ("--iree-opt-const-eval", _BOOL, "constants are folded at compile time either way"),
    ("--iree-opt-numeric-precision-reduction", _BOOL, _NOTHING_TO_TUNE),
    ("--iree-opt-data-tiling", _BOOL, _NOTHING_TO_TUNE),
    ("--iree-opt-strip-assertions", _BOOL, _NOTHING_TO_TUNE),
    ("--iree-opt-aggressively-propagate-transposes", _BOOL, _NOTHING_TO_TUNE),
    ("--iree-dispatch-creation-enable-aggressive-fusion", _BOOL,
     "pyree always fuses elementwise producers and consumers into their root"),
    ("--iree-stream-partitioning-favor", ("min-peak-memory", "max-concurrency", "debug"),
     "pyree's host program runs dispatches in order and reuses transient memory either way"),
    ("--iree-hal-executable-debug-level", _INT, "kernels always carry their source location"),
    ("--iree-llvmcpu-debug-symbols", _BOOL, "the CPU shared object always keeps its symbols"),
    ("--iree-llvmcpu-link-embedded", _BOOL,
     "pyree always links a system ELF shared object (IREE's system library format)"),
    ("--iree-hal-cuda-use-ptxas", _BOOL, "pyree adds a cubin whenever ptxas is found"),
    ("--mlir-disable-threading", _BOOL, "pyree compiles on one thread"),
    ("--mlir-print-debuginfo", _BOOL, "printed IR always carries source locations"),
    ("--mlir-elide-elementsattrs-if-larger", _INT, "printed IR always shows constants elided"),
    ("--mlir-elide-resource-strings-if-larger", _INT, "printed IR always shows constants elided"),
    ("--output-format", ("vm-bytecode",), "the one format pyree writes (.vmfb)"),
)


class FlagError(CompileError):
    """A flag that is unknown or has a bad value; pyree-compile exits 2 on it."""


class _FlagParser(argparse.ArgumentParser):
    def error(self, message: str):
        raise FlagError(message)


def parse_bool(text: str) -> bool:
    """An LLVM-style boolean flag value: ``--flag``, ``--flag=true``, ``--flag=false``."""
    value = {"true": True, "1": True, "false": False, "0": False}.get(text.lower())
    if value is None:
        raise argparse.ArgumentTypeError(f"expected true or false, got '{text}'")
    return value


def add_compile_flags(p: argparse.ArgumentParser) -> None:
    """Adds the table to ``p``; a flag not given leaves no attribute (its field keeps its value)."""
    none = argparse.SUPPRESS

    def flag(*names, **kwargs):
        p.add_argument(*names, default=none, **kwargs)

    def boolean(*names, **kwargs):
        flag(*names, nargs="?", const=True, type=parse_bool, metavar="BOOL", **kwargs)

    flag("--pyree-hal-target-backends", "--iree-hal-target-backends",
         "--iree-hal-local-target-device-backends", dest="backends", action="append",
         metavar="LIST", help="comma-separated backends to compile for: "
         + ", ".join(TARGET_BACKENDS) + " (default llvm-cpu)")
    flag("--pyree-hal-target-device", "--iree-hal-target-device", dest="devices",
         action="append", metavar="LIST",
         help="IREE's device spelling: " + ", ".join(sorted(DEVICE_BACKENDS)))
    flag("--pyree-llvmcpu-target-cpu", "--iree-llvmcpu-target-cpu", dest="llvmcpu_target_cpu",
         metavar="CPU", help=f"code for one CPU: {DEFAULT_LLVMCPU_TARGET_CPU} (baseline x86-64), "
         "host (this machine's CPU), or an LLVM CPU name such as x86-64-v3 (default: the "
         "--pyree-llvmcpu-variants)")
    flag("--pyree-llvmcpu-target-cpu-features", "--iree-llvmcpu-target-cpu-features",
         dest="llvmcpu_target_cpu_features", metavar="LIST",
         help="+feature/-feature list on top of the CPU's own (e.g. +avx2,+fma), or host")
    flag("--pyree-llvmcpu-variants", dest="llvmcpu_variants", metavar="LIST",
         help="CPUs to carry code for, the runtime loading the best the host runs (default "
         f"{','.join(DEFAULT_LLVMCPU_VARIANTS)} unless a target CPU or features are given), or "
         "none: the target CPU alone")
    boolean("--pyree-llvmcpu-reassociate-fp-reductions",
            "--iree-llvmcpu-reassociate-fp-reductions", dest="llvmcpu_reassociate_fp_reductions",
            help="false: float reductions on llvm-cpu fold strictly left to right, one element "
            "after another (default true: split, vectorized and cascaded)")
    boolean("--pyree-opt-const-expr-hoisting", "--iree-opt-const-expr-hoisting",
            dest="const_expr_hoisting",
            help="false: regions that read only parameters (a filter's layout change) run on "
            "every call instead of once at load (default true: the module's initializer "
            "computes them; docs/PARAMETERS.md)")
    flag("--pyree-llvmcpu-target-triple", "--iree-llvmcpu-target-triple",
         dest="llvmcpu_target_triple", metavar="TRIPLE",
         help="x86_64-*-linux-* or host (pyree generates x86-64 Linux code only)")
    flag("--pyree-cuda-target", "--iree-cuda-target", "--iree-hal-cuda-llvm-target-arch",
         dest="cuda_target", metavar="TARGET",
         help="sm_<N>, a code name or a product name (default sm_80)")
    flag("--pyree-cuda-f32-matmul", dest="cuda_f32_matmul", choices=list(CUDA_F32_MATMUL),
         help="f32 matmuls and convolutions on cuda: strict (default: IEEE f32 products), tf32 "
         "(operands rounded to TF32 on tensor cores, PyTorch's allow_tf32) or 3xtf32 "
         "(error-compensated TF32 on tensor cores, about f32's accuracy); sm_80 or newer")
    flag("--pyree-rocm-target-chip", "--iree-rocm-target-chip", "--iree-rocm-target",
         "--iree-hip-target", dest="rocm_target", metavar="CHIP",
         help="gfx<N> or an AMD product name, optionally with :sramecc+/- and :xnack+/- "
         "(default gfx908)")
    boolean("--pyree-rocm-link-bc", "--iree-rocm-link-bc", dest="rocm_link_bc",
            help="link AMD's device libraries (ocml) and call their math functions "
            "(default false: pyree composes math from basic arithmetic itself)")
    flag("--pyree-rocm-bc-dir", "--iree-rocm-bc-dir", "--iree-hip-bc-dir", dest="rocm_bc_dir",
         metavar="DIR", help="the ROCm device-library bitcode directory for --iree-rocm-link-bc "
         "(default: the first of $ROCM_PATH/amdgcn/bitcode, /opt/rocm/amdgcn/bitcode, "
         "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode that exists)")
    flag("--pyree-vulkan-target", "--iree-vulkan-target", "--iree-vulkan-target-triple",
         dest="vulkan_target", metavar="TARGET", help="an architecture (ampere, rdna3, "
         "valhall), chip or product (rtx4090, gfx1100) or a triple from IREE's Vulkan guide")
    flag("--pyree-input-type", "--iree-input-type", dest="input_type", metavar="TYPE",
         help="auto (default: detect from the op names), none, stablehlo, or tosa "
         "(needs pyree-base-compiler[tosa])")
    for name, dest, default in _DEMOTIONS:
        boolean(f"--pyree-input-{name}", f"--iree-input-{name}", dest=dest,
                help=f"{name.replace('-', ' ')} before lowering; function signatures change too "
                f"(default: {default})")
    flag("--pyree-print-ir-after-all", "--mlir-print-ir-after-all", dest="print_ir_after_all",
         action="store_true", help="print the IR after each stage and each flow pass to stderr")
    flag("--pyree-print-ir-after", "--mlir-print-ir-after", dest="print_ir_after",
         action="append", metavar="LIST", help="print the IR after each run of these flow "
         "passes (comma-separated names; repeatable) to stderr")
    flag("--pyree-compile-to", "--compile-to", dest="compile_to", metavar="PHASE",
         choices=list(COMPILE_TO_STAGES), help="stop after this IREE phase and write that "
         "stage's IR as text instead of a module: " + ", ".join(COMPILE_TO_STAGES))
    for kind in _DUMP_KINDS:
        flag(f"--pyree-hal-dump-executable-{kind}-to", f"--iree-hal-dump-executable-{kind}-to",
             dest=f"dump_{kind}", metavar="DIR",
             help=f"write each dispatch's {'files' if kind == 'files' else kind} per target "
             "into DIR")
    flag("--iree-hal-dump-executable-benchmarks-to", dest="dump_benchmarks", metavar="DIR",
         help="refused: pyree writes no per-dispatch benchmark modules")
    flag("--pyree-progress", dest="progress", action=argparse.BooleanOptionalAction,
         help="print a line to stderr as each stage starts and as code generation gets through "
         "each tenth of the kernels (default: in pyree-compile only once a compile has run a "
         "few seconds, in the Python API never)")
    flag("--mlir-timing", dest="progress", action="store_true",
         help="print each stage with its elapsed time to stderr (as --pyree-progress)")
    flag("--pyree-opt-export-parameters", "--iree-opt-export-parameters",
         "--iree-parameter-export", dest="export_parameters", metavar="[SCOPE=]FILE",
         help="move constants of at least the minimum export size to this .irpa or "
         ".safetensors file; the module references them by SCOPE (docs/PARAMETERS.md)")
    flag("--pyree-opt-minimum-parameter-export-size", "--iree-opt-minimum-parameter-export-size",
         "--iree-parameter-export-minimum-size", dest="minimum_parameter_export_size",
         type=int, metavar="BYTES", help="smallest constant exported (default 256, as IREE)")
    flag("--pyree-opt-splat-parameters", "--iree-opt-splat-parameters", "--iree-parameter-splat",
         dest="splat_parameters", metavar="FILE", help="also write an .irpa of zero splats for "
         "every parameter the module reads (to run it without the real weights)")
    for name, values, why in NO_EFFECT:
        if values == _BOOL:
            boolean(name, dest=_no_effect_dest(name), help=f"accepted, no effect: {why}")
        else:
            flag(name, dest=_no_effect_dest(name), metavar=values if values == _INT else "VALUE",
                 type=int if values == _INT else None,
                 choices=None if values == _INT else list(values),
                 help=f"accepted, no effect: {why}")


def _no_effect_dest(name: str) -> str:
    return "no_effect_" + name.lstrip("-").replace("-", "_")


def flag_values(args: argparse.Namespace) -> dict[str, object]:
    """The CompileOptions fields the parsed flags set (only those given)."""
    given = vars(args)
    values = {key: given[key] for key in (
        "llvmcpu_target_cpu", "llvmcpu_target_cpu_features", "llvmcpu_variants",
        "llvmcpu_target_triple", "llvmcpu_reassociate_fp_reductions",
        "cuda_target", "cuda_f32_matmul", "rocm_target", "rocm_link_bc", "rocm_bc_dir",
        "vulkan_target",
        "input_type", "demote_f64_to_f32", "demote_i64_to_i32", "promote_bf16_to_f32",
        "print_ir_after_all", "print_ir_after", "compile_to", "export_parameters",
        "minimum_parameter_export_size", "splat_parameters", "const_expr_hoisting",
        "progress") if key in given}
    backends = _backends(given.get("backends", []), given.get("devices", []))
    if backends:
        values["target_backends"] = backends
    if "dump_benchmarks" in given:
        raise FlagError("--iree-hal-dump-executable-benchmarks-to is not supported: pyree writes "
                        "no per-dispatch benchmark modules; --iree-hal-dump-executable-files-to "
                        "writes each dispatch's sources, LLVM IR, assembly and binaries")
    dumps: dict[str, list[str]] = {}
    for flag, kinds in _DUMP_KINDS.items():
        for kind in kinds if f"dump_{flag}" in given else ():
            dumps.setdefault(kind, []).append(given[f"dump_{flag}"])
    if dumps:
        values["dump_executables_to"] = dumps
    return values


def parse_extra_args(extra_args: Sequence[str]) -> dict[str, object]:
    """``compile_str(extra_args=[...])``: the CompileOptions fields those flags set."""
    if isinstance(extra_args, str):
        raise FlagError("extra_args must be a list of flags, e.g. ['--iree-opt-level=O3'], "
                        "not one string")
    parser = _FlagParser(prog="extra_args", add_help=False, allow_abbrev=False)
    add_compile_flags(parser)
    args, rest = parser.parse_known_args(list(extra_args))
    if rest:
        raise FlagError(f"unrecognized flags in extra_args: {' '.join(rest)} (docs/FLAGS.md "
                        "lists the flags pyree accepts)")
    return flag_values(args)


def _backends(backend_lists: list[str], device_lists: list[str]) -> list[str]:
    backends: list[str] = []
    for item in backend_lists:
        backends += [_BACKEND_ALIASES.get(b, b) for b in (b.strip() for b in item.split(",")) if b]
    for item in device_lists:
        for device in (d.strip() for d in item.split(",") if d.strip()):
            if device not in DEVICE_BACKENDS:
                raise FlagError(f"unknown target device '{device}'; known devices: "
                                + ", ".join(sorted(DEVICE_BACKENDS)))
            backends.append(DEVICE_BACKENDS[device])
    for backend in backends:
        if backend not in TARGET_BACKENDS:
            raise FlagError(f"unknown target backend '{backend}'; available backends: "
                            + ", ".join(TARGET_BACKENDS))
    return list(dict.fromkeys(backends))
