"""Versions chosen by size (flow/versions.py, issue 29 item 5): a contraction whose rows are a
run-time size splits K as the static module compiled for the call's rows would, one version per
band of rows; the runtime keeps the chosen version's commands only (no branch, no wait, no copy
per call), and every version's numbers match numpy on both sides of each band's edge, with NaN,
infinities and -0 among the operands."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
from pass_runs import after_pass, generics
from pyree.compiler import CompileOptions, compile_str
from pyree.compiler.flow import split_reduction as sr
from pyree.compiler.sizes import substitute
from pyree.compiler.tensor_program import If
from pyree.runtime.module.reader import read_module
from trace_checks import check_trace, dispatches

MATMUL = """
func.func @mm(%a: tensor<{m}x{k}x{t}>, %b: tensor<{k}x{n}x{t}>) -> tensor<{m}x{n}xf32> {{{dims}
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty({rows}) : tensor<{m}x{n}xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %r = linalg.matmul ins(%a, %b : tensor<{m}x{k}x{t}>, tensor<{k}x{n}x{t}>)
      outs(%f : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  return %r : tensor<{m}x{n}xf32>
}}
"""


def matmul(m: int | None, k: int, n: int, t: str = "f32") -> str:
    """``a[m, k] @ b[k, n]`` summed in f32; ``m`` None: a run-time row count."""
    dims = "" if m is not None else (f"\n  %c0 = arith.constant 0 : index\n"
                                     f"  %m = tensor.dim %a, %c0 : tensor<?x{k}x{t}>")
    return MATMUL.format(m="?" if m is None else m, k=k, n=n, t=t, dims=dims,
                         rows="" if m is not None else "%m")


def versions(function) -> list:
    """[(condition or None, the version's ops)] of the function's one size-chosen If chain."""
    (op,) = [op for op in function.ops if isinstance(op, If)]
    out = []
    while isinstance(op, If):
        out.append((op.condition, op.then.ops))
        op = op.otherwise.ops[0] if len(op.otherwise.ops) == 1 and isinstance(
            op.otherwise.ops[0], If) else None if not op.otherwise.ops else op.otherwise
        if not isinstance(op, If):
            out.append((None, op.ops))
            break
    return out


def splits_of(ops) -> int:
    """The K chunks of a version, or of a static function's ops: 1 where the product is whole."""
    partial = [g for g in ops if "partial" in g.origin]
    return partial[0].loop_ranges[0] if partial else 1


def chosen(chain, rows: int):
    """The version of ``chain`` that a call with ``rows`` rows runs."""
    for condition, ops in chain:
        if condition is None or substitute(condition, {s: rows for s in condition.symbols()}):
            return ops
    raise AssertionError("no version taken")


@pytest.mark.parametrize("k, n, t", [(768, 768, "f16"), (3072, 768, "f16"), (256, 1024, "f16"),
                                     (1000, 200, "f32")])
def test_rows_split_k_as_the_static_module_would_on_the_gpu(k, n, t):
    """For every row count from the tensor-core tile's least on, the version a call takes splits
    K in the chunks the static module at that row count splits it in (or keeps it whole); below
    GPU_MIN_SIDE rows it takes that count's plan (the static one runs the matrix-vector
    template there, which takes no run-time extent). Where the static plans make more than
    MAX_VERSIONS bands, the bands between the first ones and the last two take more chunks."""
    chain = versions(after_pass(matmul(None, k, n, t), "split-reductions", gpu=True,
                                implicit_gemm=True))
    assert 2 <= len(chain) <= sr.MAX_VERSIONS
    assert splits_of(chain[-1][1]) == 1  # many rows: whole
    merged = 0
    for rows in (1, 7, 16, 63, 64, 117, 118, 127, 128, 129, 200, 246, 400, 513, 600, 705, 2049,
                 2376, 3100, 5324, 5325, 5407, 9000):
        static = splits_of(generics(after_pass(matmul(max(rows, sr.GPU_MIN_SIDE), k, n, t),
                                               "split-reductions", gpu=True, implicit_gemm=True)))
        taken = splits_of(chosen(chain, rows))
        assert taken == static or taken > static > 1, rows
        merged += taken != static
    assert merged == 0 or len(chain) == sr.MAX_VERSIONS


@pytest.mark.parametrize("k, n", [(768, 768), (768, 3072), (1000, 200)])
def test_rows_from_one_take_the_static_plan_where_small_sides_are_tiled(k, n):
    """Where every target runs a side below GPU_MIN_SIDE on its tiled templates (Vulkan), up to
    GPU_GEMV_ROWS rows take the static module's plan at that very count (a decode's one row:
    the matrix-vector split), not the plan at GPU_MIN_SIDE rows; from there on as on the
    other GPUs."""
    chain = versions(after_pass(matmul(None, k, n), "split-reductions", gpu=True,
                                implicit_gemm=False, small_sides=True))
    assert 2 <= len(chain) <= sr.MAX_VERSIONS
    merged = 0
    for rows in (1, 2, 4, 5, 7, 15, 16, 17, 64, 129, 600, 2049):
        probe = rows if rows <= sr.GPU_GEMV_ROWS else max(rows, sr.GPU_MIN_SIDE)
        static = splits_of(generics(after_pass(matmul(probe, k, n), "split-reductions", gpu=True,
                                               implicit_gemm=False)))
        taken = splits_of(chosen(chain, rows))
        assert taken == static or taken > static > 1, rows
        merged += taken != static
    assert merged == 0 or len(chain) == sr.MAX_VERSIONS
    at_one = splits_of(generics(after_pass(matmul(1, k, n), "split-reductions", gpu=True)))
    assert splits_of(chosen(chain, 1)) == at_one > 1


EVERY_DIM = """
func.func @mm(%a: tensor<?x?x{t}>, %b: tensor<?x?x{t}>) -> tensor<?x?xf32> {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %a, %c0 : tensor<?x?x{t}>
  %n = tensor.dim %b, %c1 : tensor<?x?x{t}>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%m, %n) : tensor<?x?xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x?xf32>) -> tensor<?x?xf32>
  %r = linalg.matmul ins(%a, %b : tensor<?x?x{t}>, tensor<?x?x{t}>)
      outs(%f : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}}
"""


def test_a_run_time_k_splits_where_the_call_s_k_divides():
    """M, N and K at run time: a call takes K / 4 or K / 2 chunks where the static module at
    its sizes would cut K at least that many ways and the chunks divide the call's K, else the
    product whole; never more chunks than the static module."""
    chain = versions(after_pass(EVERY_DIM.format(t="f32"), "split-reductions", gpu=True,
                                implicit_gemm=True))
    assert [splits_of(ops) for _, ops in chain] == [4, 2, 1]
    for m, k, n in [(1024, 1024, 1024), (1024, 1026, 1024), (1024, 1027, 1024), (7, 5, 13),
                    (2048, 1024, 2048), (1, 4096, 1), (1, 1000, 1), (1500, 2048, 900),
                    (1500, 2048, 1300), (200, 1536, 7000), (200, 1536, 12000)]:
        values = {"s0": m, "s1": k, "s3": n}
        taken = next(splits_of(ops) for condition, ops in chain
                     if condition is None or substitute(condition, values))
        static = splits_of(generics(after_pass(matmul(m, k, n), "split-reductions", gpu=True,
                                               implicit_gemm=True)))
        assert k % taken == 0 and (taken == static or 1 <= taken < static), (m, k, n, taken)
        assert taken == static or static not in (1, 2, 4) or k % static, (m, k, n, taken)


def test_a_run_time_k_on_tensor_cores_stays_whole():
    """f16 operands: the tensor-core templates stage no run-time coefficient, so no split."""
    function = after_pass(EVERY_DIM.format(t="f16"), "split-reductions", gpu=True,
                          implicit_gemm=True)
    assert not any(isinstance(op, If) for op in function.ops)
    assert splits_of(generics(function)) == 1


def test_no_versions_where_no_size_would_split():
    function = after_pass(matmul(None, 64, 4096, "f16"), "split-reductions", gpu=True,
                          implicit_gemm=True)
    assert not any(isinstance(op, If) for op in function.ops)


def test_bounds_leave_out_the_versions_no_call_takes():
    """With the rows bounded below the first band's edge, the split version alone, no If."""
    mlir = matmul(None, 3072, 768, "f16")
    function = after_pass(mlir, "split-reductions", gpu=True, implicit_gemm=True)
    (condition, _), *_ = versions(function)
    (edge,) = [a.args[1] for a in condition.atoms() if a.op == "lt"]  # rows < edge
    from pyree.compiler.flow.passes import flow_passes, run_passes
    from pyree.compiler.input import import_mlir
    from pyree.compiler.tensor_program import Symbol
    (fn,) = import_mlir(mlir, "t.mlir").functions
    fn.symbols = [Symbol(s.name, 1, edge - 1) for s in fn.symbols]
    passes = flow_passes(True, True)
    last = [p.name for p in passes].index("split-reductions")
    bounded = run_passes(fn, passes[:last + 1])
    assert not any(isinstance(op, If) for op in bounded.ops)
    assert splits_of(generics(bounded)) == splits_of(versions(function)[0][1])


# f32 on llvm-cpu: K = 1024, N = 2048 splits 4 ways up to 528 rows (66 tiles of 16384 outputs),
# 2 ways up to 1048, whole from 1049 (FEW_TILES); each edge is called on both sides.
K, N = 1024, 2048
EDGES = (0, 1, 7, 528, 529, 1048, 1049, 1100)


@pytest.fixture(scope="module")
def cpu_module() -> bytes:
    return compile_str(matmul(None, K, N), CompileOptions(target_backends=["llvm-cpu"]))


def test_the_module_holds_size_branches(cpu_module):
    tree = read_module(cpu_module).tree
    assert (tree.schemaVersionMajor, tree.schemaVersionMinor) == (1, 8)
    (fn,) = tree.functions
    branches = [c.branch for c in fn.commands if c.kind == 5]
    assert any(b.conditionSize is not None for b in branches)


def test_each_version_matches_numpy_and_runs_without_a_branch(cpu_module, tmp_path):
    module = rt.load_module(cpu_module, device="local-task")
    rng = np.random.default_rng(5)
    b = rng.standard_normal((K, N)).astype(np.float32)
    b[3, 5], b[7, :3] = np.inf, -0.0
    expected_dispatches = {0: 0, 1: 2, 7: 2, 528: 2, 529: 2, 1048: 2, 1049: 1, 1100: 1}
    for rows in EDGES:
        a = rng.standard_normal((rows, K)).astype(np.float32)
        if rows > 2:
            a[1, 4], a[2, :] = np.nan, -0.0
        path = tmp_path / f"{rows}.json"
        with rt.trace(str(path)):
            got = module.mm(a, b).to_host()
        spans = check_trace(str(path))
        assert not [s for s in spans if s["cat"] == "host" and s["name"] == "branch"]
        assert len(dispatches(spans)) == expected_dispatches[rows], rows
        with np.errstate(invalid="ignore"):
            ref = a.astype(np.float64) @ b.astype(np.float64)
        assert got.shape == (rows, N)
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-3 * np.sqrt(K))
        assert np.array_equal(np.isnan(got), np.isnan(ref))


CHAIN = """
func.func @chain(%a: tensor<?x1024xf32>, %b: tensor<1024x2048xf32>, %c: tensor<2048x40xf32>)
    -> tensor<?x40xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x1024xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%m) : tensor<?x2048xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x2048xf32>) -> tensor<?x2048xf32>
  %h = linalg.matmul ins(%a, %b : tensor<?x1024xf32>, tensor<1024x2048xf32>)
      outs(%f : tensor<?x2048xf32>) -> tensor<?x2048xf32>
  %e2 = tensor.empty(%m) : tensor<?x40xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<?x40xf32>) -> tensor<?x40xf32>
  %r = linalg.matmul ins(%h, %c : tensor<?x2048xf32>, tensor<2048x40xf32>)
      outs(%f2 : tensor<?x40xf32>) -> tensor<?x40xf32>
  return %r : tensor<?x40xf32>
}
"""


def test_a_version_inside_the_program_feeds_the_next_one():
    """The first product's result is no function result: each version writes it where the
    next product reads it, whichever version ran."""
    module = rt.load_module(compile_str(CHAIN, CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    rng = np.random.default_rng(9)
    b = rng.standard_normal((1024, 2048)).astype(np.float32) / 32
    c = rng.standard_normal((2048, 40)).astype(np.float32) / 32
    for rows in (1, 529, 1049, 3):
        a = rng.standard_normal((rows, 1024)).astype(np.float32)
        a[0, 0] = -np.inf
        got = module.chain(a, b, c).to_host()
        with np.errstate(invalid="ignore"):
            ref = (a.astype(np.float64) @ b) @ c
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
        assert np.array_equal(np.isnan(got), np.isnan(ref))


def test_versions_hold_only_the_bytes_of_the_version_a_call_runs():
    """Each If's versions share one area, sized per call for the version taken, and the two
    Ifs share it too: at 1100 rows the first product runs whole (no partials) and the second
    in 8 chunks, so the arena is the first product's result and the second's partials only,
    not the first's 4-way partials (36 MB there) as well."""
    from pyree.runtime.vm.sizes import Sizes

    fn = read_module(compile_str(CHAIN, CompileOptions(target_backends=["llvm-cpu"]))
                     ).tree.functions[0]
    sizes = Sizes(fn)
    for rows, partials in ((1100, 8 * 1100 * 40 * 4), (500, 4 * 500 * 2048 * 4)):
        hidden = rows * 2048 * 4  # the first product's result, which the second reads
        assert sizes.instance((rows,)).transientSize <= hidden + partials + 4 * 64, rows
