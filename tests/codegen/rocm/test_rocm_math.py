"""CPU-only: every float op and cast compiles for the rocm target or is refused by name (f64
transcendentals); none reaches LLVM's AMDGPU backend as math it would abort on."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hsaco_reader import lld  # noqa: F401
from tooling import require_module

require_module("xdsl")  # the compiler

from pyree.compiler import CompileError  # noqa: E402
from pyree.compiler import kernel as K  # noqa: E402
from pyree.compiler.codegen.rocm import generate_hsaco, resolve_target  # noqa: E402


def test_f64_transcendental_is_refused_by_name():
    x = K.Load(0, (K.AffineExpr((1,)),), "f64")
    b = K.Binding("f64", (7,), "read")
    kernel = K.Kernel("exp64", (7,), 1, (b, K.Binding("f64", (7,), "write")),
                      (K.Result(1, (K.AffineExpr((1,)),), K.Unary("exp", x, "f64")),))
    with pytest.raises(CompileError, match="'exp' on f64 is not supported by the rocm backend"):
        generate_hsaco([kernel], resolve_target("gfx942"))


_SWEEP = '''
import sys
from pyree.compiler import kernel as K
from pyree.compiler.codegen.common.math_expansion import EXACT, GPU_EXPANDED
from pyree.compiler.codegen.rocm import generate_hsaco, resolve_target
from pyree.compiler.errors import CompileError
ix = (K.AffineExpr((1,)),)
BINARY = ("add", "sub", "mul", "div", "rem", "max", "min", "copysign", "pow", "atan2")
UNARY = sorted((GPU_EXPANDED | EXACT | {"floor", "ceil", "sqrt", "rsqrt", "abs", "neg",
                                        "roundeven", "trunc"}) - set(BINARY))
target = resolve_target(sys.argv[1])
for dt in ("f32", "f16", "bf16", "f64"):
    for op in UNARY + list(BINARY):
        x = K.Load(0, ix, dt)
        e = K.Binary(op, x, x, dt) if op in BINARY else K.Unary(op, x, dt)
        k = K.Kernel(op, (7,), 1, (K.Binding(dt, (7,), "read"), K.Binding(dt, (7,), "write")),
                     (K.Result(1, ix, e),))
        try:
            generate_hsaco([k], target)
        except CompileError as err:
            print("refused", dt, op, err)
    for src in ("f32", "f16", "bf16", "f64", "i8", "i32", "i64", "ui32"):
        if src == dt or {src, dt} == {"f16", "bf16"}:
            continue
        if K.is_float(src):
            op = "fpext" if K.itemsize(src) < K.itemsize(dt) else "fptrunc"
            pairs = [(src, dt, op)]
        else:
            unsigned = src.startswith("u")
            pairs = [(src, dt, "uitofp" if unsigned else "sitofp"),
                     (dt, src, "fptoui" if unsigned else "fptosi")]
        for a, b, op in pairs:
            k = K.Kernel("cast", (7,), 1, (K.Binding(a, (7,), "read"), K.Binding(b, (7,), "write")),
                         (K.Result(1, ix, K.Cast(op, K.Load(0, ix, a), b)),))
            generate_hsaco([k], target)
print("done")
'''


@pytest.mark.parametrize("chip", ["gfx942", "gfx1100"])
def test_math_reaches_llvm_only_as_arithmetic(chip):
    """Every float op compiles or is refused by name; none reaches LLVM's AMDGPU backend as math
    it would abort the process on (run in a child process, which such an abort would kill)."""
    proc = subprocess.run([sys.executable, "-c", _SWEEP, chip], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.endswith("done\n"), proc.stderr[-2000:]
    refused = [line.split()[1:3] for line in proc.stdout.splitlines() if line.startswith("refused")]
    assert refused and all(dt == "f64" for dt, _ in refused), refused
    assert ["f64", "exp"] in refused and ["f64", "tanh"] in refused
