"""read-slabs (flow/slabs.py): a kernel reading one constant row of a larger tensor reads a view of
that row instead, so the kernels of an unrolled loop's steps are equal and compiled once; a row
at an offset that is no multiple of the buffers' alignment, and a read under a Select that may
leave the tensor, keep their reads. Numbers on local-task against numpy."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
from pass_runs import after_pass, generics
from pyree.compiler import CompileOptions, compile_str
from pyree.compiler.tensor_program import View


def _steps(width: int) -> str:
    """Each of rows 1 and 2 of exp(x), times y plus y: two kernels, one per row, each reading
    its row of x at a constant index once the slices' views fold into the fused exp."""
    return f"""
func.func @main(%x0: tensor<4x{width}xf32>, %y: tensor<{width}xf32>) -> (tensor<{width}xf32>, tensor<{width}xf32>) {{
  %e = tensor.empty() : tensor<{width}xf32>
  %e2 = tensor.empty() : tensor<4x{width}xf32>
  %x = linalg.generic {{indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
      iterator_types = ["parallel", "parallel"]}} ins(%x0 : tensor<4x{width}xf32>) outs(%e2 : tensor<4x{width}xf32>) {{
    ^bb0(%p: f32, %o: f32):
      %v = math.exp %p : f32
      linalg.yield %v : f32
  }} -> tensor<4x{width}xf32>
  %r1 = tensor.extract_slice %x[1, 0] [1, {width}] [1, 1] : tensor<4x{width}xf32> to tensor<{width}xf32>
  %r2 = tensor.extract_slice %x[2, 0] [1, {width}] [1, 1] : tensor<4x{width}xf32> to tensor<{width}xf32>
  %a = linalg.generic {{indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
      iterator_types = ["parallel"]}} ins(%r1, %y : tensor<{width}xf32>, tensor<{width}xf32>) outs(%e : tensor<{width}xf32>) {{
    ^bb0(%p: f32, %q: f32, %o: f32):
      %m = arith.mulf %p, %q : f32
      %s = arith.addf %m, %q : f32
      linalg.yield %s : f32
  }} -> tensor<{width}xf32>
  %b = linalg.generic {{indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
      iterator_types = ["parallel"]}} ins(%r2, %y : tensor<{width}xf32>, tensor<{width}xf32>) outs(%e : tensor<{width}xf32>) {{
    ^bb0(%p: f32, %q: f32, %o: f32):
      %m = arith.mulf %p, %q : f32
      %s = arith.addf %m, %q : f32
      linalg.yield %s : f32
  }} -> tensor<{width}xf32>
  return %a, %b : tensor<{width}xf32>, tensor<{width}xf32>
}}
"""


@pytest.mark.parametrize("width,shared", [(16, True), (32, True), (13, False)])
def test_steps_on_rows_share_one_kernel(width, shared):
    function = after_pass(_steps(width), "read-slabs")
    views = [op for op in function.ops if isinstance(op, View)]
    offsets = sorted(v.byte_offset for v in views)
    assert offsets == ([4 * width, 8 * width] if shared else []), offsets
    vmfb = compile_str(_steps(width), CompileOptions(target_backends=["llvm-cpu"]))
    assert len(rt.read_module(vmfb).tree.kernels) == (2 if shared else 3)  # exp's, the rows'
    rng = np.random.default_rng(width)
    x = rng.standard_normal((4, width)).astype(np.float32)
    y = rng.standard_normal(width).astype(np.float32)
    x[1, 3], x[2, 5] = np.inf, np.nan
    a, b = rt.load_module(vmfb, device="local-task")["main"](x, y)
    ex = np.exp(x.astype(np.float64))
    np.testing.assert_allclose(a.to_host(), ex[1] * y + y, rtol=1e-6)
    np.testing.assert_allclose(b.to_host(), ex[2] * y + y, rtol=1e-6)


def test_a_read_that_may_leave_the_tensor_keeps_its_index():
    """A shifted read under a Select (a pad's) ranges past row 0 where it is never taken: the
    operand is left as it is."""
    mlir = """
func.func @main(%x: tensor<4x16xf32>) -> tensor<5x16xf32> {
  %c = arith.constant 0.0 : f32
  %p = tensor.pad %x low[1, 0] high[0, 0] {
  ^bb0(%i: index, %j: index):
    tensor.yield %c : f32
  } : tensor<4x16xf32> to tensor<5x16xf32>
  return %p : tensor<5x16xf32>
}
"""
    function = after_pass(mlir, "read-slabs")
    assert not any(isinstance(op, View) for op in function.ops)
    (op,) = generics(function)
    assert op.inputs[0].shape == (4, 16)


def test_a_scatter_reading_a_row_of_the_tensor_it_starts_from():
    """``x.index_add(0, idx, 2 * x[1])`` with x computed: the scatter reads row 1 of the value it
    starts from, which the host copies whole into its result, so that operand keeps its reads
    (a row view there failed to compile). Checked against PyTorch, repeated indices included."""
    from tooling import require_module

    torch = require_module("torch")
    require_module("torch_mlir")
    from pyree.compiler import import_torch

    class Model(torch.nn.Module):
        def forward(self, a, idx):
            x = torch.exp(a)
            return x.index_add(0, idx, x[1:2].expand(idx.shape[0], -1) * 2)

    rng = np.random.default_rng(5)
    a = torch.from_numpy(rng.standard_normal((7, 16)).astype(np.float32))
    idx = torch.tensor([0, 3, 3, 6, 1])
    vmfb = compile_str(import_torch(Model(), a, idx), CompileOptions(target_backends=["llvm-cpu"]))
    got = rt.load_module(vmfb, device="local-task")["main"](a.numpy(), idx.numpy()).to_host()
    with torch.no_grad():
        want = Model()(a.double(), idx).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6)
