"""Kernels with run-time sizes on the GPU drivers: each dispatch's grid is its export's programs
over the dispatch's push constants (schema 1.5), passed per command (hal.h revision 5), and a
function is recorded once per size, so sizes that alternate call after call, queued without
waits, show a recording (on CUDA, a graph) that replayed for another size. Every result is
checked against numpy. Vulkan runs on lavapipe in CI; CUDA on the GPU host (``-m cuda``), in each
command-buffer mode."""

from __future__ import annotations

import struct

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import compile_str
from pyree.compiler._fb.BindingLayout import BindingLayoutT
from pyree.compiler._fb.CudaExecutable import CudaExecutableT
from pyree.compiler._fb.Executable import ExecutableT
from pyree.compiler._fb.GpuExport import GpuExportT
from pyree.compiler.module_writer import ModuleBuilder

from .module_factory import (
    ARG,
    F32,
    N_GROUPS,
    RESULT,
    SCALE,
    expr,
    ref,
    sized,
    sized_dispatch,
    sized_function,
    sym,
    symbol,
    times,
)
from .module_mutations import _pack, _unpack

ADD = """func.func @add(%a: tensor<4096xf32>, %b: tensor<4096xf32>) -> tensor<4096xf32> {
  %e = tensor.empty() : tensor<4096xf32>
  %r = linalg.add ins(%a, %b : tensor<4096xf32>, tensor<4096xf32>)
                  outs(%e : tensor<4096xf32>) -> tensor<4096xf32>
  return %r : tensor<4096xf32>
}"""
# out[i] = x[i] * factor for i < n (n and the factor's bits: the two push constants), one
# thread per element, 64 to a block (ptxas accepts it for sm_60 and later).
SCALE_PTX = b"""
.version 7.0
.target sm_60
.address_size 64
.visible .entry pyree_test_scale_n(.param .u64 x, .param .u64 out, .param .u32 n,
                                   .param .u32 factor)
{
  .reg .pred %p;
  .reg .b32 %r<8>;
  .reg .f32 %f<4>;
  .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [x];
  ld.param.u64 %rd2, [out];
  ld.param.u32 %r1, [n];
  ld.param.u32 %r2, [factor];
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mov.u32 %r5, %tid.x;
  mad.lo.u32 %r6, %r3, %r4, %r5;
  setp.ge.u32 %p, %r6, %r1;
  @%p bra DONE;
  mul.wide.u32 %rd3, %r6, 4;
  add.u64 %rd4, %rd1, %rd3;
  add.u64 %rd5, %rd2, %rd3;
  ld.global.f32 %f1, [%rd4];
  mov.b32 %f2, %r2;
  mul.rn.f32 %f3, %f1, %f2;
  st.global.f32 [%rd5], %f3;
DONE:
  ret;
}
"""


def _device(driver: str) -> None:
    info = next((d for d in rt.list_drivers() if d.name == driver), None)
    if info is None or not info.available:
        pytest.skip(f"no {driver} device: {info.reason if info else 'driver not installed'}")


def _add_of_w_workgroups() -> tuple[bytes, int]:
    """The compiled add, its one export's grid (w, 1, 1) over push constant 0, which the
    dispatch sets to w, the length of a third (i8) argument; and the kernel's own grid."""
    tree, segment = _unpack(compile_str(ADD, target_backends=["vulkan-spirv"]))
    (export,) = tree.executables[0].spirv.exports
    assert export.gridSize[1:] == [1, 1]
    export.gridSizeExpr = [expr(sym(0)), expr([0, 1]), expr([0, 1])]
    (f,) = tree.functions
    f.symbols = [symbol("w", 0, export.gridSize[0])]
    f.arguments.append(sized(5, sym(0)))
    f.commands[0].dispatch.pushConstantExprs = [expr(sym(0))]
    return _pack(tree, segment), export.gridSize[0]


@pytest.mark.vulkan
def test_vulkan_runs_each_dispatchs_own_grid():
    """All of the kernel's workgroups compute every element; half of them exactly half (the
    rest stays as the call cleared it: 0); none, nothing."""
    _device("vulkan")
    data, grid = _add_of_w_workgroups()
    module = rt.load_module(data, device="vulkan")
    rng = np.random.default_rng()
    a, b = (rng.uniform(1, 2, 4096).astype(np.float32) for _ in range(2))  # a + b is never 0
    sizes = [grid, grid // 2, grid, 0, grid // 2, 1, grid, grid // 2] * 3
    calls = [(w, module.add(a, b, np.zeros(w, np.int8))) for w in sizes]
    for w, result in calls:
        out = result.to_host()
        computed = out == a + b
        assert computed.sum() == 4096 * w // grid, (w, computed.sum())
        assert np.all(computed | (out == 0)), w
    # one recording per size, the most recent last
    assert [s["w"] for s in module.add.recorded_sizes] == list(dict.fromkeys(sizes[::-1]))[::-1]


def _cuda_scale() -> bytes:
    """scale(x: ?xf32) = x * 2.5 by SCALE_PTX: ceildiv(n, 64) blocks of 64 threads."""
    b = ModuleBuilder("sized_cuda", "test_sized_gpu")
    cuda = CudaExecutableT()
    cuda.targetArch, cuda.cubinArch = "sm_60", ""
    cuda.ptx, cuda.cubin = b.add_data(SCALE_PTX), b.add_data(b"")
    export = GpuExportT()
    export.name, export.gridSize, export.blockSize = "pyree_test_scale_n", [1, 1, 1], [64, 1, 1]
    export.gridSizeExpr = [expr(N_GROUPS), expr([0, 1]), expr([0, 1])]
    export.bindings = [BindingLayoutT() for _ in range(2)]
    for layout, access in zip(export.bindings, (0, 1)):
        layout.access, layout.minLengthExpr = access, expr(times(sym(0), 4))
    cuda.exports = [export]
    e = ExecutableT()
    e.name, e.format, e.cuda = "scale", 1, cuda
    b.module.executables = [e]
    bits = struct.unpack("<I", struct.pack("<f", SCALE))[0]
    n = sym(0)
    b.module.functions = [sized_function("scale", [symbol("n")], [sized(F32, n)], [sized(F32, n)],
                                         [times(n, 4)], [sized_dispatch(
                                             0, ref(ARG, 0, times(n, 4)),
                                             ref(RESULT, 0, times(n, 4)), push=[n, [0, bits]])])]
    return b.finish()


@pytest.mark.cuda
@pytest.mark.parametrize("mode", ["direct", "stream", "graph"])
def test_cuda_launches_each_sizes_grid(mode):
    _device("cuda")
    module = rt.load_module(_cuda_scale(), device=f"cuda://0?command_buffer={mode}")
    rng = np.random.default_rng()
    sizes = [5003, 1, 64, 0, 65, 5003, 61, 1, 100_000] * 3
    inputs = [rng.standard_normal(n).astype(np.float32) for n in sizes]
    calls = [module.scale(x) for x in inputs]
    for x, result in zip(inputs, calls):
        assert result.shape == x.shape
        np.testing.assert_array_equal(result.to_host(), x * np.float32(SCALE))
    assert sorted(s["n"] for s in module.scale.recorded_sizes) == sorted(set(sizes))
