"""Row kernels: softmax, log_softmax, layernorm and rmsnorm compile to one dispatch (a chain of
reductions over the same rows plus the elementwise op reading them, ``flow/row_fusion.py``) and
give numpy's float64 numbers on local-sync and local-task, special values included."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pyree.runtime as rt
import pytest
from compiled import compiled
from pyree.compiler import CompileOptions, compile_str
from pyree.compiler.flow.passes import form_dispatch_regions
from pyree.compiler.kernel import Acc, AffineExpr, Binary, Const, Load, Result, Unary
from pyree.compiler.tensor_program import Function, Generic, Value, View

sys.path.insert(0, str(Path(__file__).resolve().parent))
import row_kernel_cases as C  # noqa: E402
from test_regions import run  # noqa: E402

KINDS = ("softmax", "log_softmax", "layernorm", "rmsnorm")
CPU = CompileOptions(target_backends=["llvm-cpu"])


def dispatches(vmfb: bytes) -> int:
    function = rt.read_module(vmfb).tree.functions[0]
    return sum(c.kind == 0 for c in function.commands or [])  # CommandKind.dispatch


@pytest.mark.parametrize("kind", KINDS)
def test_each_chain_is_one_dispatch(kind):
    assert dispatches(compiled(C.mlir(kind, 37, 129, "f16"), CPU)) == 1


@pytest.mark.parametrize("rows, fused", [(255, False), (256, True)])
def test_few_long_rows_stay_split_reductions(rows, fused):
    """split_reduction's rule: fewer than 256 rows of 16384 or more elements are split over the
    whole device instead (partial folds, then their fold), so their chain is not fused."""
    count = dispatches(compiled(C.mlir("softmax", rows, 16384, "f32"), CPU))
    assert (count == 1) == fused, count


@pytest.mark.parametrize("device", ["local-sync", "local-task"])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("kind", KINDS)
def test_chains_match_numpy_with_special_values(kind, dtype, device):
    rng = np.random.default_rng(11)
    for m, n in ((1, 7), (37, 1), (37, 129), (3, 1000), (3, 50257)):
        module = rt.load_module(compiled(C.mlir(kind, m, n, dtype), CPU), device=device)
        args = C.inputs(kind, m, n, dtype, rng, specials=True)
        C.check(kind, module[module.function_names[0]](*args), args, dtype)


def _ix(n, dims):
    return tuple(AffineExpr(tuple(int(j == d) for j in range(n))) if d is not None
                 else AffineExpr((0,) * n) for d in dims)


def _softmax_ops(x: Value, transposed_read: bool = False):
    """max over the last dim, sum of exp(x - max), exp(x - max) / sum, as three Generics."""
    m, n = x.shape
    mx, total, out = Value("f32", (m,), "max"), Value("f32", (m,), "sum"), Value("f32", (m, n), "out")
    ld = Load(0, _ix(2, (0, 1)), "f32")
    row = Load(1, _ix(2, (0,)), "f32")
    ops = [Generic([x], [mx], (Result(0, _ix(2, (0,)), Binary("max", ld, Acc(0, "f32"), "f32"),
                                      Const(-np.inf, "f32")),), (m, n), 1),
           Generic([x, mx], [total], (Result(0, _ix(2, (0,)), Binary(
               "add", Unary("exp", Binary("sub", ld, row, "f32"), "f32"), Acc(0, "f32"), "f32"),
               Const(0.0, "f32")),), (m, n), 1)]
    shifted = Load(1, _ix(2, (1,)) if transposed_read else _ix(2, (0,)), "f32")
    ops.append(Generic([x, mx, total], [out], (Result(0, _ix(2, (0, 1)), Binary(
        "div", Unary("exp", Binary("sub", ld, shifted, "f32"), "f32"),
        Load(2, _ix(2, (0,)), "f32"), "f32")),), (m, n), 2))
    return ops, out


def test_a_chain_through_unit_views_fuses_into_one_generic():
    x = Value("f32", (5, 5), "x")
    ops, out = _softmax_ops(x)
    keep = Value("f32", (5, 1), "max_keepdim")  # the max read through expand_shape
    ops.insert(1, View(keep, ops[0].results[0]))
    ops[1 + 1].inputs[1] = keep
    ops[1 + 1].outputs = (Result(0, _ix(2, (0,)), Binary("add", Unary("exp", Binary(
        "sub", Load(0, _ix(2, (0, 1)), "f32"), Load(1, _ix(2, (0, None)), "f32"), "f32"), "f32"),
        Acc(0, "f32"), "f32"), Const(0.0, "f32")),)
    fused = form_dispatch_regions(Function("f", [x], ops, [out]))
    generics = [op for op in fused.ops if isinstance(op, Generic)]
    assert len(generics) == 1 and [r.row for r in generics[0].outputs] == [False, False, True]


def test_a_read_at_another_row_is_not_fused():
    """out[i, j] reads max[j]: not the row's own max, so max stays a separate dispatch."""
    x = Value("f32", (5, 5), "x")
    ops, out = _softmax_ops(x, transposed_read=True)
    fused = form_dispatch_regions(Function("f", [x], ops, [out]))
    assert sum(isinstance(op, Generic) for op in fused.ops) == 2  # max+sum; out on its own


def test_a_softmax_over_the_leading_dim_is_one_dispatch():
    """Rows along dim 0 (x read at [d1, d0], the reduction over d1): the loops still match one
    to one, only the accesses are transposed."""
    src = C.mlir("softmax", 37, 129, "f32").replace("tensor<37xf32>", "tensor<129xf32>")
    src = src.replace("affine_map<(d0, d1) -> (d0, d1)>", "affine_map<(d0, d1) -> (d1, d0)>")
    vmfb = compile_str(src, CPU)
    assert dispatches(vmfb) == 1
    module = rt.load_module(vmfb, device="local-sync")
    x = np.random.default_rng(3).standard_normal((37, 129)).astype(np.float32)
    got = module[module.function_names[0]](x)
    C.check("softmax", np.asarray(got).T, [x.T], "f32")



@pytest.mark.parametrize("then", ["scale", "entropy"])
def test_ops_reading_a_row_result_elementwise_join_it(then):
    """A row result read at the element it is stored at is recomputed where it is read: a scale
    after softmax is one more row result, the entropy of softmax one more phase."""
    m, n = 37, 129
    vmfb = compile_str(C.softmax_then(m, n, then), CPU)
    assert dispatches(vmfb) == 1
    module = rt.load_module(vmfb, device="local-task")
    x = C.inputs("softmax", m, n, "f32", np.random.default_rng(9))[0]
    np.testing.assert_allclose(np.asarray(module["main"](x)), C.softmax_then_reference(then, x),
                               rtol=2e-5, atol=1e-6)


def _same_numbers(function: Function, fused: Function) -> None:
    x = np.random.default_rng(4).standard_normal(function.arguments[0].shape).astype(np.float32)
    for got, want in zip(run(fused, [x]), run(function, [x])):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_ops_between_that_read_a_result_move_after_the_row_kernel():
    """exp(max) (a second function result) sits between max and the sum: it follows the fused
    kernel, which stores max for it."""
    x = Value("f32", (7, 5), "x")
    ops, out = _softmax_ops(x)
    mx = ops[0].results[0]
    other = Value("f32", (7,), "exp_max")
    ops.insert(1, Generic([mx], [other], (Result(0, _ix(1, (0,)), Unary(
        "exp", Load(0, _ix(1, (0,)), "f32"), "f32")),), (7,), 1))
    function = Function("f", [x], ops, [out, other])
    fused = form_dispatch_regions(function)
    generics = [op for op in fused.ops if isinstance(op, Generic)]
    assert [len(g.outputs) for g in generics] == [3, 1]  # max, sum, row; then exp(max)
    _same_numbers(function, fused)


def test_a_sum_reading_max_at_another_row_stays_a_kernel_of_its_own():
    """sum[i] folds exp(x[i] - max[6 - i]): not row-wise, so only the division joins the sum."""
    x = Value("f32", (7, 5), "x")
    ops, out = _softmax_ops(x)
    ops[1].outputs = (dataclasses.replace(ops[1].outputs[0], value=Binary("add", Unary("exp", Binary(
        "sub", Load(0, _ix(2, (0, 1)), "f32"), Load(1, (AffineExpr((-1, 0), 6),), "f32"), "f32"),
        "f32"), Acc(0, "f32"), "f32")),)
    ops[2] = Generic([x, ops[1].results[0]], [out], (Result(0, _ix(2, (0, 1)), Binary(
        "div", Load(0, _ix(2, (0, 1)), "f32"), Load(1, _ix(2, (0,)), "f32"), "f32")),), (7, 5), 2)
    function = Function("f", [x], ops, [out])
    fused = form_dispatch_regions(function)
    assert [len(g.outputs) for g in fused.ops if isinstance(g, Generic)] == [1, 2]
    _same_numbers(function, fused)



@pytest.mark.parametrize("kind, shape", [("softmax_dim1", (3, 37, 5, 2)),
                                         ("batch_stats", (2, 37, 5, 7)),
                                         ("softmax_unit_dims", (1, 12, 1, 1025)),
                                         ("softmax_unit_dims", (3, 5, 1, 37))])
def test_chains_over_leading_dims_are_one_dispatch(kind, shape):
    """The elementwise op's loops (n, c, h, w) are permuted into the reductions' parallel-first
    order (c | n, h, w) or (n, h, w | c): still one kernel, the same numbers."""
    mlir, x, want = C.leading_dims(kind, shape)
    vmfb = compile_str(mlir, CPU)
    assert dispatches(vmfb) == 1
    module = rt.load_module(vmfb, device="local-task")
    C.check_against(np.asarray(module["main"](x)), want)
