"""CPU-only: the cuda target's matmul templates (wgmma on sm_90a, mma.sync, SIMT, matrix-vector):
the instructions each shape and operand type takes, its tiles, its stores, no spills (ptxas -v)."""

from __future__ import annotations

import re

import cases
import kernel_zoo as zoo
import pytest
from dtype_cases import ptx_of
from ptx_modules import assemble_verbose
from tooling import require_module

require_module("xdsl")  # the compiler

from pyree.compiler import CompileOptions, compile_str  # noqa: E402
from pyree.compiler import kernel as K  # noqa: E402
from pyree.compiler.codegen.cuda import generate_ptx, resolve_target  # noqa: E402


def entry_text(ptx: str, name: str) -> str:
    """Kernel ``name``'s PTX, from its ``.entry`` to the next module-scope line."""
    start = ptx.index(f".entry {name}(")
    end = re.compile(r"^\S", re.M).search(ptx, ptx.index("\n}", start) + 2)
    return ptx[start:end.start() if end else len(ptx)]


def test_wgmma_on_sm_90a_only_and_without_serialization(ptxas, tmp_path):
    """The Hopper matmul at each tile width, f16 and bf16, B as [k, n] (transposed by the
    instruction) and [n, k]: wgmma with the accumulators kept in place (ptxas warns when it must
    serialize wgmma because other instructions touch them), no spills; mma.sync elsewhere."""
    kernels = [zoo.matmul(2048, 2048, 192, "f16", "f32"), zoo.linear(2048, 1024, 640, "bf16"),
               zoo.linear(37, 53, 29, "bf16"), zoo.linear(129, 257, 72, "f16", batch=3, b_nk=False)]
    ptx, launches = generate_ptx(kernels, resolve_target("hopper"))
    entries = [entry_text(ptx, name) for name, _ in launches]
    for entry, (n, dtype, trans_b) in zip(entries, [(256, "f16", 1), (128, "bf16", 0), (64, "bf16", 0),
                                                    (64, "f16", 1)]):
        count = entry.count(f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{dtype}.{dtype}")
        assert count and count % 4 == 0  # four k16 steps per k tile (short k loops unroll)
        assert f"p, 1, 1, 0, {trans_b};" in entry
    assert "mma.sync" not in ptx and "fence.proxy.async.shared::cta" in ptx
    assert [launch.grid for _, launch in launches] == [(8, 16, 1), (8, 16, 1), (1, 1, 1), (5, 2, 3)]
    log = assemble_verbose(ptxas, ptx, "sm_90a", tmp_path)
    assert "serialized" not in log
    assert re.findall(r"(\d+) bytes spill stores", log) == ["0"] * len(kernels)
    sm90, _ = generate_ptx(kernels, resolve_target("sm_90"))
    assert "wgmma" not in sm90 and "mma.sync" in sm90


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_mma_sync_takes_bf16_a_weight_batches_and_odd_sizes(ptxas, arch, tmp_path):
    """mma.sync for bf16 and f16: ldmatrix.trans stages a [k, n] B, plain ldmatrix an [n, k] one;
    whole tiles copy with cp.async, tails with cp.async's zero-filling source size, rows that
    are not 16-byte aligned (k = 29) with scalar loads."""
    kernels = [zoo.linear(2048, 2048, 192, "bf16"), zoo.linear(37, 53, 29, "bf16"),
               zoo.linear(129, 257, 72, "f16", batch=3, b_nk=False)]
    ptx, launches = generate_ptx(kernels, resolve_target(arch))
    whole, odd, batch = (entry_text(ptx, name) for name, _ in launches)
    assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in whole + odd
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in batch
    assert "ldmatrix.sync.aligned.m8n8.x4.trans" not in whole + odd and "x4.trans" in batch
    assert re.search(r"cp\.async\.cg\.shared\.global \[%rd\d+\], \[%rd\d+\], 16;", whole)
    assert not re.search(r"cp\.async\.cg\.shared\.global \[%rd\d+\], \[%rd\d+\], 16, %r", whole)
    assert re.search(r"cp\.async\.cg\.shared\.global \[%rd\d+\], \[%rd\d+\], 16, %r", batch)
    assert "cp.async.cg.shared.global" not in odd and "ld.global.b16" in odd
    assert [launch.grid for _, launch in launches] == [(8, 16, 1), (1, 1, 1), (5, 3, 3)]
    log = assemble_verbose(ptxas, ptx, arch, tmp_path)
    assert re.findall(r"(\d+) bytes spill stores", log) == ["0"] * len(kernels)


@pytest.mark.parametrize("arch, instruction", [("sm_90a", "wgmma.mma_async.sync.aligned.m64n"),
                                               ("sm_80", "mma.sync.aligned.m16n8k16.row.col.f32.")])
def test_f16_bf16_cases_run_on_tensor_cores(ptxas, arch, instruction):
    """Every tensor-core case of cases.py (the GPU run checks their values) compiles, PTX and
    cubin, to tensor-core instructions of its operand type; f32 x f32 stays on the SIMT template
    (tensor cores would round its inputs to TF32)."""
    import pyree.runtime as rt
    options = CompileOptions(target_backends=["cuda"], cuda_target=arch)
    for name, (mlir, args, *_) in {**cases.TENSOR_CORE_CASES,
                                   "matmul_f32_37x53x61": cases.CASES["matmul_f32_37x53x61"]}.items():
        module = rt.read_module(compile_str(mlir, options))
        (executable,) = module.tree.executables
        assert executable.cuda.cubin.length > 0, name
        ptx = bytes(module.bytes_of(executable.cuda.ptx)).decode()
        dtype = {"float16": "f16", "bfloat16": "bf16", "float32": None}[args[0][1]]
        if dtype is None:
            assert "mma" not in ptx and "fma.rn.f32" in ptx, name
            continue
        lines = [line for line in ptx.splitlines() if instruction in line]
        assert lines and all(f"{dtype}.{dtype}" in line for line in lines), name


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_matrix_vector_products_take_their_template(ptxas, arch, tmp_path):
    """Every matrix-vector case of cases.py (m or n <= 4; the GPU run checks their values) compiles to
    matmul_gemv's kernel, whatever the operand types: no tensor-core or tiled-SIMT code, its
    shared slice sums present, no spills."""
    import pyree.runtime as rt
    options = CompileOptions(target_backends=["cuda"], cuda_target=arch)
    names = [n for n in cases.CASES if "gemv" in n or n in ("mm_f16_1x512x4096", "bmm_bf16_32x1x512x128")]
    assert len(names) == 11
    for name in names:
        module = rt.read_module(compile_str(cases.CASES[name][0], options))
        (executable,) = module.tree.executables
        assert executable.cuda.cubin.length > 0, name
        ptx = bytes(module.bytes_of(executable.cuda.ptx)).decode()
        contraction = re.search(r"\.entry (k0_\w+)\(.*?\n}", ptx, re.S).group(0)
        assert "_sums" in contraction and "mma" not in contraction, name
        log = assemble_verbose(ptxas, ptx, arch, tmp_path)
        assert set(re.findall(r"(\d+) bytes spill stores", log)) == {"0"}, name


@pytest.mark.parametrize("m, n, batch, wgmma_bn, mma_tile", [
    (4096, 4096, 1, 256, (128, 256)), (2048, 2048, 1, 256, (128, 256)),
    (1024, 3072, 1, 192, (128, 256)), (128, 50257, 1, 192, (128, 128)),
    (128, 2304, 1, 64, (64, 64)), (1, 4096, 1, 64, (64, 64)), (1, 512, 32, 128, (64, 128)),
    (1024, 64, 12, 64, (64, 64))])
def test_tensor_core_tiles_fill_the_gpu(m, n, batch, wgmma_bn, mma_tile):
    """Issue 11: BERT's qkv (128 x 2304) made 9 blocks of 128x256 for 132 multiprocessors. The
    tile with the least work on the busiest multiprocessor wins, the larger one on a tie; wgmma's
    widths run in steps of 32 (1024 x 3072 in two waves of n192, not three of n256)."""
    from pyree.compiler.codegen.cuda import matmul_mma, matmul_wgmma
    tile = matmul_mma.choose_tile(m, n, batch)
    assert (matmul_wgmma.choose_tile(m, n, batch).bn, (tile.bm, tile.bn)) == (wgmma_bn, mma_tile)


@pytest.mark.parametrize("m, n, batch, tile", [
    (4096, 4096, 1, 128), (1600, 1500, 1, 128), (700, 900, 1, 64), (256, 196, 1, 32),
    (512, 49, 1, 32), (37, 53, 1, 32), (256, 196, 40, 128)])
def test_simt_matmul_tiles_fill_the_gpu(m, n, batch, tile):
    """The largest tile that still gives every multiprocessor a block: ResNet-18's batch-1 conv
    GEMMs (256 x 196, 512 x 49) got 4 to 32 blocks of 128x128 before."""
    from pyree.compiler.codegen.common.llvm_gpu.matmul import choose_tiling
    assert choose_tiling(m, n, batch).bm == tile


@pytest.mark.parametrize("name, vector", [("linear_f32_relu_1030x2052x45", "v4"),
                                          ("linear_f32_relu_700x900x133", "v2"),
                                          ("matmul_f32_257x131x67", None)])
def test_simt_matmul_stores_aligned_runs_as_vectors(name, vector):
    """Rows whose length is a multiple of the thread's run (4 columns on 128x128 tiles, 2 on
    64x64) are stored a run per instruction, with the scalar stores kept for the tails; an odd
    row length (131) has only scalar stores. The GPU run checks the values (cases.py)."""
    vmfb = compile_str(cases.CASES[name][0],
                       CompileOptions(target_backends=["cuda"], cuda_target="sm_90"))
    ptx = ptx_of(vmfb)
    vectors = re.findall(r"st\.global\.(v\d)\.b32", ptx)
    assert set(vectors) == ({vector} if vector else set())
    assert re.search(r"st\.global\.b32", ptx)  # the tails


def test_a_math_epilogue_takes_the_narrow_wgmma_tile():
    """GPT-2's linear + bias + GELU(tanh) unrolls its epilogue per accumulator: n64 ran it in
    0.061 ms on the H100 where n256 took 0.112 ms. A plain or bias-only epilogue keeps the
    tile of least ``waves_cost`` (n192: 1024 x 3072 in two waves)."""
    import dataclasses

    from pyree.compiler.codegen.cuda import matmul_wgmma
    plain = zoo.linear(1024, 3072, 768, "f16")
    r = plain.results[0]
    x = r.epilogue.x  # acc + bias, before the truncation
    gelu = K.Binary("mul", x, K.Unary("tanh", x, "f32"), "f32")
    with_gelu = dataclasses.replace(plain, results=(dataclasses.replace(
        r, epilogue=K.Cast("fptrunc", gelu, "f16")),))
    widths = [matmul_wgmma.plan(k, resolve_target("sm_90a"))[1][1][0].bn for k in (plain, with_gelu)]
    assert widths == [192, 64]
