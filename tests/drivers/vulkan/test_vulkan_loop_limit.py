"""Mesa's lavapipe stops every loop of a shader once their shared count reaches 65535 steps, and
returns whatever the loops had folded by then. pyree's lavapipe and baseline Vulkan targets keep
each invocation under that: a fold longer than it is spread over a workgroup's invocations, and a
kernel that no template can keep under it is refused at compile time instead of answering
wrong. A GPU's Vulkan target has no such limit."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileError, CompileOptions, compile_str
from tooling import require_module

pytestmark = pytest.mark.vulkan

LAVAPIPE = "cpu-lavapipe-linux"


def counting(outputs: int, length: int, fold: str) -> str:
    """``out[i]`` over ``j`` of ``x[i] < y[j]``: a count (``acc + select``, i32), whether any
    holds (``acc | lt``, i1, which no pass splits), or a count by a conditional update
    (``select(lt, acc + 1, acc)``, which no parallel template takes)."""
    dtype, init, step = {
        "count": ("i32", "0 : i32", "%s = arith.select %lt, %one, %zero : i32\n"
                  "    %t = arith.addi %acc, %s : i32"),
        "any": ("i1", "false", "%t = arith.ori %acc, %lt : i1"),
        "update": ("i32", "0 : i32", "%u = arith.addi %acc, %one : i32\n"
                   "    %t = arith.select %lt, %u, %acc : i32"),
    }[fold]
    return f"""
#a = affine_map<(d0, d1) -> (d0)>
#b = affine_map<(d0, d1) -> (d1)>
func.func @main(%x: tensor<{outputs}xf32>, %y: tensor<{length}xf32>) -> tensor<{outputs}x{dtype}> {{
  %c0 = arith.constant {init}
  %e = tensor.empty() : tensor<{outputs}x{dtype}>
  %z = linalg.fill ins(%c0 : {dtype}) outs(%e : tensor<{outputs}x{dtype}>) -> tensor<{outputs}x{dtype}>
  %r = linalg.generic {{indexing_maps = [#a, #b, #a], iterator_types = ["parallel", "reduction"]}}
      ins(%x, %y : tensor<{outputs}xf32>, tensor<{length}xf32>) outs(%z : tensor<{outputs}x{dtype}>) {{
  ^bb0(%p: f32, %q: f32, %acc: {dtype}):
    %lt = arith.cmpf olt, %p, %q : f32
    %one = arith.constant 1 : i32
    %zero = arith.constant 0 : i32
    {step}
    linalg.yield %t : {dtype}
  }} -> tensor<{outputs}x{dtype}>
  return %r : tensor<{outputs}x{dtype}>
}}"""


def vulkan(text: str, target: str) -> bytes:
    return compile_str(text, CompileOptions(target_backends=["vulkan-spirv"], vulkan_target=target))


@pytest.mark.parametrize("fold, outputs, length", [("any", 4099, 70001), ("count", 8, 196615)])
def test_a_fold_past_the_limit_is_spread_and_right(vulkan_device, fold, outputs, length):
    # "any" over 4099 outputs whose reads move with the output: one invocation each on a GPU,
    # where lavapipe saw only the first 65535 of y, and only those past it can hold here.
    rng = np.random.default_rng(7)
    x = rng.standard_normal(outputs).astype(np.float32)
    y = rng.standard_normal(length).astype(np.float32)
    y[::997] = np.nan  # never counted: x < NaN is false
    if fold == "any":  # only y[-5] can hold: x[i] < 0
        y[:] = -np.inf
        y[-5] = 0.0
    module = rt.load_module(vulkan(counting(outputs, length, fold), LAVAPIPE), device=vulkan_device)
    got = np.asarray(module["main"](x, y).to_host())
    want = (x[:, None] < y[None, :]).sum(1)
    np.testing.assert_array_equal(got, want > 0 if fold == "any" else want)
    assert fold == "count" or 0 < want.astype(bool).sum() < outputs


@pytest.mark.parametrize("target", [LAVAPIPE, ""])  # "": the baseline lavapipe also meets
def test_a_serial_update_past_the_limit_is_refused(target):
    with pytest.raises(CompileError, match=r"runs 100001 loop steps in one invocation, more "
                                           r"than the 65535 .*lavapipe") as caught:
        vulkan(counting(8, 100000, "update"), target)
    assert caught.value.location.endswith(":8:3")  # the linalg.generic's line


def test_cascaded_sums_and_row_stores_count_toward_the_limit(vulkan_device):
    """A softmax down 21000 rows of 256 columns (one invocation a column: a max, a cascaded
    sum, then the rows stored) runs 21001 + 23627 + 21001 loop passes: under the limit by its
    folds' steps alone, over it with the cascade's block loops and each loop's exit, which had
    left the last 369 rows zero. Spread over a workgroup a column now. (The limit is each
    invocation's, so the rows are the point: 256 columns compile to the kernel 4096 did, a
    workgroup of 256 a column, at 1/16 of the data and of lavapipe's time.)"""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((21000, 256)).astype(np.float32)
    jax = require_module("jax")
    jax.config.update("jax_platforms", "cpu")
    text = jax.jit(lambda v: jax.nn.softmax(v, axis=0)).lower(x).as_text()
    module = rt.load_module(vulkan(text, LAVAPIPE), device=vulkan_device)
    got = np.asarray(module["main"](x).to_host())
    wide = np.exp(x - x.max(0)).astype(np.float64)
    np.testing.assert_allclose(got, wide / wide.sum(0), rtol=2e-5, atol=1e-9)


def test_a_long_contraction_leaves_the_tiled_matmul(vulkan_device):
    """[8, K] x [K, 8] with K = 1048583 (prime: split_reduction finds no chunks): the tiled
    matmul's K loop, 16 a step, would run 65537 steps (4.7% of a product was lost at K =
    1100009); the fold template spreads it over a workgroup an output."""
    k = 1048583
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((8, k)).astype(np.float32), rng.standard_normal((k, 8)).astype(np.float32)
    text = f"""func.func @main(%a: tensor<8x{k}xf32>, %b: tensor<{k}x8xf32>) -> tensor<8x8xf32> {{
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x8xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  %r = linalg.matmul ins(%a, %b : tensor<8x{k}xf32>, tensor<{k}x8xf32>) outs(%f : tensor<8x8xf32>) -> tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}}"""
    module = rt.load_module(vulkan(text, LAVAPIPE), device=vulkan_device)
    got = np.asarray(module["main"](a, b).to_host())
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-2)


def test_a_serial_update_within_the_limit_or_on_a_gpu_compiles(vulkan_device):
    rng = np.random.default_rng(8)
    x, y = rng.standard_normal(8).astype(np.float32), rng.standard_normal(65535).astype(np.float32)
    module = rt.load_module(vulkan(counting(8, 65535, "update"), LAVAPIPE), device=vulkan_device)
    np.testing.assert_array_equal(np.asarray(module["main"](x, y).to_host()),
                                  (x[:, None] < y[None, :]).sum(1))
    assert vulkan(counting(8, 100000, "update"), "ampere")  # no limit on a GPU's driver


def test_the_cli_names_the_limit_without_a_traceback(tmp_path):
    source = tmp_path / "count.mlir"
    source.write_text(counting(8, 100000, "update"))
    proc = subprocess.run([sys.executable, "-m", "pyree.compiler.tools.compile", str(source),
                           "--iree-hal-target-backends=vulkan-spirv",
                           f"--iree-vulkan-target={LAVAPIPE}", "-o", str(tmp_path / "m.vmfb")],
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "count.mlir:8:3" in proc.stderr and "more than the 65535" in proc.stderr
    assert not (tmp_path / "m.vmfb").exists()
