"""A function result that is a reshape of a value only dispatches compute (host/planning.py
``_Reshapes``): that value is computed straight into the result's allocation, with no copy at
the end of the call; a reshape of an argument or a constant, a slice, and a value returned
twice keep their copy. Counted in the host program's commands; every program's numbers checked
against numpy on local-task, twice per module (fresh result buffers)."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
from host_commands import copies
from pyree.compiler import compile_str

MM = """%z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<13x7xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<13x7xf32>) -> tensor<13x7xf32>
  %m = linalg.matmul ins(%x, %y : tensor<13x5xf32>, tensor<5x7xf32>) outs(%f : tensor<13x7xf32>) -> tensor<13x7xf32>"""
HEAD = "func.func @main(%x: tensor<13x5xf32>, %y: tensor<5x7xf32>) -> ({types}) {{\n  "
R3 = "tensor<1x13x7xf32>"
EXPAND = "%r = tensor.expand_shape %m [[0, 1], [2]] output_shape [1, 13, 7] : tensor<13x7xf32> into " + R3


def mm(x, y):
    return x.astype(np.float64) @ y


PROGRAMS = {  # name: (result types, body, copies, numpy of the results)
    "a matmul reshaped": (R3, f"{MM}\n  {EXPAND}\n  return %r : {R3}", 0,
                          lambda x, y: [mm(x, y)[None]]),
    "reshaped twice over": (
        "tensor<91xf32>", f"{MM}\n  {EXPAND}\n  %c = tensor.collapse_shape %r [[0, 1, 2]] : "
        f"{R3} into tensor<91xf32>\n  return %c : tensor<91xf32>", 0,
        lambda x, y: [mm(x, y).reshape(-1)]),
    "reshaped and read again": (
        f"{R3}, tensor<13x7xf32>",
        f"{MM}\n  {EXPAND}\n  %n = arith.negf %m : tensor<13x7xf32>\n  return %r, %n : {R3}, "
        "tensor<13x7xf32>", 0, lambda x, y: [mm(x, y)[None], -mm(x, y)]),
    "two reshapes of one value": (
        f"{R3}, tensor<91xf32>",
        f"{MM}\n  {EXPAND}\n  %c = tensor.collapse_shape %m [[0, 1]] : tensor<13x7xf32> into "
        f"tensor<91xf32>\n  return %r, %c : {R3}, tensor<91xf32>", 1,
        lambda x, y: [mm(x, y)[None], mm(x, y).reshape(-1)]),
    "a value and its reshape": (
        f"tensor<13x7xf32>, {R3}", f"{MM}\n  {EXPAND}\n  return %m, %r : tensor<13x7xf32>, {R3}", 1,
        lambda x, y: [mm(x, y), mm(x, y)[None]]),
    "a reshape returned twice": (
        f"{R3}, {R3}", f"{MM}\n  {EXPAND}\n  return %r, %r : {R3}, {R3}", 1,
        lambda x, y: [mm(x, y)[None]] * 2),
    "a reshaped argument": (
        "tensor<1x13x5xf32>", "%r = tensor.expand_shape %x [[0, 1], [2]] output_shape [1, 13, 5] : "
        "tensor<13x5xf32> into tensor<1x13x5xf32>\n  return %r : tensor<1x13x5xf32>", 1,
        lambda x, y: [x[None]]),
    "a slice of the matmul": (
        "tensor<6x7xf32>", f"{MM}\n  %r = tensor.extract_slice %m[7, 0] [6, 7] [1, 1] : "
        "tensor<13x7xf32> to tensor<6x7xf32>\n  return %r : tensor<6x7xf32>", 1,
        lambda x, y: [mm(x, y)[7:]]),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_reshaped_result_is_computed_in_place(name):
    types, body, want_copies, reference = PROGRAMS[name]
    text = HEAD.format(types=types) + body + "\n}"
    assert copies(text) == want_copies
    rng = np.random.default_rng(len(name))
    x = rng.standard_normal((13, 5)).astype(np.float32)
    x[3, 2], x[5, 0], x[8, 4] = np.nan, np.inf, -0.0
    y = rng.standard_normal((5, 7)).astype(np.float32)
    module = rt.load_module(compile_str(text), device="local-task")
    for _ in range(2):
        got = module.main(x, y)
        got = got if isinstance(got, tuple) else (got,)
        with np.errstate(invalid="ignore"):
            want = reference(x, y)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.to_host(), w, rtol=1e-5, atol=1e-6)


def test_a_reshape_of_a_run_time_sized_value():
    """``?`` rows: the result's bytes are a size; the reshape still needs no copy."""
    text = """func.func @main(%x: tensor<?x4xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x4xf32>
  %e = tensor.empty(%n) : tensor<?x4xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
      iterator_types = ["parallel", "parallel"]} ins(%x : tensor<?x4xf32>) outs(%e : tensor<?x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %b = math.exp %a : f32
    linalg.yield %b : f32
  } -> tensor<?x4xf32>
  %r = tensor.collapse_shape %s [[0, 1]] : tensor<?x4xf32> into tensor<?xf32>
  return %r : tensor<?xf32>
}"""
    assert copies(text) == 0
    module = rt.load_module(compile_str(text), device="local-task")
    for n in (0, 1, 7, 3):
        x = np.arange(n * 4, dtype=np.float32).reshape(n, 4) / 7
        np.testing.assert_allclose(module.main(x).to_host(), np.exp(x).reshape(-1), rtol=1e-6)
