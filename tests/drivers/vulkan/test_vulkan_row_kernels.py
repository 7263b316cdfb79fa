"""Row kernels (softmax, log_softmax, layernorm, rmsnorm as one dispatch) on a Vulkan device
(lavapipe in CI): the results of both templates (the workgroup tree for rows of 128 or more, one
invocation per row below) match numpy in float64, with +inf, -inf, all -inf, NaN and -0.0 rows
(tests/codegen/spirv/test_spirv_row_kernels.py validates the shaders)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pyree.runtime as rt
import pytest
from codegen.spirv.spirv_modules import spirv_binaries, validate, vulkan_vmfb

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "flow"))
import row_kernel_cases as C  # noqa: E402

pytestmark = pytest.mark.vulkan
SHAPES = ((1, 7), (37, 1), (37, 129), (3, 1000))


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("kind", C.KINDS)
def test_row_kernels_match_numpy(kind, dtype, vulkan_device):
    rng = np.random.default_rng(5)
    for m, n in SHAPES:
        module = rt.load_module(vulkan_vmfb(C.mlir(kind, m, n, dtype)), device=vulkan_device)
        args = C.inputs(kind, m, n, dtype, rng, specials=True)
        got = module[module.function_names[0]](*args)
        C.check(kind, got, args, dtype)


@pytest.mark.parametrize("then", ["scale", "entropy"])
def test_ops_reading_a_row_result_join_it(then, vulkan_device, tmp_path):
    """softmax * 3 (one more row result) and its entropy (a third phase whose ``sub`` fold only
    the one-invocation-per-row template takes), each one shader."""
    for m, n in ((37, 129), (5, 45)):
        vmfb = vulkan_vmfb(C.softmax_then(m, n, then))
        (code, executable), = spirv_binaries(vmfb)
        assert len(executable.exports) == 1 and validate(code, tmp_path) == ""
        module = rt.load_module(vmfb, device=vulkan_device)
        x = C.inputs("softmax", m, n, "f32", np.random.default_rng(2))[0]
        np.testing.assert_allclose(np.asarray(module["main"](x)), C.softmax_then_reference(then, x),
                                   rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("kind, shape", [("softmax_dim1", (3, 37, 5, 2)),
                                         ("softmax_dim1", (2, 300, 4, 3)),
                                         ("batch_stats", (2, 37, 5, 7))])
def test_chains_over_leading_dims_match_torch(kind, shape, vulkan_device):
    """The elementwise op permuted into the reductions' loop order (tests/flow/test_row_kernels.py)."""
    mlir, x, want = C.leading_dims(kind, shape)
    module = rt.load_module(vulkan_vmfb(mlir), device=vulkan_device)
    C.check_against(module["main"](x), want)


def masked_softmax(m: int, n: int) -> str:
    """torch's softmax decomposition inside SDPA: 0 for a row whose every score is -inf (an
    i1 ``and`` fold beside the max and the sum)."""
    t2, t1, b1 = f"tensor<{m}x{n}xf32>", f"tensor<{m}xf32>", f"tensor<{m}xi1>"
    rows = "affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>"
    return f"""
    func.func @main(%x: {t2}) -> {t2} {{
      %ninf = arith.constant 0xFF800000 : f32
      %zero = arith.constant 0.0 : f32
      %true = arith.constant true
      %e1 = tensor.empty() : {t1}
      %mx0 = linalg.fill ins(%ninf : f32) outs(%e1 : {t1}) -> {t1}
      %mx = linalg.generic {{indexing_maps = [{rows}],
          iterator_types = ["parallel", "reduction"]}} ins(%x : {t2}) outs(%mx0 : {t1}) {{
        ^bb0(%a: f32, %acc: f32):
          %r = arith.maximumf %a, %acc : f32
          linalg.yield %r : f32
      }} -> {t1}
      %s0 = linalg.fill ins(%zero : f32) outs(%e1 : {t1}) -> {t1}
      %s = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>,
          affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i)>],
          iterator_types = ["parallel", "reduction"]}} ins(%x, %mx : {t2}, {t1}) outs(%s0 : {t1}) {{
        ^bb0(%a: f32, %m: f32, %acc: f32):
          %d = arith.subf %a, %m : f32
          %e = math.exp %d : f32
          %r = arith.addf %e, %acc : f32
          linalg.yield %r : f32
      }} -> {t1}
      %eb = tensor.empty() : {b1}
      %all0 = linalg.fill ins(%true : i1) outs(%eb : {b1}) -> {b1}
      %all = linalg.generic {{indexing_maps = [{rows}],
          iterator_types = ["parallel", "reduction"]}} ins(%x : {t2}) outs(%all0 : {b1}) {{
        ^bb0(%a: f32, %acc: i1):
          %eq = arith.cmpf oeq, %a, %ninf : f32
          %r = arith.andi %eq, %acc : i1
          linalg.yield %r : i1
      }} -> {b1}
      %e2 = tensor.empty() : {t2}
      %p = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>,
          affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i)>,
          affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}}
          ins(%x, %mx, %s, %all : {t2}, {t1}, {t1}, {b1}) outs(%e2 : {t2}) {{
        ^bb0(%a: f32, %m: f32, %l: f32, %dead: i1, %o: f32):
          %d = arith.subf %a, %m : f32
          %e = math.exp %d : f32
          %q = arith.divf %e, %l : f32
          %r = arith.select %dead, %zero, %q : f32
          linalg.yield %r : f32
      }} -> {t2}
      return %p : {t2}
    }}"""


@pytest.mark.parametrize("m, n, block", [(37, 300, 128), (6, 1000, 128), (9, 45, 128),
                                         (4099, 130, 32)])
def test_masked_softmax_rows_match_numpy(m, n, block, vulkan_device, tmp_path):
    """One shader whose every row folds its max, its sum and whether it is all -inf (on the
    workgroup tree from 128 columns: the i1 fold crosses shared memory as a u32; with 4096 rows
    or more, on a workgroup of about n / 8 invocations), against numpy with all -inf, partly
    -inf, NaN and +inf rows."""
    vmfb = vulkan_vmfb(masked_softmax(m, n))
    (code, executable), = spirv_binaries(vmfb)
    assert len(executable.exports) == 1 and validate(code, tmp_path) == ""
    assert list(executable.exports[0].blockSize) == [block, 1, 1]
    rng = np.random.default_rng(7)
    x = rng.standard_normal((m, n)).astype(np.float32)
    x[0] = -np.inf                                   # all -inf: zeros
    x[1, : n // 2] = -np.inf                         # half masked, as a causal row
    x[2, n - 1] = np.nan
    x[3, 1] = np.inf
    x[4, :] = -np.inf
    x[4, n - 1] = 0.0                                # one key left
    got = np.asarray(rt.load_module(vmfb, device=vulkan_device)["main"](x))
    with np.errstate(invalid="ignore", over="ignore"):
        x64 = x.astype(np.float64)
        mx = x64.max(axis=1, keepdims=True)
        e = np.exp(x64 - mx)
        want = np.where(np.all(x64 == -np.inf, axis=1, keepdims=True), 0.0,
                        e / e.sum(axis=1, keepdims=True))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = ~np.isnan(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=2e-5, atol=1e-6)


def test_column_folds_read_whole_rows_across_outputs(vulkan_device, tmp_path):
    """out[n] = sum_k x[k] * w[k, n] over 4099 outputs: each output's reads are a column of w,
    contiguous across outputs, not along k, so one invocation an output (neighbours reading a
    row together) rather than a workgroup an output (one element of each row); NaN, inf and
    -0.0 land where numpy puts them."""
    k, n = 300, 4099
    mlir = f"""
    func.func @main(%x: tensor<{k}xf32>, %w: tensor<{k}x{n}xf32>) -> tensor<{n}xf32> {{
      %zero = arith.constant 0.0 : f32
      %e = tensor.empty() : tensor<{n}xf32>
      %i = linalg.fill ins(%zero : f32) outs(%e : tensor<{n}xf32>) -> tensor<{n}xf32>
      %r = linalg.generic {{indexing_maps = [affine_map<(j, c) -> (c)>,
                                            affine_map<(j, c) -> (c, j)>,
                                            affine_map<(j, c) -> (j)>],
                           iterator_types = ["parallel", "reduction"]}}
          ins(%x, %w : tensor<{k}xf32>, tensor<{k}x{n}xf32>) outs(%i : tensor<{n}xf32>) {{
        ^bb0(%a: f32, %b: f32, %acc: f32):
          %p = arith.mulf %a, %b : f32
          %s = arith.addf %acc, %p : f32
          linalg.yield %s : f32
      }} -> tensor<{n}xf32>
      return %r : tensor<{n}xf32>
    }}"""
    vmfb = vulkan_vmfb(mlir)
    (code, executable), = spirv_binaries(vmfb)
    assert validate(code, tmp_path) == ""
    grids = [int(np.prod(list(e.gridSize))) for e in executable.exports]
    assert grids[-1] < n // 16, grids  # not a workgroup an output
    rng = np.random.default_rng(3)
    x = rng.standard_normal(k).astype(np.float32)
    w = rng.standard_normal((k, n)).astype(np.float32)
    w[5, 7], w[6, 8], x[9] = np.nan, np.inf, -0.0
    got = np.asarray(rt.load_module(vmfb, device=vulkan_device)["main"](x, w))
    with np.errstate(invalid="ignore"):
        want = x.astype(np.float64) @ w.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-4, atol=1e-4)
