"""Compiler options: one dataclass that the CLI, the Python API and every backend read."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from pyree.compiler.backends import NAMES as TARGET_BACKENDS
from pyree.compiler.backends import PORTABLE as PORTABLE_BACKEND
from pyree.compiler.errors import CompileError

# TARGET_BACKENDS: the --pyree-hal-target-backends names (IREE's spellings), from the codegen
# registry. PORTABLE_BACKEND is IREE's portable reference backend (VMVX: its own bytecode,
# interpreted by the runtime, so a module runs on any host). pyree has no interpreter: vmvx is
# llvm-cpu's code for the baseline x86-64 CPU, which local-sync and local-task run on every
# x86-64 host (docs/DESIGN.md); resolve_targets turns the name into llvm-cpu.

# The baseline x86-64 CPU (SSE2), which every x86-64 CPU runs: IREE's default target CPU.
DEFAULT_LLVMCPU_TARGET_CPU = "generic"

# --pyree-cuda-f32-matmul: how the cuda target multiplies f32 matmuls and convolutions. "strict"
# (the default) keeps IEEE f32 products; "tf32" and "3xtf32" run them on tensor cores
# (codegen/cuda/matmul_mma.py says what each computes).
CUDA_F32_MATMUL = ("strict", "tf32", "3xtf32")
# With no --pyree-llvmcpu-target-cpu, -features or -variants, the llvm-cpu executable carries code
# for each of these CPUs and the runtime loads the best one the host runs: the baseline, so that
# a module built on one machine loads on any x86-64 deploy host, and AVX2/FMA code, which every
# x86-64 CPU since 2013-2015 runs (AVX-512 hosts too). x86-64-v4 (AVX-512) is opt-in: its code
# generation cost as much as the other two together (docs/FLAGS.md, docs/DESIGN.md).
DEFAULT_LLVMCPU_VARIANTS = (DEFAULT_LLVMCPU_TARGET_CPU, "x86-64-v3")

# --compile-to: IREE's phase names -> the pyree stage whose IR is written at that point (the
# names of --pyree-print-ir-after-all's sections); None: pyree has no textual IR there (its code
# generation goes straight to LLVM IR / PTX / SPIR-V, which --iree-hal-dump-executable-files-to
# writes); "end": the module.
COMPILE_TO_STAGES: dict[str, str | None] = {
    "input": "tensor program", "abi": "tensor program", "preprocessing": "tensor program",
    "global-optimization": "tensor program", "dispatch-creation": "dispatch regions",
    "flow": "dispatch regions", "stream": "dispatch regions", "executable-sources": "kernels",
    "executable-configurations": "kernels", "executable-targets": None, "hal": None, "vm": None,
    "end": "module",
}


class InputType(enum.StrEnum):
    """IREE's ``iree.compiler.InputType`` names. pyree compiles AUTO, NONE, STABLEHLO and TOSA;
    the others are refused by name with the way in that pyree offers (input/input_types.py)."""

    AUTO = "auto"
    NONE = "none"
    STABLEHLO = "stablehlo"
    STABLEHLO_XLA = "stablehlo_xla"
    TOSA = "tosa"
    TM_TENSOR = "tm_tensor"
    TORCH = "torch"
    ONNX = "onnx"


@dataclass
class CompileOptions:
    # A list of backends; a string is read as the command line reads it ("llvm-cpu", "llvm-cpu,cuda").
    target_backends: list[str] = field(default_factory=lambda: ["llvm-cpu"])
    # --pyree-llvmcpu-target-cpu: "generic" (baseline x86-64), "host" (the build machine's CPU),
    # or an LLVM CPU name ("x86-64-v3", "skylake-avx512", "znver4", ...): code for that one CPU.
    # "" (not given): the default variants, unless llvmcpu_variants says otherwise.
    llvmcpu_target_cpu: str = ""
    # --pyree-llvmcpu-target-cpu-features: "+avx2,+fma,-avx512f" on top of the CPU's own set, or
    # "host" (this machine's); empty: the CPU's set as it is (codegen/llvm_cpu/targets.py).
    llvmcpu_target_cpu_features: str = ""
    # --pyree-llvmcpu-variants: the CPUs the llvm-cpu executable carries code for, the runtime
    # loading the best the host runs (a list, or a comma list as the flag takes it); [] ("none"):
    # one CPU, the target CPU (generic where none is given). None: DEFAULT_LLVMCPU_VARIANTS when
    # neither a target CPU nor features are given, else [].
    llvmcpu_variants: list[str] | None = None
    # --pyree-llvmcpu-target-triple: pyree generates x86-64 Linux ELF only; "" or "host" is that,
    # any other x86_64-*-linux* triple is accepted, other architectures are refused.
    llvmcpu_target_triple: str = ""
    # --pyree-llvmcpu-reassociate-fp-reductions: false folds every float reduction of the llvm-cpu
    # kernels strictly in order (no split, no vector lanes, no cascade), as IREE's flag does.
    llvmcpu_reassociate_fp_reductions: bool = True
    # --pyree-cuda-target: sm_<N>, a code name or a product name; the cuda backend resolves it.
    cuda_target: str = "sm_80"
    # --pyree-cuda-f32-matmul: one of CUDA_F32_MATMUL; anything but "strict" needs sm_80 or newer.
    cuda_f32_matmul: str = "strict"
    # --pyree-rocm-target-chip: a gfx name or an AMD product name, optionally with :sramecc+/- and
    # :xnack+/- features; the rocm backend resolves it (codegen/rocm/targets.py).
    rocm_target: str = "gfx908"
    # --iree-rocm-link-bc: math as calls to AMD's device libraries (ocml), linked from
    # --iree-rocm-bc-dir (empty: $ROCM_PATH/amdgcn/bitcode, /opt/rocm/..., Debian's); off, pyree
    # composes math from basic arithmetic itself (codegen/rocm/device_libs.py).
    rocm_link_bc: bool = False
    rocm_bc_dir: str = ""
    # --pyree-vulkan-target: a target triple from IREE's Vulkan guide; the backend resolves it.
    vulkan_target: str = ""
    # --pyree-input-type: auto (detect from the op names), none, stablehlo or tosa
    # (input/input_types.py).
    input_type: str = "auto"
    # --pyree-input-demote-f64-to-f32 / -demote-i64-to-i32 / -promote-bf16-to-f32: rewrite those
    # element types before lowering (input/demotion.py); the functions' signatures change too.
    # i64 on for StableHLO input only (None: that default, IREE's); bf16 off. f64 (None): a
    # module whose f64 values are all inside its functions (torch-mlir computes LayerNorm's
    # statistics in f64) runs them in f32 where a target lacks f64 (a Vulkan target without
    # shaderFloat64), as IREE's default demotion does everywhere; elsewhere f64 stays f64.
    demote_f64_to_f32: bool | None = None
    demote_i64_to_i32: bool | None = None
    promote_bf16_to_f32: bool = False
    # --pyree-opt-export-parameters=[scope=]path.{irpa,safetensors}: constants of at least
    # minimum_parameter_export_size bytes (IREE's default 256) go to that parameter file and the
    # module references them (parameters/__init__.py; docs/PARAMETERS.md).
    export_parameters: str = ""
    minimum_parameter_export_size: int = 256
    # --pyree-opt-splat-parameters=path.irpa: an archive of zero splats, one per parameter the
    # module reads (IREE's: to run or benchmark a model without its real weights).
    splat_parameters: str = ""
    # --pyree-opt-const-expr-hoisting (IREE's --iree-opt-const-expr-hoisting): regions that read
    # only parameters run once at load in the module's initializer (parameters/load_time.py);
    # false leaves them in the functions, run on every call.
    const_expr_hoisting: bool = True
    # --pyree-print-ir-after-all: print the IR after each stage and each flow pass to stderr.
    print_ir_after_all: bool = False
    # --pyree-print-ir-after=NAME[,NAME]: print the IR after each run of these flow passes
    # (flow/passes.py names them; a comma list in one item is several names).
    print_ir_after: list[str] = field(default_factory=list)
    # --compile-to: stop after this IREE phase and return that stage's IR as text instead of a
    # module ("end": the module); pipeline.COMPILE_TO maps IREE's phases to pyree's stages.
    compile_to: str = "end"
    # --iree-hal-dump-executable-{files,sources,intermediates,binaries}-to: the folders for each
    # kind of file ("sources", "intermediates", "binaries") of each dispatch's per-target code
    # (codegen/executable_files.py).
    dump_executables_to: dict[str, list[str]] = field(default_factory=dict)
    # --pyree-progress: True prints a short line on stderr as each stage starts ("parsing m.mlir
    # (94.0 MB)", "codegen for llvm-cpu: 200 kernels") and as code generation gets through each
    # tenth of the kernels ("codegen for llvm-cpu: 80/200 kernels"); a callable is called with
    # each line instead (progress.py). pyree-compile prints them for long compiles.
    progress: Callable[[str], None] | bool | None = None

    def __post_init__(self):
        if isinstance(self.target_backends, str):
            self.target_backends = [b.strip() for b in self.target_backends.split(",") if b.strip()]
        self.target_backends = list(self.target_backends)
        if isinstance(self.input_type, enum.Enum):  # ours or iree.compiler's InputType
            self.input_type = self.input_type.value
        if isinstance(self.llvmcpu_variants, str):
            names = [n.strip() for n in self.llvmcpu_variants.split(",") if n.strip()]
            self.llvmcpu_variants = [] if names == ["none"] else names
        elif self.llvmcpu_variants is not None:
            self.llvmcpu_variants = list(self.llvmcpu_variants)


def resolve_targets(options: CompileOptions) -> CompileOptions:
    """``options`` with every backend name checked and vmvx built as llvm-cpu for the baseline
    CPU alone (no variants: the same code, so the same answers, on every host). A CPU choice
    is refused beside vmvx rather than applied to it: a module holds one llvm-cpu executable,
    and vmvx promises one that runs anywhere."""
    targets = options.target_backends
    if not targets:
        raise CompileError("no target backend given; use --pyree-hal-target-backends="
                           + "|".join(TARGET_BACKENDS))
    for name in targets:
        if name not in TARGET_BACKENDS:
            raise CompileError(f"unknown target backend '{name}'; known backends: "
                               + ", ".join(TARGET_BACKENDS))
    if PORTABLE_BACKEND not in targets:
        return options
    chosen = [f"--iree-llvmcpu-target-cpu={options.llvmcpu_target_cpu}"
              ] if options.llvmcpu_target_cpu not in ("", DEFAULT_LLVMCPU_TARGET_CPU) else []
    if options.llvmcpu_target_cpu_features:
        chosen.append(f"--iree-llvmcpu-target-cpu-features={options.llvmcpu_target_cpu_features}")
    if options.llvmcpu_variants:
        chosen.append(f"--pyree-llvmcpu-variants={','.join(options.llvmcpu_variants)}")
    if chosen:
        raise CompileError(
            f"the vmvx target cannot be combined with {' '.join(chosen)}: pyree builds vmvx as "
            f"llvm-cpu code for the baseline x86-64 CPU ({DEFAULT_LLVMCPU_TARGET_CPU}) so that it "
            "runs on any host; drop vmvx to build for that CPU, or drop the CPU flag")
    backends = ["llvm-cpu" if name == PORTABLE_BACKEND else name for name in targets]
    return replace(options, target_backends=list(dict.fromkeys(backends)),
                   llvmcpu_target_cpu=DEFAULT_LLVMCPU_TARGET_CPU, llvmcpu_variants=[])
