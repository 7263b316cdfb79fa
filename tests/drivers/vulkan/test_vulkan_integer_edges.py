"""Integer ops where SPIR-V leaves the answer undefined, on a Vulkan device, defined as pyree's
other targets define them (codegen/llvm_cpu/scalar.py ``shift``, ``int_divide``): a shift by the
width or more gives 0, or the sign fill for an arithmetic right shift (NVIDIA's driver took the
amount mod 32, so PyTorch's ``1 << 40`` of an int32 came out 256; a negative amount counts as a
huge one); division and remainder by zero give 0, MIN / -1 wraps. Against a Python reference."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileOptions, compile_str

pytestmark = pytest.mark.vulkan

OPS = ("shli", "shrsi", "shrui")
DIVISIONS = ("divsi", "remsi", "divui", "remui")


def _program(element: str, n: int, ops=OPS) -> str:
    t = f"tensor<{n}x{element}>"
    m = "affine_map<(d0) -> (d0)>"
    body = []
    for op in ops:
        body.append(
            f"  %{op} = linalg.generic {{indexing_maps = [{m}, {m}, {m}], iterator_types = "
            f"[\"parallel\"]}} ins(%a, %s : {t}, {t}) outs(%e : {t}) {{\n"
            f"  ^bb0(%x: {element}, %y: {element}, %o: {element}):\n"
            f"    %r = arith.{op} %x, %y : {element}\n    linalg.yield %r : {element}\n  }} -> {t}")
    names, types = ", ".join(f"%{op}" for op in ops), ", ".join([t] * len(ops))
    return "\n".join([f"func.func @main(%a: {t}, %s: {t}) -> ({types}) {{",
                      f"  %e = tensor.empty() : {t}", *body, f"  return {names} : {types}", "}"])


def _reference(op: str, a: int, n: int, bits: int) -> int:
    """The result's bits as a signed value of ``bits`` bits."""
    amount = n % (1 << bits)  # the amount read as unsigned
    unsigned = a % (1 << bits)
    if op in DIVISIONS:
        x, y = (a, n) if op.endswith("si") else (a % (1 << bits), n % (1 << bits))
        if y == 0:
            r = 0
        else:
            q = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)  # truncating
            r = q if op.startswith("div") else x - q * y
    elif op == "shrsi":
        r = (-1 if a < 0 else 0) if amount >= bits else a >> amount
    elif amount >= bits:
        r = 0
    else:
        r = unsigned << amount if op == "shli" else unsigned >> amount
    r %= 1 << bits
    return r - (1 << bits) if r >> (bits - 1) else r


@pytest.mark.parametrize("element,dtype", [("i8", np.int8), ("i16", np.int16),
                                           ("i32", np.int32), ("i64", np.int64)])
def test_shifts_past_the_width(vulkan_device, element, dtype):
    bits = np.iinfo(dtype).bits
    amounts = [0, 1, bits - 1, bits, bits + 1, 40, 70, 127, -1, -bits]
    values = [1, -1, 5, -7, int(np.iinfo(dtype).max), int(np.iinfo(dtype).min), 0x55, -0x56]
    a = np.array([v for v in values for _ in amounts], dtype)
    s = np.array([n for _ in values for n in amounts]).astype(dtype)  # wraps as the type does
    module = rt.load_module(compile_str(_program(element, a.size),
                                        CompileOptions(target_backends=["vulkan-spirv"])),
                            device=vulkan_device)
    for op, got in zip(OPS, module["main"](a, s), strict=True):
        want = np.array([_reference(op, int(x), int(n), bits) for x, n in zip(a, s)], dtype)
        np.testing.assert_array_equal(got.to_host(), want, err_msg=f"{op} on {element}")


@pytest.mark.parametrize("element,dtype", [("i8", np.int8), ("i16", np.int16),
                                           ("i32", np.int32), ("i64", np.int64)])
def test_division_by_zero_and_min_by_minus_one(vulkan_device, element, dtype):
    info = np.iinfo(dtype)
    values = [7, -7, 0, 1, -1, int(info.max), int(info.min), 100]
    divisors = [0, 1, -1, 3, -3, int(info.min), int(info.max), 2]
    a = np.array([v for v in values for _ in divisors], dtype)
    s = np.array([d for _ in values for d in divisors], dtype)
    module = rt.load_module(compile_str(_program(element, a.size, DIVISIONS),
                                        CompileOptions(target_backends=["vulkan-spirv"])),
                            device=vulkan_device)
    for op, got in zip(DIVISIONS, module["main"](a, s), strict=True):
        want = np.array([_reference(op, int(x), int(n), info.bits) for x, n in zip(a, s)],
                        dtype)
        np.testing.assert_array_equal(got.to_host(), want, err_msg=f"{op} on {element}")
