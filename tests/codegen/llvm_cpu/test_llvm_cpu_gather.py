"""Gather kernels through every llvm-cpu template (elementwise, vectorized reduction, contraction
micro-kernel) against ``kernel.evaluate``: index dtypes of every width and signedness, tables of
1-bit, 16-bit and bf16 elements, gathers inside Select arms, and out-of-range indices (clamped)."""

import numpy as np
import pytest
from llvmcpu_harness import affine, random_array, run
from llvmlite import ir  # noqa: F401  (the backend's dependency: skip cleanly without it)
from pyree.compiler.codegen.common.normalize import normalize
from pyree.compiler.codegen.llvm_cpu.matmul import plan as plan_matmul
from pyree.compiler.codegen.llvm_cpu.targets import resolve_target
from pyree.compiler.kernel import (
    DTYPES,
    Acc,
    Binary,
    Binding,
    Cast,
    Compare,
    Const,
    Gather,
    Kernel,
    Load,
    LoopIndex,
    Result,
    Select,
    evaluate,
)


def check(kernel: Kernel, inputs: dict[int, np.ndarray]) -> np.ndarray:
    got = run(kernel, inputs)
    want = [inputs.get(i, np.zeros(b.shape, DTYPES[b.dtype])).copy()
            for i, b in enumerate(kernel.bindings)]
    evaluate(kernel, want)
    out = kernel.results[0].binding
    np.testing.assert_array_equal(got[out], want[out])
    return got[out]


@pytest.mark.parametrize("ids_dtype", ["i8", "ui8", "i16", "i32", "ui32", "i64", "index"])
def test_rows_at_ids_of_every_int_dtype(ids_dtype):
    """out[i, j] = table[ids[i], j], 300 rows: ui8 ids reach past 127, i8 ones go negative."""
    rows, cols, n = 300, 37, 41
    ids = Load(0, (affine(1, 0),), ids_dtype)
    kernel = Kernel("rows", (n, cols), 2,
                    (Binding(ids_dtype, (n,), "read"), Binding("f32", (rows, cols), "read"),
                     Binding("f32", (n, cols), "write")),
                    (Result(2, (affine(1, 0), affine(0, 1)),
                            Gather(1, (ids, LoopIndex(1)), "f32")),))
    info = np.iinfo(DTYPES[ids_dtype])
    rng = np.random.default_rng(3)
    ids_data = rng.integers(max(info.min, -400), min(info.max, 400), n, endpoint=True)
    ids_data[:4] = [0, min(info.max, rows - 1), info.min, info.max]
    ids_data = ids_data.astype(DTYPES[ids_dtype])
    table = random_array("f32", (rows, cols), rng)
    got = check(kernel, {0: ids_data, 1: table})
    np.testing.assert_array_equal(got, table[np.clip(ids_data.astype(np.float64), 0, rows - 1).astype(int)])


@pytest.mark.parametrize("dtype", ["i1", "f16", "bf16", "i8", "f64"])
def test_gathered_element_dtypes(dtype):
    kernel = Kernel("g", (29,), 1,
                    (Binding("i32", (29,), "read"), Binding(dtype, (3, 11), "read"),
                     Binding(dtype, (29,), "write")),
                    (Result(2, (affine(1),), Gather(1, (
                        Binary("rem", Load(0, (affine(1),), "i32"), Const(3, "i32"), "i32"),
                        Binary("div", Load(0, (affine(1),), "i32"), Const(3, "i32"), "i32"),
                    ), dtype)),))
    rng = np.random.default_rng(5)
    check(kernel, {0: rng.integers(-5, 40, 29).astype(np.int32), 1: random_array(dtype, (3, 11), rng)})


def test_embedding_bag_reduction():
    """out[i, d] = max_j table[ids[i, j], d]: a Gather in a reduction's value, vectorized over d."""
    n, bag, rows, dim = 7, 9, 50, 67
    g = Gather(1, (Load(0, (affine(1, 0, 0), affine(0, 0, 1)), "i64"), LoopIndex(1)), "f32")
    kernel = Kernel("bag", (n, dim, bag), 2,
                    (Binding("i64", (n, bag), "read"), Binding("f32", (rows, dim), "read"),
                     Binding("f32", (n, dim), "write")),
                    (Result(2, (affine(1, 0, 0), affine(0, 1, 0)), Binary("max", Acc(0, "f32"), g, "f32"),
                            Const(-np.inf, "f32")),))
    rng = np.random.default_rng(6)
    check(kernel, {0: rng.integers(-3, rows + 3, (n, bag)), 1: random_array("f32", (rows, dim), rng)})


def test_gathered_rows_through_the_matmul_micro_kernel():
    """C = A[perm] @ B with A's rows gathered: the contraction template evaluates x per row."""
    M, N, K, rows = 37, 29, 53, 40
    perm = Load(0, (affine(1, 0, 0),), "i32")
    cols = Load(3, (affine(0, 0, 1),), "i32")  # a Load, not a LoopIndex: x stays "pure"
    x = Gather(1, (perm, cols), "f32")
    y = Load(2, (affine(0, 0, 1), affine(0, 1, 0)), "f32")
    kernel = Kernel("mm", (M, N, K), 2,
                    (Binding("i32", (M,), "read"), Binding("f32", (rows, K), "read"),
                     Binding("f32", (K, N), "read"), Binding("i32", (K,), "read"),
                     Binding("f32", (M, N), "write")),
                    (Result(4, (affine(1, 0, 0), affine(0, 1, 0)),
                            Binary("add", Acc(0, "f32"), Binary("mul", x, y, "f32"), "f32"),
                            Const(0.0, "f32")),))
    assert plan_matmul(normalize(kernel), resolve_target("host")) is not None
    rng = np.random.default_rng(8)
    a, b = random_array("f32", (rows, K), rng), random_array("f32", (K, N), rng)
    inputs = {0: rng.integers(0, rows, M).astype(np.int32), 1: a, 2: b,
              3: np.arange(K, dtype=np.int32)}
    got = run(kernel, inputs)[4]
    np.testing.assert_allclose(got, a[inputs[0]] @ b, rtol=1e-5, atol=1e-4)


def test_gather_in_a_select_arm_beside_a_guarded_load():
    """select(i < 5, table[ids[i]], x[i - 5]): the other arm's load is out of range where the
    gather is chosen (tensor.pad's shape), and the gather's own index is clamped."""
    n = 23
    i = LoopIndex(0)
    value = Select(Compare("lt", i, Const(5, "index")),
                   Gather(1, (Cast("extsi", Load(0, (affine(1),), "i32"), "index"),), "f32"),
                   Load(2, (affine(1, const=-5),), "f32"), "f32")
    kernel = Kernel("sel", (n,), 1,
                    (Binding("i32", (n,), "read"), Binding("f32", (4,), "read"),
                     Binding("f32", (n - 5,), "read"), Binding("f32", (n,), "write")),
                    (Result(3, (affine(1),), value),))
    rng = np.random.default_rng(9)
    check(kernel, {0: rng.integers(-9, 9, n).astype(np.int32), 1: random_array("f32", (4,), rng),
                   2: random_array("f32", (n - 5,), rng)})


def test_a_gather_of_an_empty_binding_is_refused():
    from pyree.compiler.errors import CompileError
    kernel = Kernel("empty", (3,), 1,
                    (Binding("i32", (3,), "read"), Binding("f32", (0,), "read"),
                     Binding("f32", (3,), "write")),
                    (Result(2, (affine(1),), Gather(1, (Load(0, (affine(1),), "i32"),), "f32")),))
    with pytest.raises(CompileError, match="gather reads empty binding 1"):
        normalize(kernel)


def test_loop_indices_in_a_gather_survive_loop_reordering_and_dropping():
    """Loops (3, 1, 5) stored transposed, the unit loop and both others in the gathered index:
    normalize drops, reorders and renumbers loops inside the Gather's index expressions too."""
    ids = Cast("bitcast", Load(0, (affine(1, 0, 0),), "i64"), "index")
    row = Binary("add", ids, LoopIndex(1), "index")
    col = Binary("sub", LoopIndex(2), LoopIndex(0), "index")
    kernel = Kernel("t", (3, 1, 5), 3,
                    (Binding("i64", (3,), "read"), Binding("f32", (7, 5), "read"),
                     Binding("f32", (5, 1, 3), "write")),
                    (Result(2, (affine(0, 0, 1), affine(0, 1, 0), affine(1, 0, 0)),
                            Gather(1, (row, col), "f32")),))
    rng = np.random.default_rng(10)
    check(kernel, {0: np.array([2, -1, 9]), 1: random_array("f32", (7, 5), rng)})
