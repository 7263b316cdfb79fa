"""A scatter's result starts as a copy of its original (host/program.py) unless the original is
a value the function computes and nothing reads after the scatter: then the scatter updates it
in place (host/planning.py ``in_place``); an argument that nothing reads after the scatter,
whose result is returned, is tied to it (``ties``: the runtime starts the result as the
argument, tests/host/test_ties.py). Counted in the host program's commands, and each program's
numbers checked on local-task."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
from host_commands import copies
from pyree.compiler import compile_str

SCATTER = """%{name} = iree_linalg_ext.scatter dimension_map = [0] unique_indices(false) ins(%upd, %idx : tensor<40x7xf32>, tensor<40x1xi64>) outs(%{orig} : tensor<13x7xf32>) {{
  ^bb0(%u: f32, %o: f32):
    %s = arith.addf %o, %u : f32
    iree_linalg_ext.yield %s : f32
  }} -> tensor<13x7xf32>"""
HEAD = ("func.func @main(%x: tensor<13x7xf32>, %upd: tensor<40x7xf32>, %idx: tensor<40x1xi64>)"
        " -> tensor<13x7xf32> {\n")

PROGRAMS = {  # name: (body, copies of the original, numpy of x and the scatter's sum s(orig))
    "into zeros returned": (
        "%z = arith.constant dense<0.0> : tensor<13x7xf32>\n" + SCATTER.format(name="r", orig="z")
        + "\nreturn %r : tensor<13x7xf32>", 0, lambda x, s: s(np.zeros_like(x))),
    "into the argument": (SCATTER.format(name="r", orig="x") + "\nreturn %r : tensor<13x7xf32>",
                          0, lambda x, s: s(x)),
    "into the argument read again later": (
        SCATTER.format(name="q", orig="x") + "\n%r = arith.addf %q, %x : tensor<13x7xf32>"
        "\nreturn %r : tensor<13x7xf32>", 1, lambda x, s: s(x) + x),
    "into a value read again later": (
        "%e = math.exp %x : tensor<13x7xf32>\n" + SCATTER.format(name="q", orig="e")
        + "\n%r = arith.addf %q, %e : tensor<13x7xf32>\nreturn %r : tensor<13x7xf32>",
        1, lambda x, s: s(np.exp(x)) + np.exp(x)),
    "twice into zeros returned": (
        "%z = arith.constant dense<0.0> : tensor<13x7xf32>\n" + SCATTER.format(name="a", orig="z")
        + "\n" + SCATTER.format(name="r", orig="a") + "\nreturn %r : tensor<13x7xf32>", 0,
        lambda x, s: 2 * s(np.zeros_like(x))),
    "into a value read only by it": (
        "%e = math.exp %x : tensor<13x7xf32>\n" + SCATTER.format(name="q", orig="e")
        + "\n%r = arith.negf %q : tensor<13x7xf32>\nreturn %r : tensor<13x7xf32>",
        0, lambda x, s: -s(np.exp(x))),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_scatter_copies_its_original_only_where_it_must(name):
    body, want_copies, reference = PROGRAMS[name]
    text = HEAD + body + "\n}"
    assert copies(text, scatter_atomics=True) == want_copies
    rng = np.random.default_rng(len(name))
    x = rng.standard_normal((13, 7)).astype(np.float32)
    upd = rng.standard_normal((40, 7)).astype(np.float32)
    idx = rng.integers(-1, 14, size=(40, 1)).astype(np.int64)
    module = rt.load_module(compile_str(text), device="local-task")

    def scatter_sum(orig):
        out = orig.astype(np.float64)
        inside = (idx[:, 0] >= 0) & (idx[:, 0] < 13)
        np.add.at(out, idx[inside, 0], upd[inside].astype(np.float64))
        return out

    for _ in range(2):  # the second call starts from fresh buffers as well
        got = module.main(x, upd, idx).to_host()
        np.testing.assert_allclose(got, reference(x, scatter_sum), rtol=1e-5, atol=1e-5)
