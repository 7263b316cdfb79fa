"""Float ops on NaN, +-inf, -0, denormals and the largest finite values, every pair of them,
against numpy on the CPU drivers: the NaN-propagating and NaN-skipping min/max, each of
``arith.cmpf``'s 16 predicates feeding a select, and ``arith.remf`` (C's fmod), which the
parser did not know (torch-mlir lowers torch.remainder of tensors to it; it was refused as
"unsupported op 'arith.remf'")."""

from __future__ import annotations

import functools
import os

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileOptions, compile_str

PREDICATES = ["false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq", "ugt", "uge",
              "ult", "ule", "une", "uno", "true"]
BINARY = ["arith.maximumf", "arith.minimumf", "arith.remf", "arith.addf", "arith.divf"]
VALUES = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.5, -3.5, 1e-40, 3e38,
                   -3e38], np.float32)


def _program() -> str:
    ops = [f"%z{k} = {op} %x, %y : f32" for k, op in enumerate(BINARY)]
    for p in PREDICATES:
        k = len(ops)
        ops.append(f"%c{k} = arith.cmpf {p}, %x, %y : f32\n    %z{k} = arith.select %c{k}, %x, %y : f32")
    n = len(ops)
    types = ", ".join(["tensor<?xf32>"] * n)
    return f"""
#m = affine_map<(d0) -> (d0)>
func.func @f(%a: tensor<?xf32>, %b: tensor<?xf32>) -> ({types}) {{
  %c0 = arith.constant 0 : index
  %n = tensor.dim %a, %c0 : tensor<?xf32>
  %e = tensor.empty(%n) : tensor<?xf32>
  %r:{n} = linalg.generic {{indexing_maps = [#m, #m{", #m" * n}], iterator_types = ["parallel"]}}
      ins(%a, %b : tensor<?xf32>, tensor<?xf32>) outs({", ".join(["%e"] * n)} : {types}) {{
  ^bb0(%x: f32, %y: f32, {", ".join(f"%o{k}: f32" for k in range(n))}):
    {chr(10).join("    " + op for op in ops).strip()}
    linalg.yield {", ".join(f"%z{k}" for k in range(n))} : {", ".join(["f32"] * n)}
  }} -> ({types})
  return {", ".join(f"%r#{k}" for k in range(n))} : {types}
}}"""


@functools.cache
def _module(device: str):
    # the device's Vulkan target (tests/e2e/test_dynamic_shapes.py): one that keeps subnormals
    # (DenormPreserve), which the baseline target does not ask for and NVIDIA's driver flushes
    options = CompileOptions(
        target_backends=["vulkan-spirv" if device == "vulkan" else "llvm-cpu"],
        vulkan_target=os.environ.get("PYREE_VULKAN_TARGET", "cpu-lavapipe-linux"))
    return rt.load_module(compile_str(_program(), options), device=device)


def _expected(x: np.ndarray, y: np.ndarray) -> list[np.ndarray]:
    nan = np.isnan(x) | np.isnan(y)
    both_zero = (x == 0) & (y == 0)
    with np.errstate(all="ignore"):
        out = [
            np.where(nan, np.nan, np.where(both_zero, np.where(np.signbit(x), y, x), np.maximum(x, y))),
            np.where(nan, np.nan, np.where(both_zero, np.where(np.signbit(x), x, y), np.minimum(x, y))),
            np.fmod(x, y), x + y, x / y,
        ]
        ordered = {"false": np.zeros_like(nan), "true": np.ones_like(nan), "oeq": x == y,
                   "ogt": x > y, "oge": x >= y, "olt": x < y, "ole": x <= y,
                   "one": (x != y) & ~nan, "ord": ~nan, "uno": nan}
        unordered = {"ueq": x == y, "ugt": x > y, "uge": x >= y, "ult": x < y, "ule": x <= y,
                     "une": x != y}
    for p in PREDICATES:
        holds = ordered[p] if p in ordered else nan | unordered[p]
        out.append(np.where(holds, x, y))
    return [o.astype(np.float32) for o in out]


@pytest.mark.parametrize("device", ["local-task", "local-sync",
                                    pytest.param("vulkan", marks=pytest.mark.vulkan)])
def test_special_values_through_min_max_remainder_and_every_predicate(device):
    """On vulkan-spirv (Mesa's lavapipe in CI) too: the sign of max(+0, -0) and min (SPIR-V's
    FMax/FMin leave it open), and remf over an infinite divisor and to a zero; its remainders
    of quotients past 2^24 or by divisors past 2^126 are left out there (OpFRem's
    ``a - b * trunc(a / b)``: inexact; Vulkan bounds a division's error below 2^126 only), and
    a subnormal operand or result may be flushed to a zero of its sign (NVIDIA's driver flushes
    FMax's subnormal operands, DenormPreserve or not); divf is the rounded quotient for
    divisors below 2^126, which is as far as Vulkan bounds OpFDiv (NVIDIA's inf / 3e38 is NaN)."""
    if device == "vulkan" and not any(d.name == "vulkan" and d.available for d in rt.list_drivers()):
        pytest.skip("no vulkan device")
    x, y = np.repeat(VALUES, len(VALUES)), np.tile(VALUES, len(VALUES))
    got = [r.to_host() for r in _module(device)["f"](x, y)]
    names = BINARY + [f"cmpf {p} + select" for p in PREDICATES]
    with np.errstate(all="ignore"):
        huge = np.isfinite(x) & np.isfinite(y) & (y != 0) & (
            (np.abs(x / y) >= 2.0 ** 24) | (np.abs(y) >= 2.0 ** 126))
    def flushed(v):
        return np.where(np.abs(v) < np.finfo(np.float32).tiny, np.copysign(0, v), v).astype(v.dtype)

    flush = device == "vulkan"
    for name, g, want, want_flushed in zip(names, got, _expected(x, y),
                                           _expected(flushed(x), flushed(y))):
        # the same bits, NaN for NaN (any payload) and the sign of a zero included
        same = np.zeros(g.shape, bool)
        for w in [want] + ([flushed(want), want_flushed, flushed(want_flushed)] if flush else []):
            same |= (np.isnan(g) & np.isnan(w)) | ((g == w) & (np.signbit(g) == np.signbit(w)))
        if device == "vulkan" and name == "arith.remf":
            same |= huge
        if device == "vulkan" and name == "arith.divf":
            same |= np.abs(y) >= 2.0 ** 126
        bad = np.flatnonzero(~same)
        assert bad.size == 0, f"{name}: " + ", ".join(
            f"({x[i]}, {y[i]}) -> {g[i]}, not {want[i]}" for i in bad[:5])


def test_torch_remainder_of_tensors():
    import torch
    from pyree.compiler import import_torch

    class Remainders(torch.nn.Module):
        def forward(self, a, b):
            return torch.remainder(a, b), torch.remainder(b, a)

    a = torch.tensor([5.5, -5.5, 5.5, -5.5, 0.0, -0.0, 3.0, np.inf, 1.0, 7.0])
    b = torch.tensor([2.0, 2.0, -2.0, -2.0, 3.0, 3.0, np.inf, 2.0, 0.0, -0.7])
    module = rt.load_module(compile_str(import_torch(Remainders(), a, b),
                                        CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    got = [r.to_host() for r in module["main"](a.numpy(), b.numpy())]
    for g, w in zip(got, Remainders()(a, b)):
        np.testing.assert_array_equal(g, w.numpy())


F16_TO_BF16 = """
func.func @f(%a: tensor<?xf16>) -> (tensor<?xbf16>, tensor<?xf16>) {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %a, %c0 : tensor<?xf16>
  %e = tensor.empty(%n) : tensor<?xbf16>
  %h = tensor.empty(%n) : tensor<?xf16>
  %r:2 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>,
      affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%a : tensor<?xf16>) outs(%e, %h : tensor<?xbf16>, tensor<?xf16>) {
  ^bb0(%x: f16, %o: bf16, %p: f16):
    %y = arith.truncf %x : f16 to bf16
    %z = arith.truncf %y : bf16 to f16
    linalg.yield %y, %z : bf16, f16
  } -> (tensor<?xbf16>, tensor<?xf16>)
  return %r#0, %r#1 : tensor<?xbf16>, tensor<?xf16>
}
"""


def test_truncf_between_the_two_16_bit_floats():
    """Neither is wider than the other (MLIR's verifier wants a narrower result; pyree takes
    it): f16 -> bf16 was an internal compiler error (an LLVM fptrunc from half to float)."""
    import ml_dtypes  # the tests' bf16 reference (dtype_cases.py)

    every = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    module = rt.load_module(compile_str(F16_TO_BF16, CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    bf16, back = (r.to_host() for r in module["f"](every))
    want = every.astype(np.float32).astype(ml_dtypes.bfloat16)
    nan = np.isnan(want.astype(np.float32))
    assert np.array_equal(bf16.view(np.uint16)[~nan], want.view(np.uint16)[~nan])
    assert np.isnan(bf16.astype(np.float32)[nan]).all()
    want_back = want.astype(np.float32).astype(np.float16)
    assert np.array_equal(back.view(np.uint16)[~nan], want_back.view(np.uint16)[~nan])


DIVIDE = """
func.func @f(%a: tensor<?xf32>, %b: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %a, %c0 : tensor<?xf32>
  %e = tensor.empty(%n) : tensor<?xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>,
      affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%a, %b : tensor<?xf32>, tensor<?xf32>) outs(%e : tensor<?xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %q = arith.divf %x, %y : f32
    linalg.yield %q : f32
  } -> tensor<?xf32>
  return %r : tensor<?xf32>
}
"""


@pytest.mark.parametrize("device", ["local-task",
                                    pytest.param("vulkan", marks=pytest.mark.vulkan)])
def test_a_division_is_the_rounded_quotient(device):
    """divf bit for bit numpy's (IEEE's rounded quotient) on every target, Vulkan's too, whose
    OpFDiv may be 2.5 ulp off (NVIDIA's is a reciprocal and a product: a quantization scale
    of 5 / 255 one ulp low moved ONNX's DynamicQuantizeLinear by one step); quotients that
    are whole numbers stay whole. Divisors within [2^-126, 2^126], where Vulkan bounds it."""
    options = CompileOptions(
        target_backends=["vulkan-spirv" if device == "vulkan" else "llvm-cpu"],
        vulkan_target=os.environ.get("PYREE_VULKAN_TARGET", "cpu-lavapipe-linux"))
    module = rt.load_module(compile_str(DIVIDE, options), device=device)
    rng = np.random.default_rng(5)
    n = 20000
    x = (rng.standard_normal(n) * 2.0 ** rng.integers(-60, 60, n)).astype(np.float32)
    y = (rng.standard_normal(n) * 2.0 ** rng.integers(-60, 60, n)).astype(np.float32)
    whole = rng.integers(-1000, 1000, (2, 500)).astype(np.float32)
    x = np.concatenate([x, whole[0] * np.where(whole[1] == 0, 1, whole[1]), [-2.5, 5.0, 4.0]])
    y = np.concatenate([y, np.where(whole[1] == 0, 1, whole[1]), [5.0 / 255, 255.0, 255.0]])
    x, y = x.astype(np.float32), y.astype(np.float32)
    got = module["f"](x, y).to_host()
    want = x / y
    tiny = np.abs(want) < np.finfo(np.float32).tiny  # a flushed subnormal quotient may be 0
    bad = np.flatnonzero((got != want) & ~(tiny & (np.abs(got) <= np.abs(want))))
    assert bad.size == 0, ", ".join(f"{x[i]!r} / {y[i]!r} -> {got[i]!r}, not {want[i]!r}"
                                    for i in bad[:5])
