"""CPU-only: kernels with run-time sizes on rocm (codegen/common/llvm_gpu/dynamic.py, the
templates cuda shares): the programs of tests/e2e/test_dynamic_shapes.py compile and link with
ld.lld into code objects whose kernels take the push constants by value after the bindings, and
whose exports carry the grid as SizeExprs (0 blocks where the sizes are 0). No AMD GPU runs them
here: tests/drivers/rocm/hip_on_cuda/test_rocm_on_cuda_dynamic.py runs the rocm driver on them
through the HIP-on-CUDA shim."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from e2e.test_dynamic_shapes import EXP_ADD_ROWSUM, MATMUL, SHORTER
from hsaco_reader import check_module, lld, read_hsaco, rocm_executables  # noqa: F401
from tooling import require_module

require_module("xdsl")  # the compiler

from pyree.compiler import CompileOptions, compile_str  # noqa: E402
from pyree.runtime.module.size_exprs import evaluate  # noqa: E402

CASES = {"exp_add_rowsum": EXP_ADD_ROWSUM, "matmul": MATMUL, "shorter": SHORTER}  # RESHAPE: no kernel


def check_grid(export, pushed: int) -> None:
    """3 SizeExprs whose blocks are 0 where every size is 0 (nothing to do: no launch) and at
    least 1 each where every size is 1; ``grid_size`` then [0, 0, 0]."""
    assert pushed >= 1
    programs = [[int(v) for v in e.code] for e in export.gridSizeExpr]
    assert len(programs) == 3
    assert np.prod([evaluate(p, [0] * pushed) for p in programs]) == 0
    assert min(evaluate(p, [1] * pushed) for p in programs) >= 1
    assert list(export.gridSize) == [0, 0, 0]


@pytest.mark.parametrize("chip", ["gfx908", "gfx1100"])  # wave 64 and wave 32
@pytest.mark.parametrize("name", sorted(CASES))
def test_dynamic_kernels_link_and_export_their_grid(chip, name):
    vmfb = compile_str(CASES[name], CompileOptions(target_backends=["rocm"], rocm_target=chip))
    assert check_module(vmfb, chip) >= 1
    _, (exe,) = rocm_executables(vmfb)
    (data,) = struct.unpack_from("<Q", vmfb, len(vmfb) - 48 + 8)
    start = data + exe.rocm.codeObject.offset
    meta = read_hsaco(vmfb[start:start + exe.rocm.codeObject.length])["metadata"]
    kernels = {k[".name"]: k for k in meta["amdhsa.kernels"]}
    assert exe.rocm.exports
    for export in exe.rocm.exports:
        args = [a[".value_kind"] for a in kernels[export.name.decode()][".args"]]
        pushed = args.count("by_value")
        assert pushed >= 1 and args[:len(export.bindings)] == ["global_buffer"] * len(export.bindings)
        check_grid(export, pushed)
    require_module("pyree.runtime.module.reader").read_module(vmfb)  # the verifier accepts it


def test_the_kernels_own_size_checks_link():
    """out[p1] = x[p2 + i] of x[p0]: a kernel that checks its slice per dispatch and traps
    (llvm.trap, which the rocm target lets through to LLVM) links like any other."""
    from pyree.compiler.codegen.rocm import generate_hsaco, generate_ir, resolve_target
    from pyree.compiler.kernel import AffineExpr, Binding, Kernel, Load, Result
    from pyree.compiler.sizes import Size
    p0, p1, p2 = (Size.symbol(f"p{k}") for k in range(3))
    kernel = Kernel("slice", (p1,), 1, (Binding("f32", (p0,), "read"), Binding("f32", (p1,), "write")),
                    (Result(1, (AffineExpr((1,), 0),), Load(0, (AffineExpr((1,), p2),), "f32")),))
    ir, _ = generate_ir([kernel], resolve_target("gfx942"))
    assert "call void @llvm.trap()" in ir and "i64 %pc2" in ir
    hsaco, _ = generate_hsaco([kernel], resolve_target("gfx942"))
    (meta,) = read_hsaco(hsaco)["metadata"]["amdhsa.kernels"]
    assert [a[".value_kind"] for a in meta[".args"]][:5] == ["global_buffer"] * 2 + ["by_value"] * 3
