"""Convolutions rewritten into im2col + one-reduction GEMMs (flow/convolution.py, flow/collapse.py).

Each case is a convolution written as linalg.generic with window maps (the form the front end
gives the named conv ops), optionally behind a tensor.pad, a bias init and a relu. The rewritten
and fused program, run through the kernel IR reference (``kernel.evaluate``) and end to end on
local-task, must equal a float64 numpy convolution; the outlined GEMM must be what the llvm-cpu,
cuda and vulkan-spirv contraction templates match.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from pyree.compiler import CompileOptions, compile_str
from pyree.compiler.codegen.cuda import matmul as cuda_matmul
from pyree.compiler.codegen.llvm_cpu.contraction import match_contraction
from pyree.compiler.codegen.llvm_cpu.normalize import normalize
from pyree.compiler.codegen.llvm_cpu.target import resolve_target as cpu_target
from pyree.compiler.codegen.spirv import matmul as spirv_matmul
from pyree.compiler.codegen.spirv.targets import resolve_target as vulkan_target
from pyree.compiler.flow.convolution import rewrite_convolutions
from pyree.compiler.flow.kernels import outline
from pyree.compiler.flow.regions import form_dispatch_regions
from pyree.compiler.flow.tensor_program import Constant, Function, Generic, View
from pyree.compiler.input import import_mlir
from pyree.compiler.kernel import DTYPES, evaluate

NP = {"f32": np.float32, "f16": np.float16}


@dataclass(frozen=True)
class Conv:
    layout: str = "nchw"       # nchw (filter fchw), nhwc (filter hwcf), ngchw (filter gfchw)
    n: int = 1
    c: int = 3
    h: int = 9
    w: int = 11
    f: int = 5
    kh: int = 3
    kw: int = 2
    stride: tuple = (1, 1)
    dilation: tuple = (1, 1)
    pad: tuple = (0, 0)        # symmetric, on h and w
    groups: int = 1
    dtype: str = "f32"         # inputs; the accumulator is f32
    bias_relu: bool = False

    @property
    def out_hw(self):
        hp, wp = self.h + 2 * self.pad[0], self.w + 2 * self.pad[1]
        oh = (hp - self.dilation[0] * (self.kh - 1) - 1) // self.stride[0] + 1
        ow = (wp - self.dilation[1] * (self.kw - 1) - 1) // self.stride[1] + 1
        return oh, ow

    def shapes(self):
        n, c, h, w, f, kh, kw, g = self.n, self.c, self.h, self.w, self.f, self.kh, self.kw, self.groups
        oh, ow = self.out_hw
        ph, pw = h + 2 * self.pad[0], w + 2 * self.pad[1]
        if self.layout == "nchw":
            return (n, c, h, w), (n, c, ph, pw), (f, c, kh, kw), (n, f, oh, ow)
        if self.layout == "nhwc":
            return (n, h, w, c), (n, ph, pw, c), (kh, kw, c, f), (n, oh, ow, f)
        return (n, g, c, h, w), (n, g, c, ph, pw), (g, f, c, kh, kw), (n, g, f, oh, ow)

    def reference(self, x, wt, bias):
        """float64 convolution in the layout's own terms."""
        x, wt = x.astype(np.float64), wt.astype(np.float64)
        if self.layout == "nhwc":
            x, wt = x.transpose(0, 3, 1, 2), wt.transpose(3, 2, 0, 1)
        if self.layout != "ngchw":
            x, wt = x[:, None], wt[None]
        (sh, sw), (dh, dw), (ph, pw) = self.stride, self.dilation, self.pad
        x = np.pad(x, ((0, 0), (0, 0), (0, 0), (ph, ph), (pw, pw)))
        oh, ow = self.out_hw
        out = np.zeros(x.shape[:2] + (wt.shape[1], oh, ow))
        for i in range(self.kh):
            for j in range(self.kw):
                win = x[:, :, :, i * dh: i * dh + sh * (oh - 1) + 1: sh,
                        j * dw: j * dw + sw * (ow - 1) + 1: sw]
                out += np.einsum("ngchw,gfc->ngfhw", win, wt[:, :, :, i, j])
        if self.layout == "nhwc":
            out = out[:, 0].transpose(0, 2, 3, 1)
        elif self.layout == "nchw":
            out = out[:, 0]
        if self.bias_relu:
            bshape = [1] * out.ndim
            bshape[-1 if self.layout == "nhwc" else -3] = -1
            out = np.maximum(out + bias.astype(np.float64).reshape(bshape), 0)
        return out

    def mlir(self) -> str:
        xs, ps, ws, os_ = self.shapes()
        t = lambda s, dt: f"tensor<{'x'.join(map(str, s))}x{dt}>"
        (sh, sw), (dh, dw) = self.stride, self.dilation
        hi, wi = f"oh * {sh} + kh * {dh}", f"ow * {sw} + kw * {dw}"
        if self.layout == "nchw":
            loops = "n, f, oh, ow, c, kh, kw"
            imap, wmap, omap = f"n, c, {hi}, {wi}", "f, c, kh, kw", "n, f, oh, ow"
            bias_dim, n_par = "f", 4
        elif self.layout == "nhwc":
            loops = "n, oh, ow, f, kh, kw, c"
            imap, wmap, omap = f"n, {hi}, {wi}, c", "kh, kw, c, f", "n, oh, ow, f"
            bias_dim, n_par = "f", 4
        else:
            loops = "n, g, f, oh, ow, c, kh, kw"
            imap, wmap, omap = f"n, g, c, {hi}, {wi}", "g, f, c, kh, kw", "n, g, f, oh, ow"
            bias_dim, n_par = "f", 5
        par = ", ".join(['"parallel"'] * n_par)
        its = par + ", " + ", ".join(['"reduction"'] * 3)
        out_loops = omap
        dt = self.dtype
        lines = [f"func.func @conv(%x: {t(xs, dt)}, %w: {t(ws, dt)}, %b: tensor<{self.f}xf32>) -> {t(os_, 'f32')} {{",
                 "  %z = arith.constant 0.0 : f32",
                 f"  %zi = arith.constant 0.0 : {dt}"]
        src = "%x"
        if any(self.pad):
            pads = [0] * len(xs)
            hdim = 1 if self.layout == "nhwc" else len(xs) - 2
            pads[hdim], pads[hdim + 1] = self.pad
            low = ", ".join(map(str, pads))
            args = ", ".join(f"%i{k}: index" for k in range(len(xs)))
            lines += [f"  %p = tensor.pad %x low[{low}] high[{low}] {{",
                      f"  ^bb0({args}):",
                      f"    tensor.yield %zi : {dt}",
                      f"  }} : {t(xs, dt)} to {t(ps, dt)}"]
            src = "%p"
        lines.append(f"  %e = tensor.empty() : {t(os_, 'f32')}")
        if self.bias_relu:
            lines += [f"  %i = linalg.generic {{indexing_maps = [affine_map<({out_loops}) -> ({bias_dim})>, "
                      f"affine_map<({out_loops}) -> ({out_loops})>], iterator_types = [{par}]}}"
                      f" ins(%b : tensor<{self.f}xf32>) outs(%e : {t(os_, 'f32')}) {{",
                      "  ^bb0(%v: f32, %o: f32):",
                      "    linalg.yield %v : f32",
                      f"  }} -> {t(os_, 'f32')}"]
        else:
            lines.append(f"  %i = linalg.fill ins(%z : f32) outs(%e : {t(os_, 'f32')}) -> {t(os_, 'f32')}")
        body = [f"  ^bb0(%a: {dt}, %bb: {dt}, %acc: f32):"]
        if dt != "f32":
            body += ["    %ae = arith.extf %a : f16 to f32", "    %be = arith.extf %bb : f16 to f32",
                     "    %m = arith.mulf %ae, %be : f32"]
        else:
            body += ["    %m = arith.mulf %a, %bb : f32"]
        body += ["    %s = arith.addf %acc, %m : f32", "    linalg.yield %s : f32"]
        lines += [f"  %r = linalg.generic {{indexing_maps = [affine_map<({loops}) -> ({imap})>, "
                  f"affine_map<({loops}) -> ({wmap})>, affine_map<({loops}) -> ({omap})>], "
                  f"iterator_types = [{its}]}} ins({src}, %w : {t(ps, dt)}, {t(ws, dt)}) "
                  f"outs(%i : {t(os_, 'f32')}) {{"] + body + [f"  }} -> {t(os_, 'f32')}"]
        res = "%r"
        if self.bias_relu:
            ident = f"affine_map<({out_loops}) -> ({out_loops})>"
            lines += [f"  %y = linalg.generic {{indexing_maps = [{ident}, {ident}], iterator_types = "
                      f"[{par}]}} ins(%r : {t(os_, 'f32')}) outs(%e : {t(os_, 'f32')}) {{",
                      "  ^bb0(%v: f32, %o: f32):",
                      "    %q = arith.maximumf %v, %z : f32",
                      "    linalg.yield %q : f32",
                      f"  }} -> {t(os_, 'f32')}"]
            res = "%y"
        lines += [f"  return {res} : {t(os_, 'f32')}", "}"]
        return "\n".join(lines)

    def inputs(self, rng):
        xs, _, ws, _ = self.shapes()
        dt = NP[self.dtype]
        return [rng.standard_normal(xs).astype(dt), rng.standard_normal(ws).astype(dt),
                rng.standard_normal(self.f).astype(np.float32)]


CASES = {
    "nchw": Conv(),
    "nchw_stride2_pad": Conv(h=10, w=9, stride=(2, 2), pad=(1, 1), kh=3, kw=3),
    "nchw_stride3_batch2": Conv(n=2, c=5, h=13, w=11, f=7, stride=(3, 3), kh=3, kw=3),
    "nchw_dilation2_pad": Conv(h=11, w=10, dilation=(2, 2), pad=(2, 1), kh=3, kw=3, bias_relu=True),
    "nchw_1x1": Conv(c=7, f=6, kh=1, kw=1, bias_relu=True),
    "nchw_1x1_stride2": Conv(n=2, c=7, f=6, kh=1, kw=1, stride=(2, 2)),
    "nchw_mixed_stride": Conv(stride=(2, 1), dilation=(1, 2), pad=(1, 0)),
    "nchw_1x3": Conv(n=2, kh=1, kw=3, pad=(0, 1)),
    "nhwc": Conv(layout="nhwc"),
    "nhwc_stride2_pad_batch2": Conv(layout="nhwc", n=2, c=5, h=10, w=9, f=3, stride=(2, 2),
                                    pad=(1, 1), kh=3, kw=3, bias_relu=True),
    "nhwc_dilation2": Conv(layout="nhwc", h=11, w=12, dilation=(2, 2), kh=3, kw=3),
    "nhwc_1x1": Conv(layout="nhwc", n=2, c=7, f=9, kh=1, kw=1),
    "grouped": Conv(layout="ngchw", n=2, groups=3, c=3, f=5, pad=(1, 1), kh=3, kw=3),
    "f16": Conv(dtype="f16", c=5, f=7, pad=(1, 1), kh=3, kw=3, bias_relu=True),
    "f16_nhwc": Conv(layout="nhwc", dtype="f16", c=5, f=7, stride=(2, 2), kh=3, kw=3),
}


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
    assert match_contraction(normalize(kernel), cpu_target("host")) is not None
    assert cuda_matmul.match(kernel) is not None
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
    from pyree.compiler.codegen.llvm_cpu.exprs import span_stride
    from pyree.compiler.codegen.llvm_cpu.reduction import ReductionLowering

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
    assert cuda_matmul.match(kernel) is not None
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
    from pyree.compiler.flow.tensor_program import Value
    from pyree.compiler.kernel import Acc, AffineExpr, Binary, Const, Gather, Load, Result

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
