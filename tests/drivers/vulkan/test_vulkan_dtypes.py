"""Special float values and the 16-bit float types on a Vulkan device (lavapipe in CI): the
results match the CPU tests' references (tests/codegen/spirv/test_spirv_dtypes.py validates the
shaders). bf16 has no Vulkan 1.2 type: it is stored as 16-bit integers and converted with integer
ops."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
from codegen.spirv.spirv_modules import vulkan_vmfb
from dtype_cases import (
    PROGRAMS,
    TOLERANCE,
    H,
    X,
    bf16_expected,
    bf16_inputs,
    f16_bits_expected,
    f16_bits_inputs,
    math_expected,
    math_inputs,
    relative_error,
    same_bits,
    special_expected,
)
from pyree.compiler import CompileOptions, compile_str

pytestmark = pytest.mark.vulkan


def test_special_values_are_bit_exact(vulkan_device):
    outs = rt.load_module(vulkan_vmfb(PROGRAMS["special"]), device=vulkan_device)["f"](X, H)
    for k, (actual, want) in enumerate(zip(outs, special_expected())):
        actual = np.asarray(actual.to_host())
        assert same_bits(actual, want), (k, actual, want)


def test_bf16_ops_casts_and_constants_are_bit_exact(vulkan_device):
    inputs = bf16_inputs(np.random.default_rng())
    outs = rt.load_module(vulkan_vmfb(PROGRAMS["bf16_ops"]), device=vulkan_device)["bf"](*inputs)
    for k, (actual, want) in enumerate(zip(outs, bf16_expected(*inputs))):
        actual = np.asarray(actual.to_host())
        assert same_bits(actual, want), (k, actual, want)


def test_f16_bitcasts_are_bit_exact(vulkan_device):
    """NaN's payload aside (any NaN matches any NaN), every f16 <-> i16 bitcast keeps the bits."""
    inputs = f16_bits_inputs(np.random.default_rng())
    outs = rt.load_module(vulkan_vmfb(PROGRAMS["f16_bits"]), device=vulkan_device)["bits"](*inputs)
    for k, (actual, want) in enumerate(zip(outs, f16_bits_expected(*inputs))):
        actual = np.asarray(actual.to_host())
        if want.dtype == np.int16:  # a NaN's bits: any NaN
            nan = np.isnan(want.view(np.float16))
            assert np.isnan(actual.view(np.float16)[nan]).all(), k
            actual, want = actual[~nan], want[~nan]
        assert same_bits(actual, want), (k, actual, want)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_math_reductions_and_matmuls_in_16_bit_floats(vulkan_device, dtype):
    inputs = math_inputs(np.random.default_rng(), dtype)
    outs = rt.load_module(vulkan_vmfb(PROGRAMS[f"math_{dtype}"]), device=vulkan_device)["f"](*inputs)
    for name, actual, want in zip(["matmul", "exp", "tanh", "erf", "sum"], outs,
                                  math_expected(*inputs)):
        actual = np.asarray(actual.to_host())
        assert actual.dtype == inputs[0].dtype, name
        assert relative_error(actual, want) <= TOLERANCE[dtype], name


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_long_16_bit_reductions(vulkan_device, dtype):
    x = math_inputs(np.random.default_rng(), dtype)[0]
    x = np.tile(x.reshape(-1), 4099 * 3 // x.size + 1)[:3 * 4099].reshape(3, 4099)
    out = rt.load_module(vulkan_vmfb(PROGRAMS[f"reduce_{dtype}"]), device=vulkan_device)["f"](x)
    # Accumulating in the 16-bit type: the error grows with the length, ~sqrt(n) ulps.
    assert relative_error(out.to_host(), x.astype(np.float64).sum(axis=1)) <= 8 * TOLERANCE[dtype]


def test_sign_extended_index_compares(vulkan_device):
    """i32 -> index (64-bit) sign extension feeding signed compares: built from OpSConvert,
    Mesa's lavapipe answered false to 1 <= 1; every comparison must match numpy."""
    mlir = """
    func.func @f(%x: tensor<7xi32>) -> tensor<7xi32> {
      %e = tensor.empty() : tensor<7xi32>
      %r = linalg.generic {indexing_maps = [affine_map<(a) -> (a)>, affine_map<(a) -> (a)>],
                           iterator_types = ["parallel"]} ins(%x : tensor<7xi32>) outs(%e : tensor<7xi32>) {
      ^bb0(%v: i32, %o: i32):
        %i = arith.index_cast %v : i32 to index
        %c1 = arith.constant 1 : index
        %le = arith.cmpi sle, %i, %c1 : index
        %lt = arith.cmpi slt, %i, %c1 : index
        %a = arith.extui %le : i1 to i32
        %b = arith.extui %lt : i1 to i32
        %s = arith.shli %a, %b : i32
        %w = arith.index_cast %i : index to i32
        %r = arith.addi %s, %w : i32
        linalg.yield %r : i32
      } -> tensor<7xi32>
      return %r : tensor<7xi32>
    }"""
    x = np.array([1, 2, 0, -3, 2**31 - 1, -2**31, -1], np.int32)
    out = rt.load_module(compile_str(mlir, CompileOptions(target_backends=["vulkan-spirv"])),
                         device=vulkan_device)["f"](x).to_host()
    le, lt = (x <= 1).astype(np.int32), (x < 1).astype(np.int32)
    np.testing.assert_array_equal(out, (le << lt) + x)
