"""CPU-only: kernels with run-time sizes on rocm (codegen/common/llvm_gpu/dynamic.py, the
templates cuda shares): the programs of tests/e2e/test_dynamic_shapes.py compile and link with
ld.lld into code objects whose kernels take the push constants by value after the bindings, and
whose exports carry the grid as SizeExprs (0 blocks where the sizes are 0). No AMD GPU runs them
here: tests/drivers/rocm/hip_on_cuda/test_rocm_on_cuda_dynamic.py runs the rocm driver on them
through the HIP-on-CUDA shim."""

from __future__ import annotations

import struct

import pytest
from e2e.test_dynamic_shapes import EXP_ADD_ROWSUM, MATMUL, SHORTER
from hsaco_reader import check_module, lld, read_hsaco, rocm_executables  # noqa: F401
from tooling import require_module

require_module("xdsl")  # the compiler

from pyree.compiler import CompileOptions, compile_str  # noqa: E402
from pyree.runtime.module.size_exprs import evaluate  # noqa: E402

CASES = {"exp_add_rowsum": EXP_ADD_ROWSUM, "matmul": MATMUL, "shorter": SHORTER}  # RESHAPE: no kernel


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
        programs = [list(e.code) for e in export.gridSizeExpr]
        assert programs[1:] == [[0, 1], [0, 1]] and list(export.gridSize) == [0, 1, 1]
        assert evaluate(programs[0], [0] * pushed) == 0
        assert evaluate(programs[0], [1] * pushed) >= 1
    require_module("pyree.runtime.module.reader").read_module(vmfb)  # the verifier accepts it
