"""Elementwise chains whose fused expression shares its sub-expressions (a DAG, not a tree):
``p = p * p`` beside ``r = r * p + r``, as repeated squaring, integer ``pow`` and polynomial
evaluation build them. Comparing two such expressions as trees took 2^n steps (a chain of 18
took 12 s to compile, 31 did not finish); kernel/ir.py compares each pair of nodes once."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileOptions, compile_str

N = 13


def squaring_chain(steps: int) -> str:
    """``r = 1, p = x``, then ``steps`` times ``r = r * p + r`` and ``p = p * p``, each its own
    linalg.generic, as an importer writes them."""
    t, m = f"tensor<{N}xf32>", "affine_map<(d0) -> (d0)>"
    lines = [f"func.func @main(%x: {t}) -> {t} {{", f"  %e = tensor.empty() : {t}",
             f"  %one = arith.constant dense<1.0> : {t}"]

    def generic(name: str, a: str, b: str, body: str) -> None:
        lines.append(
            f"  %{name} = linalg.generic {{indexing_maps = [{m}, {m}, {m}], iterator_types = "
            f"[\"parallel\"]}} ins(%{a}, %{b} : {t}, {t}) outs(%e : {t}) {{\n"
            f"  ^bb0(%u: f32, %v: f32, %o: f32):\n{body}  }} -> {t}")

    p, r = "x", "one"
    for i in range(steps):
        generic(f"r{i}", r, p, "    %m = arith.mulf %u, %v : f32\n"
                               "    %s = arith.addf %m, %u : f32\n    linalg.yield %s : f32\n")
        generic(f"p{i}", p, p, "    %m = arith.mulf %u, %v : f32\n    linalg.yield %m : f32\n")
        p, r = f"p{i}", f"r{i}"
    lines.append(f"  return %{r} : {t}\n}}")
    return "\n".join(lines)


@pytest.mark.timeout(120)
def test_a_long_squaring_chain_compiles_and_matches_numpy():
    steps = 40
    x = np.array([0.5, -0.5, 0.0, -0.0, 0.999, -0.999, 0.25, 0.9, -0.75, np.nan, 0.1, -0.3,
                  0.6], np.float32)
    module = rt.load_module(compile_str(squaring_chain(steps),
                                        CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    got = module["main"](x).to_host()
    r, p = np.ones_like(x), x.copy()
    for _ in range(steps):
        r, p = r * p + r, p * p
    np.testing.assert_allclose(got, r, rtol=1e-5, equal_nan=True)
