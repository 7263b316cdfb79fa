"""Gathers (``tensor.extract`` at data-dependent indices inside a linalg.generic) shared by the
CPU/CUDA tests (tests/e2e/test_gather.py) and the Vulkan ones (tests/vulkan/test_vulkan_gather.py):
each case is an MLIR program, its inputs and a numpy reference. pyree clamps every gathered index
into its dim (MLIR leaves an out-of-range one undefined), so the references clip."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

MLIR_DTYPES = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16", np.dtype(np.int64): "i64",
               np.dtype(np.int32): "i32"}


@dataclass(frozen=True)
class Case:
    program: str
    inputs: Callable[[np.random.Generator], list[np.ndarray]]
    reference: Callable[..., np.ndarray]


def _t(shape, dtype) -> str:
    return f"tensor<{'x'.join(map(str, shape))}x{MLIR_DTYPES[np.dtype(dtype)]}>" if shape else \
        f"tensor<{MLIR_DTYPES[np.dtype(dtype)]}>"


def embedding(ids_shape, ids_dtype, table_shape, table_dtype, wrap=False, ids=None) -> Case:
    """``table[ids[...], :, ...]`` as torch-mlir emits ``aten.embedding`` (with its ``cf.assert``
    bounds checks); ``wrap`` adds the negative-index wraparound select of ``aten.index``;
    ``ids`` fixes the ids (out-of-range ones show the clamping)."""
    n_ids, rank = len(ids_shape), len(ids_shape) + len(table_shape) - 1
    out_shape = tuple(ids_shape) + tuple(table_shape[1:])
    dims = ", ".join(f"d{i}" for i in range(rank))
    lead = ", ".join(f"d{i}" for i in range(n_ids))
    idt = MLIR_DTYPES[np.dtype(ids_dtype)]
    row, wrapping = "%in", []
    if wrap:
        wrapping = [f"%neg = arith.cmpi slt, %in, %c0 : {idt}",
                    f"%wrapped = arith.addi %in, %cn : {idt}",
                    f"%row = arith.select %neg, %wrapped, %in : {idt}"]
        row = "%row"
    inner = [f"%j{k} = linalg.index {n_ids + k} : index" for k in range(len(table_shape) - 1)]
    at = ", ".join(["%k"] + [f"%j{k}" for k in range(len(table_shape) - 1)])
    body = "\n      ".join([*wrapping, f"%k = arith.index_cast {row} : {idt} to index",
                            "%ok = arith.cmpi slt, %k, %rows : index",
                            'cf.assert %ok, "index must be smaller than dim size"', *inner,
                            f"%v = tensor.extract %table[{at}] : {_t(table_shape, table_dtype)}",
                            f"linalg.yield %v : {MLIR_DTYPES[np.dtype(table_dtype)]}"])
    program = f"""
func.func @main(%ids: {_t(ids_shape, ids_dtype)}, %table: {_t(table_shape, table_dtype)})
    -> {_t(out_shape, table_dtype)} {{
  %rows = arith.constant {table_shape[0]} : index
  %c0 = arith.constant 0 : {idt}
  %cn = arith.constant {table_shape[0]} : {idt}
  %e = tensor.empty() : {_t(out_shape, table_dtype)}
  %r = linalg.generic {{indexing_maps = [affine_map<({dims}) -> ({lead})>,
                                        affine_map<({dims}) -> ({dims})>],
                       iterator_types = [{", ".join(['"parallel"'] * rank)}]}}
      ins(%ids : {_t(ids_shape, ids_dtype)}) outs(%e : {_t(out_shape, table_dtype)}) {{
    ^bb0(%in: {idt}, %out: {MLIR_DTYPES[np.dtype(table_dtype)]}):
      {body}
  }} -> {_t(out_shape, table_dtype)}
  return %r : {_t(out_shape, table_dtype)}
}}"""

    def inputs(rng):
        rows = table_shape[0]
        low = -rows if wrap else 0
        chosen = (np.asarray(ids) if ids is not None
                  else rng.integers(low, rows, size=ids_shape)).astype(ids_dtype)
        return [chosen, rng.standard_normal(table_shape).astype(table_dtype)]

    def reference(ids_, table):
        rows = table.shape[0]
        at = ids_.astype(np.int64)
        if wrap:
            at = np.where(at < 0, at + rows, at)
        return table[np.clip(at, 0, rows - 1)]

    return Case(program, inputs, reference)


# out[i, j] = x[(3 * r[i] + 1) rem 6, c[j] + i]: both indices computed, i32 arithmetic.
GATHER_2D = Case("""
func.func @main(%x: tensor<6x10xf32>, %r: tensor<5xi32>, %c: tensor<4xi32>) -> tensor<5x4xf32> {
  %c1 = arith.constant 1 : i32
  %c3 = arith.constant 3 : i32
  %c6 = arith.constant 6 : i32
  %e = tensor.empty() : tensor<5x4xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d1)>,
                                        affine_map<(d0, d1) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%r, %c : tensor<5xi32>, tensor<4xi32>) outs(%e : tensor<5x4xf32>) {
    ^bb0(%a: i32, %b: i32, %out: f32):
      %p = arith.muli %a, %c3 : i32
      %q = arith.addi %p, %c1 : i32
      %row = arith.remsi %q, %c6 : i32
      %i = arith.index_cast %row : i32 to index
      %d0 = linalg.index 0 : index
      %bi = arith.index_cast %b : i32 to index
      %j = arith.addi %bi, %d0 : index
      %v = tensor.extract %x[%i, %j] : tensor<6x10xf32>
      linalg.yield %v : f32
  } -> tensor<5x4xf32>
  return %g : tensor<5x4xf32>
}""", lambda rng: [rng.standard_normal((6, 10)).astype(np.float32),
                   rng.integers(0, 50, 5).astype(np.int32), rng.integers(0, 6, 4).astype(np.int32)],
    lambda x, r, c: x[((3 * r + 1) % 6)[:, None], np.clip(c[None, :] + np.arange(5)[:, None], 0, 9)])

# out[i, d] = sum_j table[ids[i, j], d]: a gather inside a reduction (an embedding bag).
EMBEDDING_BAG = Case("""
func.func @main(%ids: tensor<3x5xi64>, %table: tensor<9x6xf32>) -> tensor<3x6xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3x6xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<3x6xf32>) -> tensor<3x6xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>,
                                        affine_map<(d0, d1, d2) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%ids : tensor<3x5xi64>) outs(%init : tensor<3x6xf32>) {
    ^bb0(%id: i64, %acc: f32):
      %k = arith.index_cast %id : i64 to index
      %d = linalg.index 1 : index
      %v = tensor.extract %table[%k, %d] : tensor<9x6xf32>
      %sum = arith.addf %v, %acc : f32
      linalg.yield %sum : f32
  } -> tensor<3x6xf32>
  return %s : tensor<3x6xf32>
}""", lambda rng: [rng.integers(0, 9, (3, 5)).astype(np.int64),
                   rng.standard_normal((9, 6)).astype(np.float32)],
    lambda ids, table: table[ids].sum(axis=1))

# out[m, n] = sum_k table[ids[m], k] * w[k, n]: a gathered matmul operand (the GPU matmul templates).
GATHERED_MATMUL = Case("""
func.func @main(%ids: tensor<37xi32>, %table: tensor<50x23xf32>, %w: tensor<23x29xf32>)
    -> tensor<37x29xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<37x29xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<37x29xf32>) -> tensor<37x29xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m)>, affine_map<(m, n, k) -> (k, n)>,
                                        affine_map<(m, n, k) -> (m, n)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%ids, %w : tensor<37xi32>, tensor<23x29xf32>) outs(%init : tensor<37x29xf32>) {
    ^bb0(%id: i32, %b: f32, %acc: f32):
      %row = arith.index_cast %id : i32 to index
      %k = linalg.index 2 : index
      %a = tensor.extract %table[%row, %k] : tensor<50x23xf32>
      %p = arith.mulf %a, %b : f32
      %sum = arith.addf %p, %acc : f32
      linalg.yield %sum : f32
  } -> tensor<37x29xf32>
  return %s : tensor<37x29xf32>
}""", lambda rng: [rng.integers(-2, 52, 37).astype(np.int32),
                   rng.integers(-4, 5, (50, 23)).astype(np.float32),
                   rng.integers(-4, 5, (23, 29)).astype(np.float32)],
    lambda ids, table, w: table[np.clip(ids, 0, 49)] @ w)  # small integers: exact in f32

# A function-level tensor.extract at an index read from a tensor.
SCALAR_EXTRACT = Case("""
func.func @main(%t: tensor<9xf32>, %i: tensor<i64>) -> f32 {
  %k = tensor.extract %i[] : tensor<i64>
  %ix = arith.index_cast %k : i64 to index
  %v = tensor.extract %t[%ix] : tensor<9xf32>
  return %v : f32
}""", lambda rng: [rng.standard_normal(9).astype(np.float32), np.array(7, np.int64)],
    lambda t, i: t[np.clip(i, 0, 8)])

CASES = {
    "embedding_i64": embedding((3, 4), np.int64, (13, 5), np.float32),
    "embedding_i32": embedding((7,), np.int32, (11, 3), np.float32),
    "embedding_rank3_table_f16": embedding((2, 3), np.int32, (5, 3, 7), np.float16),
    "wraparound": embedding((4, 5), np.int64, (6, 7), np.float32, wrap=True),
    "clamped": embedding((8,), np.int64, (5, 3), np.float32,
                         ids=[-7, 100, 3, 2**40, -2**40, 4, 5, 0]),
    "clamped_i32": embedding((4,), np.int32, (5, 3), np.float32, ids=[-1, 5, 2**31 - 1, 1]),
    "gather_2d": GATHER_2D,
    "embedding_bag": EMBEDDING_BAG,
    "gathered_matmul": GATHERED_MATMUL,
    "scalar_extract": SCALAR_EXTRACT,
}
