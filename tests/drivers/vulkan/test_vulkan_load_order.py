"""How ``load_module`` orders a Vulkan load (issue 31 item 4): the SPIR-V is checked once per
new executable, beside the device's start or by the driver, never skipped; the executable loads
on a thread beside the constants' upload and its error still comes first; a constant's error
still reaches the caller, with no load thread left behind. Results checked against numpy."""

from __future__ import annotations

import threading

import numpy as np
import pyree.runtime as rt
import pytest
from codegen.spirv.spirv_modules import vulkan_vmfb
from pyree.runtime.hal.images import spirv
from runtime.module_mutations import _pack, _unpack

pytestmark = pytest.mark.vulkan


def _mlir(n: int, weight: str) -> str:
    return f"""
util.global private @w = {weight} : tensor<{n}xf32>
func.func @main(%x: tensor<{n}xf32>) -> tensor<{n}xf32> {{
  %w = util.global.load @w : tensor<{n}xf32>
  %s = arith.mulf %x, %w : tensor<{n}xf32>
  %r = arith.addf %s, %x : tensor<{n}xf32>
  return %r : tensor<{n}xf32>
}}
"""


def _load_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("pyree-load")]


def test_new_spirv_is_checked_once_and_the_result_is_right(vulkan_device, monkeypatch):
    rng = np.random.default_rng()
    n = int(rng.integers(1000, 5000))  # a size of its own: code no earlier load checked
    w = rng.standard_normal(n).astype(np.float32)
    w[:3] = [-0.0, np.inf, np.nan]
    checks = []
    real = spirv._check
    monkeypatch.setattr(spirv, "_check", lambda code, entries: (checks.append(1),
                                                                real(code, entries)))
    dense = "dense<[" + ", ".join(repr(float(v)) for v in w.astype(np.float64)) + "]>"
    data = vulkan_vmfb(_mlir(n, dense.replace("nan", "0x7FC00000").replace("inf", "0x7F800000")))
    module = rt.load_module(data, device=vulkan_device)
    assert len(checks) == 1
    x = rng.standard_normal(n).astype(np.float32)
    np.testing.assert_allclose(module.main(x).to_host(), x * w + x, rtol=1e-6, atol=1e-6)
    rt.load_module(data, device=vulkan_device)  # the same code again: passed in this process
    assert len(checks) == 1
    assert not _load_threads()


def test_a_refused_executable_is_the_error_even_when_a_constant_fails_too(vulkan_device):
    tree, segment = _unpack(vulkan_vmfb(_mlir(37, '#stream.parameter.named<"w">')))
    tree.executables[0].spirv.code.length -= 4
    with pytest.raises(rt.DriverError, match=r"SPIR-V is refused: .*cut short"):
        rt.load_module(_pack(tree, segment), device=vulkan_device)  # and no parameter file
    assert not _load_threads()


def test_a_missing_parameter_is_the_error_and_no_load_thread_is_left(vulkan_device):
    data = vulkan_vmfb(_mlir(41, '#stream.parameter.named<"w">'))
    with pytest.raises(rt.PyreeError, match="'w'"):
        rt.load_module(data, device=vulkan_device)
    assert not _load_threads()
