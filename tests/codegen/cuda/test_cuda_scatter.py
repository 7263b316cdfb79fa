"""Scatter kernels (``kernel.Scatter``) of the LLVM GPU templates, cuda's NVPTX IR run here on the
CPU: every combine the scatter template has (atomicrmw, a compare-exchange loop, a plain store)
on each dtype, repeated and out-of-range places, against ``kernel.evaluate``. The emulation runs
the threads one after another in update order, so even float sums must match exactly; atomicity
itself is tested on the GPU (tests/drivers/cuda/test_cuda_scatter_gpu.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from tooling import require_module

require_module("llvmlite")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from nvptx_on_cpu import Emulated, run_program  # noqa: E402
from pyree.compiler.codegen.common.llvm_gpu.llvm_text import Module  # noqa: E402
from pyree.compiler.codegen.cuda import emit_kernel, resolve_target  # noqa: E402
from pyree.compiler.codegen.cuda.nvptx import NVPTX  # noqa: E402
from pyree.compiler.codegen.cuda.ptx import data_layout  # noqa: E402
from pyree.compiler.kernel import Binding, Kernel, evaluate  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from scatter_cases import CASES, D, N, U, scatter_kernel, values  # noqa: E402


def run_both(kernel: Kernel, rows: np.ndarray, rng) -> tuple[np.ndarray, np.ndarray]:
    dtype = kernel.bindings[0].dtype
    upd, start = values(dtype, (U, D), rng), values(dtype, (N, D), rng)
    want = start.copy()
    evaluate(kernel, [upd, rows, start, want])
    got = start.copy()
    assert Emulated(kernel)([upd, rows, start, got], [])
    return got, want


@pytest.mark.parametrize("dtype, op", CASES)
def test_scatter_combines_repeated_rows_and_skips_the_outside(dtype, op):
    rng = np.random.default_rng(3)
    rows = rng.integers(-2, N + 2, size=(U, 1)).astype(np.int32)  # repeats, some outside
    rows[:3, 0] = [0, N - 1, 0]
    got, want = run_both(scatter_kernel(dtype, op, first=op in ("max", "xor")), rows, rng)
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))  # bit for bit


def test_scatter_of_nan_and_infinities_combines_as_the_op_defines():
    """max propagates NaN (``Binary`` max is IEEE maximum), add takes inf + -inf to NaN."""
    for op in ("max", "add"):
        kernel = scatter_kernel("f32", op)
        rng = np.random.default_rng(5)
        rows = rng.integers(0, N, size=(U, 1)).astype(np.int32)
        upd = values("f32", (U, D), rng)
        upd[0, 0], upd[1, 1], upd[2, 2] = np.nan, np.inf, -np.inf
        rows[1, 0] = rows[2, 0]
        start = values("f32", (N, D), rng)
        want, got = start.copy(), start.copy()
        evaluate(kernel, [upd, rows, start, want])
        assert Emulated(kernel)([upd, rows, start, got], [])
        np.testing.assert_array_equal(got, want)
        assert np.isnan(got[rows[0, 0], 0])


def test_plain_set_stores_each_update():
    rng = np.random.default_rng(9)
    rows = rng.permutation(N)[:U % N + 3].reshape(-1, 1).astype(np.int32)
    kernel = scatter_kernel("f32", None)
    kernel = Kernel(kernel.name, (len(rows), D), 2,
                    (Binding("f32", (len(rows), D), "read"), Binding("i32", (len(rows), 1), "read"),
                     *kernel.bindings[2:]), kernel.results)
    upd, start = values("f32", (len(rows), D), rng), values("f32", (N, D), rng)
    got = start.copy()
    assert Emulated(kernel)([upd, rows, start, got], [])
    want = start.copy()
    want[rows[:, 0]] = upd
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype, op, rmw", [("f32", "add", "atomicrmw fadd"),
                                            ("i64", "add", "atomicrmw add"),
                                            ("ui32", "max", "atomicrmw umax"),
                                            ("f32", "mul", "cmpxchg"), ("bf16", "add", "cmpxchg")])
def test_scatter_uses_one_atomic_per_update(dtype, op, rmw):
    module = Module(data_layout(resolve_target("sm_90")), NVPTX)
    emit_kernel(module, scatter_kernel(dtype, op), "k", resolve_target("sm_90"))
    text = module.text()
    assert rmw in text and text.count("atomicrmw") + text.count("cmpxchg ptr") == 1


def test_plain_set_of_repeated_rows_keeps_the_last_update():
    """The two kernels of a plain set: the winner of each place, then the winners' stores."""
    text = """func.func @main(%orig: tensor<9x4xf32>, %upd: tensor<40x4xf32>, %idx: tensor<40x1xi32>) -> tensor<9x4xf32> {
  %r = iree_linalg_ext.scatter dimension_map = [0] unique_indices(true) ins(%upd, %idx : tensor<40x4xf32>, tensor<40x1xi32>) outs(%orig : tensor<9x4xf32>) {
  ^bb0(%u: f32, %o: f32):
    iree_linalg_ext.yield %u : f32
  } -> tensor<9x4xf32>
  return %r : tensor<9x4xf32>
}"""
    rng = np.random.default_rng(21)
    orig, upd = values("f32", (9, 4), rng), values("f32", (40, 4), rng)
    idx = rng.integers(-1, 10, size=(40, 1)).astype(np.int32)
    got = run_program(text, [orig, upd, idx], scatter_atomics=True)
    want = orig.copy()
    for u in range(40):
        if 0 <= idx[u, 0] < 9:
            want[idx[u, 0]] = upd[u]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_rows_written_at_a_run_time_position_into_a_returned_argument(dtype):
    """A KV cache's step (flow/argument_windows.py): a scatter of the new rows alone, each a
    plain store, places past the cache skipped; the rest of the cache is its argument's."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from numerics_cases import CASES

    case = CASES[f"cache_rows_{dtype}"]()
    assert "scatter" in _flow_text(case.mlir)
    rng = np.random.default_rng(11)
    for pos in (0, 17, 35, 36, -1):
        cache, new, _ = case.inputs(rng)
        got = run_program(case.mlir, [cache, new, np.array(pos, np.int64)], scatter_atomics=True)
        want = case.reference(cache, new, pos)
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def _flow_text(text: str) -> str:
    from pyree.compiler.flow.passes import flow_passes, run_flow
    from pyree.compiler.input import parse_mlir
    from pyree.compiler.input.lowering import lower_to_tensor_program
    from pyree.compiler.printing import format_program

    program = lower_to_tensor_program(parse_mlir(text, "program.mlir"), scatter_atomics=True)
    return format_program(run_flow(program, flow_passes(gpu=True, implicit_gemm=True)))
