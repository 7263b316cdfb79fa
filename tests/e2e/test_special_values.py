"""Constants with special values — hex bit patterns, NaN, ±inf, -0.0, literals out of the type's
range — come out bit-exact in every form MLIR writes them and on every path they take: kernel
immediates, splat fills, dense data, folding, checks. A GPT-2 block's causal mask is
``0xFF800000`` (-inf); read as the number 4286578688.0 it gave wrong answers, not an error."""

from __future__ import annotations

import re

import numpy as np
import pyree.runtime as rt
import pytest
from dtype_cases import (
    NAN32,
    NINF32,
    NZ32,
    PINF32,
    SPECIAL,
    H,
    X,
    bits,
    ptx_of,
    same_bits,
    special_expected,
)
from pyree.compiler import CompileError, CompileOptions, compile_str
from pyree.compiler.input.constants import dense_array, is_splat, scalar_const
from pyree.compiler.input.parser import parse_mlir
from pyree.compiler.kernel import DTYPES, Const


def constant_of(literal: str, type: str):
    """The attribute of ``arith.constant <literal> : <type>`` as parsed."""
    module = parse_mlir(f"func.func @f() -> {type} {{\n  %c = arith.constant {literal} : {type}\n"
                        f"  return %c : {type}\n}}")
    return next(op for op in module.walk() if op.name == "arith.constant").properties["value"]


@pytest.mark.parametrize("literal, type, dtype, expected", [
    ("0xFF800000", "f32", "f32", NINF32),
    ("0x7FC00000", "f32", "f32", NAN32),
    ("-0.0", "f32", "f32", NZ32),
    ("1.0e40", "f32", "f32", PINF32),  # MLIR rounds a literal beyond the type to inf
    ("-1.0e40", "f32", "f32", NINF32),
    ("1.0e5", "f16", "f16", 0x7C00),
    ("65519.0", "f16", "f16", 0x7BFF),  # rounds down to the largest f16
    ("0xFC00", "f16", "f16", 0xFC00),
    ("0xFF80", "bf16", "bf16", 0xFF80),
    ("0x7FF0000000000000", "f64", "f64", 0x7FF0000000000000),
])
def test_scalar_float_literals_read_as_mlir_does(literal, type, dtype, expected):
    const = scalar_const(constant_of(literal, type), dtype, "")
    actual = np.array(const.value, DTYPES[dtype])
    assert same_bits(actual, np.array(expected, f"u{actual.itemsize}").view(actual.dtype))


@pytest.mark.parametrize("literal, type, expected", [
    ("0xFF : i8", "i8", [-1]),
    ("dense<0xFF> : tensor<2xi8>", "i8", [-1, -1]),
    ("dense<[0xFF, 1]> : tensor<2xi8>", "i8", [-1, 1]),
])
def test_hex_integers_wrap_to_the_type(literal, type, expected):
    attr = constant_of(*literal.rsplit(" : ", 1))
    if "dense" in literal:
        assert dense_array(attr, type, (len(expected),), "").tolist() == expected
    else:
        assert scalar_const(attr, type, "").value == expected[0]


@pytest.mark.parametrize("literal, dtype, expected", [
    ("dense<0xFF800000> : tensor<3xf32>", "f32", [NINF32] * 3),
    ("dense<[0x7FC00000, -0.0, 0xFF800000, 1.0e40]> : tensor<4xf32>", "f32",
     [NAN32, NZ32, NINF32, PINF32]),
    ('dense<"0x0000C07F00000080000080FF"> : tensor<3xf32>', "f32", [NAN32, NZ32, NINF32]),
    ("dense<[[0x7C00, 1.0e5], [-0.0, 0xFE00]]> : tensor<2x2xf16>", "f16",
     [0x7C00, 0x7C00, 0x8000, 0xFE00]),
    ('dense<"0x00FC0080"> : tensor<2xf16>', "f16", [0xFC00, 0x8000]),
    ("dense<[0xFF80, -0.0, 1.0e39]> : tensor<3xbf16>", "bf16", [0xFF80, 0x8000, 0x7F80]),
    ("dense<0xFFF0000000000000> : tensor<2xf64>", "f64", [0xFFF0000000000000] * 2),
])
def test_dense_float_literals_keep_their_bits(literal, dtype, expected):
    attr = constant_of(*literal.rsplit(" : ", 1))
    data = dense_array(attr, dtype, (len(expected),), "")
    assert bits(data).tolist() == expected


def test_i1_hex_blob_is_one_byte_per_element():
    data = dense_array(constant_of('dense<"0x010001">', "tensor<3xi1>"), "i1", (3,), "")
    assert data.tolist() == [True, False, True]


@pytest.mark.parametrize("literal, message", [
    ("dense<[0x1FF800000]> : tensor<1xf32>", "does not fit in 4 bytes"),
    ("0x1FFFF : f16", "does not fit in 2 bytes"),
])
def test_hex_float_wider_than_the_type_is_an_error(literal, message):
    with pytest.raises(CompileError, match=message):
        constant_of(*literal.rsplit(" : ", 1))


def test_splats_compare_bits():
    assert not is_splat(np.array([0.0, -0.0], np.float32))  # else the -0.0 would become 0.0
    assert is_splat(np.array([np.nan, np.nan], np.float32))
    assert Const(0.0, "f32") != Const(-0.0, "f32") and Const(0, "f32") == Const(0.0, "f32")
    assert Const(float("nan"), "f32") == Const(float("nan"), "f32")


# ---- end to end ---------------------------------------------------------------------------------

@pytest.mark.parametrize("device", ["local-sync", "local-task"])
def test_special_values_are_bit_exact_on_cpu(device):
    module = rt.load_module(compile_str(SPECIAL), device=device)
    outs = [np.asarray(o.to_host()) for o in module["f"](X, H)]
    for i, (actual, want) in enumerate(zip(outs, special_expected())):
        assert same_bits(actual, want), (i, actual, want)


def test_minus_zero_and_zero_kernels_are_not_shared():
    program = """
    func.func @f(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
      %z = arith.constant dense<0.0> : tensor<4xf32>
      %nz = arith.constant dense<-0.0> : tensor<4xf32>
      %a = arith.mulf %x, %z : tensor<4xf32>
      %b = arith.mulf %x, %nz : tensor<4xf32>
      return %a, %b : tensor<4xf32>, tensor<4xf32>
    }"""
    x = np.array([1.0, -1.0, 2.0, -0.0], np.float32)
    a, b = (np.asarray(o.to_host()) for o in rt.load_module(compile_str(program))["f"](x))
    assert same_bits(a, x * np.float32(0.0)) and same_bits(b, x * np.float32(-0.0))


def test_cuda_immediates_carry_the_bit_patterns():
    ptx = ptx_of(compile_str(SPECIAL, CompileOptions(target_backends=["cuda"])))
    immediates = set(re.findall(r"0f[0-9A-F]{8}", ptx))
    assert {"0fFF800000", "0f7FC00000", "0f80000000"} <= immediates, immediates
    assert "0f4F7F8000" not in ptx  # 4286578688.0, the misread -inf
