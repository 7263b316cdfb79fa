"""CPU-only: the cuda compiler target (NVPTX via llvmlite) needs no GPU and no GPU driver."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kernel_zoo as zoo  # noqa: E402
from tooling import require_module, require_tool  # noqa: E402

require_module("xdsl")  # the compiler

from pyree.compiler import CompileError, CompileOptions, compile_str  # noqa: E402
from pyree.compiler import kernel as K  # noqa: E402
from pyree.compiler._fb.Module import ModuleT  # noqa: E402
from pyree.compiler.codegen.cuda import generate_ptx, resolve_target  # noqa: E402


@pytest.fixture
def ptxas() -> str:
    """The compiler assembles cubins with the same ptxas (``$PYREE_PTXAS`` or the PATH's)."""
    return require_tool("ptxas", env="PYREE_PTXAS")


ADD = (Path(__file__).parent.parent / "data" / "add.mlir").read_text()


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
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


@pytest.mark.parametrize("name, arch", [
    ("hopper", "sm_90a"), ("h100", "sm_90a"), ("H100", "sm_90a"), ("h200", "sm_90a"),
    ("sm_90a", "sm_90a"), ("sm_90", "sm_90"),
    ("ampere", "sm_80"), ("a100", "sm_80"), ("rtx3090", "sm_86"), ("rtx4090", "sm_89"),
    ("ada", "sm_89"), ("volta", "sm_70"), ("pascal", "sm_60"), ("p100", "sm_60"),
    ("turing", "sm_75"), ("sm_60", "sm_60"),
])
def test_target_names_resolve(name, arch):
    assert resolve_target(name).arch == arch


def test_unknown_target_lists_the_accepted_names():
    with pytest.raises(CompileError) as e:
        resolve_target("sm_42")
    assert "sm_42" in str(e.value) and "sm_90" in str(e.value) and "hopper" in str(e.value)
    assert "rtx4090" in str(e.value) and "default sm_80" in str(e.value)


def _cuda_executable(vmfb: bytes):
    from pyree.compiler._fb.Module import Module
    module = ModuleT.InitFromObj(Module.GetRootAs(vmfb, 0))
    (exe,) = module.executables
    return exe.cuda


def test_module_carries_ptx_and_a_cubin_for_the_exact_target(ptxas):
    cuda = _cuda_executable(compile_str(ADD, CompileOptions(target_backends=["cuda"],
                                                            cuda_target="hopper")))
    assert cuda.targetArch == b"sm_90a" and cuda.cubinArch == b"sm_90a"
    assert cuda.ptx.length > 0 and cuda.cubin.length > 0
    (export,) = cuda.exports
    assert len(export.gridSize) == 3 and len(export.blockSize) == 3
    assert [b.minLength for b in export.bindings] == [16, 16, 16]


def test_without_ptxas_the_module_carries_ptx_only(monkeypatch):
    monkeypatch.setenv("PYREE_PTXAS", "")
    cuda = _cuda_executable(compile_str(ADD, CompileOptions(target_backends=["cuda"])))
    assert cuda.targetArch == b"sm_80" and cuda.cubinArch == b"" and cuda.cubin.length == 0


def test_compiles_with_no_gpu_driver_loaded():
    code = ("import sys; from pyree.compiler import compile_str, CompileOptions; "
            f"compile_str({ADD!r}, CompileOptions(target_backends=['cuda'])); "
            "assert not any(m.startswith('cuda.bindings') for m in sys.modules), 'imported cuda'")
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYREE_PTXAS": ""})


def test_aligned_elementwise_uses_16_byte_accesses():
    ptx, _ = generate_ptx([zoo.add((64, 1024)), zoo.add((37, 48), "f16")], resolve_target("sm_90"))
    assert "ld.global.v4.b32" in ptx and "st.global.v4.b32" in ptx


def test_odd_shapes_fall_back_to_scalar_accesses():
    ptx, _ = generate_ptx([zoo.add((37, 53))], resolve_target("sm_90"))
    assert "ld.global.v4" not in ptx and "ld.global" in ptx


def test_templates_are_chosen_by_kernel_shape():
    ptx, _ = generate_ptx([zoo.row_sum(), zoo.matmul(1600, 1500, 67)], resolve_target("sm_90"))
    assert "shfl.sync.bfly" in ptx           # block reduction
    assert "ld.shared.v4" in ptx and "fma.rn.f32" in ptx  # tiled matmul, 128x128 tiles


def test_wgmma_on_sm_90a_only_and_without_serialization(ptxas, tmp_path):
    """The Hopper matmul: wgmma with the accumulators kept in place (ptxas warns when it must
    serialize wgmma because other instructions touch them), mma.sync elsewhere."""
    kernels = [zoo.matmul(256, 512, 192, "f16"), zoo.matmul(128, 384, 640, "f16")]
    ptx, launches = generate_ptx(kernels, resolve_target("hopper"))
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16") == 4
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16") == 4
    assert "mma.sync" not in ptx and "fence.proxy.async.shared::cta" in ptx
    assert [launch.grid for _, launch in launches] == [(2, 2, 1), (3, 1, 1)]
    src = tmp_path / "k.ptx"
    src.write_text(ptx)
    proc = subprocess.run([ptxas, "-arch=sm_90a", "-v", str(src), "-o", str(tmp_path / "k.cubin")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "serialized" not in proc.stderr and "spill" in proc.stderr
    assert " 0 bytes spill stores" in proc.stderr
    sm90, _ = generate_ptx(kernels, resolve_target("sm_90"))
    assert "wgmma" not in sm90 and "mma.sync" in sm90


def test_f64_transcendentals_are_refused_clearly():
    ix = (K.AffineExpr((1,)),)
    kernel = K.Kernel("exp64", (7,), 1, (K.Binding("f64", (7,), "read"), K.Binding("f64", (7,), "write")),
                      (K.Result(1, ix, K.Unary("exp", K.Load(0, ix, "f64"), "f64")),))
    with pytest.raises(CompileError, match="'exp' on f64 is not supported by the cuda backend"):
        generate_ptx([kernel], resolve_target("sm_90"))


@pytest.mark.parametrize("m, n, batch, tile", [
    (4096, 4096, 1, 128), (1600, 1500, 1, 128), (700, 900, 1, 64), (256, 196, 1, 32),
    (512, 49, 1, 32), (37, 53, 1, 32), (256, 196, 40, 128)])
def test_simt_matmul_tiles_fill_the_gpu(m, n, batch, tile):
    """The largest tile that still gives every multiprocessor a block: ResNet-18's batch-1 conv
    GEMMs (256 x 196, 512 x 49) got 4 to 32 blocks of 128x128 before."""
    from pyree.compiler.codegen.cuda.matmul import choose_tiling
    assert choose_tiling(m, n, batch).bm == tile
