"""Host-program control flow (scf.for / scf.while / scf.if) shared by the CPU tests
(tests/host/test_control_flow.py), the Vulkan ones (tests/drivers/vulkan/test_vulkan_control_flow.py)
and the CUDA GPU run (tests/drivers/cuda): one MLIR module, and per function its inputs and a numpy
reference. Trip counts and branch choices come from device results and from arguments, and
loop-carried values are swapped (a parallel copy) and nested."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

MLIR = """
func.func @repeat_add(%x: tensor<7x3xf32>) -> tensor<7x3xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c5 = arith.constant 5 : index
  %init = arith.constant dense<0.0> : tensor<7x3xf32>
  %r = scf.for %i = %c0 to %c5 step %c1 iter_args(%acc = %init) -> (tensor<7x3xf32>) {
    %f = arith.index_cast %i : index to i32
    %g = arith.sitofp %f : i32 to f32
    %e = tensor.empty() : tensor<7x3xf32>
    %s = linalg.fill ins(%g : f32) outs(%e : tensor<7x3xf32>) -> tensor<7x3xf32>
    %xi = arith.mulf %x, %s : tensor<7x3xf32>
    %n = arith.addf %acc, %xi : tensor<7x3xf32>
    scf.yield %n : tensor<7x3xf32>
  }
  return %r : tensor<7x3xf32>
}

func.func @double_until(%x: tensor<13xf32>, %limit: tensor<f32>) -> (tensor<13xf32>, tensor<i32>) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant 0.0 : f32
  %lim = tensor.extract %limit[] : tensor<f32>
  %r:2 = scf.while (%a = %x, %k = %c0) : (tensor<13xf32>, i32) -> (tensor<13xf32>, i32) {
    %e = tensor.empty() : tensor<f32>
    %f = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
    %s = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>],
                         iterator_types = ["reduction"]} ins(%a : tensor<13xf32>) outs(%f : tensor<f32>) {
    ^bb0(%in: f32, %o: f32):
      %t = arith.addf %in, %o : f32
      linalg.yield %t : f32
    } -> tensor<f32>
    %v = tensor.extract %s[] : tensor<f32>
    %c = arith.cmpf olt, %v, %lim : f32
    scf.condition(%c) %a, %k : tensor<13xf32>, i32
  } do {
  ^bb0(%a2: tensor<13xf32>, %k2: i32):
    %d = arith.addf %a2, %a2 : tensor<13xf32>
    %k3 = arith.addi %k2, %c1 : i32
    scf.yield %d, %k3 : tensor<13xf32>, i32
  }
  %kt = tensor.from_elements %r#1 : tensor<i32>
  return %r#0, %kt : tensor<13xf32>, tensor<i32>
}

func.func @fib(%n: tensor<i32>) -> tensor<i64> {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %a0 = arith.constant 0 : i64
  %b0 = arith.constant 1 : i64
  %nn = tensor.extract %n[] : tensor<i32>
  %r:2 = scf.for %i = %c0 to %nn step %c1 iter_args(%a = %a0, %b = %b0) -> (i64, i64) : i32 {
    %s = arith.addi %a, %b : i64
    scf.yield %b, %s : i64, i64
  }
  %t = tensor.from_elements %r#0 : tensor<i64>
  return %t : tensor<i64>
}

func.func @swap_tensors(%a: tensor<5xf32>, %b: tensor<5xf32>, %n: tensor<index>) -> (tensor<5xf32>, tensor<5xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %nn = tensor.extract %n[] : tensor<index>
  %r:2 = scf.for %i = %c0 to %nn step %c1 iter_args(%x = %a, %y = %b) -> (tensor<5xf32>, tensor<5xf32>) {
    scf.yield %y, %x : tensor<5xf32>, tensor<5xf32>
  }
  return %r#0, %r#1 : tensor<5xf32>, tensor<5xf32>
}

func.func @square_or_negate(%x: tensor<9xf32>) -> tensor<9xf32> {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %first = tensor.extract %x[%c0] : tensor<9xf32>
  %p = arith.cmpf ogt, %first, %zero : f32
  %r = scf.if %p -> (tensor<9xf32>) {
    %m = arith.mulf %x, %x : tensor<9xf32>
    scf.yield %m : tensor<9xf32>
  } else {
    %n = arith.negf %x : tensor<9xf32>
    scf.yield %n : tensor<9xf32>
  }
  return %r : tensor<9xf32>
}

func.func @nested(%x: tensor<6xf32>, %rows: tensor<index>) -> tensor<6xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %one = arith.constant dense<1.0> : tensor<6xf32>
  %n = tensor.extract %rows[] : tensor<index>
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %x) -> (tensor<6xf32>) {
    %inner = scf.for %j = %c0 to %c3 step %c1 iter_args(%a = %acc) -> (tensor<6xf32>) {
      %odd = arith.remui %j, %c3 : index
      %is0 = arith.cmpi eq, %odd, %c1 : index
      %next = scf.if %is0 -> (tensor<6xf32>) {
        %d = arith.mulf %a, %x : tensor<6xf32>
        scf.yield %d : tensor<6xf32>
      } else {
        %s = arith.addf %a, %one : tensor<6xf32>
        scf.yield %s : tensor<6xf32>
      }
      scf.yield %next : tensor<6xf32>
    }
    scf.yield %inner : tensor<6xf32>
  }
  return %r : tensor<6xf32>
}

func.func @switch(%i: tensor<index>, %x: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %k = tensor.extract %i[] : tensor<index>
  %r = scf.index_switch %k -> tensor<4x3xf32>
  case 2 {
    %d = arith.addf %x, %x : tensor<4x3xf32>
    scf.yield %d : tensor<4x3xf32>
  }
  case 5 {
    %e = scf.execute_region -> tensor<4x3xf32> {
      %m = arith.mulf %x, %x : tensor<4x3xf32>
      scf.yield %m : tensor<4x3xf32>
    }
    scf.yield %e : tensor<4x3xf32>
  }
  default {
    %n = arith.negf %x : tensor<4x3xf32>
    scf.yield %n : tensor<4x3xf32>
  }
  return %r : tensor<4x3xf32>
}
"""


@dataclass(frozen=True)
class Case:
    function: str
    inputs: Callable[[np.random.Generator], list]
    reference: Callable[..., tuple]


def _double_until(x, limit):
    k = 0
    while x.sum(dtype=np.float32) < limit:
        x, k = x + x, k + 1
    return x, np.int32(k)


def _fib(n):
    a, b = 0, 1
    for _ in range(int(n)):
        a, b = b, a + b
    return (np.int64(a),)


def _nested(x, rows):
    acc = x.copy()
    for _ in range(int(rows)):
        for j in range(3):
            acc = acc * x if j % 3 == 1 else acc + np.float32(1)
    return (acc,)


def _f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


CASES = [
    Case("repeat_add", lambda rng: [_f32(rng, 7, 3)], lambda x: (x * 0 + x + 2 * x + 3 * x + 4 * x,)),
    Case("double_until", lambda rng: [np.abs(_f32(rng, 13)) + np.float32(0.01),
                                      np.float32(rng.uniform(50, 5000))], _double_until),
    Case("double_until", lambda rng: [np.full(13, 2.0, np.float32), np.float32(1.0)],
         _double_until),  # the condition fails at once: the body never runs
    *(Case("fib", lambda rng, n=n: [np.int32(n)], _fib) for n in (0, 1, 2, 57, 90)),
    *(Case("swap_tensors", lambda rng, n=n: [_f32(rng, 5), _f32(rng, 5), np.int64(n)],
           lambda a, b, n: (a, b) if n % 2 == 0 else (b, a)) for n in (0, 3, 8)),
    Case("square_or_negate", lambda rng: [np.abs(_f32(rng, 9)) + 0.5], lambda x: (x * x,)),
    Case("square_or_negate", lambda rng: [-np.abs(_f32(rng, 9))], lambda x: (-x,)),
    *(Case("nested", lambda rng, n=n: [_f32(rng, 6), np.int64(n)], _nested) for n in (0, 1, 4)),
    *(Case("switch", lambda rng, k=k: [np.int64(k), _f32(rng, 4, 3)],
           lambda k, x: ({2: x + x, 5: x * x}.get(int(k), -x),)) for k in (2, 5, 0, -7)),
]


def check_case(module, case: Case, rng: np.random.Generator) -> None:
    inputs = case.inputs(rng)
    got = getattr(module, case.function)(*inputs)
    got = got if isinstance(got, tuple) else (got,)
    want = case.reference(*inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g = np.asarray(g)
        assert g.dtype == np.asarray(w).dtype
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=0)
