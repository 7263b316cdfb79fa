"""Gathers (``tensor.extract`` at data-dependent indices inside a linalg.generic) shared by the
CPU/CUDA tests (tests/e2e/test_gather.py) and the Vulkan ones (tests/drivers/vulkan/test_vulkan_gather.py):
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

def computed_index(table: int, points: int, body: str, reference: Callable[[np.ndarray], list]) -> Case:
    """``out[i] = sum over k of t[k]`` for the indices ``k`` that ``body`` computes from ``%ii``
    (loop index i as i32) and names ``%k0``, ``%k1``, ...: casts and narrow arithmetic that wrap
    (MLIR's arith) inside index math. ``reference(i)`` gives the indices by numpy's own wrapping
    conversions and arithmetic; pyree clamps them."""
    count = body.count("%k")
    names = [f"%k{n}" for n in range(count)]
    reads = [f"%v{n} = tensor.extract %t[{k}] : tensor<{table}xf32>" for n, k in enumerate(names)]
    total = "%v0"
    for n in range(1, count):
        reads.append(f"%sum{n} = arith.addf {total}, %v{n} : f32")
        total = f"%sum{n}"
    lines = "\n      ".join([*body.strip().splitlines(), *reads])
    program = f"""
func.func @main(%t: tensor<{table}xf32>) -> tensor<{points}xf32> {{
  %e = tensor.empty() : tensor<{points}xf32>
  %r = linalg.generic {{indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}}
      outs(%e : tensor<{points}xf32>) {{
    ^bb0(%out: f32):
      %i = linalg.index 0 : index
      %ii = arith.index_cast %i : index to i32
      {lines}
      linalg.yield {total} : f32
  }} -> tensor<{points}xf32>
  return %r : tensor<{points}xf32>
}}"""

    def summed(t):
        with np.errstate(over="ignore"):
            ks = reference(np.arange(points))
        out = t[np.clip(np.asarray(ks[0], np.int64), 0, table - 1)]
        for k in ks[1:]:
            out = out + t[np.clip(np.asarray(k, np.int64), 0, table - 1)]
        return out

    return Case(program, lambda rng: [rng.standard_normal(table).astype(np.float32)], summed)


def _i8_of(v):
    return np.asarray(v).astype(np.int8)


# index_cast(extui(trunci(i * 100 : i32 to i8))): t[44] at i = 3, not t[300].
TRUNC_I8 = """
%c100 = arith.constant 100 : i32
%m = arith.muli %ii, %c100 : i32
%n = arith.trunci %m : i32 to i8
%u = arith.extui %n : i8 to i32
%k0 = arith.index_cast %u : i32 to index"""


def _trunc_i8(i):
    return [(i.astype(np.int32) * np.int32(100)).astype(np.int8).astype(np.uint8)]


# extsi and extui of the same negative i8: -106 is -106 + 128 = 22 signed, 150 unsigned.
EXTSI_EXTUI = """
%c50 = arith.constant 50 : i32
%c128 = arith.constant 128 : i32
%m = arith.muli %ii, %c50 : i32
%n = arith.trunci %m : i32 to i8
%s = arith.extsi %n : i8 to i32
%s1 = arith.addi %s, %c128 : i32
%k0 = arith.index_cast %s1 : i32 to index
%u = arith.extui %n : i8 to i32
%k1 = arith.index_cast %u : i32 to index"""


def _extsi_extui(i):
    n = (i.astype(np.int32) * np.int32(50)).astype(np.int8)
    return [n.astype(np.int32) + 128, n.astype(np.uint8)]


# trunci to i1 (the low bit), read back unsigned (0, 1) and signed (0, -1).
TRUNC_I1 = """
%c3 = arith.constant 3 : i32
%c4 = arith.constant 4 : i32
%m = arith.muli %ii, %c3 : i32
%b = arith.trunci %m : i32 to i1
%u = arith.extui %b : i1 to i32
%u4 = arith.muli %u, %c4 : i32
%s = arith.extsi %b : i1 to i32
%a = arith.addi %u4, %s : i32
%a1 = arith.addi %a, %ii : i32
%k0 = arith.index_cast %a1 : i32 to index
%k1 = arith.index_castui %b : i1 to index"""


def _trunc_i1(i):
    bit = (i.astype(np.int32) * 3) & 1
    return [4 * bit - bit + i, bit]


# i * 4099 truncated to i16, sign-extended, moved up by 32768: all of a 65536-entry table.
TRUNC_I16 = """
%c = arith.constant 4099 : i32
%m = arith.muli %ii, %c : i32
%n = arith.trunci %m : i32 to i16
%s = arith.extsi %n : i16 to i32
%x = arith.index_cast %s : i32 to index
%c32768 = arith.constant 32768 : index
%k0 = arith.addi %x, %c32768 : index"""


def _trunc_i16(i):
    return [(i.astype(np.int32) * np.int32(4099)).astype(np.int16).astype(np.int64) + 32768]


# index_cast sign-extends a negative i32 (i - 3 + 3 is i), index_castui zero-extends it (huge).
NEGATIVE_I32 = """
%c3 = arith.constant 3 : i32
%d = arith.subi %ii, %c3 : i32
%x = arith.index_cast %d : i32 to index
%c3i = arith.constant 3 : index
%k0 = arith.addi %x, %c3i : index
%k1 = arith.index_castui %d : i32 to index"""


def _negative_i32(i):
    d = i.astype(np.int32) - np.int32(3)
    return [d.astype(np.int64) + 3, d.astype(np.uint32)]


# An i8 add that overflows: i + 120 is -128 at i = 8 (index_cast), 128 read unsigned.
I8_ADD = """
%a = arith.trunci %ii : i32 to i8
%c120 = arith.constant 120 : i8
%s = arith.addi %a, %c120 : i8
%k0 = arith.index_castui %s : i8 to index
%k1 = arith.index_cast %s : i8 to index"""


def _i8_add(i):
    s = _i8_of(i) + np.int8(120)
    return [s.astype(np.uint8), s.astype(np.int64)]


# index arithmetic that overflows 64 bits: i * 2**62 + i wraps to i at i = 4 and 0.
INDEX_OVERFLOW = """
%c = arith.constant 4611686018427387904 : index
%m = arith.muli %i, %c : index
%k0 = arith.addi %m, %i : index"""


def _index_overflow(i):
    i = i.astype(np.int64)
    return [i * np.int64(2**62) + i]


# The function-level form: one scalar index read from a tensor, wrapped through i8.
SCALAR_TRUNC_I8 = Case("""
func.func @main(%t: tensor<256xf32>, %i: tensor<i32>) -> f32 {
  %c100 = arith.constant 100 : i32
  %x = tensor.extract %i[] : tensor<i32>
  %m = arith.muli %x, %c100 : i32
  %n = arith.trunci %m : i32 to i8
  %u = arith.extui %n : i8 to i32
  %k = arith.index_cast %u : i32 to index
  %v = tensor.extract %t[%k] : tensor<256xf32>
  return %v : f32
}""", lambda rng: [rng.standard_normal(256).astype(np.float32),
                   np.array(rng.integers(-2**31, 2**31), np.int32)],
    lambda t, i: t[_trunc_i8(np.asarray(i))[0]])

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
    "cast_trunc_i8": computed_index(400, 4, TRUNC_I8, _trunc_i8),
    "cast_trunc_i8_table256": computed_index(256, 7, TRUNC_I8, _trunc_i8),
    "cast_extsi_extui": computed_index(400, 8, EXTSI_EXTUI, _extsi_extui),
    "cast_trunc_i1": computed_index(9, 6, TRUNC_I1, _trunc_i1),
    "cast_trunc_i16": computed_index(65536, 21, TRUNC_I16, _trunc_i16),
    "cast_negative_i32": computed_index(10, 7, NEGATIVE_I32, _negative_i32),
    "cast_i8_add_overflow": computed_index(256, 19, I8_ADD, _i8_add),
    "cast_index_overflow": computed_index(9, 6, INDEX_OVERFLOW, _index_overflow),
    "cast_scalar_trunc_i8": SCALAR_TRUNC_I8,
}
