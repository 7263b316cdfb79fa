"""Long f32 reductions as accurate as numpy's: sums, means, variances, norms, dot products, row and
column sums and a long-K matmul, over 1e5..1e7 elements at odd lengths, on inputs with a large
common offset or mixed signs. Each output's error against float64 numpy must stay within a small
factor of what numpy's own f32 reduction of the same data gets (its pairwise sum; BLAS for the
matmul), or of one ulp of the sum of magnitudes where numpy happens to be exact. A serial f32 sum
misses by thousands of ulps here (a 1e7 sum was off by 1.7e-4 relative, numpy by 1.1e-7): the
backends cascade their accumulators (codegen/common/cascade.py).

The same module runs on local-task here, on Vulkan
(tests/drivers/vulkan/test_vulkan_reduction_accuracy.py, lavapipe in CI) and on CUDA
(tests/drivers/cuda/test_cuda_gpu.py, modules from tests/drivers/cuda/build_modules.py).
"""

from __future__ import annotations

import numpy as np
import pytest

FACTOR = 4   # within this many times numpy's error (or one ulp of the sum of magnitudes)

SUM = """
func.func @{name}(%x: tensor<{shape}xf32>) -> tensor<{out}f32> {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{out}f32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<{out}f32>) -> tensor<{out}f32>
  %r = linalg.generic {{indexing_maps = [affine_map<({dims}) -> ({dims})>, affine_map<({dims}) -> ({kept})>],
      iterator_types = [{iterators}]}} ins(%x : tensor<{shape}xf32>) outs(%init : tensor<{out}f32>) {{
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  }} -> tensor<{out}f32>
  return %r : tensor<{out}f32>
}}
"""


def _sum(name: str, shape: tuple[int, ...], reduced: int) -> str:
    dims = [f"d{i}" for i in range(len(shape))]
    kept = [d for i, d in enumerate(dims) if i != reduced]
    out = "".join(f"{n}x" for i, n in enumerate(shape) if i != reduced)
    return SUM.format(name=name, shape="x".join(map(str, shape)), out=out,
                      dims=", ".join(dims), kept=", ".join(kept), iterators=", ".join(
                          '"reduction"' if i == reduced else '"parallel"' for i in range(len(shape))))


N_DOT = 1000003
ROWS = (4, 100003)   # the variance's rows
MEAN = (3, 200003)
M, K, N = 64, 4099, 67

MLIR = "\n".join([
    _sum("sum", (9999991,), 0),          # a split fold: whole chunks, the rest in the final fold
    _sum("row_sums", (256, 8191), 1),    # many outputs: not split, lanes along the row
    _sum("column_sums", (8191, 256), 0),  # a reduction over the outer dim
    f"""
func.func @mean(%x: tensor<{MEAN[0]}x{MEAN[1]}xf32>) -> tensor<{MEAN[0]}xf32> {{
  %zero = arith.constant 0.0 : f32
  %n = arith.constant {float(MEAN[1])} : f32
  %e = tensor.empty() : tensor<{MEAN[0]}xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<{MEAN[0]}xf32>) -> tensor<{MEAN[0]}xf32>
  %s = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
      iterator_types = ["parallel", "reduction"]}} ins(%x : tensor<{MEAN[0]}x{MEAN[1]}xf32>)
      outs(%init : tensor<{MEAN[0]}xf32>) {{
  ^bb0(%a: f32, %acc: f32):
    %t = arith.addf %a, %acc : f32
    linalg.yield %t : f32
  }} -> tensor<{MEAN[0]}xf32>
  %m = linalg.generic {{indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
      iterator_types = ["parallel"]}} ins(%s : tensor<{MEAN[0]}xf32>) outs(%e : tensor<{MEAN[0]}xf32>) {{
  ^bb0(%a: f32, %o: f32):
    %q = arith.divf %a, %n : f32
    linalg.yield %q : f32
  }} -> tensor<{MEAN[0]}xf32>
  return %m : tensor<{MEAN[0]}xf32>
}}

func.func @dot(%a: tensor<{N_DOT}xf32>, %b: tensor<{N_DOT}xf32>) -> tensor<f32> {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %r = linalg.generic {{indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>, affine_map<(i) -> ()>],
      iterator_types = ["reduction"]}} ins(%a, %b : tensor<{N_DOT}xf32>, tensor<{N_DOT}xf32>)
      outs(%init : tensor<f32>) {{
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %p, %acc : f32
    linalg.yield %s : f32
  }} -> tensor<f32>
  return %r : tensor<f32>
}}

func.func @norm(%a: tensor<{N_DOT}xf32>) -> tensor<f32> {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %r = linalg.generic {{indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> ()>],
      iterator_types = ["reduction"]}} ins(%a : tensor<{N_DOT}xf32>) outs(%init : tensor<f32>) {{
  ^bb0(%x: f32, %acc: f32):
    %p = arith.mulf %x, %x : f32
    %s = arith.addf %p, %acc : f32
    linalg.yield %s : f32
  }} -> tensor<f32>
  %n = linalg.generic {{indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>],
      iterator_types = []}} ins(%r : tensor<f32>) outs(%e : tensor<f32>) {{
  ^bb0(%x: f32, %o: f32):
    %q = math.sqrt %x : f32
    linalg.yield %q : f32
  }} -> tensor<f32>
  return %n : tensor<f32>
}}

func.func @variance(%x: tensor<{ROWS[0]}x{ROWS[1]}xf32>) -> tensor<{ROWS[0]}xf32> {{
  %zero = arith.constant 0.0 : f32
  %n = arith.constant {float(ROWS[1])} : f32
  %e = tensor.empty() : tensor<{ROWS[0]}xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<{ROWS[0]}xf32>) -> tensor<{ROWS[0]}xf32>
  %s = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
      iterator_types = ["parallel", "reduction"]}} ins(%x : tensor<{ROWS[0]}x{ROWS[1]}xf32>)
      outs(%init : tensor<{ROWS[0]}xf32>) {{
  ^bb0(%a: f32, %acc: f32):
    %t = arith.addf %a, %acc : f32
    linalg.yield %t : f32
  }} -> tensor<{ROWS[0]}xf32>
  %m = linalg.generic {{indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
      iterator_types = ["parallel"]}} ins(%s : tensor<{ROWS[0]}xf32>) outs(%e : tensor<{ROWS[0]}xf32>) {{
  ^bb0(%a: f32, %o: f32):
    %q = arith.divf %a, %n : f32
    linalg.yield %q : f32
  }} -> tensor<{ROWS[0]}xf32>
  %ss = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>,
                                          affine_map<(i, j) -> (i)>],
      iterator_types = ["parallel", "reduction"]}} ins(%x, %m : tensor<{ROWS[0]}x{ROWS[1]}xf32>,
      tensor<{ROWS[0]}xf32>) outs(%init : tensor<{ROWS[0]}xf32>) {{
  ^bb0(%a: f32, %mu: f32, %acc: f32):
    %d = arith.subf %a, %mu : f32
    %d2 = arith.mulf %d, %d : f32
    %t = arith.addf %d2, %acc : f32
    linalg.yield %t : f32
  }} -> tensor<{ROWS[0]}xf32>
  %v = linalg.generic {{indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
      iterator_types = ["parallel"]}} ins(%ss : tensor<{ROWS[0]}xf32>) outs(%e : tensor<{ROWS[0]}xf32>) {{
  ^bb0(%a: f32, %o: f32):
    %q = arith.divf %a, %n : f32
    linalg.yield %q : f32
  }} -> tensor<{ROWS[0]}xf32>
  return %v : tensor<{ROWS[0]}xf32>
}}

func.func @matmul(%a: tensor<{M}x{K}xf32>, %b: tensor<{K}x{N}xf32>) -> tensor<{M}x{N}xf32> {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{M}x{N}xf32>
  %c = linalg.fill ins(%zero : f32) outs(%e : tensor<{M}x{N}xf32>) -> tensor<{M}x{N}xf32>
  %r = linalg.matmul ins(%a, %b : tensor<{M}x{K}xf32>, tensor<{K}x{N}xf32>)
                     outs(%c : tensor<{M}x{N}xf32>) -> tensor<{M}x{N}xf32>
  return %r : tensor<{M}x{N}xf32>
}}
"""])


def _offset(rng, shape):
    """A large common offset with small deviations: once the running sum's ulp dwarfs them, a
    serial sum rounds every step the same way (the error of summing 0.1s grows linearly)."""
    return (1000.1 + 0.01 * rng.standard_normal(shape)).astype(np.float32)


def _mixed(rng, shape):
    """Mixed signs and magnitudes: normal values scaled by 10^U(-2, 2)."""
    return (rng.standard_normal(shape) * 10.0 ** rng.uniform(-2, 2, shape)).astype(np.float32)


def _f64_var(x):
    return np.var(x.astype(np.float64), axis=1)


# function -> (input makers, float64 reference, numpy's f32 computation, per-output magnitude)
CASES = {
    "sum": ([lambda r: _offset(r, 9999991)], lambda x: x.astype(np.float64).sum(), np.sum,
            lambda x: np.abs(x.astype(np.float64)).sum()),
    "row_sums": ([lambda r: _offset(r, (256, 8191))], lambda x: x.astype(np.float64).sum(1),
                 lambda x: x.sum(1), lambda x: np.abs(x.astype(np.float64)).sum(1)),
    # numpy's own column sums are serial: its pairwise error is that of the transposed copy's rows
    "column_sums": ([lambda r: _mixed(r, (8191, 256))], lambda x: x.astype(np.float64).sum(0),
                    lambda x: np.ascontiguousarray(x.T).sum(1), lambda x: np.abs(x.astype(np.float64)).sum(0)),
    "mean": ([lambda r: _offset(r, MEAN)], lambda x: x.astype(np.float64).mean(1),
             lambda x: x.mean(1), lambda x: np.abs(x.astype(np.float64)).mean(1)),
    "dot": ([lambda r: _mixed(r, N_DOT), lambda r: _mixed(r, N_DOT)],
            lambda a, b: a.astype(np.float64) @ b, lambda a, b: np.sum(a * b),
            lambda a, b: np.abs(a.astype(np.float64) * b).sum()),
    "norm": ([lambda r: _mixed(r, N_DOT)], lambda x: np.linalg.norm(x.astype(np.float64)),
             lambda x: np.sqrt(np.sum(x * x)), lambda x: np.linalg.norm(x.astype(np.float64))),
    # a variance of offset data: the squared deviations are summed after the mean is subtracted
    "variance": ([lambda r: _offset(r, ROWS)], _f64_var, lambda x: np.var(x, axis=1), _f64_var),
    "matmul": ([lambda r: _offset(r, (M, K)) / 1000, lambda r: _mixed(r, (K, N))],
               lambda a, b: a.astype(np.float64) @ b, np.matmul,
               lambda a, b: np.abs(a.astype(np.float64)) @ np.abs(b)),
}


def check(module, name: str, seed: int = 0) -> float:
    """Runs ``name`` on fresh inputs; returns its worst error over numpy's worst (at least one ulp
    of the largest magnitude: numpy may be exact by luck on one output)."""
    makers, reference, numpy_f32, magnitude = CASES[name]
    rng = np.random.default_rng(seed)
    args = [make(rng) for make in makers]
    got = np.asarray(module[name](*args).to_host(), np.float64)
    want = reference(*args)
    ours = np.max(np.abs(got - want))
    theirs = np.max(np.abs(np.asarray(numpy_f32(*args), np.float64) - want))
    ulp = float(np.spacing(np.float32(np.max(magnitude(*args)))))
    ratio = ours / max(theirs, ulp)
    assert ratio <= FACTOR, f"{name}: error {ours:.3g}, numpy's {theirs:.3g}: {ratio:.1f}x"
    return ratio


@pytest.fixture(scope="module")
def cpu_module():
    import pyree.runtime as rt
    from pyree.compiler import CompileOptions, compile_str
    return rt.load_module(compile_str(MLIR, CompileOptions(target_backends=["llvm-cpu"])),
                          device="local-task")


@pytest.mark.parametrize("name", sorted(CASES))
def test_long_reduction_is_as_accurate_as_numpy_on_local_task(cpu_module, name):
    check(cpu_module, name)
