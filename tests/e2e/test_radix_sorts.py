"""Lines ordered by one key, sorted by the key's bytes on the CPU (codegen/llvm_cpu/line_sort.py:
``radix_key``, ``_radix_sort``), against numpy's stable sort on local-task: keys whose high
halves tie where their low halves do not (a 64-bit key's two passes), ranges that end small
while only a 64-bit key's high half has been sorted (compared whole there), long runs of equal
keys (sorted by place), every key type with its special values, lengths around the radix
threshold; and the kernels that take the radix sort and those that must not."""

from __future__ import annotations

import numpy as np
import pytest
from pyree.compiler.codegen.common.normalize import normalize
from pyree.compiler.codegen.llvm_cpu.line_sort import RADIX_MIN, RADIX_SMALL, radix_key
from pyree.compiler.flow.kernels import outline
from pyree.compiler.flow.passes import flow_passes, run_flow
from pyree.compiler.input import parse_mlir
from pyree.compiler.input.lowering import lower_to_tensor_program
from pyree.compiler.tensor_program import Generic, is_line_walk
from sort_cases import sort_case, stable_order
from test_merge_sort import run_torch
from tooling import require_module


def _check_sort(x: np.ndarray, dim: int = -1, descending: bool = False):
    torch = require_module("torch")
    values, indices = run_torch(
        lambda t: torch.sort(t, dim=dim, descending=descending, stable=True), x)
    order = stable_order(x, dim % x.ndim, descending)
    np.testing.assert_array_equal(indices, order)
    np.testing.assert_array_equal(values, np.take_along_axis(x, order, dim))  # NaN, -0.0 too
    if x.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(values), np.signbit(np.take_along_axis(x, order, dim)))


def _wide(rng, n: int, highs: int) -> np.ndarray:
    """int64 keys with ``highs`` distinct high halves (negative ones too) and random low ones."""
    return (rng.integers(-highs // 2, highs - highs // 2, n) << 32) + rng.integers(0, 2**32, n)


@pytest.mark.parametrize("highs", [1, 3, 300, 2**20])
@pytest.mark.parametrize("descending", [False, True])
def test_64_bit_keys_sorted_by_both_halves(highs, descending):
    """One high half: the whole line goes to the low halves' pass; 300: ranges of a few
    thousand split there; 2**20: most ranges end under ``RADIX_SMALL`` while only the high
    half is sorted, and are compared whole."""
    x = _wide(np.random.default_rng(highs), 50021, highs)
    x[::11] = x[5]  # ties across the line
    _check_sort(x.reshape(1, -1), descending=descending)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("descending", [False, True])
def test_float_keys_made_total(dtype, descending):
    """NaN last ascending and first descending, tied among themselves; -0.0 tied with 0.0;
    +-inf, subnormals and runs of equal values: ties by index."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 30011)).astype(dtype)
    flat = x.reshape(-1)
    flat[::13] = -0.0
    flat[1::17] = 0.0
    flat[2::19] = np.nan
    flat[3::23] = np.inf
    flat[4::29] = -np.inf
    flat[5::31] = np.finfo(dtype).smallest_subnormal
    flat[6::37] = -np.finfo(dtype).smallest_subnormal
    flat[7::41] = 1.5
    _check_sort(x, descending=descending)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int32, np.uint32, np.bool_])
def test_integer_keys_of_every_width(dtype):
    rng = np.random.default_rng(5)
    info = np.iinfo(dtype) if dtype != np.bool_ else None
    x = (rng.random((3, 4099)) < 0.4 if dtype == np.bool_ else
         rng.integers(info.min, info.max, (3, 4099), endpoint=True).astype(dtype))
    if info is not None:
        x[:, ::97] = info.min
        x[:, 1::89] = info.max
    _check_sort(x)
    _check_sort(x, descending=True)


@pytest.mark.parametrize("n", [RADIX_MIN - 1, RADIX_MIN, RADIX_MIN + RADIX_SMALL + 1, 200003])
def test_runs_of_equal_keys_sorted_by_place(n):
    """All equal, two values, and a ramp: ranges whose every key byte ties go on to the place's
    bytes (past 2**16 places, three of them)."""
    rng = np.random.default_rng(n)
    for x in (np.zeros(n, np.float32), (rng.random(n) < 0.5).astype(np.float32),
              np.arange(n, dtype=np.float32)[::-1].copy()):
        _check_sort(x.reshape(1, -1))


def test_sorts_along_a_strided_dim_and_a_top_k_past_the_heap():
    x = np.random.default_rng(8).integers(-1000, 1000, (5000, 3)).astype(np.int64)
    _check_sort(x, dim=0, descending=True)
    torch = require_module("torch")
    y = np.random.default_rng(9).standard_normal((2, 9001)).astype(np.float32)
    values, indices = run_torch(lambda t: torch.topk(t, 5000, 1, largest=False), y)
    order = stable_order(y, 1, False)[:, :5000]
    np.testing.assert_array_equal(indices, order)
    np.testing.assert_array_equal(values, np.take_along_axis(y, order, 1))


def _line_sort_kernels(program_text: str):
    program = lower_to_tensor_program(parse_mlir(program_text, "sort.mlir"), line_walks=True)
    function = run_flow(program, flow_passes(gpu=False, implicit_gemm=False)).functions[0]
    return [normalize(outline(op, "sort")) for op in function.ops
            if isinstance(op, Generic) and is_line_walk(op)]


@pytest.mark.parametrize("dtype, descending", [(np.float32, False), (np.int64, True),
                                               (np.int16, False), (np.float16, True)])
def test_the_radix_sort_takes_an_order_by_one_key(dtype, descending):
    kernel, = _line_sort_kernels(sort_case((3, 1000), 1, dtype, descending).program)
    key, ascending = radix_key(kernel)
    assert ascending is not descending
    assert kernel.bindings[kernel.results[0].binding].dtype == "i64"


LEXICOGRAPHIC = """func.func @main(%a: tensor<600xi32>, %b: tensor<600xf32>) -> (tensor<600xi32>, tensor<600xf32>) {
  %r:2 = iree_linalg_ext.sort dimension(0) outs(%a, %b : tensor<600xi32>, tensor<600xf32>) {
  ^bb0(%a0: i32, %a1: i32, %b0: f32, %b1: f32):
    %lt = arith.cmpi slt, %a0, %a1 : i32
    %eq = arith.cmpi eq, %a0, %a1 : i32
    %blt = arith.cmpf olt, %b0, %b1 : f32
    %tie = arith.andi %eq, %blt : i1
    %before = arith.ori %lt, %tie : i1
    iree_linalg_ext.yield %before : i1
  } -> tensor<600xi32>, tensor<600xf32>
  return %r#0, %r#1 : tensor<600xi32>, tensor<600xf32>
}"""


def test_an_order_by_two_keys_is_sorted_by_comparing():
    """A lexicographic order (JAX's sort with two keys) is walked, but not by one key's bytes:
    the comparison sort takes it, and still gives numpy's lexsort."""
    import pyree.runtime as rt
    from pyree.compiler import compile_str
    kernel, = _line_sort_kernels(LEXICOGRAPHIC)
    assert radix_key(kernel) is None
    rng = np.random.default_rng(1)
    a = rng.integers(-5, 5, 600).astype(np.int32)
    b = rng.standard_normal(600).astype(np.float32)
    b[::7] = b[3]
    got_a, got_b = rt.load_module(compile_str(LEXICOGRAPHIC), device="local-task")["main"](a, b)
    order = np.lexsort((b, a))
    np.testing.assert_array_equal(np.asarray(got_a), a[order])
    np.testing.assert_array_equal(np.asarray(got_b), b[order])
