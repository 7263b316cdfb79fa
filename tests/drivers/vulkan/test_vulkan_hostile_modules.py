"""The module fuzz test on a Vulkan device (Mesa's lavapipe in CI; a GPU where the lead runs
it): hostile rewrites of real vulkan-spirv modules, re-stamped, loaded and run in child
processes; none may crash, hang (beyond a host-program loop it rewrote) or return a byte the
call did not write (tests/runtime/hostile_runs.py). The driver checks SPIR-V structure before
vkCreateShaderModule: lavapipe hung on a module cut by one word."""

from __future__ import annotations

import pyree.runtime as rt
import pytest
from pyree.compiler import CompileOptions
from runtime.hostile_runs import MUTANTS, compile_bases, fuzz
from runtime.module_mutations import _pack, _unpack

pytestmark = pytest.mark.vulkan


@pytest.fixture(scope="module")
def bases() -> dict[str, bytes]:
    return compile_bases(CompileOptions(target_backends=["vulkan-spirv"]))


def test_hostile_modules_neither_crash_hang_nor_leak(vulkan_device, bases, tmp_path):
    failed, counts = fuzz(vulkan_device, bases, tmp_path)
    assert not failed, "\n".join(failed)
    assert counts.get("ok", 0) > MUTANTS // 10 and counts.get("refused", 0) > MUTANTS // 10, counts


@pytest.mark.parametrize("words", [1, 2, 5])
def test_spirv_cut_short_is_refused_before_the_driver_sees_it(vulkan_device, bases, words):
    tree, segment = _unpack(bases["mlp"])
    tree.executables[0].spirv.code.length -= 4 * words
    with pytest.raises(rt.DriverError, match=r"the executable's SPIR-V is refused: .*cut short"):
        rt.load_module(_pack(tree, segment), device=vulkan_device)
