"""Fills of ranges vkCmdFillBuffer cannot take (it wants offset and size multiples of 4): splat
results of 8- and 16-bit types with odd element counts (Gemma 2's int8 masks of 13 tokens
failed on NVIDIA's driver), and, through rewritten modules, fills that start and end inside a
4-byte word, with the pattern's phase kept from the fill's first byte. Against numpy."""

from __future__ import annotations

import copy

import numpy as np
import pyree.runtime as rt
import pytest
from drivers.rocm.hip_on_cuda.rocm_on_cuda_cases import fills_expected, fills_mlir
from pyree.compiler import CompileOptions, compile_str
from pyree.compiler._fb.Command import CommandT
from runtime.module_mutations import BARRIER, FILL, _pack, _unpack

pytestmark = pytest.mark.vulkan


def _vulkan(text: str) -> bytes:
    return compile_str(text, CompileOptions(target_backends=["vulkan-spirv"]))


def test_splats_of_every_width_and_odd_counts(vulkan_device):
    x = np.random.default_rng(3).random((37, 53), dtype=np.float32)
    out = rt.load_module(_vulkan(fills_mlir()), device=vulkan_device)["main"](x)
    for got, want in zip(out, fills_expected(x), strict=True):
        np.testing.assert_array_equal(got.to_host(), want)


# (element type, count, splat, (start, end) byte ranges refilled with the second pattern)
REFILLS = {
    "i8": ("i8", 1001, "-91", np.int8, 0x5A, [(3, 997), (5, 7), (1, 2), (8, 9), (0, 1001)]),
    "f16": ("f16", 999, "-2.5", np.float16, 0x3C00, [(2, 994), (6, 8), (10, 1998), (0, 6)]),
}


@pytest.mark.parametrize("name", sorted(REFILLS))
def test_fills_that_start_and_end_inside_a_word(vulkan_device, name):
    element, count, splat, dtype, pattern, ranges = REFILLS[name]
    tree, segment = _unpack(_vulkan(
        f"func.func @main() -> tensor<{count}x{element}> {{\n"
        f"  %a = arith.constant dense<{splat}> : tensor<{count}x{element}>\n"
        f"  return %a : tensor<{count}x{element}>\n}}"))
    function = tree.functions[0]
    (first,) = [c for c in function.commands if c.kind == FILL]
    width = first.fill.patternLength
    want = np.full(count, np.array(splat, np.float64), dtype).view(np.uint8).copy()
    refills = []
    for start, end in ranges:
        barrier, fill = CommandT(), copy.deepcopy(first)
        barrier.kind = BARRIER
        fill.fill.target.offset, fill.fill.target.length = start, end - start
        fill.fill.pattern = pattern
        refills += [barrier, fill]
        want[start:end] = np.frombuffer(pattern.to_bytes(width, "little"), np.uint8)[
            np.arange(end - start) % width]
    at = function.commands.index(first) + 1
    function.commands[at:at] = refills
    got = rt.load_module(_pack(tree, segment), device=vulkan_device)["main"]().to_host()
    np.testing.assert_array_equal(got.view(np.uint8), want)
