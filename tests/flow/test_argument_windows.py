"""scatter-argument-windows (flow/argument_windows.py): a window written at a run-time offset
(``tensor.insert_slice``, ``stablehlo.dynamic_update_slice``) into an argument that the function
returns becomes a scatter of the window alone, tied to the argument (host/planning.py ``ties``);
a destination the function computes or a result used again stays the select over the whole
tensor, and a scatter that reads its own destination is not tied. Each checked against numpy at
offsets inside, across the edge and past it, with NaN, -0 and infinities in the untouched part
compared bit for bit, on every target CI runs, called with and without donating the argument."""

from __future__ import annotations

import os
import re

import ml_dtypes
import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileOptions, compile_str

BACKENDS = [
    pytest.param(("llvm-cpu", "local-task"), id="llvm-cpu"),
    pytest.param(("vulkan-spirv", "vulkan"), id="vulkan", marks=pytest.mark.vulkan),
]
HEADER = re.compile(r"// -----// IR after (\S+) //----- //\n")

INSERT = """func.func @main(%cache: tensor<3x9x4x{t}>, %new: tensor<3x2x4x{t}>, %pos: tensor<i64>)
    -> tensor<3x9x4x{t}> {{
  %p = tensor.extract %pos[] : tensor<i64>
  %i = arith.index_cast %p : i64 to index
  %r = tensor.insert_slice %new into %cache[0, %i, 0] [3, 2, 4] [1, 1, 1]
      : tensor<3x2x4x{t}> into tensor<3x9x4x{t}>
  return %r : tensor<3x9x4x{t}>
}}"""

UPDATE = """func.func @main(%a: tensor<6x5xf32>, %u: tensor<2x3xf32>, %i: tensor<i32>,
                %j: tensor<i32>) -> tensor<6x5xf32> {
  %r = stablehlo.dynamic_update_slice %a, %u, %i, %j
      : (tensor<6x5xf32>, tensor<2x3xf32>, tensor<i32>, tensor<i32>) -> tensor<6x5xf32>
  return %r : tensor<6x5xf32>
}"""

KEPT = {  # programs whose window stays a select over the whole destination
    "a destination the function computes": """
func.func @main(%cache: tensor<3x9x4xf32>, %new: tensor<3x2x4xf32>, %pos: tensor<i64>)
    -> tensor<3x9x4xf32> {
  %e = math.exp %cache : tensor<3x9x4xf32>
  %p = tensor.extract %pos[] : tensor<i64>
  %i = arith.index_cast %p : i64 to index
  %r = tensor.insert_slice %new into %e[0, %i, 0] [3, 2, 4] [1, 1, 1]
      : tensor<3x2x4xf32> into tensor<3x9x4xf32>
  return %r : tensor<3x9x4xf32>
}""",
    "a result used again": """
func.func @main(%cache: tensor<3x9x4xf32>, %new: tensor<3x2x4xf32>, %pos: tensor<i64>)
    -> tensor<3x9x4xf32> {
  %p = tensor.extract %pos[] : tensor<i64>
  %i = arith.index_cast %p : i64 to index
  %w = tensor.insert_slice %new into %cache[0, %i, 0] [3, 2, 4] [1, 1, 1]
      : tensor<3x2x4xf32> into tensor<3x9x4xf32>
  %r = math.exp %w : tensor<3x9x4xf32>
  return %r : tensor<3x9x4xf32>
}""",
}
# rows of the argument itself written back into it at a run-time row: in place, the scatter
# would read rows that it writes, so the host program must not tie it to the argument
SHIFT = """
func.func @main(%cache: tensor<3x9x4xf32>, %pos: tensor<i64>) -> tensor<3x9x4xf32> {
  %s = tensor.extract_slice %cache[0, 0, 0] [3, 2, 4] [1, 1, 1]
      : tensor<3x9x4xf32> to tensor<3x2x4xf32>
  %p = tensor.extract %pos[] : tensor<i64>
  %i = arith.index_cast %p : i64 to index
  %r = tensor.insert_slice %s into %cache[0, %i, 0] [3, 2, 4] [1, 1, 1]
      : tensor<3x2x4xf32> into tensor<3x9x4xf32>
  return %r : tensor<3x9x4xf32>
}"""
DTYPES = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16, "i32": np.int32,
          "i8": np.int8, "i1": np.bool_}


def _options(target: str, **more) -> CompileOptions:
    return CompileOptions(target_backends=[target], vulkan_target=os.environ.get(
        "PYREE_VULKAN_TARGET", "cpu-lavapipe-linux"), **more)


def _after_pass(text: str, capsys) -> str:
    compile_str(text, _options("llvm-cpu", print_ir_after=["scatter-argument-windows"]),
                extra_args=["--compile-to=flow"])
    parts = HEADER.split(capsys.readouterr().err)
    return dict(zip(parts[1::2], parts[2::2]))["scatter-argument-windows"]


def _special(rng, shape, dtype) -> np.ndarray:
    if dtype is np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -1000), min(info.max, 1000), shape).astype(dtype)
    x = rng.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    flat[[1, 5, 11, 17]] = [np.nan, -0.0, np.inf, -np.inf]
    return x


def _same_bits(got: np.ndarray, want: np.ndarray) -> None:
    view = {1: np.uint8, 2: np.uint16, 4: np.uint32}[want.dtype.itemsize]
    np.testing.assert_array_equal(np.asarray(got).view(view), want.view(view))


def test_windows_into_returned_arguments_become_scatters(capsys):
    for text in (INSERT.format(t="f32"), UPDATE):
        ir = _after_pass(text, capsys)
        assert re.search(r"scatter %\w+\[", ir) and "select(" not in ir, ir


@pytest.mark.parametrize("name", sorted(KEPT))
def test_other_windows_stay_selects(name, capsys):
    ir = _after_pass(KEPT[name], capsys)
    assert "scatter" not in ir and "select(" in ir, ir


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_insert_at_a_run_time_row(backend, dtype):
    target, device = backend
    module = rt.load_module(compile_str(INSERT.format(t=dtype), _options(target)), device=device)
    assert module.main.tied_results == [0]
    rng = np.random.default_rng(len(dtype))
    np_type = DTYPES[dtype]
    for pos in (0, 4, 7, 8, -1, -2, 100):
        cache = _special(rng, (3, 9, 4), np_type)
        new = _special(rng, (3, 2, 4), np_type)
        want = cache.copy()
        for t in range(9):
            if 0 <= t - pos < 2:
                want[:, t] = new[:, t - pos]
        kept = cache.copy()
        _same_bits(module.main(cache, new, np.int64(pos)).to_host(), want)
        _same_bits(cache, kept)  # an argument not donated is never written
        # donated: a result of this module's, written in place and given back as the result
        first = module.main(cache, new, np.int64(pos))
        again = module.main(first, new, np.int64(pos), donate=(0,))
        with pytest.raises(rt.InvocationError, match="donated to a call of 'main'"):
            first.to_host()
        _same_bits(again.to_host(), want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dynamic_update_slice_clamps_its_start(backend):
    target, device = backend
    module = rt.load_module(compile_str(UPDATE, _options(target)), device=device)
    assert module.main.tied_results == [0]
    rng = np.random.default_rng(5)
    for i, j in [(0, 0), (4, 2), (5, 4), (-3, 1), (99, -99), (2, 1)]:
        a = _special(rng, (6, 5), np.float32)
        u = rng.standard_normal((2, 3)).astype(np.float32)
        want = a.copy()
        ci, cj = min(max(i, 0), 4), min(max(j, 0), 2)
        want[ci:ci + 2, cj:cj + 3] = u
        held = rt.asdevicearray(module.device, a)  # not this module's result: copied, kept
        got = module.main(held, u, np.int32(i), np.int32(j), donate=True)
        _same_bits(got.to_host(), want)
        _same_bits(held.to_host(), a)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_window_read_from_its_own_destination(backend):
    """Rows 0-1 written back at ``pos``: fused, the scatter reads the argument it would write
    (its own starting value's binding), so the result is not tied (a copy, even where the
    caller donates), and windows that overlap their source come out as numpy's."""
    target, device = backend
    module = rt.load_module(compile_str(SHIFT, _options(target)), device=device)
    assert module.main.tied_results == [None]
    rng = np.random.default_rng(7)
    for pos in (1, 0, 3, 8):
        cache = _special(rng, (3, 9, 4), np.float32)
        want = cache.copy()
        for t in range(9):
            if 0 <= t - pos < 2:
                want[:, t] = cache[:, t - pos]
        first = module.main(cache, np.int64(0))  # rows 0-1 over themselves: the same cache
        _same_bits(module.main(first, np.int64(pos), donate=True).to_host(), want)
        _same_bits(first.to_host(), cache)
