"""CPU-only: kernels with run-time sizes on cuda (codegen/common/llvm_gpu/dynamic.py): the programs
of tests/e2e/test_dynamic_shapes.py compile, their PTX assembles with ptxas, their exports carry
the grid as SizeExprs over the push constants (0 blocks where the sizes are 0), their kernels take
the push constants after the bindings and trap on sizes that would be negative. Running them is
tests/drivers/cuda/test_cuda_dynamic.py's, on a GPU."""

from __future__ import annotations

import functools
import re

import kernel_zoo as zoo
import numpy as np
import pytest
from e2e.test_dynamic_shapes import EXP_ADD_ROWSUM, MATMUL, SHORTER, _Head, _SmallCnn
from ptx_modules import assemble_verbose, cuda_executable
from tooling import require_module

require_module("xdsl")  # the compiler

from nvptx_on_cpu import Emulated  # noqa: E402
from pyree.compiler import CompileOptions, compile_str  # noqa: E402
from pyree.compiler.codegen.cuda import generate_ptx, resolve_target  # noqa: E402
from pyree.compiler.kernel import (  # noqa: E402
    DTYPES,
    Acc,
    AffineExpr,
    Binary,
    Binding,
    Cast,
    Const,
    Final,
    Gather,
    Kernel,
    Load,
    LoopIndex,
    Result,
    SizeValue,
    Unary,
    bind_sizes,
    has_run_time_sizes,
    is_float,
    push_constant_count,
)
from pyree.compiler.kernel import evaluate as evaluate_kernel  # noqa: E402
from pyree.compiler.kernel.analysis import size_code  # noqa: E402
from pyree.compiler.sizes import Size, is_static  # noqa: E402
from pyree.runtime.module.size_exprs import evaluate  # noqa: E402

CASES = {"exp_add_rowsum": EXP_ADD_ROWSUM, "matmul": MATMUL, "shorter": SHORTER}  # RESHAPE: no kernel


@functools.cache
def torch_mlir(name: str) -> str:
    """The e2e file's torch programs with a dynamic batch: softmax(relu(linear)), a CNN,
    layernorm."""
    import torch
    from pyree.compiler import import_torch
    batch = torch.export.Dim("batch", min=1, max=4096)
    if name == "softmax_head":
        return import_torch(_Head().eval(), torch.randn(4, 16), dynamic_shapes={"x": {0: batch}})
    if name == "cnn":
        return import_torch(_SmallCnn().eval(), torch.randn(2, 3, 17, 13),
                            dynamic_shapes={"x": {0: batch}})
    return import_torch(torch.nn.LayerNorm(37).eval(), torch.randn(3, 37),
                        dynamic_shapes={"input": {0: batch}})


TORCH = ("softmax_head", "cnn", "layernorm")


def compiled(mlir: str, tmp_path, arch: str = "sm_80"):
    """(the module's CudaExecutableT, its PTX as dumped) for ``mlir``."""
    out = str(tmp_path / "dump")
    options = CompileOptions(target_backends=["cuda"], cuda_target=arch,
                             dump_executables_to={"binaries": [out]})
    exe = cuda_executable(compile_str(mlir, options))
    (ptx,) = (tmp_path / "dump").glob("*.ptx")
    return exe, ptx.read_text()


def check_grid(export, pushed: int) -> None:
    """3 SizeExprs whose blocks are 0 where every size is 0 (nothing to do: no launch) and at
    least 1 each where every size is 1; ``grid_size`` then [0, 0, 0]."""
    assert pushed >= 1
    programs = [[int(v) for v in e.code] for e in export.gridSizeExpr]
    assert len(programs) == 3
    assert np.prod([evaluate(p, [0] * pushed) for p in programs]) == 0
    assert min(evaluate(p, [1] * pushed) for p in programs) >= 1
    assert list(export.gridSize) == [0, 0, 0]


@pytest.mark.parametrize("name", [*sorted(CASES), *TORCH])
def test_dynamic_kernels_assemble_and_export_their_grid(ptxas, name, tmp_path):
    exe, ptx = compiled(CASES[name] if name in CASES else torch_mlir(name), tmp_path)
    assemble_verbose(ptxas, ptx, "sm_80", tmp_path)
    assert exe.cubin.length > 0  # the compiler's own ptxas run took it too
    assert exe.exports
    for export in exe.exports:
        params = re.search(rf"\.entry {export.name.decode()}\((.*?)\)", ptx, re.S).group(1)
        pushed = params.count(".u64") - len(export.bindings)
        assert export.gridSizeExpr is not None and len(export.gridSizeExpr) == 3
        check_grid(export, pushed)


def test_elementwise_grid_is_one_thread_per_element_or_group_up_to_its_cap(tmp_path):
    """(1000 rows of 1000: groups of four; 1001 of 1001: elements.)"""
    exe, _ = compiled(EXP_ADD_ROWSUM, tmp_path)
    (exp,) = [e for e in exe.exports if int(e.blockSize[0]) == 256 and not len(e.bindings) == 2]
    grid = list(exp.gridSizeExpr[0].code)
    assert [evaluate(grid, [m, n]) for m, n in [(1, 1), (7, 13), (1000, 1000), (1001, 1001),
                                                 (10**5, 10**5)]] == [1, 1, 977, 3915, 65535]


def test_an_access_proven_only_at_run_time_is_checked_by_the_kernel():
    """out[p1] = x[p2 + i] of x[p0]: no compile-time proof keeps the load in range, so each
    thread checks the dispatch's sizes first and traps where the slice would leave x."""
    p0, p1, p2 = (Size.symbol(f"p{k}") for k in range(3))
    kernel = Kernel("slice", (p1,), 1, (Binding("f32", (p0,), "read"), Binding("f32", (p1,), "write")),
                    (Result(1, (AffineExpr((1,), 0),), Load(0, (AffineExpr((1,), p2),), "f32")),))
    ptx, launches = generate_ptx([kernel], resolve_target("sm_80"))
    assert "trap;" in ptx
    (_, launch), = launches
    assert not is_static(launch.grid[0])
    ptx, _ = generate_ptx([zoo.add((37, 53))], resolve_target("sm_80"))
    assert "trap;" not in ptx


def test_static_kernels_take_no_push_constants(tmp_path):
    static = EXP_ADD_ROWSUM.replace("?x?", "7x13").replace("(%m, %n)", "()") \
        .replace("(%m)", "()").replace("?xf32", "7xf32")
    exe, ptx = compiled(static, tmp_path)
    for export in exe.exports:
        assert export.gridSizeExpr is None and min(export.gridSize) >= 1
        params = re.search(rf"\.entry {export.name.decode()}\((.*?)\)", ptx, re.S).group(1)
        assert params.count(".u64") == len(export.bindings)


# ---- the kernels' arithmetic, run on this CPU (nvptx_on_cpu.py) --------------------------------
P0, P1, P2, P3 = (Size.symbol(f"p{k}") for k in range(4))


def ix(n: int, *dims: int, const=0) -> AffineExpr:
    """The index ``sum(loop[d] * coefficient)`` over ``n`` loops; ``dims`` pairs (loop, coeff)."""
    coeffs = [0] * n
    for loop, c in zip(dims[::2], dims[1::2]):
        coeffs[loop] = c
    return AffineExpr(tuple(coeffs), const)


@functools.cache
def emulated(kernel: Kernel) -> Emulated:
    return Emulated(kernel)


def run_emulated(kernel: Kernel, sizes: tuple, inputs: dict, seed: int) -> list[np.ndarray]:
    """The kernel's buffers after one launch at push constants ``sizes`` (outputs start as
    garbage), with the push constants' slots carrying garbage high halves."""
    bound = bind_sizes(kernel, {f"p{k}": n for k, n in enumerate(sizes)})
    rng = np.random.default_rng(seed)
    buffers = [inputs[i] if i in inputs else rng.standard_normal(b.shape).astype(np.float32)
               for i, b in enumerate(bound.bindings)]
    assert emulated(kernel)(buffers, list(sizes), high_halves=0xDEAD)
    return buffers


def broadcast_add_and_transpose() -> tuple[Kernel, Kernel]:
    """out[p0, p1] = x[p0, p1] + y[p1], and t[p1, p0] = x[p0, p1]."""
    add = Kernel("bcast", (P0, P1), 2, (Binding("f32", (P0, P1), "read"), Binding("f32", (P1,), "read"),
                                        Binding("f32", (P0, P1), "write")),
                 (Result(2, (ix(2, 0, 1), ix(2, 1, 1)),
                         Binary("add", Load(0, (ix(2, 0, 1), ix(2, 1, 1)), "f32"),
                                Load(1, (ix(2, 1, 1),), "f32"), "f32")),))
    transpose = Kernel("t", (P1, P0), 2, (Binding("f32", (P0, P1), "read"),
                                          Binding("f32", (P1, P0), "write")),
                       (Result(1, (ix(2, 0, 1), ix(2, 1, 1)), Load(0, (ix(2, 1, 1), ix(2, 0, 1)), "f32")),))
    return add, transpose


def test_broadcast_add_and_transpose_at_every_size():
    """out[p0, p1] = x[p0, p1] + y[p1], and t[p1, p0] = x[p0, p1]: the grid-stride elementwise
    kernel, one launch per size, none compiled for it."""
    add, transpose = broadcast_add_and_transpose()
    rng = np.random.default_rng(1)
    for m, n in [(0, 5), (5, 0), (1, 1), (7, 13), (131, 257)]:
        x, y = rng.standard_normal((m, n)).astype(np.float32), rng.standard_normal(n).astype(np.float32)
        np.testing.assert_array_equal(run_emulated(add, (m, n), {0: x, 1: y}, m)[2], x + y)
        np.testing.assert_array_equal(run_emulated(transpose, (m, n), {0: x}, n)[1], x.T)


def test_a_static_innermost_range_takes_vector_groups():
    """out[p0, 28] = x[p0, 30][.., d1 + 1] * 2 (an im2col's row): four elements a thread, the
    contiguous store one 16-byte vector, the shifted load four scalars; every size matches."""
    shift = Kernel("shift", (P0, 28), 2, (Binding("f32", (P0, 30), "read"),
                                          Binding("f32", (P0, 28), "write")),
                   (Result(1, (ix(2, 0, 1), ix(2, 1, 1)),
                           Binary("mul", Load(0, (ix(2, 0, 1), ix(2, 1, 1, const=1)), "f32"),
                                  Const(2.0, "f32"), "f32")),))
    ptx, _ = generate_ptx([shift], resolve_target("sm_80"))
    assert re.search(r"st\.global\.v4\.(f32|b32)", ptx)
    rng = np.random.default_rng(3)
    for m in (0, 1, 3, 70):
        x = rng.standard_normal((m, 30)).astype(np.float32)
        x[:1, 5] = np.nan
        got = run_emulated(shift, (m,), {0: x}, m)[1]
        np.testing.assert_array_equal(got, x[:, 1:29] * 2)


def test_a_run_time_innermost_range_takes_groups_where_they_divide_it():
    """out[p0, p1] = x[p0, p1] + y[p1] and its transpose: a dispatch whose p1 the group of four
    divides runs the groups (16-byte accesses where contiguous: x, y, out; the transpose's
    load scalar), any other one element a thread; every size matches."""
    add, transpose = broadcast_add_and_transpose()
    ptx, launches = generate_ptx([add], resolve_target("sm_80"))
    assert re.search(r"ld\.global\.v4\.(f32|b32)", ptx) and re.search(r"st\.global\.v4", ptx)
    (_, launch), = launches
    grid = size_code(launch.grid[0])
    assert [evaluate(grid, [m, n]) for m, n in [(3, 8), (3, 7), (1000, 1000), (1000, 1001)]] \
        == [1, 1, 977, 3911]
    rng = np.random.default_rng(2)
    for m, n in [(3, 8), (3, 7), (0, 4), (5, 0), (2, 4), (9, 36), (9, 38)]:
        x, y = rng.standard_normal((m, n)).astype(np.float32), rng.standard_normal(n).astype(np.float32)
        if m and n:
            x[0, -1], y[0] = np.inf, np.nan
        np.testing.assert_array_equal(run_emulated(add, (m, n), {0: x, 1: y}, m)[2], x + y)
        np.testing.assert_array_equal(run_emulated(transpose, (m, n), {0: x}, n)[1], x.T)


def test_gather_from_a_static_table_at_run_time_ids():
    """out[p0, 16] = table[clamp(ids[p0]), :], ids past either end reading the edge rows."""
    ids = Load(0, (ix(2, 0, 1),), "i32")
    embed = Kernel("embed", (P0, 16), 2, (Binding("i32", (P0,), "read"), Binding("f32", (10, 16), "read"),
                                          Binding("f32", (P0, 16), "write")),
                   (Result(2, (ix(2, 0, 1), ix(2, 1, 1)), Gather(1, (ids, LoopIndex(1)), "f32")),))
    rng = np.random.default_rng(5)
    table = rng.standard_normal((10, 16)).astype(np.float32)
    for n in (0, 1, 7, 131):
        idv = rng.integers(-3, 13, n).astype(np.int32)
        got = run_emulated(embed, (n,), {0: idv, 1: table}, n)[2]
        np.testing.assert_array_equal(got, table[np.clip(idv, 0, 9)])


def test_gather_from_a_run_time_shaped_table():
    """out[p0, 3] = table[clamp(ids[p0]), :] of a table[p1, 3]: the clamp and the row stride
    are the dispatch's sizes (index_select along a dynamic sequence)."""
    ids = Load(0, (ix(2, 0, 1),), "i32")
    kernel = Kernel("g", (P0, 3), 2, (Binding("i32", (P0,), "read"), Binding("f32", (P1, 3), "read"),
                                      Binding("f32", (P0, 3), "write")),
                    (Result(2, (ix(2, 0, 1), ix(2, 1, 1)), Gather(1, (ids, LoopIndex(1)), "f32")),))
    rng = np.random.default_rng(11)
    for n, rows in [(0, 5), (1, 1), (7, 13), (131, 2)]:
        table = rng.standard_normal((rows, 3)).astype(np.float32)
        idv = rng.integers(-3, rows + 3, n).astype(np.int32)
        got = run_emulated(kernel, (n, rows), {0: idv, 1: table}, n)[2]
        np.testing.assert_array_equal(got, table[np.clip(idv, 0, rows - 1)])
    # an empty table and ids to read: the launch traps (element 0 is past its end)
    out = np.full((3, 3), 7.0, np.float32)
    assert not emulated(kernel)([np.zeros(3, np.int32), np.zeros((0, 3), np.float32), out], [3, 0])
    np.testing.assert_array_equal(out, 7.0)


def test_a_body_that_reads_a_size():
    """out[i] = x[i] + p1, p1 a push constant read as a value (SizeValue: a body comparing a
    dim with 1 reads one)."""
    kernel = Kernel("plus_size", (P0,), 1, (Binding("f32", (P0,), "read"), Binding("f32", (P0,), "write")),
                    (Result(1, (ix(1, 0, 1),), Binary("add", Load(0, (ix(1, 0, 1),), "f32"),
                                                      Cast("uitofp", SizeValue(P1, "i32"), "f32"), "f32")),))
    x = np.random.default_rng(6).standard_normal(37).astype(np.float32)
    for p1 in (0, 1, 7):
        np.testing.assert_array_equal(run_emulated(kernel, (37, p1), {0: x}, p1)[1], x + np.float32(p1))


def test_matmul_and_column_sums_fold_to_run_time_extents():
    """C[p0, p1] = sum_k A[p0, k] B[k, p1] (k < p2): the tiled matmul, its tiles' tails and
    a K of 0 masked at run time; s[p1] = sum_i x[i, p1]: one thread per output, its fold
    cascaded to an extent known per launch."""
    a, b = Load(0, (ix(3, 0, 1), ix(3, 2, 1)), "f32"), Load(1, (ix(3, 2, 1), ix(3, 1, 1)), "f32")
    mm = Kernel("mm", (P0, P1, P2), 2, (Binding("f32", (P0, P2), "read"), Binding("f32", (P2, P1), "read"),
                                        Binding("f32", (P0, P1), "write")),
                (Result(2, (ix(3, 0, 1), ix(3, 1, 1)),
                        Binary("add", Acc(0, "f32"), Binary("mul", a, b, "f32"), "f32"),
                        init=Const(0.0, "f32")),))
    cols = Kernel("cols", (P1, P0), 1, (Binding("f32", (P0, P1), "read"), Binding("f32", (P1,), "write")),
                  (Result(1, (ix(2, 0, 1),), Binary("add", Acc(0, "f32"), Load(0, (ix(2, 1, 1), ix(2, 0, 1)),
                                                                                "f32"), "f32"),
                          init=Const(0.0, "f32")),))
    rng = np.random.default_rng(2)
    for m, n, k in [(1, 1, 1), (7, 5, 13), (33, 65, 300), (0, 3, 4), (3, 2, 0)]:
        x, y = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
        got = run_emulated(mm, (m, n, k), {0: x, 1: y}, m)[2]
        np.testing.assert_allclose(got, x.astype(np.float64) @ y, rtol=1e-5, atol=1e-5 * k ** 0.5)
        got = run_emulated(cols, (m, k), {0: x}, k)[1]
        np.testing.assert_allclose(got, x.sum(0, dtype=np.float64), rtol=1e-5, atol=1e-5)


def batched_matmul() -> Kernel:
    """out[p3, p0, p1] = x[p3, p0, p2] @ y[p3, p2, p1], every size at run time."""
    a = Load(0, (ix(4, 0, 1), ix(4, 1, 1), ix(4, 3, 1)), "f32")
    b = Load(1, (ix(4, 0, 1), ix(4, 3, 1), ix(4, 2, 1)), "f32")
    return Kernel("bmm", (P3, P0, P1, P2), 3,
                  (Binding("f32", (P3, P0, P2), "read"), Binding("f32", (P3, P2, P1), "read"),
                   Binding("f32", (P3, P0, P1), "write")),
                  (Result(2, (ix(4, 0, 1), ix(4, 1, 1), ix(4, 2, 1)),
                          Binary("add", Acc(0, "f32"), Binary("mul", a, b, "f32"), "f32"),
                          init=Const(0.0, "f32")),))


def test_matmul_takes_the_static_templates_tiling_per_dispatch(monkeypatch):
    """One kernel holds every SIMT tiling and takes the one ``choose_tiling`` takes for the
    dispatch's M, N and batch, the grid to match: with ``FILL_BLOCKS`` lowered to 1 a 130x129
    product runs 128x128 tiles, 70x65 runs 64x64 and 33x65 runs 32x32 (a batch of 3 products,
    each checked)."""
    from pyree.compiler.codegen.common.llvm_gpu import matmul
    monkeypatch.setattr(matmul, "FILL_BLOCKS", 1)
    emulated = Emulated(batched_matmul())
    rng = np.random.default_rng(8)
    for (m, n, k), tile in [((130, 129, 5), 128), ((70, 65, 9), 64), ((33, 65, 17), 32),
                            ((128, 127, 3), 64)]:
        assert emulated.grid([m, n, k, 3]) == (-(-n // tile), -(-m // tile), 3)
        x = rng.standard_normal((3, m, k)).astype(np.float32)
        y = rng.standard_normal((3, k, n)).astype(np.float32)
        out = np.full((3, m, n), np.nan, np.float32)
        assert emulated([x, y, out], [m, n, k, 3])
        np.testing.assert_allclose(out, x.astype(np.float64) @ y, rtol=1e-5, atol=1e-5 * k ** 0.5)


def test_rows_and_columns_past_the_tiles_keep_nan_and_inf_where_they_belong(monkeypatch):
    """Past M or N the SIMT tiles stage the clamped last row (column) instead of zeros
    (llvm_gpu/matmul.py): what they compute there is never stored, so NaN and inf in x's last
    row and y's last column reach exactly the outputs that read them, whatever the tile."""
    from pyree.compiler.codegen.common.llvm_gpu import matmul
    monkeypatch.setattr(matmul, "FILL_BLOCKS", 1)
    emulated = Emulated(batched_matmul())
    rng = np.random.default_rng(11)
    for m, n, k in [(130, 129, 5), (70, 65, 9), (33, 65, 17), (3, 2, 40)]:
        x = rng.standard_normal((2, m, k)).astype(np.float32)
        y = rng.standard_normal((2, k, n)).astype(np.float32)
        x[:, -1, 0], x[0, -1, -1], y[:, 1, -1] = np.inf, np.nan, -np.inf
        out = np.full((2, m, n), 7.0, np.float32)
        assert emulated([x, y, out], [m, n, k, 2])
        with np.errstate(invalid="ignore"):
            want = x.astype(np.float64) @ y
        for mask in (np.isnan, np.isposinf, np.isneginf):
            np.testing.assert_array_equal(mask(out), mask(want), err_msg=f"{m}x{n}x{k}")
        finite = np.isfinite(want)
        np.testing.assert_allclose(out[finite], want[finite], rtol=1e-5, atol=1e-5 * k ** 0.5)


def test_a_tiling_a_static_extent_rules_out_is_left_out(monkeypatch, ptxas, tmp_path):
    """A convolution's GEMM with a run-time batch: its 64 output channels (a static M) rule the
    128x128 tiling out, so the kernel holds the 64x64 and 32x32 bodies alone, with their shared
    memory (2 x 2 KiB a tile, not 2 x 4 KiB) and registers; it still takes either per dispatch,
    the grid to match."""
    from pyree.compiler.codegen.common.llvm_gpu import matmul
    monkeypatch.setattr(matmul, "FILL_BLOCKS", 1)
    a = Load(0, (ix(4, 1, 1), ix(4, 3, 1)), "f32")
    b = Load(1, (ix(4, 0, 1), ix(4, 3, 1), ix(4, 2, 1)), "f32")  # the patches, batch-major
    conv = Kernel("conv", (P1, 64, P0, 37), 3,
                  (Binding("f32", (64, 37), "read"), Binding("f32", (P1, 37, P0), "read"),
                   Binding("f32", (P1, 64, P0), "write")),
                  (Result(2, (ix(4, 0, 1), ix(4, 1, 1), ix(4, 2, 1)),
                          Binary("add", Acc(0, "f32"), Binary("mul", a, b, "f32"), "f32"),
                          init=Const(0.0, "f32")),))
    ptx, _ = generate_ptx([conv], resolve_target("sm_90a"))
    assert sorted(map(int, re.findall(r"\.shared[^\n]*conv_[ab]\[(\d+)\]", ptx))) == [4096, 4096]
    assert "8192 bytes smem" in assemble_verbose(ptxas, ptx, "sm_90a", tmp_path)
    emulated = Emulated(conv)
    rng = np.random.default_rng(9)
    for n, tile in [(65, 64), (33, 32)]:
        assert emulated.grid([n, 3]) == (-(-n // tile), -(-64 // tile), 3)
        x = rng.standard_normal((64, 37)).astype(np.float32)
        y = rng.standard_normal((3, 37, n)).astype(np.float32)
        out = np.full((3, 64, n), np.nan, np.float32)
        assert emulated([x, y, out], [n, 3])
        np.testing.assert_allclose(out, x.astype(np.float64) @ y, rtol=1e-5, atol=1e-4)


def test_a_slice_past_its_binding_traps_before_any_access():
    p0, p1, p2 = P0, P1, P2
    kernel = Kernel("slice", (p1,), 1, (Binding("f32", (p0,), "read"), Binding("f32", (p1,), "write")),
                    (Result(1, (AffineExpr((1,), 0),), Load(0, (AffineExpr((1,), p2),), "f32")),))
    emulated = Emulated(kernel)
    x = np.arange(100, dtype=np.float32)
    out = np.zeros(31, np.float32)
    assert emulated([x, out], [100, 31, 69])
    np.testing.assert_array_equal(out, x[69:])
    for p1_, p2_ in [(31, 70), (1, 100)]:
        out = np.full(p1_, 7.0, np.float32)
        assert not emulated([x, out], [100, p1_, p2_])
        np.testing.assert_array_equal(out, 7.0)


def test_row_kernels_fold_across_the_block():
    """Row sums and softmax (max, then the sum of exp(x - max), then each element divided):
    one block per row, its threads striding over a row whose length is a push constant, then
    warp shuffles and shared memory (the barrier and shuffles emulated)."""
    x = Load(0, (ix(2, 0, 1), ix(2, 1, 1)), "f32")
    row = (ix(2, 0, 1),)
    sums = Kernel("rows", (P0, P1), 1, (Binding("f32", (P0, P1), "read"), Binding("f32", (P0,), "write")),
                  (Result(1, row, Binary("add", Acc(0, "f32"), x, "f32"), init=Const(0.0, "f32")),))
    shifted = Unary("exp", Binary("sub", x, Final(0, "f32"), "f32"), "f32")
    softmax = Kernel("softmax", (P0, P1), 1,
                     (Binding("f32", (P0, P1), "read"), Binding("f32", (P0,), "write"),
                      Binding("f32", (P0,), "write"), Binding("f32", (P0, P1), "write")),
                     (Result(1, row, Binary("max", Acc(0, "f32"), x, "f32"), init=Const(-np.inf, "f32")),
                      Result(2, row, Binary("add", Acc(1, "f32"), shifted, "f32"), init=Const(0.0, "f32")),
                      Result(3, (ix(2, 0, 1), ix(2, 1, 1)), Binary("div", shifted, Final(1, "f32"), "f32"),
                             row=True)))
    rng = np.random.default_rng(3)
    for m, n in [(0, 5), (2, 0), (1, 1), (3, 7), (2, 1000)]:
        xv = rng.standard_normal((m, n)).astype(np.float32)
        got = run_emulated(sums, (m, n), {0: xv}, n)[1]
        np.testing.assert_allclose(got, xv.sum(1, dtype=np.float64), rtol=1e-5, atol=1e-5)
        got = run_emulated(softmax, (m, n), {0: xv}, n)[3]
        e = np.exp(xv.astype(np.float64) - xv.max(1, keepdims=True, initial=-np.inf))
        np.testing.assert_allclose(got, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_more_elements_than_the_grid_has_threads_are_strided_over(monkeypatch):
    """Past ``MAX_GRID`` blocks of 256 threads the grid stays capped and each thread takes
    every (grid * 256)-th element, or group of four (the cap lowered to 3 blocks here, so that
    a small array shows it)."""
    from pyree.compiler.codegen.common.llvm_gpu import elementwise
    monkeypatch.setattr(elementwise, "MAX_GRID", 3)
    double = Kernel("double", (P0,), 1, (Binding("f32", (P0,), "read"), Binding("f32", (P0,), "write")),
                    (Result(1, (ix(1, 0, 1),), Binary("add", Load(0, (ix(1, 0, 1),), "f32"),
                                                      Load(0, (ix(1, 0, 1),), "f32"), "f32")),))
    emulated = Emulated(double)
    x = np.random.default_rng(4).standard_normal(5001).astype(np.float32)
    for n in (1, 3 * 256, 3 * 256 + 1, 4 * 3 * 256 + 4, 5001):
        threads = n // 4 if n % 4 == 0 else n  # groups of four where they divide n
        assert emulated.grid([n]) == (min(3, -(-threads // 256)), 1, 1)
        out = np.full(n, np.nan, np.float32)
        assert emulated([x[:n], out], [n])
        np.testing.assert_array_equal(out, x[:n] + x[:n])


# the CNN too, but it takes minutes here: kernel.evaluate and the emulated blocks of its convolution
@pytest.mark.parametrize("name", [*sorted(CASES), "softmax_head", "layernorm"])
def test_the_programs_kernels_agree_with_the_kernel_evaluator(name, monkeypatch):
    """Every kernel with run-time sizes that the e2e programs compile to (the torch models'
    linears, convolution, batch norm, softmax and layernorm among them), run on the CPU at small
    odd push constants against ``kernel.evaluate`` on the same fresh inputs, or trapping where
    those push constants would take an access past its binding."""
    import pyree.compiler.codegen.cuda as cuda
    seen: list[Kernel] = []
    generate = cuda.generate_ptx
    monkeypatch.setattr(cuda, "generate_ptx", lambda kernels, *a, **k: (seen.extend(kernels),
                                                                         generate(kernels, *a, **k))[1])
    compile_str(CASES[name] if name in CASES else torch_mlir(name),
                CompileOptions(target_backends=["cuda"]))
    dynamic = [k for k in seen if has_run_time_sizes(k)]
    assert dynamic
    for kernel in dynamic:
        sizes = [(3, 5, 2, 7)[k % 4] for k in range(push_constant_count(kernel))]
        params = {f"p{k}": v for k, v in enumerate(sizes)}
        bound = bind_sizes(kernel, params)
        rng = np.random.default_rng(len(kernel.name))
        buffers = [rng.integers(0, 3, b.shape).astype(DTYPES[b.dtype]) if not is_float(b.dtype)
                   else rng.standard_normal(b.shape).astype(DTYPES[b.dtype]) for b in bound.bindings]
        want = [b.copy() for b in buffers]
        try:
            evaluate_kernel(kernel, want, params)
        except IndexError:  # sizes no host program passes together (a run-time K's chunk of
            # 2 with K = 7): the kernel traps before it reads past a binding
            assert not emulated(kernel)(buffers, sizes), kernel.name
            continue
        assert emulated(kernel)(buffers, sizes), kernel.name
        for got, expected in zip(buffers, want):
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5, err_msg=kernel.name)


def test_a_long_run_time_k_runs_in_run_time_chunks():
    """A product with K at run time in its versions split in 4 and 2 chunks of K / s
    (flow/split_reduction.py's ``_run_time_k``): the partial product reads k = s * (K / s) + c,
    a run-time coefficient, on the SIMT template (not the per-point fold it fell to before),
    and the fold of the partials gives the product, NaN and inf included."""
    from pyree.compiler.flow.kernels import outline
    from pyree.compiler.flow.passes import flow_passes, run_flow
    from pyree.compiler.flow.versions import is_by_size
    from pyree.compiler.input import parse_mlir
    from pyree.compiler.input.lowering import lower_to_tensor_program
    from pyree.compiler.sizes import substitute
    from pyree.compiler.tensor_program import View, parameters_of

    program = lower_to_tensor_program(parse_mlir(MATMUL, "mm.mlir"))
    function = run_flow(program, flow_passes(gpu=True, implicit_gemm=True)).functions[0]
    (four,) = [op for op in function.ops if is_by_size(op)]
    (two,) = four.otherwise.ops
    rng = np.random.default_rng(12)
    for version, (m, k, n) in [(four.then, (3, 1024, 5)), (two.then, (2, 1026, 7))]:
        symbols = dict(zip(("s0", "s1", "s3"), (m, k, n)))
        a = rng.standard_normal((m, k)).astype(np.float32)
        a[0, 700], a[1, 3] = np.inf, np.nan
        b = rng.standard_normal((k, n)).astype(np.float32)
        env = {id(v): x for v, x in zip(function.arguments, (a, b))}
        def shape(v, symbols=symbols):
            return tuple(int(substitute(d, symbols)) for d in v.shape)
        for op in version.ops:
            if isinstance(op, View):
                env[id(op.result)] = env[id(op.source)].reshape(shape(op.result))
                continue
            kernel = outline(op, "k")
            if "partial" in op.origin:  # the tiled template: its tiles staged in shared memory
                assert ".shared" in generate_ptx([kernel], resolve_target("sm_90a"))[0]
            outs = [np.full(shape(v), np.nan, np.float32) for v in op.results]
            sizes = [int(substitute(s, symbols)) for s in parameters_of(op)]
            assert Emulated(kernel)([env[id(v)] for v in op.inputs] + outs, sizes)
            env.update((id(v), x) for v, x in zip(op.results, outs))
        with np.errstate(invalid="ignore"):
            want = a.astype(np.float64) @ b
        np.testing.assert_allclose(env[id(version.results[0])], want, rtol=1e-5, atol=1e-4)
