"""Narrow values stay narrow where a product extends them: a widening cast fuses into its reader,
not into its producer, and a large constant is not folded into a wider copy (flow/regions.py
``_passes_widening``, flow/constant_folding.py ``_widens``). An f16 linear then reads f16
operands (the tensor cores' kind) instead of f32 copies of them."""

import numpy as np
import pytest
from pyree.compiler import CompileOptions, compile_str
from pyree.compiler.flow.constant_folding import MAX_WIDENED_BYTES, fold_constants
from pyree.compiler.flow.passes import form_dispatch_regions
from pyree.compiler.input import import_mlir
from pyree.compiler.kernel import Cast, Load, walk
from pyree.compiler.tensor_program import Constant, Generic

ID2 = "affine_map<(d0, d1) -> (d0, d1)>"


def _extf(src: str, shape: str) -> str:
    return f"""linalg.generic {{indexing_maps = [{ID2}, {ID2}], iterator_types = ["parallel", "parallel"]}}
      ins({src} : tensor<{shape}xf16>) outs(%e32{src[1:]} : tensor<{shape}xf32>) {{
  ^bb0(%v: f16, %o: f32):
    %r = arith.extf %v : f16 to f32
    linalg.yield %r : f32
  }} -> tensor<{shape}xf32>"""


def linear_f16(m: int, k: int, n: int, weight: str = "%w") -> str:
    """x * 2 in f16, both operands extended to f32, then their product (what torch-mlir gives
    for an f16 ``linear`` after an elementwise op)."""
    arg = "" if weight != "%w" else f", %w: tensor<{k}x{n}xf16>"
    const = "" if weight == "%w" else f"  %w = {weight}\n"
    return f"""func.func @f(%x: tensor<{m}x{k}xf16>{arg}) -> tensor<{m}x{n}xf32> {{
{const}  %two = arith.constant 2.0 : f16
  %ey = tensor.empty() : tensor<{m}x{k}xf16>
  %y = linalg.generic {{indexing_maps = [{ID2}, {ID2}], iterator_types = ["parallel", "parallel"]}}
      ins(%x : tensor<{m}x{k}xf16>) outs(%ey : tensor<{m}x{k}xf16>) {{
  ^bb0(%v: f16, %o: f16):
    %r = arith.mulf %v, %two : f16
    linalg.yield %r : f16
  }} -> tensor<{m}x{k}xf16>
  %e32y = tensor.empty() : tensor<{m}x{k}xf32>
  %y32 = {_extf("%y", f"{m}x{k}")}
  %e32w = tensor.empty() : tensor<{k}x{n}xf32>
  %w32 = {_extf("%w", f"{k}x{n}")}
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{m}x{n}xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %mm = linalg.matmul ins(%y32, %w32 : tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>)
      outs(%f : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  return %mm : tensor<{m}x{n}xf32>
}}"""


def _regions(mlir: str):
    return form_dispatch_regions(import_mlir(mlir, "t.mlir").functions[0])


def test_the_producer_writes_the_narrow_value_and_the_product_extends_it():
    function = _regions(linear_f16(5, 7, 3))
    generics = [op for op in function.ops if isinstance(op, Generic)]
    assert len(generics) == 2
    producer, product = generics
    assert producer.results[0].dtype == "f16"
    casts = [e for r in product.outputs for e in walk(r.value) if isinstance(e, Cast)]
    assert {c.op for c in casts} == {"fpext"} and len(casts) == 2
    assert all(isinstance(c.x, Load) and c.x.dtype == "f16" for c in casts)


@pytest.mark.parametrize("device", ["local-sync", "local-task"])
def test_the_narrow_linear_matches_numpy(device):
    import pyree.runtime as rt
    m, k, n = 9, 37, 13
    module = rt.load_module(compile_str(linear_f16(m, k, n), CompileOptions(
        target_backends=["llvm-cpu"])), device=device)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((m, k)).astype(np.float16)
    w = rng.standard_normal((k, n)).astype(np.float16)
    x[0, 3], x[2, 5], w[4, 1], x[3, 0] = np.nan, np.inf, -np.inf, -0.0
    got = module.f(x, w).to_host()
    with np.errstate(invalid="ignore"):
        want = (x * np.float16(2)).astype(np.float64) @ w.astype(np.float64)
    for test in (np.isnan, np.isposinf, np.isneginf):
        np.testing.assert_array_equal(test(got), test(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-5, atol=1e-5)


def _dense(k: int, n: int) -> str:
    values = np.random.default_rng(1).standard_normal((k, n)).astype(np.float16)
    rows = ", ".join("[" + ", ".join(f"{v:.4f}" for v in row) + "]" for row in values)
    return f"arith.constant dense<[{rows}]> : tensor<{k}x{n}xf16>"


@pytest.mark.parametrize("k, n, folded", [(7, 3, True), (160, 128, False)])
def test_a_large_constant_is_not_folded_wider(k, n, folded):
    """A weight whose f32 copy is over MAX_WIDENED_BYTES stays f16 and is extended in the product's
    loads; a small one is folded to f32 (nothing to save)."""
    assert (k * n * 4 > MAX_WIDENED_BYTES) != folded
    function = fold_constants(import_mlir(linear_f16(5, k, n, _dense(k, n)), "t.mlir").functions[0])
    dtypes = {op.result.dtype for op in function.ops if isinstance(op, Constant) and op.data is not None}
    assert ("f32" in dtypes) == folded
