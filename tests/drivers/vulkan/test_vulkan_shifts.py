"""Shifts by the width or more on a Vulkan device: SPIR-V leaves them undefined (NVIDIA's driver
took the amount mod 32, so PyTorch's ``1 << 40`` of an int32 came out 256), pyree defines them as
its other targets do (codegen/llvm_cpu/scalar.py ``shift``): 0, or the sign fill for an
arithmetic right shift; a negative amount counts as a huge one. Against a Python reference."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileOptions, compile_str

pytestmark = pytest.mark.vulkan

OPS = ("shli", "shrsi", "shrui")


def _program(element: str, n: int) -> str:
    t = f"tensor<{n}x{element}>"
    m = "affine_map<(d0) -> (d0)>"
    body = []
    for op in OPS:
        body.append(
            f"  %{op} = linalg.generic {{indexing_maps = [{m}, {m}, {m}], iterator_types = "
            f"[\"parallel\"]}} ins(%a, %s : {t}, {t}) outs(%e : {t}) {{\n"
            f"  ^bb0(%x: {element}, %y: {element}, %o: {element}):\n"
            f"    %r = arith.{op} %x, %y : {element}\n    linalg.yield %r : {element}\n  }} -> {t}")
    return "\n".join([f"func.func @main(%a: {t}, %s: {t}) -> ({t}, {t}, {t}) {{",
                      f"  %e = tensor.empty() : {t}", *body,
                      f"  return %shli, %shrsi, %shrui : {t}, {t}, {t}", "}"])


def _reference(op: str, a: int, n: int, bits: int) -> int:
    """The result's bits as a signed value of ``bits`` bits."""
    amount = n % (1 << bits)  # the amount read as unsigned
    unsigned = a % (1 << bits)
    if op == "shrsi":
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
