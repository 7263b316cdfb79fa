"""The flow passes that decide on shapes, in functions with run-time sizes (issue 29 item 5):
each fires where what it decides on is provably static (a dim, a stride, a loop box) and leaves
the rest; the whole compile on local-task matches numpy at several sizes, 0 and 1 included."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest
from pass_runs import after_pass, generics, run_local_task
from pyree.compiler.kernel import Cast, Load, walk
from pyree.compiler.tensor_program import View

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conv_cases import CASES  # noqa: E402
from test_channel_affine import batchnorm_mlir, params, reference  # noqa: E402
from test_gathers import take_rows  # noqa: E402

MARK = 7919  # a batch no other dim has: "tensor<7919x" becomes "tensor<?x"


def batch_at_run_time(mlir: str, arg: str) -> str:
    """``mlir`` (one function) with its batch, ``MARK``, a run-time dim of argument ``arg``,
    which every ``tensor.empty()`` of a batched type takes."""
    text = mlir.replace(f"tensor<{MARK}x", "tensor<?x")
    head, body = text.split("{\n", 1)
    arg_type = head.split(f"{arg}: ", 1)[1].split(">", 1)[0] + ">"
    dim = f"  %c0_ = arith.constant 0 : index\n  %n_ = tensor.dim {arg}, %c0_ : {arg_type}\n"
    body = body.replace("tensor.empty() : tensor<?x", "tensor.empty(%n_) : tensor<?x")
    return head + "{\n" + dim + body


@pytest.mark.parametrize("name", ["nchw_dilation2_pad", "nhwc_stride2_pad_batch2", "grouped", "f16"])
def test_convolutions_become_gemms_with_a_run_time_batch(name):
    """rewrite-convolutions: patches and one K loop (the filter's dims are static)."""
    conv = dataclasses.replace(CASES[name], n=MARK)
    mlir = batch_at_run_time(conv.mlir(), "%x")
    function = after_pass(mlir, "rewrite-convolutions")
    assert any(isinstance(op, View) for op in function.ops)
    assert all(len(op.loop_ranges) - op.num_parallel <= 1 for op in generics(function))
    tol = 1e-2 if conv.dtype == "f16" else 1e-4
    for n in (0, 1, 3):
        case = dataclasses.replace(conv, n=n)
        args = case.inputs(np.random.default_rng(n))
        got = run_local_task(mlir, *args, function="conv")
        assert got.shape == case.shapes()[3]
        np.testing.assert_allclose(got, case.reference(*args), rtol=tol, atol=tol)


def test_batchnorm_folds_into_a_convolution_with_a_run_time_batch():
    """fold-channel-affine: the four per-channel ops are gone (they index the static channel)."""
    p = params(np.random.default_rng(3))
    mlir = batch_at_run_time(batchnorm_mlir(*p).replace("tensor<1x", f"tensor<{MARK}x"), "%x")
    assert len(generics(after_pass(mlir, "fold-channel-affine"))) == 1
    for n in (0, 1, 2):
        x = np.random.default_rng(n).standard_normal((n, 3, 9, 11)).astype(np.float32)
        got = run_local_task(mlir, x, function="f")
        want = [reference(x[i:i + 1], *p)[1] for i in range(n)]  # the reference takes batch 1
        np.testing.assert_allclose(got, np.concatenate(want) if n else np.zeros((0, 5, 7, 9)),
                                   rtol=1e-4, atol=1e-4)


RESHAPED = """
func.func @main(%x: tensor<?x12xf32>) -> tensor<?x3x4xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x12xf32>
  %e = math.exp %x : tensor<?x12xf32>
  %v = tensor.expand_shape %e [[0], [1, 2]] output_shape [%n, 3, 4] : tensor<?x12xf32> into tensor<?x3x4xf32>
  %t = tensor.empty(%n) : tensor<?x3x4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>,
                                        affine_map<(d0, d1, d2) -> (d0, d1, d2)>],
                       iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%v : tensor<?x3x4xf32>) outs(%t : tensor<?x3x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %a : f32
    linalg.yield %s : f32
  } -> tensor<?x3x4xf32>
  return %r : tensor<?x3x4xf32>
}
"""


def test_a_view_with_a_run_time_batch_folds_into_its_reader():
    """fold-views: the batch digit's stride (12) is static and its range provably inside the
    dim for every batch, so the reader reads exp's result and the two ops fuse."""
    function = after_pass(RESHAPED, "fold-views")
    assert not any(isinstance(op, View) for op in function.ops)
    assert len(generics(after_pass(RESHAPED, "fuse-regions"))) == 1
    for n in (0, 1, 5):
        x = np.random.default_rng(n).standard_normal((n, 12)).astype(np.float32)
        got = run_local_task(RESHAPED, x)
        np.testing.assert_allclose(got, 2 * np.exp(x.astype(np.float64)).reshape(n, 3, 4), rtol=1e-6)


def test_a_view_whose_digit_could_carry_stays():
    """(n, w) viewed as (n, 3, w / 3): the view's strides (3 * (w / 3), w / 3) are not
    provably the source's (w, 1) for every w, so the view stays (and is right at w = 15)."""
    mlir = RESHAPED.replace("?x12", "?x?").replace("[%n, 3, 4]", "[%n, 3, %m]").replace(
        "?x3x4", "?x3x?").replace("%n = tensor.dim %x, %c0 : tensor<?x?xf32>",
                                  "%n = tensor.dim %x, %c0 : tensor<?x?xf32>\n  %c1 = arith.constant 1 : index\n"
                                  "  %w = tensor.dim %x, %c1 : tensor<?x?xf32>\n  %c3 = arith.constant 3 : index\n"
                                  "  %m = arith.divui %w, %c3 : index").replace("tensor.empty(%n)", "tensor.empty(%n, %m)")
    function = after_pass(mlir, "fold-views")
    assert any(isinstance(op, View) for op in function.ops)
    x = np.random.default_rng(2).standard_normal((4, 15)).astype(np.float32)
    got = run_local_task(mlir, x)
    np.testing.assert_allclose(got, 2 * np.exp(x.astype(np.float64)).reshape(4, 3, 5), rtol=1e-6)


def test_a_constant_gather_in_a_function_with_run_time_sizes():
    """fold-constant-gathers: a gather over a static box folds to a Load although the function
    has run-time sizes (its second result)."""
    mlir = take_rows(9, 3, [2, 3, 4, 5, 6]).replace(
        "func.func @main(%t: tensor<9x3xf32>) -> tensor<5x3xf32> {",
        "func.func @main(%t: tensor<9x3xf32>, %x: tensor<?xf32>) -> (tensor<5x3xf32>, tensor<?xf32>) {"
    ).replace("  return %r : tensor<5x3xf32>",
              "  %x2 = arith.addf %x, %x : tensor<?xf32>\n  return %r, %x2 : tensor<5x3xf32>, tensor<?xf32>")
    function = after_pass(mlir, "fold-constant-gathers")
    (op,) = [g for g in generics(function) if g.results[0] is function.results[0]]
    assert all(isinstance(e, Load) for r in op.outputs for e in walk(r.value)
               if hasattr(e, "binding"))
    import pyree.runtime as rt
    from pyree.compiler import CompileOptions, compile_str
    module = rt.load_module(compile_str(mlir, CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    t = np.random.default_rng(31).standard_normal((9, 3)).astype(np.float32)
    for n in (0, 7):
        x = np.arange(n, dtype=np.float32)
        rows, doubled = module["main"](t, x)
        np.testing.assert_array_equal(rows.to_host(), t[2:7])
        np.testing.assert_array_equal(doubled.to_host(), x + x)


ROW_SUM = """
func.func @main(%x: tensor<?x?xf16>) -> tensor<?xf16> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x?xf16>
  %c = arith.constant 0.0 : f16
  %e = tensor.empty(%n) : tensor<?xf16>
  %init = linalg.fill ins(%c : f16) outs(%e : tensor<?xf16>) -> tensor<?xf16>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
                                        affine_map<(d0, d1) -> (d0)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<?x?xf16>) outs(%init : tensor<?xf16>) {
  ^bb0(%a: f16, %acc: f16):
    %s = arith.addf %a, %acc : f16
    linalg.yield %s : f16
  } -> tensor<?xf16>
  return %r : tensor<?xf16>
}
"""


def test_an_f16_row_sum_of_run_time_length_accumulates_in_f32():
    """widen-narrow-floats: as in a static function, an f16 accumulator becomes f32 and the
    result is rounded once (an f16 sum of 1001 terms near 500 would be off by several units)."""
    (op,) = generics(after_pass(ROW_SUM, "widen-narrow-floats"))
    result = op.outputs[0]
    assert result.value.dtype == "f32" and isinstance(result.epilogue, Cast)
    for shape in ((3, 1001), (1, 1), (0, 5), (2, 0)):
        x = np.random.default_rng(52).uniform(0.0, 1.0, shape).astype(np.float16)
        got = run_local_task(ROW_SUM, x)
        want = x.astype(np.float64).sum(axis=1).astype(np.float16)
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=2.0 ** -10)
