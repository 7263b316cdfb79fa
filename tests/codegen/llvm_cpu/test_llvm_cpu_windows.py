"""The CPU's window order (codegen/llvm_cpu/reduction.py: blocks of vectors over several rows,
taps past 32 as loops) and its staged windows (codegen/llvm_cpu/window.py) in every x86-64 code
variant a module carries, against float64 numpy with NaN and infinities in the inputs; and the
vectors it writes for AVX2, which must not be split by LLVM's x86 backend: a 16-lane masked load
split in two 8-lane halves, one half's mask all false while the whole mask is not a constant,
came out reading the masked-off lanes (a 12 x 11 max pool's outputs took values from the next
row; a 13 x 13 depthwise convolution read past its input and crashed)."""

from __future__ import annotations

import re

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileOptions, compile_str
from pyree.compiler.codegen.common.normalize import normalize
from pyree.compiler.codegen.llvm_cpu.reduction import ReductionLowering
from pyree.compiler.flow.convolution import rewrite_convolutions
from pyree.compiler.flow.kernels import outline
from pyree.compiler.flow.passes import form_dispatch_regions
from pyree.compiler.input import import_mlir
from pyree.compiler.tensor_program import Generic
from pyree.runtime.vm.executables import host_cpu_flags
from window_cases import CASES, matches, window_case

VARIANTS = ["generic", "x86-64-v3"] + (["x86-64-v4"] if "avx512f" in host_cpu_flags() else [])
ALL = "generic,x86-64-v3,x86-64-v4"

# Beyond window_cases.py's: the one that came out wrong (a masked tail of 13 lanes on AVX2, a
# looped window), an innermost loop of 40 taps (unrolled, its outer loop looped), rows not a
# multiple of a block's, a window no wider than its row's first vector, a stride-3 window (its
# staged row read through a shuffle) and a 3 x 3 one staged.
EXTRA = {
    "max_pool_12x11_tail13": window_case("pooling_nchw_max", "NCHW", (1, 2, 29, 29), (12, 11),
                                         pads=[(0, 0), (5, 5)], pad_value=-np.inf, init=-np.inf),
    "depthwise_3x40_nchw": window_case("depthwise_conv_2d_nchw_chw", "NCHW", (2, 3, 9, 61), (3, 40),
                                       pads=[(1, 1), (20, 19)]),
    "depthwise_7x7_rows_odd": window_case("depthwise_conv_2d_nchw_chw", "NCHW", (1, 5, 13, 9), (7, 7),
                                          pads=[(3, 3), (3, 3)]),
    "depthwise_5x5_stride3": window_case("depthwise_conv_2d_nchw_chw", "NCHW", (2, 4, 31, 47), (5, 5),
                                         strides=(3, 3), pads=[(2, 2), (2, 2)]),
    "depthwise_3x3_nchw": window_case("depthwise_conv_2d_nchw_chw", "NCHW", (3, 6, 17, 23), (3, 3),
                                      pads=[(1, 1), (1, 1)]),
}
PROGRAMS = {**{n: CASES[n] for n in ("max_pool_12x11_nchw", "depthwise_13x11_nchw_odd",
                                     "depthwise_12x11_stride2_nchw", "depthwise_11x12_dilated_nchw",
                                     "depthwise_1d_k131_ncw", "depthwise_3d_5x6x5_ncdhw",
                                     "depthwise_13x13_f16_nchw", "sum_pool_12x12_i32_nhwc")},
            **EXTRA}


UNPADDED = """func.func @f(%x: tensor<1x5x13x9xf32>, %w: tensor<5x7x7xf32>) -> tensor<1x5x7x3xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x5x7x3xf32>
  %acc = linalg.fill ins(%z : f32) outs(%e : tensor<1x5x7x3xf32>) -> tensor<1x5x7x3xf32>
  %r = linalg.depthwise_conv_2d_nchw_chw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
       ins(%x, %w : tensor<1x5x13x9xf32>, tensor<5x7x7xf32>) outs(%acc : tensor<1x5x7x3xf32>) -> tensor<1x5x7x3xf32>
  return %r : tensor<1x5x7x3xf32>
}"""


@pytest.fixture(scope="module")
def modules():
    """Each program compiled once with every variant's code."""
    return {name: compile_str(case.program, CompileOptions(target_backends=["llvm-cpu"],
                                                           llvmcpu_variants=ALL))
            for name, case in PROGRAMS.items()}


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_windows_match_numpy_in_every_variant(name, variant, modules, monkeypatch):
    monkeypatch.setenv("PYREE_LLVMCPU_VARIANT", variant)
    case = PROGRAMS[name]
    inputs = case.inputs(np.random.default_rng(11))
    got = np.asarray(rt.load_module(modules[name], device="local-task")["f"](*inputs).to_host())
    matches(got, case.reference(*inputs), case.tol)


def test_avx2_code_has_no_masked_access_wider_than_a_register(tmp_path):
    """Every masked load and store of the AVX2 variant's window kernels is one 256-bit register
    (8 f32 lanes): nothing for LLVM to split."""
    compile_str(EXTRA["max_pool_12x11_tail13"].program, CompileOptions(
        target_backends=["llvm-cpu"], dump_executables_to={"intermediates": [str(tmp_path)]}))
    (ir,) = [p.read_text() for p in tmp_path.glob("*x86-64-v3.codegen.ll")]
    widths = {int(n) for n in re.findall(r"llvm\.masked\.(?:load|store)\.v(\d+)f32", ir)}
    assert widths == {8}


@pytest.mark.parametrize("vector_bits, lanes", [(128, 16), (256, 8), (512, 16)])
def test_window_lanes_are_one_register_where_the_target_masks_loads(vector_bits, lanes):
    kernel = _kernel(EXTRA["depthwise_7x7_rows_odd"].program)
    assert ReductionLowering(kernel, span=4 if vector_bits > 128 else 1,
                             vector_bits=vector_bits).lanes == lanes


def test_padded_windows_are_staged_and_bare_loads_are_not():
    padded = ReductionLowering(_kernel(EXTRA["depthwise_7x7_rows_odd"].program), 4, vector_bits=256)
    assert padded.staging is not None and padded.rows > 1
    assert ReductionLowering(_kernel(UNPADDED), 4, vector_bits=256).staging is None


VECMAT = """func.func @f(%x: tensor<1x4096xf32>, %w: tensor<4096x37xf32>) -> tensor<1x37xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x37xf32>
  %a = linalg.fill ins(%z : f32) outs(%e : tensor<1x37xf32>) -> tensor<1x37xf32>
  %r = linalg.matmul ins(%x, %w : tensor<1x4096xf32>, tensor<4096x37xf32>) outs(%a : tensor<1x37xf32>) -> tensor<1x37xf32>
  return %r : tensor<1x37xf32>
}"""


def test_long_folds_take_the_window_order_only_where_the_window_slides():
    """A 13 x 11 window (143 taps) along its rows does; a vector-matrix product's 4096 terms,
    read ``w[k * 37 + n]`` along the lanes with no overlap between taps, stays parallel-inner
    (its cascade bounds the rounding error)."""
    assert ReductionLowering(_kernel(PROGRAMS["depthwise_13x11_nchw_odd"].program), 4,
                             vector_bits=256).lanes == 8
    vecmat = ReductionLowering(_kernel(VECMAT), 4, vector_bits=256)
    assert vecmat.lanes == 0 and vecmat.parallel_inner


def _kernel(program: str):
    """The one kernel with a reduction of ``program`` (its padding fused), as the llvm-cpu
    templates get it."""
    function = form_dispatch_regions(rewrite_convolutions(import_mlir(program, "w.mlir").functions[0]))
    (kernel,) = [outline(op, "k") for op in function.ops
                 if isinstance(op, Generic) and op.num_parallel < len(op.loop_ranges)]
    return normalize(kernel)
