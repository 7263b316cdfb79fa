"""CPU-only: the cuda target's executable (NVPTX via llvmlite) needs no GPU and no GPU driver:
every template assembles with ptxas; the PTX of the forked compile jobs merges into one module,
the same bytes on any number of cores; the module carries the PTX and a cubin for the exact
target (the PTX alone without ptxas)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import kernel_zoo as zoo
import pytest
from ptx_modules import assemble_verbose, cuda_executable
from tooling import require_module

require_module("xdsl")  # the compiler

from pyree.compiler import CompileError, CompileOptions, compile_str  # noqa: E402
from pyree.compiler.codegen.cuda import generate_ptx, resolve_target  # noqa: E402

ADD = (Path(__file__).resolve().parents[2] / "data" / "add.mlir").read_text()


@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "sm_100", "sm_120"])
def test_every_template_assembles_with_ptxas(ptxas, arch, tmp_path):
    target = resolve_target(arch)
    ptx, launches = generate_ptx([make() for make in zoo.ALL.values()], target)
    assert f".target {arch}" in ptx
    src = tmp_path / "k.ptx"
    src.write_text(ptx)
    proc = subprocess.run([ptxas, f"-arch={arch}", str(src), "-o", str(tmp_path / "k.cubin")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    for name, launch in launches:
        assert f".entry {name}(" in ptx
        assert all(g >= 1 for g in launch.grid) and 32 <= launch.block[0] <= 1024


def test_every_kernel_fits_its_block_in_the_register_file(ptxas, tmp_path):
    """Each entry states its block size (.maxntid), so ptxas keeps registers x threads within
    an SM's 65536 registers (spilling if it must): without it a 1024-thread block whose kernel
    took 71 registers (ONNX's 5-D NegativeLogLikelihoodLoss) failed to launch, out of resources."""
    import re

    ptx, launches = generate_ptx([make() for make in zoo.ALL.values()], resolve_target("sm_90"))
    report = assemble_verbose(ptxas, ptx, "sm_90", tmp_path)
    used = dict(re.findall(r"Compiling entry function '(\w+)'.*?Used (\d+) registers", report,
                           re.S))
    for name, launch in launches:
        threads = launch.block[0] * launch.block[1] * launch.block[2]
        entry = ptx.split(f".entry {name}(")[1].split("{")[0]
        assert re.search(rf"\.maxntid {threads}, 1, 1|\.maxntid {threads}\b", entry), name
        assert int(used[name]) * threads <= 65536, (name, used[name], threads)


def test_ptx_is_the_same_on_one_core_and_on_many(ptxas, monkeypatch, tmp_path):
    """LLVM compiles the kernels as a fixed number of modules in forked processes, whose PTX is
    merged: every kernel once, assembled by ptxas, and the same bytes however many cores run it."""
    from pyree.compiler.codegen.common import parallel

    kernels = [make() for make in zoo.ALL.values()]
    target = resolve_target("sm_90a")
    monkeypatch.setattr(parallel, "cores", lambda: 4)
    ptx, launches = generate_ptx(kernels, target)
    monkeypatch.setattr(parallel, "cores", lambda: 1)
    assert generate_ptx(kernels, target) == (ptx, launches)
    assert ptx.count(".address_size") == 1
    for name, _ in launches:
        assert ptx.count(f".entry {name}(") == 1
    assemble_verbose(ptxas, ptx, "sm_90a", tmp_path)


def test_merging_ptx_refuses_a_name_defined_twice():
    from pyree.compiler.codegen.cuda.ptx import merge

    head = "//\n.version 8.0\n.target sm_80\n.address_size 64\n"
    one = head + "\n.visible .entry k0(\n)\n{\n\tret;\n}\n"
    two = head + "\n.extern .shared .align 16 .b8 k1_smem[];\n.visible .entry k1(\n)\n{\n\tret;\n}\n"
    assert merge([one, two]).count(".address_size") == 1
    with pytest.raises(CompileError, match="'k0' is defined by two PTX modules"):
        merge([one, one])
    with pytest.raises(CompileError, match="differ in their headers"):
        merge([one, two.replace("sm_80", "sm_90")])


def _fail_on(value: int) -> int:
    if value == 3:
        raise CompileError("three is refused", "in.mlir:3:1")
    if value == 5:
        raise KeyError("five")
    return value * value


def test_jobs_in_forked_processes_return_in_order_and_raise_what_a_child_raised(monkeypatch):
    from pyree.compiler.codegen.common import parallel

    monkeypatch.setattr(parallel, "cores", lambda: 3)
    assert parallel.map_jobs(_fail_on, [0, 1, 2, 4, 6, 7, 8]) == [0, 1, 4, 16, 36, 49, 64]
    for items in ([0, 1, 2, 4, 3, 6], [3, 1, 2]):  # 3 in a child (index 4), then here (index 0)
        with pytest.raises(CompileError) as err:
            parallel.map_jobs(_fail_on, items)
        assert str(err.value) == "in.mlir:3:1: error: three is refused"
    with pytest.raises(CompileError, match="internal compiler error: KeyError: 'five'"):
        parallel.map_jobs(_fail_on, [0, 5, 1])


def test_module_carries_ptx_and_a_cubin_for_the_exact_target(ptxas):
    cuda = cuda_executable(compile_str(ADD, CompileOptions(target_backends=["cuda"],
                                                            cuda_target="hopper")))
    assert cuda.targetArch == b"sm_90a" and cuda.cubinArch == b"sm_90a"
    assert cuda.ptx.length > 0 and cuda.cubin.length > 0
    (export,) = cuda.exports
    assert len(export.gridSize) == 3 and len(export.blockSize) == 3
    assert [b.minLength for b in export.bindings] == [16, 16, 16]


def test_without_ptxas_the_module_carries_ptx_only(monkeypatch):
    monkeypatch.setenv("PYREE_PTXAS", "")
    cuda = cuda_executable(compile_str(ADD, CompileOptions(target_backends=["cuda"])))
    assert cuda.targetArch == b"sm_80" and cuda.cubinArch == b"" and cuda.cubin.length == 0


def test_a_ptxas_older_than_the_ptx_version_leaves_ptx_only(monkeypatch, tmp_path):
    """sm_90a emits PTX 8.3; the ptxas of CUDA 12.0-12.2 refuses that version, and the module
    then carries the PTX alone (the driver compiles it) instead of failing the compile."""
    old = tmp_path / "ptxas"
    old.write_text("#!/bin/sh\necho \"ptxas fatal   : Unsupported .version 8.3; current version is "
                   "'8.0'\" >&2\nexit 255\n")
    old.chmod(0o755)
    monkeypatch.setenv("PYREE_PTXAS", str(old))
    cuda = cuda_executable(compile_str(ADD, CompileOptions(target_backends=["cuda"],
                                                            cuda_target="sm_90a")))
    assert cuda.targetArch == b"sm_90a" and cuda.ptx.length > 0 and cuda.cubin.length == 0


def test_compiles_with_no_gpu_driver_loaded():
    code = ("import sys; from pyree.compiler import compile_str, CompileOptions; "
            f"compile_str({ADD!r}, CompileOptions(target_backends=['cuda'])); "
            "assert not any(m.startswith('cuda.bindings') for m in sys.modules), 'imported cuda'")
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYREE_PTXAS": ""})


def test_templates_are_chosen_by_kernel_shape():
    ptx, _ = generate_ptx([zoo.row_sum(), zoo.matmul(1600, 1500, 67)], resolve_target("sm_90"))
    assert "shfl.sync.bfly" in ptx           # block reduction
    assert "ld.shared.v4" in ptx and "fma.rn.f32" in ptx  # tiled matmul, 128x128 tiles


@pytest.mark.parametrize("name, arch", [("blackwell", "sm_100"), ("b200", "sm_100"),
                                        ("GB200", "sm_100"), ("rtx5090", "sm_120"),
                                        ("RTX 5070 Ti", "sm_120"), ("sm_100a", "sm_100a"),
                                        ("sm_120a", "sm_120a")])
def test_blackwell_names_compile_with_a_cubin_for_the_arch(ptxas, name, arch):
    """B200/GB200 and RTX 50-series names (IREE 3.13 refuses them, or crashes on the product
    names) resolve to their arch; the f16 matmul runs mma.sync there (wgmma is sm_90a's), and
    ptxas assembles the module's cubin for exactly that arch."""
    target = resolve_target(name)
    assert target.arch == arch and target.ptx_version >= 86
    ptx, _ = generate_ptx([zoo.ALL["matmul_f16"]()], target)
    assert "mma.sync" in ptx and "wgmma" not in ptx and f".target {arch}" in ptx
    cuda = cuda_executable(compile_str(ADD, CompileOptions(target_backends=["cuda"],
                                                            cuda_target=name)))
    assert cuda.targetArch == arch.encode() and cuda.cubinArch == arch.encode()
    assert cuda.cubin.length > 0
