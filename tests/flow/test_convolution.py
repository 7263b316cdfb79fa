"""Convolutions rewritten into im2col + one-reduction GEMMs (flow/convolution.py, flow/collapse.py).

Each case is a convolution written as linalg.generic with window maps (the form the front end
gives the named conv ops), optionally behind a tensor.pad, a bias init and a relu. The rewritten
and fused program, run through the kernel IR reference (``kernel.evaluate``) and end to end on
local-task, must equal a float64 numpy convolution; the outlined GEMM must be what the llvm-cpu,
cuda and vulkan-spirv contraction templates match.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from pyree.compiler import CompileOptions, compile_str
from pyree.compiler.codegen.common import contraction
from pyree.compiler.codegen.common.normalize import normalize
from pyree.compiler.codegen.llvm_cpu.matmul import plan as plan_matmul
from pyree.compiler.codegen.llvm_cpu.targets import resolve_target as cpu_target
from pyree.compiler.codegen.spirv import matmul as spirv_matmul
from pyree.compiler.codegen.spirv.targets import resolve_target as vulkan_target
from pyree.compiler.flow.convolution import rewrite_convolutions
from pyree.compiler.flow.kernels import outline
from pyree.compiler.flow.passes import form_dispatch_regions
from pyree.compiler.input import import_mlir
from pyree.compiler.kernel import DTYPES, evaluate
from pyree.compiler.tensor_program import Constant, Function, Generic, View

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conv_cases import CASES, Conv  # noqa: E402


def flow(conv: Conv) -> Function:
    program = import_mlir(conv.mlir(), "conv.mlir")
    return form_dispatch_regions(rewrite_convolutions(program.functions[0]))


def run(function: Function, args):
    env = dict(zip(function.arguments, args))
    for op in function.ops:
        if isinstance(op, Constant):
            env[op.result] = (op.data if op.data is not None
                              else np.full(op.result.shape, op.splat, DTYPES[op.result.dtype]))
        elif isinstance(op, View):
            env[op.result] = np.ascontiguousarray(env[op.source]).reshape(op.result.shape)
        elif isinstance(op, Generic):
            outs = [np.zeros(v.shape, DTYPES[v.dtype]) for v in op.results]
            evaluate(outline(op, "k"), [env[v] for v in op.inputs] + outs)
            env.update(zip(op.results, outs))
    return [env[v] for v in function.results]


def tolerance(conv: Conv) -> float:
    return 1e-2 if conv.dtype == "f16" else 1e-4


@pytest.mark.parametrize("name", list(CASES))
def test_rewritten_program_matches_numpy(name):
    conv = CASES[name]
    rng = np.random.default_rng(7)
    args = conv.inputs(rng)
    (out,) = run(flow(conv), args)
    np.testing.assert_allclose(out, conv.reference(*args), rtol=tolerance(conv), atol=tolerance(conv))


@pytest.mark.parametrize("name", list(CASES))
def test_local_task_matches_numpy(name):
    import pyree.runtime as rt

    conv = CASES[name]
    rng = np.random.default_rng(11)
    args = conv.inputs(rng)
    module = rt.load_module(compile_str(conv.mlir(), CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    out = module["conv"](*args).to_host()
    np.testing.assert_allclose(out, conv.reference(*args), rtol=tolerance(conv), atol=tolerance(conv))


def gemms(function: Function):
    return [outline(op, "k") for op in function.ops
            if isinstance(op, Generic) and op.num_parallel < len(op.loop_ranges)]


@pytest.mark.parametrize("name", list(CASES))
def test_one_gemm_that_every_backend_matches(name):
    """Pads fuse into the patches copy, bias and relu into the GEMM: at most two kernels."""
    conv = CASES[name]
    function = flow(conv)
    generics = [op for op in function.ops if isinstance(op, Generic)]
    (kernel,) = gemms(function)
    assert len(generics) <= 2
    assert len(kernel.reduction_ranges) == 1
    assert plan_matmul(normalize(kernel), cpu_target("host")) is not None
    assert contraction.match(kernel) is not None
    assert spirv_matmul.plan(kernel, vulkan_target("")) is not None
    if conv.bias_relu:
        assert kernel.results[0].epilogue is not None


@pytest.mark.parametrize("target", ["cuda", "vulkan-spirv"])
def test_gpu_targets_compile(target):
    conv = CASES["nchw_dilation2_pad"]
    assert compile_str(conv.mlir(), CompileOptions(target_backends=[target]))


def window_mlir(kind: str, shape, k: int, stride: int, pad: int) -> tuple[str, tuple]:
    """A depthwise conv ("dw", filter (c, k, k)) or max pooling ("max") over padded NCHW input."""
    n, c, h, w = shape
    ph, pw = h + 2 * pad, w + 2 * pad
    oh, ow = (ph - k) // stride + 1, (pw - k) // stride + 1
    t = lambda s: f"tensor<{'x'.join(map(str, s))}xf32>"
    loops = "n, c, oh, ow, kh, kw"
    maps = [f"affine_map<({loops}) -> (n, c, oh * {stride} + kh, ow * {stride} + kw)>"]
    ins, types = "%p", t((n, c, ph, pw))
    body = ["    %s = arith.maximumf %acc, %a : f32"]
    fill = "0xFF800000"
    if kind == "dw":
        maps.append(f"affine_map<({loops}) -> (c, kh, kw)>")
        ins, types = "%p, %w", f"{types}, {t((c, k, k))}"
        body = ["    %m = arith.mulf %a, %b : f32", "    %s = arith.addf %acc, %m : f32"]
        fill = "0.0"
    else:  # like linalg.pooling_*: a window-shaped operand that the body ignores
        maps.append(f"affine_map<({loops}) -> (kh, kw)>")
        ins, types = "%p, %kk", f"{types}, {t((k, k))}"
    maps.append(f"affine_map<({loops}) -> (n, c, oh, ow)>")
    args = ", ".join(f"%i{j}: index" for j in range(4))
    block = "^bb0(%a: f32, %b: f32, %acc: f32):"
    text = f"""
func.func @win(%x: {t(shape)}, %w: {t((c, k, k))}) -> {t((n, c, oh, ow))} {{
  %z = arith.constant {fill} : f32
  %p = tensor.pad %x low[0, 0, {pad}, {pad}] high[0, 0, {pad}, {pad}] {{
  ^bb0({args}):
    tensor.yield %z : f32
  }} : {t(shape)} to {t((n, c, ph, pw))}
  %e = tensor.empty() : {t((n, c, oh, ow))}
  %kk = tensor.empty() : {t((k, k))}
  %i = linalg.fill ins(%z : f32) outs(%e : {t((n, c, oh, ow))}) -> {t((n, c, oh, ow))}
  %r = linalg.generic {{indexing_maps = [{", ".join(maps)}],
      iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]}}
      ins({ins} : {types}) outs(%i : {t((n, c, oh, ow))}) {{
  {block}
{chr(10).join(body)}
    linalg.yield %s : f32
  }} -> {t((n, c, oh, ow))}
  return %r : {t((n, c, oh, ow))}
}}"""
    return text, (oh, ow)


def window_reference(kind, x, w, k, stride, pad, out_hw):
    fill = 0.0 if kind == "dw" else -np.inf
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=fill)
    oh, ow = out_hw
    out = np.zeros(x.shape[:2] + (oh, ow)) if kind == "dw" else np.full(x.shape[:2] + (oh, ow), -np.inf)
    for i in range(k):
        for j in range(k):
            win = xp[:, :, i: i + stride * (oh - 1) + 1: stride, j: j + stride * (ow - 1) + 1: stride]
            out = out + win * w[None, :, i, j, None, None] if kind == "dw" else np.maximum(out, win)
    return out


@pytest.mark.parametrize("kind, shape, k, stride, pad", [
    ("dw", (1, 5, 9, 37), 3, 1, 1),
    ("dw", (2, 3, 12, 11), 3, 2, 1),
    ("dw", (1, 4, 13, 13), 5, 1, 2),
    ("max", (1, 6, 11, 40), 3, 2, 1),
    ("max", (2, 3, 7, 5), 2, 1, 0),
])
def test_depthwise_and_pooling_run_as_vector_windows(kind, shape, k, stride, pad):
    """Short windows vectorize across the output row (reduction.py's window order): stride 1
    always, strides up to ``span_stride`` where the host's vectors read a strided span in one
    masked load; longer strides keep the scalar orders."""
    import pyree.runtime as rt
    from pyree.compiler.codegen.llvm_cpu.reduction import ReductionLowering
    from pyree.compiler.codegen.llvm_cpu.scalar import span_stride

    text, out_hw = window_mlir(kind, shape, k, stride, pad)
    function = form_dispatch_regions(rewrite_convolutions(import_mlir(text, "win.mlir").functions[0]))
    (kernel,) = gemms(function)
    assert len(kernel.reduction_ranges) == 2          # not rewritten into a GEMM
    span = span_stride(cpu_target("host"))
    assert (ReductionLowering(normalize(kernel), span).lanes > 0) == (stride <= span)
    rng = np.random.default_rng(5)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((shape[1], k, k)).astype(np.float32)
    module = rt.load_module(compile_str(text, CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    out = module["win"](x, w).to_host()
    np.testing.assert_allclose(out, window_reference(kind, x, w, k, stride, pad, out_hw),
                               rtol=1e-5, atol=1e-5)


def test_depthwise_is_left_to_the_reduction_templates():
    """No filter-only output loop: no reuse for a GEMM, so no patches."""
    text = """
func.func @dw(%x: tensor<1x4x7x7xf32>, %w: tensor<4x3x3xf32>) -> tensor<1x4x5x5xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x4x5x5xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<1x4x5x5xf32>) -> tensor<1x4x5x5xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(n, c, oh, ow, kh, kw) -> (n, c, oh + kh, ow + kw)>,
      affine_map<(n, c, oh, ow, kh, kw) -> (c, kh, kw)>, affine_map<(n, c, oh, ow, kh, kw) -> (n, c, oh, ow)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]}
      ins(%x, %w : tensor<1x4x7x7xf32>, tensor<4x3x3xf32>) outs(%i : tensor<1x4x5x5xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<1x4x5x5xf32>
  return %r : tensor<1x4x5x5xf32>
}"""
    function = import_mlir(text, "dw.mlir").functions[0]
    assert rewrite_convolutions(function).ops == function.ops


def test_two_adjacent_reduction_dims_collapse_to_one():
    """A contraction over (k1, k2), contiguous in both operands, becomes a plain matmul."""
    text = """
func.func @mm(%a: tensor<5x3x4xf32>, %b: tensor<3x4x7xf32>) -> tensor<5x7xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<5x7xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<5x7xf32>) -> tensor<5x7xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(m, n, k1, k2) -> (m, k1, k2)>,
      affine_map<(m, n, k1, k2) -> (k1, k2, n)>, affine_map<(m, n, k1, k2) -> (m, n)>],
      iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%a, %b : tensor<5x3x4xf32>, tensor<3x4x7xf32>) outs(%i : tensor<5x7xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<5x7xf32>
  return %r : tensor<5x7xf32>
}"""
    function = form_dispatch_regions(rewrite_convolutions(import_mlir(text, "mm.mlir").functions[0]))
    (kernel,) = gemms(function)
    assert kernel.loop_ranges == (5, 7, 12)
    assert contraction.match(kernel) is not None
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((5, 3, 4)).astype(np.float32), rng.standard_normal((3, 4, 7)).astype(np.float32)
    (out,) = run(function, [a, b])
    np.testing.assert_allclose(out, np.einsum("mkl,kln->mn", a.astype(np.float64), b), rtol=1e-5, atol=1e-5)


def test_classifier_head_reads_its_weight_along_rows():
    """x @ W with W (k, n) after the transpose folds: the reduction sweeps W's rows
    (parallel-inner), the broadcast x does not vote for walking W's columns."""
    import pyree.runtime as rt
    from pyree.compiler.codegen.llvm_cpu.reduction import ReductionLowering

    rng = np.random.default_rng(9)
    w = rng.standard_normal((50, 64)).astype(np.float32)
    dense = ", ".join(f"[{', '.join(map(repr, map(float, row)))}]" for row in w)
    text = f"""
func.func @head(%x: tensor<1x64xf32>) -> tensor<1x50xf32> {{
  %w = arith.constant dense<[{dense}]> : tensor<50x64xf32>
  %z = arith.constant 0.0 : f32
  %et = tensor.empty() : tensor<64x50xf32>
  %wt = linalg.transpose ins(%w : tensor<50x64xf32>) outs(%et : tensor<64x50xf32>) permutation = [1, 0]
  %e = tensor.empty() : tensor<1x50xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<1x50xf32>) -> tensor<1x50xf32>
  %r = linalg.matmul ins(%x, %wt : tensor<1x64xf32>, tensor<64x50xf32>) outs(%i : tensor<1x50xf32>) -> tensor<1x50xf32>
  return %r : tensor<1x50xf32>
}}"""
    function = form_dispatch_regions(rewrite_convolutions(import_mlir(text, "head.mlir").functions[0]))
    (kernel,) = gemms(function)
    assert ReductionLowering(normalize(kernel)).parallel_inner
    x = rng.standard_normal((1, 64)).astype(np.float32)
    module = rt.load_module(compile_str(text, CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    np.testing.assert_allclose(module["head"](x).to_host(), x.astype(np.float64) @ w.T.astype(np.float64),
                               rtol=1e-5, atol=1e-5)


def test_collapse_keeps_the_shape_of_a_gathered_binding():
    """Loops (i, j) of x[i, j, k] would merge through a view of x, but x is also gathered with
    computed indices, which are per dim of x's own shape: no merge then."""
    from pyree.compiler.flow.collapse import collapse_loops
    from pyree.compiler.kernel import Acc, AffineExpr, Binary, Const, Gather, Load, Result
    from pyree.compiler.tensor_program import Value

    x, out = Value("f32", (2, 3, 4), "x"), Value("f32", (2, 3), "out")
    unit = [AffineExpr(tuple(int(j == d) for j in range(3))) for d in range(3)]
    corner = Gather(0, (Const(1, "index"), Const(2, "index"), Const(3, "index")), "f32")
    value = Binary("add", Acc(0, "f32"), Binary("mul", Load(0, tuple(unit), "f32"), corner, "f32"), "f32")
    op = Generic([x], [out], (Result(0, tuple(unit[:2]), value, init=Const(0.0, "f32")),), (2, 3, 4), 2)
    assert collapse_loops(op) == [op]
    plain = Binary("add", Acc(0, "f32"), Load(0, tuple(unit), "f32"), "f32")
    merged = collapse_loops(Generic([x], [out], (Result(0, tuple(unit[:2]), plain, init=Const(0.0, "f32")),),
                                    (2, 3, 4), 2))
    assert [o.loop_ranges for o in merged if isinstance(o, Generic)] == [(6, 4)]
