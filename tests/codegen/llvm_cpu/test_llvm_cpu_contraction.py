"""Matmul-like kernels through the register-blocked micro-kernel, checked against numpy."""

import numpy as np
import pytest
from llvmcpu_harness import affine, matmul, random_array, run
from pyree.compiler.codegen.common.normalize import normalize
from pyree.compiler.codegen.llvm_cpu.matmul import _rows_per_block
from pyree.compiler.codegen.llvm_cpu.matmul import plan as plan_matmul
from pyree.compiler.codegen.llvm_cpu.targets import resolve_target
from pyree.compiler.kernel import (
    Acc,
    Binary,
    Binding,
    Const,
    Kernel,
    Load,
    Result,
    Unary,
    evaluate,
)


def check(kernel, rng, cpu="host", rtol=1e-5, micro_kernel=True, **ref_args):
    matched = plan_matmul(normalize(kernel), resolve_target(cpu)) is not None
    assert matched == micro_kernel
    inputs = {i: random_array(b.dtype, b.shape, rng) for i, b in enumerate(kernel.bindings)
              if b.access == "read"}
    got = run(kernel, inputs, cpu=cpu)[-1]
    a, b = (inputs[0].astype(np.float64), inputs[1].astype(np.float64))
    if ref_args.get("b_transposed"):
        b = np.swapaxes(b, -1, -2)
    ref = a @ b
    extra = [inputs[i].astype(np.float64) for i in sorted(inputs) if i >= 2]
    if ref_args.get("init_from"):
        ref = ref + extra.pop()
    if ref_args.get("bias"):
        ref = ref + extra.pop(0)
    if ref_args.get("relu"):
        ref = np.maximum(ref, 0)
    np.testing.assert_allclose(got.astype(np.float64), ref, rtol=rtol, atol=rtol * np.sqrt(a.shape[-1]))
    return got


@pytest.mark.parametrize("M,N,K", [(37, 29, 53), (128, 256, 64), (13, 100, 300), (2, 3, 1)])
def test_matmul_shapes(M, N, K):
    check(matmul(M, N, K), np.random.default_rng(M + N + K))


@pytest.mark.parametrize("M,N,K", [(1, 1, 1), (37, 1, 53), (1, 29, 53)])
def test_degenerate_matmuls_take_the_reduction_path(M, N, K):
    """Unit loops are dropped, so these become dot products / vecmats / a single product."""
    check(matmul(M, N, K), np.random.default_rng(M + N + K), micro_kernel=False)


def test_matmul_matches_reference_interpreter():
    kernel = matmul(5, 19, 7, bias=True, relu=True)
    rng = np.random.default_rng(20)
    a, b, bias = (random_array("f32", s, rng) for s in ((5, 7), (7, 19), (19,)))
    got = run(kernel, {0: a, 1: b, 2: bias})[3]
    ref = np.zeros((5, 19), np.float32)
    evaluate(kernel, [a, b, bias, ref])
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("variant", [
    {"batch": 3}, {"bias": True, "relu": True}, {"b_transposed": True}, {"init_from": True},
    {"in_dtype": "f16"}, {"batch": 2, "b_transposed": True, "bias": True},
])
def test_matmul_variants(variant):
    check(matmul(37, 45, 53, **variant), np.random.default_rng(21), **variant)


def test_f64_and_int8_matmul():
    rng = np.random.default_rng(22)
    check(matmul(37, 29, 53, in_dtype="f64", acc="f64"), rng, rtol=1e-12)
    kernel = matmul(37, 29, 53, in_dtype="i8", acc="i32")
    a, b = (random_array("i8", s, rng) for s in ((37, 53), (53, 29)))
    got = run(kernel, {0: a, 1: b})[2]
    np.testing.assert_array_equal(got, a.astype(np.int32) @ b.astype(np.int32))


@pytest.mark.parametrize("cpu", ["generic", "haswell"])
def test_matmul_on_narrower_vector_isas(cpu):
    check(matmul(37, 45, 53, bias=True), np.random.default_rng(23), cpu=cpu, bias=True)


def test_long_k_packs_b_a_leaf_at_a_time():
    """K too long for a whole-K packed panel on the stack: a transposed B is packed a cascade
    leaf of K at a time (test_llvm_cpu_contraction_leaves.py has the cases)."""
    kernel = matmul(9, 35, 4500, b_transposed=True)
    lowering = plan_matmul(normalize(kernel), resolve_target("host"))
    assert lowering.pack and lowering.leaves
    check(kernel, np.random.default_rng(24), rtol=1e-4, b_transposed=True)


@pytest.mark.parametrize("variant, packed", [
    ({}, False), ({"b_transposed": True}, True), ({"in_dtype": "f16"}, True),
    ({"in_dtype": "i8", "acc": "i32"}, True), ({"batch": 2}, False),
])
def test_only_transposed_or_converted_b_is_packed(variant, packed):
    """A row-major B of the accumulator's type is read in place; one whose columns are strided
    or whose elements are converted goes through the packed panel. Both agree with numpy at
    ragged shapes (NaN and infinities included for the float ones)."""
    M, N, K = 29, 75, 41
    kernel = matmul(M, N, K, bias=True, **variant)
    assert plan_matmul(normalize(kernel), resolve_target("host")).pack == packed
    rng = np.random.default_rng(27)
    inputs = {i: random_array(b.dtype, b.shape, rng) for i, b in enumerate(kernel.bindings)
              if b.access == "read"}
    a, b, bias = (inputs[i].astype(np.float64) for i in range(3))
    if variant.get("acc") != "i32":
        inputs[0][..., 3, 5], inputs[1][..., 7, 2] = np.nan, np.inf
        a, b = inputs[0].astype(np.float64), inputs[1].astype(np.float64)
    b = np.swapaxes(b, -1, -2) if variant.get("b_transposed") else b
    got = run(kernel, inputs)[-1].astype(np.float64)
    with np.errstate(invalid="ignore"):
        ref = a @ b + bias
    np.testing.assert_allclose(got, ref, rtol=1e-3 if variant.get("in_dtype") == "f16" else 1e-5,
                               atol=1e-4 * K)


def test_b_with_far_apart_rows_is_packed():
    """A row-major B goes through the packed panel where its rows lie a whole number of 4 KiB
    pages apart (N = 1024 f32: read in place, every k would map to one L1 set), or more than
    1 KiB apart (N = 257, 1025) where more than one block of rows reads each panel; rows 1 KiB
    apart (N = 256), or one block of rows (M = 5), read it in place. All agree with numpy."""
    for M, N, packed in ((13, 1024, True), (5, 1024, True), (13, 1025, True), (5, 1025, False),
                         (13, 257, True), (13, 256, False)):
        kernel = matmul(M, N, 37, bias=True)
        assert plan_matmul(normalize(kernel), resolve_target("host")).pack == packed, (M, N)
        check(kernel, np.random.default_rng(28), bias=True)


def test_matvec_is_a_vectorized_reduction():
    """y = A x has no n loop: it takes the reduction path, not the micro-kernel."""
    rng = np.random.default_rng(25)
    A, x = random_array("f32", (301, 257), rng), random_array("f32", (257,), rng)
    k = Kernel("matvec", (301, 257), 1,
               (Binding("f32", (301, 257), "read"), Binding("f32", (257,), "read"), Binding("f32", (301,), "write")),
               (Result(2, (affine(1, 0),), Binary("add", Acc(0, "f32"), Binary(
                   "mul", Load(0, (affine(1, 0), affine(0, 1)), "f32"), Load(1, (affine(0, 1),), "f32"), "f32"),
                   "f32"), init=Const(0.0, "f32"), epilogue=Unary("tanh", Acc(0, "f32"), "f32")),))
    got = run(k, {0: A, 1: x})[2]
    np.testing.assert_allclose(got, np.tanh(A.astype(np.float64) @ x), rtol=1e-5, atol=1e-5)


def test_block_height_wastes_least_on_the_ragged_last_block():
    """Blocks past M still run, so M=64 takes blocks of 11 (66 rows), not 12 (72)."""
    assert [_rows_per_block(M, min(M, 12)) for M in (12, 16, 24, 64, 160, 1000)] == [12, 8, 12, 11, 10, 12]
    lowering = plan_matmul(normalize(matmul(160, 196, 40)), resolve_target("skylake-avx512"))
    assert (lowering.micro.mr, lowering.micro.nr) == (10, 32)


@pytest.mark.parametrize("cpu", ["host", "skylake-avx512", "haswell", "generic"])
@pytest.mark.parametrize("M,N,K", [
    (160, 1060, 60),   # several workgroups; last panel 1060 % 32 = 4 columns: one vector
    (64, 112, 33),     # last panel exactly one full vector (avx-512)
    (16, 49, 24),      # last panel 17 columns: two vectors, the second one lane
    (13, 7, 5),        # one ragged panel only
])
def test_ragged_panels_and_block_heights(M, N, K, cpu):
    check(matmul(M, N, K, bias=True, relu=True), np.random.default_rng(M * N + K), cpu=cpu,
          bias=True, relu=True)


def test_half_width_last_vector_in_f64_and_int8():
    """49 columns: the ragged panel's last vector holds one column and runs at half width."""
    rng = np.random.default_rng(26)
    check(matmul(21, 49, 30, in_dtype="f64", acc="f64"), rng, rtol=1e-12)
    kernel = matmul(21, 49, 30, in_dtype="i8", acc="i32")
    a, b = (random_array("i8", s, rng) for s in ((21, 30), (30, 49)))
    np.testing.assert_array_equal(run(kernel, {0: a, 1: b})[2], a.astype(np.int32) @ b.astype(np.int32))
