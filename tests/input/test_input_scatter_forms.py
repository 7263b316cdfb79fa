"""iree_linalg_ext.scatter in the forms of IREE's tests/e2e/linalg_ext_ops/scatter.mlir: whole
rows, single points, a swapped dimension_map, batch dims in the indices, update slices along
and across the original's dims, both spellings of dimension_map; a plain set (unique places)
and an accumulation (repeated places), against a numpy loop on random data."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileError, compile_str


def scatter_reference(original, updates, indices, dimension_map, add: bool) -> np.ndarray:
    """The op's definition: for each batch position ``u`` and slice element ``s`` (aligned to
    the original's last dims), the place is ``s`` plus ``indices[u, i]`` on dim
    ``dimension_map[i]``."""
    out = original.astype(np.float64)
    batch = indices.ndim - 1
    m = updates.ndim - batch
    offset = out.ndim - m
    for u in np.ndindex(*indices.shape[:batch]):
        for s in np.ndindex(*updates.shape[batch:]):
            place = [0] * offset + list(s)
            for i, d in enumerate(dimension_map):
                place[d] += int(indices[u + (i,)])
            value = float(updates[u + s])
            out[tuple(place)] = out[tuple(place)] + value if add else value
    return out


def _type(a: np.ndarray) -> str:
    return f"tensor<{'x'.join(map(str, a.shape))}x{'f32' if a.dtype == np.float32 else 'i32'}>"


def _module(original, updates, indices, dimension_map, add: bool, older: bool) -> str:
    to, tu, ti = _type(original), _type(updates), _type(indices)
    dims = (f"dimension_map(dense<{list(dimension_map)}> : tensor<{len(dimension_map)}xi64>)"
            if older else f"dimension_map = {list(dimension_map)}")
    body = ("      %s = arith.addf %a, %b : f32\n      iree_linalg_ext.yield %s : f32" if add
            else "      iree_linalg_ext.yield %a : f32")
    return f"""func.func @f(%o: {to}, %u: {tu}, %i: {ti}) -> {to} {{
  %r = iree_linalg_ext.scatter {dims} unique_indices({'false' if add else 'true'})
      ins(%u, %i : {tu}, {ti}) outs(%o : {to}) {{
    ^bb0(%a: f32, %b: f32):
{body}
  }} -> {to}
  return %r : {to}
}}"""


def _places(rng, count: int, highs: list[int], unique: bool) -> np.ndarray:
    """``count`` index tuples, each entry in [0, high]; distinct where ``unique``."""
    grid = np.stack(np.meshgrid(*[np.arange(h + 1) for h in highs], indexing="ij"), -1)
    grid = grid.reshape(-1, len(highs))
    pick = rng.choice(len(grid), count, replace=not unique)
    return grid[pick].astype(np.int32)


# name: (original shape, updates shape, index batch shape, dimension_map, highest index per
# entry so that every slice stays inside the original)
FORMS = {
    "rows": ((7, 4), (3, 4), (3,), [0], [6]),
    "points": ((4, 5), (6,), (6,), [0, 1], [3, 4]),
    "points_swapped": ((4, 5), (6,), (6,), [1, 0], [4, 3]),
    "batch_dims": ((4, 5), (2, 3), (2, 3), [0, 1], [3, 4]),
    "slice_along_a_row": ((4, 6), (2, 3), (2,), [0, 1], [3, 3]),
    "slice_across_rows": ((5, 4), (2, 3, 1), (2,), [0, 1], [2, 3]),
    "columns_of_a_3d_tensor": ((3, 4, 5), (2, 3, 4, 1), (2,), [2], [4]),
}


# Every form set and added; the older spelling of dimension_map (IREE before 2024) twice.
CASES = [(form, add, False) for form in FORMS for add in (False, True)] + [
    ("points_swapped", False, True), ("slice_across_rows", True, True)]


@pytest.mark.parametrize("form, add, older", CASES, ids=[
    f"{form}-{'add' if add else 'set'}{'-dimension_map(dense)' if older else ''}"
    for form, add, older in CASES])
def test_scatter_matches_numpy(form, add, older):
    shape, updates_shape, batch, dimension_map, highs = FORMS[form]
    rng = np.random.default_rng()
    original = rng.standard_normal(shape).astype(np.float32)
    updates = rng.standard_normal(updates_shape).astype(np.float32)
    count = int(np.prod(batch))
    indices = _places(rng, count, highs, unique=not add).reshape(*batch, len(dimension_map))
    want = scatter_reference(original, updates, indices, dimension_map, add)
    text = _module(original, updates, indices, dimension_map, add, older)
    module = rt.load_module(compile_str(text, target_backends=["llvm-cpu"]), device="local-task")
    got = module["f"](original, updates, indices).to_host()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("updates_shape, indices_shape, dimension_map", [
    ((3, 4), (2, 1), [0]),        # batch dims differ
    ((3, 4), (3, 2), [0]),        # index depth is not the dimension_map's length
    ((3, 9), (3, 1), [0]),        # the slice is longer than the dim it lands in
    ((3, 4), (3, 1), [2]),        # no such dim
])
def test_a_scatter_that_does_not_fit_is_refused_at_the_op(updates_shape, indices_shape,
                                                          dimension_map):
    original = np.zeros((5, 4), np.float32)
    text = _module(original, np.zeros(updates_shape, np.float32),
                   np.zeros(indices_shape, np.int32), dimension_map, False, False)
    with pytest.raises(CompileError, match="do not fit") as info:
        compile_str(text, source_name="s.mlir", target_backends=["llvm-cpu"])
    assert info.value.location == "s.mlir:2:3"
