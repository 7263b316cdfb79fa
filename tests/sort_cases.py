"""Whole sorts (``iree_linalg_ext.sort`` / ``tm_tensor.sort`` with an index payload) shared by the
CPU tests (tests/e2e/test_merge_sort.py), the Vulkan ones (tests/drivers/vulkan/test_vulkan_sort.py)
and the CUDA ones (tests/drivers/cuda/test_cuda_sort.py): each case is an MLIR program, its
inputs and a numpy reference. Lines long enough are merge-sorted (input/merge_sort.py), short
ones counted; both must give PyTorch's stable sort: NaN last ascending and first descending,
-0.0 tied with 0.0, ties in input order."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

MLIR_DTYPES = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16", np.dtype(np.int64): "i64",
               np.dtype(np.int32): "i32", np.dtype(np.int16): "i16"}
ASCENDING = {"cmpf": ("olt", "ole"), "cmpi": ("slt", "sle")}


@dataclass(frozen=True)
class Case:
    program: str
    inputs: Callable[[np.random.Generator], list[np.ndarray]]
    reference: Callable[..., list[np.ndarray]]


def _t(shape, dtype) -> str:
    return f"tensor<{'x'.join(map(str, shape))}x{MLIR_DTYPES[np.dtype(dtype)]}>"


def stable_order(x: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """The indices PyTorch's stable sort gives: numpy's stable argsort (NaN last), and for
    descending that of the reversed line, read backwards (NaN first, ties still in input order)."""
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    n = x.shape[axis]
    backwards = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
    return n - 1 - np.flip(backwards, axis)


def data(shape, dtype, rng: np.random.Generator, special: bool = True) -> np.ndarray:
    """Many ties, and for floats NaN, +-inf, -0.0 and 0.0 scattered along every line."""
    x = rng.integers(-50, 50, size=shape)
    if not np.issubdtype(np.dtype(dtype), np.floating):
        return x.astype(dtype)
    x = (x / 8).astype(dtype)
    if special:
        flat = x.reshape(-1)
        flat[rng.integers(0, flat.size, max(flat.size // 9, 1))] = np.nan
        flat[rng.integers(0, flat.size, max(flat.size // 17, 1))] = np.inf
        flat[rng.integers(0, flat.size, max(flat.size // 19, 1))] = -np.inf
        flat[rng.integers(0, flat.size, max(flat.size // 7, 1))] = -0.0
        flat[rng.integers(0, flat.size, max(flat.size // 7, 1))] = 0.0
    return x


def sort_case(shape, axis: int, dtype, descending: bool, dialect: str = "iree_linalg_ext",
              index_dtype=np.int32, unsigned: bool = False) -> Case:
    """``dialect.sort`` of (values, their index along ``axis``) with the comparator torch-mlir
    writes (``ole``/``oge``, ``sle``/``sge``), or ``olt``/``ogt`` for iree_linalg_ext;
    ``unsigned``: integers compared as unsigned (``ult``/``ugt``: negatives last)."""
    cmp = "cmpf" if np.issubdtype(np.dtype(dtype), np.floating) else "cmpi"
    strict = dialect == "iree_linalg_ext"
    pred = ASCENDING[cmp][not strict]
    if descending:
        pred = pred.replace("lt", "gt").replace("le", "ge")
    if unsigned:
        pred = "u" + pred[1:]
    el, it = MLIR_DTYPES[np.dtype(dtype)], MLIR_DTYPES[np.dtype(index_dtype)]
    vt, ixt = _t(shape, dtype), _t(shape, index_dtype)
    program = f"""
func.func @main(%x: {vt}, %i: {ixt}) -> ({vt}, {ixt}) {{
  %s:2 = {dialect}.sort dimension({axis}) outs(%x, %i : {vt}, {ixt}) {{
  ^bb0(%a: {el}, %b: {el}, %ia: {it}, %ib: {it}):
    %c = arith.{cmp} {pred}, %a, %b : {el}
    {dialect}.yield %c : i1
  }} -> {vt}, {ixt}
  return %s#0, %s#1 : {vt}, {ixt}
}}"""

    def inputs(rng):
        along = [-1 if q == axis else 1 for q in range(len(shape))]
        index = np.broadcast_to(np.arange(shape[axis]).reshape(along), shape)
        return [data(shape, dtype, rng), index.astype(index_dtype)]

    def reference(x, index):
        order = stable_order(x.view(f"u{x.itemsize}") if unsigned else x, axis, descending)
        return [np.take_along_axis(x, order, axis), order.astype(index_dtype)]
    return Case(program, inputs, reference)


def matches(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    """Exactly, NaN where NaN is and -0.0 where -0.0 is (the sort moves elements, never rounds)."""
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g.view(f"u{g.itemsize}"), w.view(f"u{w.itemsize}"))


CASES = {
    "f32 3x1000 last ascending": sort_case((3, 1000), 1, np.float32, False),
    "f32 2x4097 last descending tm_tensor": sort_case((2, 4097), 1, np.float32, True, "tm_tensor",
                                                      np.int64),
    "f32 257x3 first ascending tm_tensor": sort_case((257, 3), 0, np.float32, False, "tm_tensor",
                                                     np.int64),
    "f32 33x2x5 middle descending": sort_case((2, 33, 5), 1, np.float32, True),
    "f32 lines of 1": sort_case((5, 1), 1, np.float32, False),
    "f32 lines of 2": sort_case((7, 2), 1, np.float32, True),
    "f32 3": sort_case((3,), 0, np.float32, False),
    "f32 4x31 last ascending": sort_case((4, 31), 1, np.float32, False),
    "f16 2x300 last descending": sort_case((2, 300), 1, np.float16, True),
    "i32 700 ascending tm_tensor": sort_case((700,), 0, np.int32, False, "tm_tensor", np.int64),
    "i64 3x200 last descending": sort_case((3, 200), 1, np.int64, True),
    "i32 unsigned 2x500 last ascending": sort_case((2, 500), 1, np.int32, False, unsigned=True),
    "i16 500x2 first descending": sort_case((500, 2), 0, np.int16, True),
}

# GPU only: too long to compile and run on CI's CPUs
LONG_CASES = {
    "f32 1000000 ascending": sort_case((1_000_000,), 0, np.float32, False),
    "f32 1000000 descending": sort_case((1_000_000,), 0, np.float32, True),
}


def file_name(name: str) -> str:
    """The module file of case ``name`` in a build folder (tests/drivers/cuda/build_modules.py)."""
    return "sort_" + re.sub(r"\W+", "_", name) + ".vmfb"
