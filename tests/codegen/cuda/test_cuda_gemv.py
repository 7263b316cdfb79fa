"""CPU-only: the matrix-vector template (common/llvm_gpu/matmul_gemv.py) run by the emulator
(nvptx_on_cpu.py) against numpy: 16-byte loads along k (a linear layer's [N, K] weight) and
along n ([K, N]), with K tails, runs of columns past N, bindings off 16-byte alignment (the
element-by-element path), batch and up to four rows (or columns: m and n swapped); infinities and NaNs in X where the K tail
is dropped; and the vector loads in the PTX. GPU runs of the same template:
tests/drivers/cuda/test_cuda_gpu.py (cases.py's gemv cases) and bench/gpu/llm_decode.py."""

from __future__ import annotations

import functools

import kernel_zoo as zoo
import ml_dtypes
import numpy as np
import pytest
from test_cuda_contraction import entry_text
from tooling import require_module

require_module("xdsl")  # the compiler

from nvptx_on_cpu import Emulated  # noqa: E402
from pyree.compiler import kernel as K  # noqa: E402
from pyree.compiler.codegen.common.llvm_gpu import matmul_gemv  # noqa: E402
from pyree.compiler.codegen.cuda import generate_ptx, resolve_target  # noqa: E402

NUMPY = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32}


@functools.cache
def emulated(kernel: K.Kernel) -> Emulated:
    return Emulated(kernel)


def misaligned(a: np.ndarray, shift: bool) -> np.ndarray:
    """``a``'s values in a buffer one element past a 16-byte boundary where ``shift``."""
    if not shift:
        return a
    room = np.empty(a.size + 16, a.dtype)
    start = (-room.ctypes.data // a.itemsize) % (16 // a.itemsize) + 1
    out = room[start:start + a.size].reshape(a.shape)
    out[...] = a
    return out


def run_linear(m, n, k, dtype, b_nk, batch=1, shift=False, x=None):
    """zoo.linear's kernel (x @ w(.T) + bias, stored in ``dtype``) on random data; the emulated
    result and numpy's in float64."""
    kernel = zoo.linear(m, n, k, dtype, batch=batch, b_nk=b_nk)
    rng = np.random.default_rng(m * 1000 + n + k)
    lead = (batch,) if batch > 1 else ()
    if x is None:
        x = rng.standard_normal(lead + (m, k))
    w = rng.standard_normal(lead + ((n, k) if b_nk else (k, n)))
    bias = rng.standard_normal(n)
    args = [misaligned(a.astype(NUMPY[dtype]), shift) for a in (x, w, bias)]
    out = misaligned(np.full(lead + (m, n), np.nan, NUMPY[dtype]), shift)
    assert emulated(kernel)([*args, out], [])
    x64, w64, b64 = (a.astype(np.float64) for a in args)
    return out.astype(np.float64), x64 @ (np.swapaxes(w64, -1, -2) if b_nk else w64) + b64


@pytest.mark.parametrize("m, n, k, dtype, b_nk, batch, along_k, width", [
    (1, 24, 600, "f16", True, 1, True, 8),     # 16-byte loads along k, a 88-deep tail
    (3, 17, 512, "bf16", True, 1, True, 8),    # K a whole number of steps; 17 columns
    (2, 9, 5, "f16", True, 2, True, 1),        # K of 5: rows off alignment, element loads
    (1, 200, 300, "f16", False, 1, False, 8),  # 16-byte loads along n; the last block's runs past N
    (4, 36, 131, "f32", False, 1, False, 4),   # f32: 4 a load; K tail of the 32-deep step
    (2, 77, 131, "f32", False, 1, False, 1),   # an odd N: rows off alignment
    (1, 64, 40, "f16", False, 3, False, 8),    # batch
    # the vector on the n side (m and n swapped): X is the matrix, read along k
    (37, 1, 300, "f32", True, 3, True, 4),     # batched matrix times vector (bij,bj->bi)
    (70, 3, 131, "f16", True, 1, True, 1),     # three columns; odd rows: element loads
    (9, 2, 64, "f32", False, 2, True, 4),      # a [K, N] vector side
    (40, 4, 256, "bf16", True, 1, True, 8),    # four columns, 16-byte loads
])
def test_gemv_matches_numpy(monkeypatch, m, n, k, dtype, b_nk, batch, along_k, width):
    monkeypatch.setattr(matmul_gemv, "MIN_BLOCKS", 0)  # the emulator's time goes by blocks (see below)
    kernel = zoo.linear(m, n, k, dtype, batch=batch, b_nk=b_nk)
    plan = matmul_gemv.plan(kernel, None)
    assert plan is not None and (plan.kernel is kernel) == (m <= matmul_gemv.ROWS)
    g = matmul_gemv.geometry(plan.kernel, plan.contraction)
    assert (g.along_k, g.width) == (along_k, width)
    for shift in (False, True):
        got, want = run_linear(m, n, k, dtype, b_nk, batch, shift)
        tol = {"f32": 1e-5, "f16": 2e-3, "bf16": 1e-2}[dtype]
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.sqrt(k))


@pytest.mark.parametrize("min_blocks, groups", [(0, 8), (2, 4), (3, 2), (132, 1)])
def test_blocks_narrowed_to_fill_the_gpu_sum_their_slices_right(monkeypatch, min_blocks, groups):
    """Lanes along n take fewer columns a block until the product makes MIN_BLOCKS blocks (40
    columns: 64, 32, 16, 8 a block); whatever the 32-lane groups' share of slices, their sums
    (shuffles within a warp, then shared memory across warps) match numpy, with a K tail and an
    infinity and a NaN in X."""
    monkeypatch.setattr(matmul_gemv, "MIN_BLOCKS", min_blocks)
    m, n, k = 2, 40, 300
    kernel = zoo.linear(m, n, k, "f16", b_nk=False)
    plan = matmul_gemv.plan(kernel, None)
    g = matmul_gemv.geometry(plan.kernel, plan.contraction)
    assert (g.along_k, g.width, g.groups) == (False, 8, groups)
    x = np.random.default_rng(6).standard_normal((m, k))
    x[0, 5], x[1, -1] = np.inf, np.nan
    rng = np.random.default_rng(7)
    args = [x.astype(np.float16), rng.standard_normal((k, n)).astype(np.float16),
            rng.standard_normal(n).astype(np.float16)]
    out = np.full((m, n), np.nan, np.float16)
    assert Emulated(kernel)([*args, out], [])
    x64, w64, b64 = (a.astype(np.float64) for a in args)
    with np.errstate(invalid="ignore"):
        want = x64 @ w64 + b64
    np.testing.assert_array_equal(np.isnan(out), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(out), np.isinf(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(out[finite], want[finite], rtol=2e-3, atol=2e-3 * np.sqrt(k))


@pytest.mark.parametrize("b_nk", [True, False])
def test_dropped_tail_products_add_no_nan(monkeypatch, b_nk):
    """An infinity in X's last k where the guarded tail step reads clamped indices: the other
    rows stay finite; a NaN in X makes its own row NaN and only that row."""
    monkeypatch.setattr(matmul_gemv, "MIN_BLOCKS", 0)  # one block to emulate, as above
    m, n, k = 3, 64, 300
    x = np.random.default_rng(5).standard_normal((m, k))
    x[0, -1], x[1, 7] = np.inf, np.nan
    got, want = run_linear(m, n, k, "f16", b_nk, x=x)
    assert np.isnan(got[1]).all() and not np.isnan(got[[0, 2]]).any()
    np.testing.assert_array_equal(np.isinf(got[0]), np.isinf(want[0]))
    np.testing.assert_allclose(got[2], want[2], rtol=2e-3, atol=2e-3 * np.sqrt(k))


def test_gemv_reads_sixteen_bytes_a_load():
    """The weights of both layouts go through 16-byte vector loads (four 32-bit words)."""
    kernels = [zoo.linear(1, 768, 768, "f16"), zoo.linear(1, 768, 768, "f16", b_nk=False),
               zoo.linear(2, 768, 3072, "bf16")]
    ptx, launches = generate_ptx(kernels, resolve_target("sm_90"))
    for name, _ in launches:
        assert "ld.global.v4" in entry_text(ptx, name), name


@pytest.mark.parametrize("kernel", [zoo.linear(5, 3, 7, "f32", batch=2), zoo.gather("matmul"),
                                    zoo.gather("rows")], ids=lambda k: k.name)
def test_swapped_loops_compute_the_same(kernel):
    """K.swap_loops (the template's m and n exchange) moves loads, stores, gathers and loop
    indices with the loops: the reference evaluation of both kernels agrees bit for bit."""
    from pyree.compiler.kernel.evaluate import evaluate
    m = kernel.num_parallel - 2
    outs = []
    for k in (kernel, K.swap_loops(kernel, m, m + 1)):
        buffers = []
        for i, b in enumerate(kernel.bindings):
            rng = np.random.default_rng(i)  # the same data for both
            data = rng.integers(0, 50, b.shape) if b.dtype.startswith("i") else \
                rng.standard_normal(b.shape)
            buffers.append(data.astype(NUMPY.get(b.dtype, b.dtype.replace("i", "int"))))
        evaluate(k, buffers)
        outs.append(buffers[kernel.results[0].binding])
    np.testing.assert_array_equal(outs[0], outs[1])
