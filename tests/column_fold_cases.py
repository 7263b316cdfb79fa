"""Column folds (a reduction whose reads run along the outputs: a mean over the middle dim, a
channels-last global pool, a column sum), which GPU modules split into partials laid out
[s, outputs...] when their outputs are too few to fill the GPU a thread each
(flow/split_reduction.py ``_column_splits``); shared by tests/e2e/test_column_folds.py (every
device) and tests/codegen/cuda/test_cuda_column_folds.py (cuda's kernels emulated). Each case:
an MLIR program, its inputs, a float64 numpy reference."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from comparisons import same_special_values


@dataclass(frozen=True)
class Case:
    program: str
    inputs: Callable[[np.random.Generator], list[np.ndarray]]
    reference: Callable[..., np.ndarray]
    splits_on_gpu: bool


def t(shape, dtype="f32") -> str:
    return f"tensor<{'x'.join(map(str, shape))}x{dtype}>"


def fold_case(shape, reduced, op: str = "add", mean: bool = False, dtype: str = "f32",
              splits_on_gpu: bool = True) -> Case:
    """``shape`` folded over the dims ``reduced`` with arith ``op`` (add: a sum; with ``mean``
    divided by the count); NaN, infinities and -0 among the inputs (floats)."""
    rank = len(shape)
    kept = [d for d in range(rank) if d not in reduced]
    out = tuple(shape[d] for d in kept)
    loops = ", ".join(f"d{d}" for d in range(rank))
    kept_map = ", ".join(f"d{d}" for d in kept)
    iterators = ", ".join('"reduction"' if d in reduced else '"parallel"' for d in range(rank))
    is_float = dtype.startswith("f")
    init = {"add": "0.0" if is_float else "0", "maximumf": "0xFF800000", "minimumf": "0x7F800000",
            "maxsi": "-2147483648"}[op]
    arith = {"add": "arith.addf" if is_float else "arith.addi", "maximumf": "arith.maximumf",
             "minimumf": "arith.minimumf", "maxsi": "arith.maxsi"}[op]
    count = int(np.prod([shape[d] for d in reduced]))
    epilogue, result = "", "%r"
    if mean:
        epilogue = f"""
  %e2 = tensor.empty() : {t(out, dtype)}
  %m = linalg.generic {{indexing_maps = [affine_map<({kept_map}) -> ({kept_map})>,
         affine_map<({kept_map}) -> ({kept_map})>],
         iterator_types = [{', '.join(['"parallel"'] * len(out))}]}}
      ins(%r : {t(out, dtype)}) outs(%e2 : {t(out, dtype)}) {{
  ^bb0(%a: {dtype}, %_: {dtype}):
    %n = arith.constant {float(count)!r} : {dtype}
    %q = arith.divf %a, %n : {dtype}
    linalg.yield %q : {dtype}
  }} -> {t(out, dtype)}"""
        result = "%m"
    program = f"""
func.func @main(%x: {t(shape, dtype)}) -> {t(out, dtype)} {{
  %c = arith.constant {init} : {dtype}
  %e = tensor.empty() : {t(out, dtype)}
  %init = linalg.fill ins(%c : {dtype}) outs(%e : {t(out, dtype)}) -> {t(out, dtype)}
  %r = linalg.generic {{indexing_maps = [affine_map<({loops}) -> ({loops})>,
         affine_map<({loops}) -> ({kept_map})>], iterator_types = [{iterators}]}}
      ins(%x : {t(shape, dtype)}) outs(%init : {t(out, dtype)}) {{
  ^bb0(%a: {dtype}, %acc: {dtype}):
    %s = {arith} %a, %acc : {dtype}
    linalg.yield %s : {dtype}
  }} -> {t(out, dtype)}{epilogue}
  return {result} : {t(out, dtype)}
}}
"""

    def inputs(rng: np.random.Generator) -> list[np.ndarray]:
        if not is_float:
            return [rng.integers(-10**6, 10**6, shape).astype(np.int32)]
        x = rng.standard_normal(shape).astype(np.float32)
        flat = x.reshape(-1)
        picks = rng.choice(flat.size, size=4, replace=False)
        flat[picks] = [np.nan, np.inf, -np.inf, -0.0]
        return [x]

    def reference(x):
        wide = x.astype(np.float64 if is_float else np.int64)
        axes = tuple(reduced)
        with np.errstate(invalid="ignore"):
            if op == "add":
                r = wide.sum(axis=axes)
                return r / count if mean else r
            return {"maximumf": np.max, "minimumf": np.min, "maxsi": np.max}[op](wide, axis=axes)

    return Case(program, inputs, reference, splits_on_gpu)


CASES = {
    # 4096 outputs of 4096 rows: 16 chunks of 256.
    "mean_middle_1x4096x4096": fold_case((1, 4096, 4096), [1], mean=True),
    # Odd: 37 outputs of 9001 rows (chunks of 64 past which the final fold takes the rest).
    "sum_columns_9001x37": fold_case((9001, 37), [0]),
    # A channels-last global average pool: 2 x 96 outputs, rows over H and W (the first split).
    "mean_nhwc_2x29x31x96": fold_case((2, 29, 31, 96), [1, 2], mean=True),
    "max_columns_5000x301": fold_case((5000, 301), [0], op="maximumf"),
    "min_middle_3x2049x65": fold_case((3, 2049, 65), [1], op="minimumf"),
    "maxsi_columns_i32_3000x77": fold_case((3000, 77), [0], op="maxsi", dtype="i32"),
    # Many outputs already (fewer than 4 chunks would make 65536 partial outputs): not split.
    "sum_columns_300x20000": fold_case((300, 20000), [0], splits_on_gpu=False),
    # Too few rows for 4 chunks of 64: not split.
    "sum_columns_200x96": fold_case((200, 96), [0], splits_on_gpu=False),
}


def matches(got: np.ndarray, want: np.ndarray) -> None:
    """NaN and infinities where the reference has them; the rest to a few f32 roundings of the
    reference's norm (exact for integers)."""
    floats = same_special_values(got, want)
    if floats is None:
        return
    got, finite = floats
    error = np.abs(got[finite] - want[finite]).max(initial=0)
    assert error <= 1e-5 * max(np.abs(want[finite]).max(initial=0), 1.0), error
