"""CPU-only: math the cuda target cannot compute is refused by name."""

from __future__ import annotations

import pytest
from tooling import require_module

require_module("xdsl")  # the compiler

from pyree.compiler import CompileError  # noqa: E402
from pyree.compiler import kernel as K  # noqa: E402
from pyree.compiler.codegen.cuda import generate_ptx, resolve_target  # noqa: E402


def test_f64_transcendentals_are_refused_clearly():
    ix = (K.AffineExpr((1,)),)
    kernel = K.Kernel("exp64", (7,), 1, (K.Binding("f64", (7,), "read"), K.Binding("f64", (7,), "write")),
                      (K.Result(1, ix, K.Unary("exp", K.Load(0, ix, "f64"), "f64")),))
    with pytest.raises(CompileError, match="'exp' on f64 is not supported by the cuda backend"):
        generate_ptx([kernel], resolve_target("sm_90"))


@pytest.mark.parametrize("op", ["sin", "cos", "tan"])
def test_huge_arguments_branch_around_payne_hanek(op):
    """sin/cos/tan reduce huge arguments by Payne-Hanek's 64-bit products, which cost more than
    the rest of the function: a lazy Select branches around them (sinc 0.43x -> 0.60x PyTorch on
    the H200), and the NVPTX code, run here, keeps the GPU bounds (specials exact) on both
    sides of the branch."""
    import sys
    from pathlib import Path

    import numpy as np
    from pyree.compiler.codegen.common.math_expansion import expand

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "e2e"))
    from nvptx_on_cpu import run_program
    from test_math_ops import GPU_ULP, UNARY, inputs, reference, special_mask, ulp_errors

    sin = expand(K.Unary(op, K.Load(0, (), "f32"), "f32"))
    lazy = [n for n in K.walk(sin) if isinstance(n, K.Select) and n.lazy]
    assert lazy and all(any(getattr(x, "dtype", None) == "ui64" for x in K.walk(n.a)) for n in lazy)

    x = inputs(op, np.float32)
    t = f"tensor<{x.size}xf32>"
    got = run_program(f'func.func @f(%x: {t}) -> {t} {{\n  %y = "{UNARY[op][0]}"(%x) : ({t}) -> {t}\n'
                      f"  return %y : {t}\n}}", [x])
    assert np.max(np.abs(x[np.isfinite(x)])) > 1e30  # the branch's costly side is taken too
    assert ulp_errors(got, reference(op, x), special_mask(x)).max() <= GPU_ULP[op]
