"""Pass widen-narrow-floats (flow/narrow_floats.py): f16 arithmetic computes in f32 and rounds once
where the value leaves, and a narrow accumulator becomes f32. The IR right after the pass, then
the numbers of the whole compile on local-task against numpy (in float64) at odd sizes."""

from __future__ import annotations

import numpy as np
from pass_runs import after_pass, generics, run_local_task
from pyree.compiler.kernel import Binary, Cast, walk

CHAIN = """
func.func @main(%x: tensor<7x5xf16>, %y: tensor<7x5xf16>, %z: tensor<7x5xf16>) -> tensor<7x5xf16> {
  %m = arith.mulf %x, %y : tensor<7x5xf16>
  %s = arith.addf %m, %z : tensor<7x5xf16>
  %e = math.exp %s : tensor<7x5xf16>
  return %e : tensor<7x5xf16>
}
"""

ROW_SUM = """
func.func @main(%x: tensor<3x1001xf16>) -> tensor<3xf16> {
  %c = arith.constant 0.0 : f16
  %e = tensor.empty() : tensor<3xf16>
  %init = linalg.fill ins(%c : f16) outs(%e : tensor<3xf16>) -> tensor<3xf16>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
                                        affine_map<(d0, d1) -> (d0)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<3x1001xf16>) outs(%init : tensor<3xf16>) {
  ^bb0(%a: f16, %acc: f16):
    %s = arith.addf %a, %acc : f16
    linalg.yield %s : f16
  } -> tensor<3xf16>
  return %r : tensor<3xf16>
}
"""


def test_an_f16_chain_computes_in_f32_and_rounds_once():
    (op,) = generics(after_pass(CHAIN, "widen-narrow-floats"))
    value = op.outputs[0].value
    assert isinstance(value, Cast) and (value.op, value.dtype) == ("fptrunc", "f16")
    assert all(e.dtype == "f32" for e in walk(value.x) if isinstance(e, Binary))
    assert sum(isinstance(e, Cast) and e.op == "fptrunc" for e in walk(value)) == 1
    rng = np.random.default_rng(51)
    x, y, z = (rng.standard_normal((7, 5)).astype(np.float16) for _ in range(3))
    x[0, :3], y[0, :3], z[0, :3] = [np.inf, -0.0, 20.0], [0.0, 1.0, 1.0], [0.0, np.nan, 0.0]
    with np.errstate(invalid="ignore", over="ignore"):  # inf * 0: NaN; exp(20) is inf in f16
        want = np.exp(x.astype(np.float64) * y + z).astype(np.float16)
    got = run_local_task(CHAIN, x, y, z)
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=2.0 ** -10)


def test_an_f16_accumulator_becomes_f32_and_the_result_is_rounded_once():
    (op,) = generics(after_pass(ROW_SUM, "widen-narrow-floats"))
    result = op.outputs[0]
    assert result.init.dtype == "f32" and result.value.dtype == "f32"
    assert isinstance(result.epilogue, Cast) and result.epilogue.dtype == "f16"
    # 1001 terms near 500 in total: an f16 accumulator would lose several units, f32 none
    x = np.random.default_rng(52).uniform(0.0, 1.0, (3, 1001)).astype(np.float16)
    got = run_local_task(ROW_SUM, x)
    want = x.astype(np.float64).sum(axis=1).astype(np.float16).astype(np.float64)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2.0 ** -10)
