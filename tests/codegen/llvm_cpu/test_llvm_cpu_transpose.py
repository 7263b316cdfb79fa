"""Transposed loads in blocks (codegen/llvm_cpu/transpose.py), through the public API: 2-D
transposes at odd shapes in every element type on the baseline, AVX2 and AVX-512 code (blocks of
4 to 16 lanes, tails on both sides), N-D permutations (NCHW<->NHWC, batched), transposes fused
with other elementwise ops, run-time sizes, and NaN, -0.0, infinities and subnormals carried
through bit for bit; all against numpy on local-task's threads. Which kernels take the blocks
is checked on the kernel IR."""

from __future__ import annotations

import itertools

import numpy as np
import pyree.runtime as rt
import pytest
from llvmcpu_harness import affine, host_flags, identity
from pyree.compiler import compile_str
from pyree.compiler.codegen.common.normalize import normalize
from pyree.compiler.codegen.llvm_cpu.transpose import plan_transpose
from pyree.compiler.kernel import (
    DTYPES,
    Binary,
    Binding,
    Compare,
    Const,
    Kernel,
    Load,
    LoopIndex,
    Result,
    Select,
)

CPUS = ["generic", "x86-64-v3", "x86-64-v4"]
SHAPES_2D = [(1, 7), (7, 1), (3, 5), (16, 16), (17, 33), (64, 8), (129, 67), (300, 1037)]


def ty(shape, dtype: str) -> str:
    return f"tensor<{'x'.join(str(d) if d is not None else '?' for d in shape)}x{dtype}>"


def permute_function(name: str, shape, perm, dtype: str, dynamic: bool = False) -> str:
    """@name(a) = linalg.transpose(a, perm); with ``dynamic`` every dim is ``?``."""
    rank = len(shape)
    src = [None] * rank if dynamic else list(shape)
    out = [src[p] for p in perm]
    lines = [f"func.func @{name}(%a: {ty(src, dtype)}) -> {ty(out, dtype)} {{"]
    dims = ""
    if dynamic:
        for d in range(rank):
            lines.append(f"  %c{d} = arith.constant {d} : index")
            lines.append(f"  %d{d} = tensor.dim %a, %c{d} : {ty(src, dtype)}")
        dims = ", ".join(f"%d{p}" for p in perm)
    lines += [f"  %e = tensor.empty({dims}) : {ty(out, dtype)}",
              f"  %r = linalg.transpose ins(%a : {ty(src, dtype)}) outs(%e : {ty(out, dtype)}) "
              f"permutation = {list(perm)}",
              f"  return %r : {ty(out, dtype)}", "}"]
    return "\n".join(lines)


def load(src: str, *flags: str) -> rt.LoadedModule:
    return rt.load_module(compile_str(src, target_backends=["llvm-cpu"], extra_args=list(flags)),
                          device="local-task")


def cpu_flags(cpu: str) -> list[str]:
    if cpu == "x86-64-v4" and "avx512f" not in host_flags():
        pytest.skip("this machine has no AVX-512")
    return [f"--iree-llvmcpu-target-cpu={cpu}"]


def special_array(dtype: str, shape, rng: np.random.Generator) -> np.ndarray:
    """Random values of ``dtype``; floats sprinkled with NaNs (payloads, both signs), ±0.0,
    ±inf and subnormals, which a copy must keep bit for bit."""
    dt = DTYPES[dtype]
    if dt == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dt, np.integer):
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, size=shape, endpoint=True).astype(dt)
    x = rng.standard_normal(shape).astype(dt)
    nbits = dt.itemsize * 8
    uint = np.dtype(f"u{dt.itemsize}")
    mant = {"f64": 52, "f32": 23, "f16": 10, "bf16": 7}[dtype]
    exp_all = ((1 << (nbits - 1 - mant)) - 1) << mant
    quiet = 1 << (mant - 1)
    sign = 1 << (nbits - 1)
    specials = [exp_all | quiet, sign | exp_all | quiet | 1, exp_all | quiet | 3,   # NaNs
                exp_all, sign | exp_all, 0, sign, 1, sign | 3]                      # inf, 0, subnormal
    if dtype != "bf16":   # bf16 computes in f32 and rounds back: a signalling NaN comes out quiet
        specials.append(exp_all | 1)
    flat = x.reshape(-1).view(uint)
    if flat.size:
        at = rng.choice(flat.size, size=min(flat.size, 3 * len(specials)), replace=False)
        flat[at] = np.resize(np.array(specials, dtype=uint), at.size)
    return x


def same_bits(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype
    want = np.ascontiguousarray(want)
    if got.dtype == np.bool_:
        np.testing.assert_array_equal(got, want)
        return
    uint = np.dtype(f"u{got.dtype.itemsize}")
    np.testing.assert_array_equal(got.view(uint), want.view(uint))


# f16, i1 and f64 move the lanes another dtype moves; they run on x86-64-v3 alone
@pytest.mark.parametrize(("dtype", "cpu"), [(d, c) for d in ("f32", "f16", "bf16", "i8", "i64", "i1", "f64")
                                            for c in CPUS if c == "x86-64-v3" or d not in ("f16", "i1", "f64")])
def test_2d_transposes_bit_exact(dtype, cpu):
    names = [f"t{k}" for k in range(len(SHAPES_2D))]
    module = load("\n".join(permute_function(n, s, (1, 0), dtype) for n, s in zip(names, SHAPES_2D)),
                  *cpu_flags(cpu))
    rng = np.random.default_rng(len(dtype) + len(cpu))
    for name, shape in zip(names, SHAPES_2D):
        x = special_array(dtype, shape, rng)
        same_bits(module[name](x).to_host(), x.T)


PERMS = ([((3, 5, 7), p) for p in itertools.permutations(range(3)) if p != (0, 1, 2)]
         + [((2, 19, 13, 11), (0, 2, 3, 1)),   # NCHW -> NHWC
            ((2, 13, 11, 19), (0, 3, 1, 2)),   # NHWC -> NCHW
            ((2, 16, 24, 40), (0, 2, 3, 1)),
            ((3, 37, 41), (0, 2, 1)),          # batched
            ((4, 6, 18, 20), (3, 2, 1, 0)),
            ((5, 33, 2, 17), (1, 3, 0, 2))])


@pytest.mark.parametrize("dtype", ["f32", "bf16", "i8"])
def test_nd_permutations_bit_exact(dtype):
    names = [f"p{k}" for k in range(len(PERMS))]
    module = load("\n".join(permute_function(n, s, p, dtype) for n, (s, p) in zip(names, PERMS)))
    rng = np.random.default_rng(3)
    for name, (shape, perm) in zip(names, PERMS):
        x = special_array(dtype, shape, rng)
        same_bits(module[name](x).to_host(), x.transpose(perm))


FUSED = """
func.func @add(%a: tensor<37x301xf32>, %b: tensor<301x37xf32>) -> tensor<301x37xf32> {
  %e = tensor.empty() : tensor<301x37xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (j, i)>, affine_map<(i, j) -> (i, j)>,
      affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<37x301xf32>, tensor<301x37xf32>) outs(%e : tensor<301x37xf32>) {
    ^bb0(%x: f32, %y: f32, %o: f32):
      %s = arith.addf %x, %y : f32
      linalg.yield %s : f32
  } -> tensor<301x37xf32>
  return %r : tensor<301x37xf32>
}
func.func @scale(%a: tensor<2x40x24xf16>, %w: tensor<40xf32>) -> tensor<2x24x40xf32> {
  %e = tensor.empty() : tensor<2x24x40xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(n, i, j) -> (n, j, i)>, affine_map<(n, i, j) -> (j)>,
      affine_map<(n, i, j) -> (n, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%a, %w : tensor<2x40x24xf16>, tensor<40xf32>) outs(%e : tensor<2x24x40xf32>) {
    ^bb0(%x: f16, %y: f32, %o: f32):
      %c = arith.extf %x : f16 to f32
      %s = arith.mulf %c, %y : f32
      linalg.yield %s : f32
  } -> tensor<2x24x40xf32>
  return %r : tensor<2x24x40xf32>
}
func.func @two(%a: tensor<45x50xi64>, %b: tensor<50x45xi64>) -> (tensor<50x45xi64>, tensor<50x45xi64>) {
  %e = tensor.empty() : tensor<50x45xi64>
  %r:2 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (j, i)>, affine_map<(i, j) -> (i, j)>,
      affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
      iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<45x50xi64>, tensor<50x45xi64>) outs(%e, %e : tensor<50x45xi64>, tensor<50x45xi64>) {
    ^bb0(%x: i64, %y: i64, %o: i64, %p: i64):
      %s = arith.subi %x, %y : i64
      %m = arith.maxsi %x, %y : i64
      linalg.yield %s, %m : i64, i64
  } -> (tensor<50x45xi64>, tensor<50x45xi64>)
  return %r#0, %r#1 : tensor<50x45xi64>, tensor<50x45xi64>
}
"""


@pytest.mark.parametrize("cpu", CPUS)
def test_transposes_fused_with_elementwise_ops(cpu):
    module = load(FUSED, *cpu_flags(cpu))
    rng = np.random.default_rng(4)
    a, b = special_array("f32", (37, 301), rng), special_array("f32", (301, 37), rng)
    with np.errstate(invalid="ignore"):
        same_bits(module["add"](a, b).to_host(), a.T + b)
    h, w = special_array("f16", (2, 40, 24), rng), special_array("f32", (40,), rng)
    with np.errstate(invalid="ignore", over="ignore"):
        same_bits(module["scale"](h, w).to_host(), h.transpose(0, 2, 1).astype(np.float32) * w)
    x, y = special_array("i64", (45, 50), rng), special_array("i64", (50, 45), rng)
    diff, top = (r.to_host() for r in module["two"](x, y))
    same_bits(diff, x.T - y)
    same_bits(top, np.maximum(x.T, y))


@pytest.mark.parametrize("dtype", ["f32", "i8", "f64"])
def test_run_time_sizes(dtype):
    module = load(permute_function("t", (0, 0), (1, 0), dtype, dynamic=True) + "\n"
                  + permute_function("nhwc", (0, 0, 0, 0), (0, 2, 3, 1), dtype, dynamic=True))
    rng = np.random.default_rng(5)
    for shape in [(0, 5), (5, 0), (1, 7), (7, 1), (3, 5), (16, 16), (17, 33), (129, 67), (1000, 131)]:
        x = special_array(dtype, shape, rng)
        same_bits(module["t"](x).to_host(), x.T)
    for shape in [(1, 3, 5, 7), (2, 19, 13, 11), (2, 64, 7, 9), (1, 1, 1, 1)]:
        x = special_array(dtype, shape, rng)
        same_bits(module["nhwc"](x).to_host(), x.transpose(0, 2, 3, 1))


def _copy(shape, index, dtype="f32", value=None) -> Kernel:
    """out[i, j] = value (default: a load of x at ``index``) over ``shape``."""
    return Kernel("copy", shape, 2, (Binding(dtype, (64, 64), "read"), Binding(dtype, shape, "write")),
                  (Result(1, identity(2), value or Load(0, index, dtype)),))


def test_which_kernels_take_the_blocks():
    t = (affine(0, 1), affine(1, 0))
    assert plan_transpose(normalize(_copy((64, 64), t)), 256, 4).lanes == 8
    assert plan_transpose(normalize(_copy((64, 64), t)), 512, 4).lanes == 16
    assert plan_transpose(normalize(_copy((64, 64), t, "f64")), 128, 1).lanes == 4
    assert plan_transpose(normalize(_copy((64, 64), t, "i8")), 256, 4).rows == 64
    for kernel in [_copy((64, 64), identity(2)),                       # contiguous
                   _copy((64, 64), (affine(1, 0), affine(0, 0))),      # broadcast along j
                   _copy((32, 32), (affine(1, 0), affine(0, 2))),      # a span of 2
                   _copy((64, 64), (affine(1, 0), affine(0, -1, const=63))),   # reversed
                   _copy((4, 64), t),                                  # fewer rows than a block
                   _copy((60, 60), t, value=Select(                    # guarded: may fall outside
                       Compare("lt", LoopIndex(1), Const(58, "index")),
                       Load(0, (affine(0, 1, const=6), affine(1, 0)), "f32"), Const(0.0, "f32"), "f32"))]:
        assert plan_transpose(normalize(kernel), 256, 4) is None, kernel
    nchw = Kernel("nhwc", (2, 5, 7, 64), 4,
                  (Binding("f32", (2, 64, 5, 7), "read"), Binding("f32", (2, 5, 7, 64), "write")),
                  (Result(1, identity(4), Binary("add", Load(0, (affine(1, 0, 0, 0), affine(0, 0, 0, 1),
                                                                 affine(0, 1, 0, 0), affine(0, 0, 1, 0)),
                                                             "f32"), Const(1.0, "f32"), "f32")),))
    flat = normalize(nchw)
    assert flat.parallel_ranges == (2, 35, 64)
    assert plan_transpose(flat, 256, 4).q == 1
