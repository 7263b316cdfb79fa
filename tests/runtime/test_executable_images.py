"""The structural checks of executable images (pyree.runtime.hal.images) on the compiler's real
output for every target: whole images pass, every cut is refused with what contradicts what,
and a CPU library's exports must be kernels it defines itself."""

from __future__ import annotations

import subprocess

import pyree.runtime as rt
import pytest
from pyree.compiler import CompileOptions, compile_str
from pyree.runtime.hal.images import ImageError
from pyree.runtime.hal.images.cpu_library import (
    check_kernel_symbols,
    export_records,
    read_library,
)
from pyree.runtime.hal.images.elf import EM_AMDGPU, EM_CUDA, ET_DYN, ET_EXEC, read_elf
from pyree.runtime.hal.images.ptx import check_ptx
from pyree.runtime.hal.images.spirv import check_spirv
from tooling import require_tool

MLIR = """
func.func @f(%a: tensor<37x53xf32>, %b: tensor<37x53xf32>) -> tensor<37xf32> {
  %s = arith.addf %a, %b : tensor<37x53xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<37xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<37xf32>) -> tensor<37xf32>
  %r = linalg.reduce ins(%s : tensor<37x53xf32>) outs(%f : tensor<37xf32>) dimensions = [1]
    (%x: f32, %y: f32) { %t = arith.addf %x, %y : f32
      linalg.yield %t : f32 }
  return %r : tensor<37xf32>
}
"""


@pytest.fixture(scope="module")
def images() -> dict:
    """(code, export names) per image kind, from one module compiled for every target."""
    require_tool("ptxas", env="PYREE_PTXAS")
    require_tool("ld.lld", env="PYREE_LLD")
    module = rt.read_module(compile_str(MLIR, CompileOptions(
        target_backends=["llvm-cpu", "cuda", "vulkan-spirv", "rocm"])))
    out = {}
    for e in module.tree.executables:
        if e.cpu:
            out["cpu"] = bytes(module.bytes_of(e.cpu.library)), [x.symbol for x in e.cpu.exports]
        elif e.cuda:
            names = [x.name for x in e.cuda.exports]
            out["ptx"], out["cubin"] = (bytes(module.bytes_of(e.cuda.ptx)), names), \
                (bytes(module.bytes_of(e.cuda.cubin)), names)
        elif e.spirv:
            out["spirv"] = bytes(module.bytes_of(e.spirv.code)), [x.name for x in e.spirv.exports]
            out["spirv layouts"] = [(x.name, len(x.bindings)) for x in e.spirv.exports]
        else:
            out["rocm"] = bytes(module.bytes_of(e.rocm.codeObject)), [x.name for x in e.rocm.exports]
    return out


def _elf(kind: str, code: bytes):
    return {"cpu": lambda: read_library(code, "elf-x86_64"),
            "cubin": lambda: read_elf(code, (EM_CUDA,), (ET_EXEC,)),
            "rocm": lambda: read_elf(code, (EM_AMDGPU,), (ET_DYN,))}[kind]()


@pytest.mark.parametrize("kind", ["cpu", "cubin", "rocm"])
def test_a_whole_elf_passes_and_every_cut_is_refused(images, kind):
    code, _ = images[kind]
    _elf(kind, code)
    for cut in sorted({64, 200, len(code) // 2, len(code) - 200, len(code) - 1}):
        with pytest.raises(ImageError, match="cut short|run past the end"):
            _elf(kind, code[:cut])
    with pytest.raises(ImageError, match="no ELF magic"):
        _elf(kind, code[:40])


def test_an_elf_for_another_machine_is_refused(images):
    with pytest.raises(ImageError, match="machine CUDA of type 2, not a x86-64 image"):
        read_library(images["cubin"][0], "elf-x86_64")
    with pytest.raises(ImageError, match="format 'elf-sparc' is not one of elf-x86_64, elf-aarch64"):
        read_library(images["cpu"][0], "elf-sparc")


@pytest.mark.parametrize("name, why", [
    ("abort", "not a function the library defines"),          # libc's, found through dlsym
    ("free", "not a function the library defines"),
    ("sched_yield", "not a function the library defines"),    # imported by the worker loop
    ("pyree_local_task_worker_v2", "not a kernel's name"),   # the runtime's worker loop
    ("pyree_local_task_execute_v2", "not a kernel's name"),
    ("_init", "not a kernel's name"),
    ("free@GLIBC_2.2.5", "not a kernel's name"),
    ("", "not a kernel's name"),
])
def test_a_cpu_export_must_be_a_kernel_the_library_defines(images, name, why):
    code, names = images["cpu"]
    library = read_library(code, "elf-x86_64")
    check_kernel_symbols(library, names)
    with pytest.raises(ImageError, match=f"export 1 names '{name}', which is {why}"):
        check_kernel_symbols(library, [names[0], name])


def test_the_compiler_records_each_cpu_export(images):
    code, names = images["cpu"]
    library = read_library(code, "elf-x86_64")
    records = export_records(library, check_kernel_symbols(library, names), names)
    module = rt.read_module(compile_str(MLIR, CompileOptions(target_backends=["llvm-cpu"])))
    exports = module.tree.executables[0].cpu.exports
    assert [(r.workgroup_count, r.bindings) for r in records] == \
        [(x.workgroupCount, tuple((b.access, b.minLength) for b in x.bindings)) for x in exports]


def test_whole_ptx_passes_and_damaged_ptx_is_refused(images):
    code, names = images["ptx"]
    check_ptx(code, names)
    with pytest.raises(ImageError, match="braces do not balance"):
        check_ptx(code[:len(code) // 2], [])
    with pytest.raises(ImageError, match="declares no kernel 'k9_missing'"):
        check_ptx(code, names + ["k9_missing"])
    with pytest.raises(ImageError, match="declares no kernel"):
        check_ptx(code, [names[0][:-1]])              # a prefix of a kernel's name is not one
    with pytest.raises(ImageError, match="NUL byte"):
        check_ptx(code[:100] + b"\0" + code[100:], names)
    with pytest.raises(ImageError, match="lacks its .version and .target"):
        check_ptx(code.replace(b".version", b"//ersion"), names)
    with pytest.raises(ImageError, match="not text"):
        check_ptx(images["cubin"][0].replace(b"\0", b"\1"), names)


def test_whole_spirv_passes_and_every_cut_word_is_refused(images, tmp_path):
    """spirv-val agrees: the module is valid, and none of its cuts is."""
    spirv_val = require_tool("spirv-val", env="SPIRV_VAL")
    code, layouts = images["spirv"][0], images["spirv layouts"]
    check_spirv(code, layouts)
    for words in (1, 2, 3, 7, len(code) // 8):
        cut = code[:len(code) - 4 * words]
        with pytest.raises(ImageError, match="cut short"):
            check_spirv(cut, layouts)
        (tmp_path / "cut.spv").write_bytes(cut)
        assert subprocess.run([spirv_val, str(tmp_path / "cut.spv")], capture_output=True).returncode
    with pytest.raises(ImageError, match="no GLCompute entry point named nope"):
        check_spirv(code, [("nope", 3)])
    with pytest.raises(ImageError, match="not a whole number of words"):
        check_spirv(code[:-2], layouts)
    with pytest.raises(ImageError, match="magic"):
        check_spirv(b"\0" * 4 + code[4:], layouts)
    with pytest.raises(ImageError, match="version word"):
        check_spirv(code[:4] + (0x00020000).to_bytes(4, "little") + code[8:], layouts)


def test_a_kernel_may_use_only_the_bindings_its_layout_has(images):
    """The compiler's kernels use all their bindings: one fewer in the layout is refused."""
    code, layouts = images["spirv"][0], images["spirv layouts"]
    check_spirv(code, layouts)
    for name, count in layouts:
        with pytest.raises(ImageError, match=rf"kernel '{name}' uses descriptor set 0 binding "
                                             rf"{count - 1}, but its pipeline layout has "):
            check_spirv(code, [(name, count - 1)])


def test_an_amdgpu_code_objects_metadata_gives_each_kernels_arguments(images):
    from pyree.runtime.hal.images.amdgpu import _decode, kernel_arguments

    code, names = images["rocm"]
    arguments = kernel_arguments(read_elf(code, (EM_AMDGPU,), (ET_DYN,)))
    assert arguments == {name: (8, 8, 8) for name in names}   # two inputs and an output
    for damaged in (b"\x82\xa1a", b"\xdf\xff\xff\xff\xff", b"\x91" * 40 + b"\x00", b"\xc1"):
        with pytest.raises(ImageError, match="metadata"):
            _decode(damaged)


def test_a_launch_must_give_every_parameter_the_kernel_declares():
    from pyree.runtime.hal.kernel_parameters import check_dispatch, check_layout
    from pyree.runtime.hal.python_driver import HalError

    check_layout("k", (8, 8, 4), 2)
    check_dispatch("k", (8, 8, 4), 2, 1, "command 3 (dispatch)")
    with pytest.raises(HalError, match=r"kernel 'k' takes parameters of \[8, 4\] bytes, but the "
                                       r"module gives it 2 bindings \(8-byte addresses\) first"):
        check_layout("k", (8, 4), 2)
    with pytest.raises(HalError, match="push constants of at most 8 bytes after"):
        check_layout("k", (8, 16), 1)
    with pytest.raises(HalError, match=r"command 3 \(dispatch\): kernel 'k' takes 3 parameters, "
                                       r"the dispatch gives 2 bindings and 0 push constants"):
        check_dispatch("k", (8, 8, 4), 2, 0, "command 3 (dispatch)")
