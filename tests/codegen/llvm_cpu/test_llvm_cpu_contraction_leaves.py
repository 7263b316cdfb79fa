"""A static K longer than a cascade leaf, run leaf by leaf across the tile (``matmul._k_blocked``)
and with the panels of a tile packed together (``matmul._pack``): the same sums, bit for bit, as
the whole-K micro-kernel of a kernel with run-time M and N (which keeps K's cascade in
registers), and numpy's within rounding; at leaf counts that end cascade levels (K = 4096 + 256,
4500: two levels), a K of whole leaves and one of a leaf and one step, with NaN, infinities and
-0.0, epilogues, residual inits, batches, transposed and converted operands, i32, and every x86
vector width."""

import numpy as np
import pytest
from llvmcpu_harness import Compiled, matmul, random_array, run
from pyree.compiler.codegen.common.normalize import normalize
from pyree.compiler.codegen.llvm_cpu.matmul import plan as plan_matmul
from pyree.compiler.codegen.llvm_cpu.targets import resolve_target
from pyree.compiler.sizes import Size
from test_llvm_cpu_dynamic import dispatch

P0, P1 = Size.symbol("p0"), Size.symbol("p1")


def inputs_for(kernel, rng, special: bool):
    inputs = {i: random_array(b.dtype, b.shape, rng) for i, b in enumerate(kernel.bindings)
              if b.access == "read"}
    if special:
        a, b = inputs[0], inputs[1]
        a[..., 3, 5], a[..., -1, -1], b[..., 7, 2] = np.nan, np.inf, -np.inf
        a[..., 4, :] = -0.0    # a row whose products are all -0.0 or 0
    return inputs


def static_and_run_time(M, N, K, cpu, **variant):
    """The static kernel's and the run-time-M, N one's results on the same inputs."""
    static = matmul(M, N, K, **variant)
    rng = np.random.default_rng(M * N + K)
    inputs = inputs_for(static, rng, special=variant.get("acc", "f32") != "i32")
    got = run(static, inputs, cpu=cpu)[-1]
    dynamic = matmul(P0, P1, K, **variant)
    assert not plan_matmul(normalize(dynamic), resolve_target(cpu)).leaves
    want = dispatch(Compiled([dynamic], cpu), dynamic, (M, N), inputs)[-1]
    return got, want, inputs


@pytest.mark.parametrize("cpu", ["host", "haswell", "skylake-avx512", "generic"])
@pytest.mark.parametrize("M,N,K,variant", [
    (13, 37, 1000, {}),                                        # y in place
    (29, 75, 257, {"bias": True, "relu": True}),               # one leaf and one step
    (7, 61, 512, {"init_from": True}),                         # whole leaves only
    (9, 35, 4500, {"b_transposed": True}),                     # two levels, packed a leaf at a time
    (5, 20, 4352, {"bias": True}),                             # 17 leaves: level 1 ends at 16
    (19, 45, 600, {"batch": 2, "b_transposed": True}),
    (7, 30, 700, {"batch": 3, "bias": True}),                  # batch, y in place
    (11, 33, 700, {"in_dtype": "f16"}),
])
def test_leaves_sum_as_the_whole_k_kernel(M, N, K, variant, cpu):
    got, want, inputs = static_and_run_time(M, N, K, cpu, **variant)
    if got.dtype == np.float32 and np.isnan(want).any() and not np.isnan(got).any():
        pytest.fail("NaN lost")
    np.testing.assert_array_equal(got, want)
    a, b = inputs[0].astype(np.float64), inputs[1].astype(np.float64)
    b = np.swapaxes(b, -1, -2) if variant.get("b_transposed") else b
    with np.errstate(invalid="ignore"):
        ref = a @ b
    extra = [inputs[i].astype(np.float64) for i in sorted(inputs) if i >= 2]
    ref = ref + extra.pop() if variant.get("init_from") else ref
    ref = ref + extra.pop(0) if variant.get("bias") else ref
    ref = np.maximum(ref, 0) if variant.get("relu") else ref
    rtol = 1e-3 if variant.get("in_dtype") == "f16" else 2e-5
    np.testing.assert_allclose(got.astype(np.float64), ref, rtol=rtol, atol=rtol * np.sqrt(K))
    assert np.isnan(got[..., 3, :]).all()


def test_which_kernels_run_leaf_by_leaf():
    """Static kernels with K past one leaf whose y is read in place, or whose whole-K panel
    would not fit the stack; a y packed whole (or a run-time M) keeps K in registers."""
    for (M, N, K, variant, cpu), leaves in [
            ((13, 37, 1000, {}, "host"), True), ((13, 37, 256, {}, "host"), False),
            ((7, 30, 700, {"batch": 3}, "haswell"), True),
            ((9, 35, 4500, {"b_transposed": True}, "haswell"), True),
            ((9, 35, 4500, {"b_transposed": True}, "generic"), False),   # 8 columns fit
            ((19, 45, 600, {"b_transposed": True}, "host"), False),
            ((P0, 45, 1000, {}, "host"), False)]:
        lowering = plan_matmul(normalize(matmul(M, N, K, **variant)), resolve_target(cpu))
        assert lowering.leaves == leaves, (M, N, K, variant, cpu)


def test_i32_leaves():
    got, want, inputs = static_and_run_time(23, 40, 777, "host", in_dtype="i32", acc="i32")
    np.testing.assert_array_equal(got, want)
    ref = inputs[0].astype(np.int64) @ inputs[1].astype(np.int64)
    np.testing.assert_array_equal(got, ref.astype(np.int32))


def test_panels_packed_together():
    """Rows of y far apart: a tile's panels are packed in one pass, as many as fit
    ``GROUP_BYTES``, the last group of the tile narrower; N leaves a ragged last panel."""
    for M, N, K, cpu in ((64, 3136 + 5, 147, "haswell"), (40, 2000 + 3, 600, "skylake-avx512"),
                         (33, 1500 + 17, 300, "host")):
        kernel = matmul(M, N, K, bias=True, relu=True)
        lowering = plan_matmul(normalize(kernel), resolve_target(cpu))
        assert lowering.pack and lowering.group > 1, (M, N, K, cpu)
        rng = np.random.default_rng(N)
        inputs = inputs_for(kernel, rng, special=False)
        got = run(kernel, inputs, cpu=cpu)[-1]
        ref = np.maximum(inputs[0].astype(np.float64) @ inputs[1] + inputs[2], 0)
        np.testing.assert_allclose(got, ref, rtol=2e-5, atol=2e-5 * np.sqrt(K))


@pytest.mark.parametrize("cpu", ["host", "haswell", "skylake-avx512", "generic"])
@pytest.mark.parametrize("M,N,K,variant", [
    (100, 70, 300, {"in_dtype": "f16"}),                       # tiles, a leaf and 44 steps
    (29, 75, 41, {"in_dtype": "f16", "bias": True}),           # K in registers, 41 = 5 vectors + 1
    (13, 40, 9, {"in_dtype": "f16"}),                          # a vector and a masked one (AVX2)
    (37, 29, 53, {"in_dtype": "i8", "acc": "i32"}),
    (19, 45, 600, {"in_dtype": "f16", "batch": 2, "b_transposed": True}),
])
def test_converted_x_packed_as_read_in_place(M, N, K, variant, cpu):
    """An x converted from f16 or i8 is packed (``matmul._pack_x``), converted a vector of k
    at a time: the same results, bit for bit, as the run-time-M, N kernel that converts it in
    place, NaN, infinities and -0.0 included; numpy's within rounding."""
    lowering = plan_matmul(normalize(matmul(M, N, K, **variant)), resolve_target(cpu))
    assert lowering.pack_x and (lowering.leaves == (K > 256))
    assert not plan_matmul(normalize(matmul(M, N, K)), resolve_target(cpu)).pack_x
    got, want, inputs = static_and_run_time(M, N, K, cpu, **variant)
    np.testing.assert_array_equal(got, want)
    a, b = inputs[0].astype(np.float64), inputs[1].astype(np.float64)
    b = np.swapaxes(b, -1, -2) if variant.get("b_transposed") else b
    with np.errstate(invalid="ignore"):
        ref = a @ b + (inputs[2] if variant.get("bias") else 0)
    if variant.get("acc") == "i32":
        np.testing.assert_array_equal(got, ref.astype(np.int32))
        return
    np.testing.assert_allclose(got.astype(np.float64), ref, rtol=1e-3, atol=1e-3 * np.sqrt(K))
    assert np.isnan(got[..., 3, :]).all()
