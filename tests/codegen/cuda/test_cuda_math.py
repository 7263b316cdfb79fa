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
