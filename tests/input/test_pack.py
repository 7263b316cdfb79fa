"""``tensor.pack`` (and ``linalg.pack``) through the public API on local-task, against a numpy
pack (pad to whole tiles, split each tiled dim, move the tiles innermost, permute the outer
dims) at sizes 1, a prime and large, with and without padding."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileError, CompileOptions, compile_str

CPU = CompileOptions(target_backends=["llvm-cpu"])


def numpy_pack(x, positions, tiles, perm, pad):
    n = x.ndim
    widths = [(0, 0)] * n
    for d, t in zip(positions, tiles):
        widths[d] = (0, -x.shape[d] % t)
    x = np.pad(x, widths, constant_values=pad)
    split, tile_axes, outer_axes = [], [], []
    for d in range(n):
        if d in positions:
            t = tiles[positions.index(d)]
            split += [x.shape[d] // t, t]
            outer_axes.append(len(split) - 2)
            tile_axes.append((positions.index(d), len(split) - 1))
        else:
            split.append(x.shape[d])
            outer_axes.append(len(split) - 1)
    y = x.reshape(split)
    order = [outer_axes[p] for p in perm] + [axis for _, axis in sorted(tile_axes)]
    return y.transpose(order)


def pack_text(shape, positions, tiles, perm, padded, keyword="tensor.pack"):
    outer = [-(-s // tiles[positions.index(d)]) if d in positions else s
             for d, s in enumerate(shape)]
    out = [outer[p] for p in perm] + list(tiles)
    t = lambda dims: "tensor<" + "x".join(map(str, dims)) + "xf32>"  # noqa: E731
    pad = "padding_value(%p : f32) " if padded else ""
    args = "%x: " + t(shape) + (", %p: f32" if padded else "")
    return f"""
func.func @pack({args}) -> {t(out)} {{
  %e = tensor.empty() : {t(out)}
  %r = {keyword} %x {pad}outer_dims_perm = {list(perm)} inner_dims_pos = {list(positions)} inner_tiles = {list(tiles)} into %e : {t(shape)} -> {t(out)}
  return %r : {t(out)}
}}
"""


@pytest.mark.parametrize("shape, positions, tiles, perm, keyword", [
    ((1, 1), [0, 1], [4, 2], [0, 1], "tensor.pack"),
    ((7, 13), [0, 1], [4, 2], [1, 0], "tensor.pack"),
    ((13, 7), [1], [3], [0, 1], "linalg.pack"),
    ((131, 257, 3), [1, 0], [16, 8], [2, 0, 1], "tensor.pack"),
])
def test_pack_with_padding_against_numpy(shape, positions, tiles, perm, keyword):
    x = np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32)
    x.ravel()[:2] = [np.nan, -0.0][:x.size]
    module = rt.load_module(compile_str(pack_text(shape, positions, tiles, perm, True, keyword),
                                        CPU), device="local-task")
    got = np.asarray(module["pack"](x, np.float32(-7.5)).to_host())
    np.testing.assert_array_equal(got, numpy_pack(x, positions, tiles, perm, -7.5))


def test_even_pack_without_padding_against_numpy():
    x = np.random.default_rng(3).standard_normal((64, 30)).astype(np.float32)
    module = rt.load_module(compile_str(pack_text((64, 30), [0, 1], [16, 2], [1, 0], False),
                                        CPU), device="local-task")
    np.testing.assert_array_equal(np.asarray(module["pack"](x).to_host()),
                                  numpy_pack(x, [0, 1], [16, 2], [1, 0], 0))


def test_uneven_pack_without_padding_is_refused():
    with pytest.raises(CompileError, match=r":4:\d+: .*needs a padding_value"):
        compile_str(pack_text((7, 13), [0, 1], [4, 2], [0, 1], False), CPU)
