"""CPU-only: tensor-core contractions with run-time sizes (codegen/cuda/run_time_mma.py). The
programs of tests/run_time_mma_cases.py (linear layers with run-time rows, attention's batched
products over a run-time sequence) take mma.sync (sm_80) or wgmma (sm_90a), not the SIMT
template; their PTX assembles; the grid the runtime evaluates picks, at every M, the tile the
static template would (the first of least waves_cost among the candidates); and the kernel,
run on this CPU (nvptx_on_cpu.py), takes the same tile per dispatch and matches float64 with NaN,
inf and -0 rows, at sizes that take each candidate, and with M, N and K all at run time (odd
strides on the scalar path, multiples of 8 on cp.async's, K = 0). The programs run on
local-task here too (their reference checked); on the GPU:
tests/drivers/cuda/test_cuda_run_time_mma_on_gpu.py."""

from __future__ import annotations

import functools

import kernel_zoo as zoo
import numpy as np
import pytest
import run_time_mma_cases as cases
from ptx_modules import assemble_verbose, cuda_executable
from tooling import require_module

require_module("xdsl")  # the compiler

import pyree.runtime as rt  # noqa: E402
from nvptx_on_cpu import Emulated  # noqa: E402
from pyree.compiler import CompileOptions, compile_str  # noqa: E402
from pyree.compiler.codegen.common.addressing import ceil_div  # noqa: E402
from pyree.compiler.codegen.cuda import TEMPLATES, matmul_mma, matmul_wgmma, resolve_target, run_time_mma  # noqa: E402
from pyree.compiler.codegen.interface import choose  # noqa: E402
from pyree.compiler.sizes import Size  # noqa: E402
from pyree.runtime.module.size_exprs import evaluate  # noqa: E402

P0, P1, P2 = (Size.symbol(f"p{k}") for k in range(3))


def ptx_of(name: str, arch: str, tmp_path) -> tuple:
    out = tmp_path / "dump"
    mode = cases.CASES[name][5] if name in cases.CASES else "strict"
    options = CompileOptions(target_backends=["cuda"], cuda_target=arch, cuda_f32_matmul=mode,
                             dump_executables_to={"binaries": [str(out)]})
    exe = cuda_executable(compile_str(cases.program(name), options))
    (ptx,) = out.glob("*.ptx")
    return exe, ptx.read_text()


def static_choice(tiles, m: int, n: int, bm_of):
    """The tile the static templates' ``min`` takes among ``tiles`` for m rows."""
    return min(tiles, key=lambda t: matmul_mma.waves_cost(m, n, 1, bm_of(t), t.bn))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("name", cases.NAMES)
def test_products_with_run_time_sizes_take_tensor_cores(ptxas, name, arch, tmp_path):
    exe, ptx = ptx_of(name, arch, tmp_path)
    assemble_verbose(ptxas, ptx, arch, tmp_path)
    ty = cases.BATCHED[name][2] if name in cases.BATCHED else cases.CASES[name][2]
    wgmma = arch == "sm_90a" and ty != "f32"
    assert ("wgmma.mma_async" in ptx) == wgmma
    assert "mma.sync.aligned" in ptx or wgmma
    if name in cases.BATCHED:
        return
    # the product whole comes last: before it, versions that split K for fewer rows, a partial
    # product and its fold each (flow/versions.py)
    export = exe.exports[-1]
    assert len(exe.exports) % 2 == 1
    k, n, _, _, epilogue, _ = cases.CASES[name]
    if wgmma:
        tiles = matmul_wgmma.RUN_TIME_TILES[-1:] if epilogue == "gelu" else matmul_wgmma.RUN_TIME_TILES
        bm_of = lambda t: matmul_wgmma.BM  # noqa: E731
    else:
        tiles, bm_of = matmul_mma.RUN_TIME_TILES, lambda t: t.bm
    taken = set()
    for m in [*range(0, 300, 7), 511, 1000, 1024, 2047, 4096, 8191, 16384, 65535]:
        t = static_choice(tiles, m, n, bm_of)
        taken.add(t)
        grid = [evaluate([int(v) for v in e.code], [m]) for e in export.gridSizeExpr]
        assert grid == [ceil_div(n, t.bn), ceil_div(m, bm_of(t)), 1], (m, t)
    assert len(taken) == len(tiles) or epilogue == "gelu" or n < 300, taken


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_split_versions_take_tensor_cores(arch):
    """A long-K product's versions for few rows (flow/versions.py): its partial products, K in
    chunks and the chunks a batch, run on the tensor-core templates as the product whole does."""
    from pyree.compiler.flow.kernels import outline
    from pyree.compiler.flow.passes import flow_passes, run_passes
    from pyree.compiler.input import import_mlir
    from pyree.compiler.tensor_program import walk_ops

    (function,) = import_mlir(cases.program("f16_nk_long_k"), "t.mlir").functions
    flowed = run_passes(function, flow_passes(gpu=True, implicit_gemm=True))
    partials = [op for op in walk_ops(flowed.ops) if "partial" in getattr(op, "origin", "")]
    assert partials
    for op in partials:
        assert choose(TEMPLATES, outline(op, "k"), resolve_target(arch))[0] is run_time_mma


def test_which_products_with_run_time_sizes_take_tensor_cores():
    """Any of M, N and K at run time, f16 operands; strict f32 stays on dynamic.py's SIMT kernel
    (tensor cores would round it to TF32), unless --pyree-cuda-f32-matmul says tf32."""
    for arch in ("sm_80", "sm_90a"):
        for m, n, k in [(P0, 64, 32), (64, P0, 32), (64, 32, P0), (P0, P1, P2)]:
            for dtype, mode, tc in [("f16", "strict", True), ("f32", "strict", False), ("f32", "tf32", True)]:
                template, _ = choose(TEMPLATES, zoo.matmul(m, n, k, dtype, "f32"), resolve_target(arch, mode))
                assert (template is run_time_mma) == tc, (arch, m, n, k, dtype, mode)
        batched = zoo.linear(P1, 24, 40, "bf16", batch=P0)  # test_a_run_time_batch's
        assert choose(TEMPLATES, batched, resolve_target(arch))[0] is run_time_mma


@functools.cache
def emulated_linear() -> Emulated:
    """f16 [M, 80] x [80, 192] + bias, relu, on mma.sync; FILL_BLOCKS 1, so that a few blocks'
    worth of rows already prefer another tile (M 65 to 128: 128x128, else 64x64)."""
    patched = pytest.MonkeyPatch()
    patched.setattr(matmul_mma, "FILL_BLOCKS", 1)
    try:
        return Emulated(zoo.matmul(P0, 192, 80, "f16", "f32", relu_bias=True))
    finally:
        patched.undo()


@pytest.mark.parametrize("m", [1, 65, 130])
def test_the_kernel_takes_the_grids_tile_per_dispatch(m):
    em = emulated_linear()
    t = min(matmul_mma.RUN_TIME_TILES,  # waves_cost with a wave of one block
            key=lambda t: ceil_div(m, t.bm) * ceil_div(192, t.bn) * (t.bm * t.bn + 64 * (t.bm + t.bn)))
    assert (t.bm, t.bn) == ((64, 64) if m <= 64 or m > 128 else (128, 128))
    assert em.grid([m]) == (ceil_div(192, t.bn), ceil_div(m, t.bm), 1)
    rng = np.random.default_rng(m)
    a = rng.standard_normal((m, 80)).astype(np.float16)
    a[0, 1] = np.inf if m > 1 else a[0, 1]
    if m > 2:
        a[1, 2], a[2] = np.nan, -0.0
    b = (rng.standard_normal((80, 192)) / 9).astype(np.float16)
    bias = rng.standard_normal(192).astype(np.float32)
    out = np.full((m, 192), 7.0, np.float32)
    assert em([a, b, bias, out], [m])
    with np.errstate(invalid="ignore"):
        ref = np.maximum(a.astype(np.float64) @ b.astype(np.float64) + bias, 0)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


@functools.cache
def emulated_mnk() -> Emulated:
    """f16 [M, K] x [K, N] + bias, relu, every extent at run time (push constants 0, 1, 2)."""
    return Emulated(zoo.matmul(P0, P1, P2, "f16", "f32", relu_bias=True))


@pytest.mark.parametrize("m, n, k", [(1, 1, 1), (7, 13, 5), (65, 16, 24), (40, 72, 136), (3, 9, 0)])
def test_every_extent_at_run_time(m, n, k):
    """Odd strides take the scalar loads, multiples of 8 cp.async (the check per dispatch); K = 0
    leaves the sums empty."""
    em = emulated_mnk()
    rng = np.random.default_rng(m + n + k)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = (rng.standard_normal((k, n)) / 3).astype(np.float16)
    if m > 1 and k > 1:
        a[0, 0], a[1, 1] = np.nan, -np.inf
    bias = rng.standard_normal(n).astype(np.float32)
    out = np.full((m, n), 7.0, np.float32)
    assert em([a, b, bias, out], [m, n, k])
    with np.errstate(invalid="ignore"):
        ref = np.maximum(a.astype(np.float64) @ b.astype(np.float64) + bias, 0)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


@functools.cache
def emulated_batched() -> Emulated:
    """bf16 x[b, m, 40] @ w[b, 24, 40]^T + bias, truncated to bf16: a run-time batch (push
    constant 0) and rows (1), the batch strides sizes."""
    return Emulated(zoo.linear(P1, 24, 40, "bf16", batch=P0))


@pytest.mark.parametrize("batch, m", [(1, 1), (3, 37), (2, 70)])
def test_a_run_time_batch(batch, m):
    import ml_dtypes
    em = emulated_batched()
    rng = np.random.default_rng(batch * m)
    x = rng.standard_normal((batch, m, 40)).astype(ml_dtypes.bfloat16)
    w = (rng.standard_normal((batch, 24, 40)) / 6).astype(ml_dtypes.bfloat16)
    bias = rng.standard_normal(24).astype(ml_dtypes.bfloat16)
    out = np.full((batch, m, 24), 7.0, ml_dtypes.bfloat16)
    assert em([x, w, bias, out], [batch, m])
    ref = x.astype(np.float64) @ w.astype(np.float64).transpose(0, 2, 1) + bias.astype(np.float64)
    np.testing.assert_allclose(out.astype(np.float64), ref, rtol=2 ** -7, atol=2 ** -7)


@pytest.mark.parametrize("name", cases.NAMES)
def test_the_programs_match_their_reference_on_local_task(name):
    module = rt.load_module(compile_str(cases.program(name), CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    for rows in (0, 1, 3, 65):
        args = cases.inputs(name, rows, rows)
        cases.check(name, module[cases.function(name)](*args).to_host(), args)
