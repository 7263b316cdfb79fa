"""AMD's device libraries (ROCm-Device-Libs bitcode) linked into the kernels: ``--iree-rocm-link-bc``.

With it on, math ops are calls to ocml (``__ocml_tanh_f32``, ...) instead of ``math_expansion``'s
formulas, and after the kernel module is built only the bitcode its undefined symbols name is
linked in: ``ocml.bc`` for ``__ocml_*``, and for each ``__oclc_*`` control constant that linked
code reads, the one ``oclc_*.bc`` that matches the chip and pyree's floating-point semantics
(denormals kept, inf/NaN as values, no unsafe math, correctly rounded f32 sqrt). The library
symbols are then made internal and the unreferenced ones dropped, so that O3 inlines what is
left and folds the control constants away.

A ``"target-cpu"`` on the libraries' functions is dropped, so they compile for the kernels' chip
(as clang's ``-mlink-builtin-bitcode`` overrides it); LLVM inlines nothing across different CPUs
and would otherwise emit them as calls into code for another chip. Their ``"target-features"``
are kept: they do not block inlining, and stripping them would let code that needs a feature the
chip lacks reach instruction selection, which aborts the process.
The directory is ``--iree-rocm-bc-dir``, else the first of ``DEFAULT_DIRS`` that exists.
"""

from __future__ import annotations

import os
import re

import llvmlite.binding as llvm
from pyree.compiler.codegen.rocm.targets import RocmTarget
from pyree.compiler.errors import CompileError

DEFAULT_DIRS = ("$ROCM_PATH/amdgcn/bitcode", "/opt/rocm/amdgcn/bitcode",
                "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode")  # the last: Debian's rocm-device-libs
_INSTALL = "install rocm-device-libs (Debian/Ubuntu: apt-get install rocm-device-libs) or pass " \
           "--iree-rocm-bc-dir=<directory holding ocml.bc>"


def ocml_function(op: str, dtype: str) -> tuple[str, str]:
    """(ocml's function for math ``op`` on ``dtype``, the dtype it computes in): every op of
    ``math_expansion.GPU_EXPANDED`` has ocml's name. f16 and bf16 compute in f32 and round once,
    as without link-bc: ocml's own f16 functions are no more accurate, and ROCm 5.2's
    ``__ocml_sin_f16`` returns NaN for every finite input (its finiteness test selects the NaN;
    run on the host as tests/codegen/rocm/ocml_host.py runs ocml; also JuliaGPU/AMDGPU.jl#177)."""
    compute = "f64" if dtype == "f64" else "f32"
    return f"__ocml_{op}_{compute}", compute


def locate(bc_dir: str) -> str:
    """The device-library directory: ``bc_dir`` if given, else the first of DEFAULT_DIRS that
    exists; one without ``ocml.bc`` is refused, naming it."""
    if bc_dir:
        directory = bc_dir
    else:
        candidates = [os.path.expandvars(d) for d in DEFAULT_DIRS
                      if "$ROCM_PATH" not in d or os.environ.get("ROCM_PATH")]
        directory = next((d for d in candidates if os.path.isdir(d)), "")
        if not directory:
            raise CompileError(f"--iree-rocm-link-bc=true links AMD's device libraries, but none "
                               f"of {', '.join(DEFAULT_DIRS)} exists: {_INSTALL}")
    if not os.path.isfile(os.path.join(directory, "ocml.bc")):
        what = "has no ocml.bc" if os.path.isdir(directory) else "does not exist"
        raise CompileError(f"the ROCm device-library directory '{directory}' {what}: {_INSTALL}")
    return directory


def _control_files(target: RocmTarget) -> dict[str, str]:
    """The oclc control library defining each control constant, for ``target``."""
    return {
        "__oclc_ISA_version": f"oclc_isa_version_{target.chip[3:]}.bc",
        "__oclc_ABI_version": "oclc_abi_version_500.bc",  # code object v5, as amdgpu.py emits
        "__oclc_wavefrontsize64": f"oclc_wavefrontsize64_{'on' if target.wave_size == 64 else 'off'}.bc",
        "__oclc_daz_opt": "oclc_daz_opt_off.bc",  # f32 denormals kept, LLVM's AMDGPU default
        "__oclc_finite_only_opt": "oclc_finite_only_off.bc",
        "__oclc_unsafe_math_opt": "oclc_unsafe_math_off.bc",
        "__oclc_correctly_rounded_sqrt32": "oclc_correctly_rounded_sqrt_on.bc",
    }


def _library_of(name: str, target: RocmTarget, directory: str) -> str:
    if name.startswith("__ocml_"):
        return "ocml.bc"
    control = _control_files(target)
    if name not in control:
        raise CompileError(f"the ROCm device libraries in '{directory}' read the control constant "
                           f"{name}, which pyree does not know how to set (a ROCm newer than it "
                           f"supports?)")
    return control[name]


def _undefined(module: llvm.ModuleRef) -> set[str]:
    """The device-library symbols ``module`` uses without defining."""
    values = [*module.functions, *module.global_variables]
    return {v.name for v in values if v.is_declaration and v.name.startswith(("__ocml_", "__oclc_"))}


def _load(directory: str, file: str, target: RocmTarget, into: llvm.ModuleRef) -> llvm.ModuleRef:
    path = os.path.join(directory, file)
    if not os.path.isfile(path):
        chip = f" for {target.chip}" if file.startswith("oclc_isa_version_") else ""
        raise CompileError(f"the ROCm device libraries in '{directory}' have no {file}{chip}, which "
                           f"the linked math needs (a rocm-device-libs older than the chip?): install "
                           f"one that has it or pass --iree-rocm-bc-dir=<its directory>")
    try:
        with open(path, "rb") as f:
            library = llvm.parse_bitcode(f.read())
    except RuntimeError as e:
        raise CompileError(f"cannot read the ROCm device library '{path}': {e}") from e
    library.triple, library.data_layout = into.triple, into.data_layout
    return library


def link(ir_text: str, target: RocmTarget, tm, directory: str) -> str:
    """``ir_text`` with the device-library code it calls linked in, internal, unused parts
    dropped (``tm``: the target machine); no device-library symbol is left undefined."""
    try:
        module = llvm.parse_assembly(ir_text)
        module.verify()
    except RuntimeError as e:
        raise CompileError(f"internal error: invalid AMDGPU IR generated: {e}") from e
    own = {v.name for v in [*module.functions, *module.global_variables] if not v.is_declaration}
    linked: set[str] = set()
    while True:
        files = {_library_of(name, target, directory) for name in _undefined(module)} - linked
        if not files:
            break
        for file in sorted(files):
            try:
                module.link_in(_load(directory, file, target, module))
            except RuntimeError as e:
                raise CompileError(f"cannot link the ROCm device library "
                                   f"'{os.path.join(directory, file)}': {e}") from e
            linked.add(file)
    missing = _undefined(module)
    if missing:
        raise CompileError(f"the ROCm device libraries in '{directory}' do not define "
                           f"{', '.join(sorted(missing))}; pass --iree-rocm-bc-dir=<a ROCm's "
                           f"amdgcn/bitcode> that does")
    for value in [*module.functions, *module.global_variables]:
        if not value.is_declaration and value.name not in own:
            value.linkage = "internal"
    module.verify()
    pm = llvm.create_new_module_pass_manager()
    pm.add_global_dead_code_eliminate_pass()
    pm.run(module, llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options()))
    return re.sub(r' "target-cpu"="[^"]*"', "", str(module))  # the kernels carry none
