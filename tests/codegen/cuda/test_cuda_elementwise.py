"""CPU-only: the cuda target's elementwise template: 16-byte accesses where rows are aligned,
scalar ones elsewhere, and Select arms that load out of range behind a branch."""

from __future__ import annotations

import dataclasses

import kernel_zoo as zoo
from ptx_modules import assemble_verbose
from tooling import require_module

require_module("xdsl")  # the compiler

from pyree.compiler import kernel as K  # noqa: E402
from pyree.compiler.codegen.cuda import generate_ptx, resolve_target  # noqa: E402


def test_aligned_elementwise_uses_16_byte_accesses():
    ptx, _ = generate_ptx([zoo.add((64, 1024)), zoo.add((37, 48), "f16")], resolve_target("sm_90"))
    assert "ld.global.v4.b32" in ptx and "st.global.v4.b32" in ptx


def test_odd_shapes_fall_back_to_scalar_accesses():
    ptx, _ = generate_ptx([zoo.add((37, 53))], resolve_target("sm_90"))
    assert "ld.global.v4" not in ptx and "ld.global" in ptx


def test_a_select_arm_that_loads_out_of_range_is_not_evaluated():
    """A pad: ``i in [1, n] ? x[i - 1] : 0``. The load of the unchosen arm would read before x
    (an H100 faulted on ResNet's strided im2col where the memory below the input was unmapped),
    so it sits behind a branch; a Select whose arms are in range stays a select."""
    from pyree.compiler.codegen.common.llvm_gpu import elementwise
    from pyree.compiler.codegen.common.llvm_gpu.llvm_text import Module
    from pyree.compiler.codegen.cuda.nvptx import NVPTX
    n = 37
    i = K.LoopIndex(0)
    inside = K.Binary("and", K.Compare("ge", i, K.Const(1, "index")),
                      K.Compare("le", i, K.Const(n, "index")), "i1")
    shifted = K.Load(0, (K.AffineExpr((1,), -1),), "f32")
    padded = K.Kernel("pad", (n + 2,), 1, (K.Binding("f32", (n,), "read"),
                                           K.Binding("f32", (n + 2,), "write")),
                      (K.Result(1, (K.AffineExpr((1,)),),
                                K.Select(inside, shifted, K.Const(0.0, "f32"), "f32")),))
    safe = dataclasses.replace(padded, results=(dataclasses.replace(
        padded.results[0], value=K.Select(inside, K.Load(0, (K.AffineExpr((0,), 0),), "f32"),
                                          K.Const(0.0, "f32"), "f32")),))
    for kernel, branches in ((padded, True), (safe, False)):
        module = Module("", NVPTX)
        elementwise.emit(module, kernel, "k", elementwise.plan(kernel, None))
        ir = module.text()
        assert ("sel_a" in ir) == branches and ("select i1" in ir) != branches, ir


def test_vector_loads_inside_a_branch_stay_in_it(ptxas, tmp_path):
    """A concat along the innermost dim (``j < n ? x[i, j] : y[i, j - n]``): each arm loads out
    of range where the other is chosen, so each is a branch, and its loads are 16-byte vectors
    (a thread's 4 lanes read 4 consecutive elements). The vector that lane 0 loaded inside its
    arm was reused by lane 1 outside it: "Instruction does not dominate all uses" (torchvision's
    ShuffleNet v2, whose concat and channel shuffle fuse into such a kernel)."""
    m, n = 3, 8
    rows, cols = K.AffineExpr((1, 0)), K.AffineExpr((0, 1))
    x = K.Load(0, (rows, cols), "f32")
    y = K.Load(1, (rows, K.AffineExpr((0, 1), -n)), "f32")
    first = K.Compare("lt", K.LoopIndex(1), K.Const(n, "index"))
    kernel = K.Kernel("concat", (m, 2 * n), 2,
                      (K.Binding("f32", (m, n), "read"), K.Binding("f32", (m, n), "read"),
                       K.Binding("f32", (m, 2 * n), "write")),
                      (K.Result(2, (rows, cols), K.Select(first, x, y, "f32")),))
    from pyree.compiler.codegen.common.llvm_gpu import elementwise
    from pyree.compiler.codegen.common.llvm_gpu.llvm_text import Module
    from pyree.compiler.codegen.cuda.nvptx import NVPTX
    module = Module("", NVPTX)
    elementwise.emit(module, kernel, "k", elementwise.plan(kernel, None))
    assert "load <4 x float>" in module.text() and "store <4 x float>" in module.text()
    ptx, _ = generate_ptx([kernel], resolve_target("sm_80"))  # LLVM verifies the IR
    assert "st.global.v4.b32" in ptx
    assemble_verbose(ptxas, ptx, "sm_80", tmp_path)


def _cache_write(layers: int, heads: int, rows: int, d: int) -> K.Kernel:
    """``out = cache`` with row ``start`` replaced by ``new``, picked by comparing i64 row
    numbers with ``start`` (pyree.compiler.llm.models.write_cache)."""
    shape = (layers, 1, heads, rows, d)
    start = K.Load(2, (), "i64")
    row = K.Load(3, (K.AffineExpr((0, 0, 0, 1, 0)),), "i64")
    inside = K.Binary("and", K.Compare("ge", row, start),
                      K.Compare("lt", row, K.Binary("add", start, K.Const(1, "i64"), "i64")), "i1")
    ix = K.AffineExpr.identity(5)
    new = K.Load(1, (*ix[:3], K.AffineExpr((0,) * 5), ix[4]), "f16")
    value = K.Select(inside, new, K.Load(0, ix, "f16"), "f16")
    return K.Kernel("write", shape, 5, (
        K.Binding("f16", shape, "read"), K.Binding("f16", (layers, 1, heads, 1, d), "read"),
        K.Binding("i64", (), "read"), K.Binding("i64", (rows,), "read"),
        K.Binding("f16", shape, "write")), (K.Result(4, ix, value),))


def test_a_wide_operand_every_lane_shares_does_not_narrow_the_group(monkeypatch):
    """A decode step's cache write: an f16 cache kept or replaced under a compare of i64 row
    numbers, which every lane of a group reads at one row. GPT-2's (12 layers, 12 heads, 1024
    rows of 64) takes groups of eight f16 lanes (16-byte accesses), not two as the i64's width
    once made them (half the copy bandwidth on the H200); a small one keeps two lanes, for the
    threads (``MIN_GROUPS``). With that floor lowered, the small one's eight-lane kernel run
    here on the CPU gives numpy's answer bit for bit, special values included."""
    import sys
    from pathlib import Path

    import numpy as np
    from pyree.compiler.codegen.common.llvm_gpu import elementwise
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from nvptx_on_cpu import Emulated

    assert elementwise.vector_width(_cache_write(12, 12, 1024, 64)) == 8
    rows, d = 40, 16
    kernel = _cache_write(2, 3, rows, d)
    assert elementwise.vector_width(kernel) == 2
    monkeypatch.setattr(elementwise, "MIN_GROUPS", 1)
    assert elementwise.vector_width(kernel) == 8
    ptx, _ = generate_ptx([kernel], resolve_target("sm_90"))
    assert "ld.global.v4.b32" in ptx and "st.global.v4.b32" in ptx
    rng = np.random.default_rng(0)
    cache = rng.standard_normal((2, 1, 3, rows, d)).astype(np.float16)
    cache.reshape(-1)[::7] = np.nan
    cache.reshape(-1)[3::11] = -0.0
    fresh = rng.standard_normal((2, 1, 3, 1, d)).astype(np.float16)
    fresh.reshape(-1)[::5] = -np.inf
    out = np.zeros_like(cache)
    args = [cache, fresh, np.array(17, np.int64), np.arange(rows, dtype=np.int64), out]
    assert Emulated(kernel, None)(args, [])
    want = cache.copy()
    want[:, :, :, 17] = fresh[:, :, :, 0]
    np.testing.assert_array_equal(out.view(np.uint16), want.view(np.uint16))
