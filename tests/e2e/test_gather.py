"""Gathers (tensor.extract at computed indices in a linalg.generic body, and at function level):
compiled for llvm-cpu and run on local-task against numpy, compiled for cuda (ptxas assembles the
PTX), plus torch's embedding + linear end to end. An out-of-range index reads the clamped element."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
import tooling
from gather_cases import CASES
from pyree.compiler import CompileOptions, compile_str
from pyree.compiler._fb.Module import Module, ModuleT


@pytest.mark.parametrize("name", sorted(CASES))
def test_gather_on_local_task(name):
    case = CASES[name]
    inputs = case.inputs(np.random.default_rng(7))
    vmfb = compile_str(case.program, CompileOptions(target_backends=["llvm-cpu"]))
    out = rt.load_module(vmfb, device="local-task")["main"](*inputs)
    got = np.asarray(out.to_host() if hasattr(out, "to_host") else out)
    want = case.reference(*inputs)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", sorted(CASES))
def test_gather_assembles_for_cuda(name):
    tooling.require_tool("ptxas", env="PYREE_PTXAS")
    vmfb = compile_str(CASES[name].program, CompileOptions(target_backends=["cuda"]))
    (exe,) = ModuleT.InitFromObj(Module.GetRootAs(vmfb, 0)).executables
    assert exe.cuda.ptx.length > 0 and exe.cuda.cubin.length > 0  # ptxas assembled it


def test_torch_embedding_and_linear():
    torch = tooling.require_module("torch")
    tooling.require_module("torch_mlir")
    from pyree.compiler import import_torch

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(23, 9)
            self.linear = torch.nn.Linear(9, 5)

        def forward(self, ids):
            return self.linear(self.embed(ids))

    torch.manual_seed(0)
    model = Model().eval()
    mlir = import_torch(model, torch.tensor([[1, 2, 3], [4, 5, 6]]))
    vmfb = compile_str(mlir, CompileOptions(target_backends=["llvm-cpu"]))
    ids = torch.tensor([[22, 0, 7], [3, 3, 19]])  # not the tracing ids
    got = rt.load_module(vmfb, device="local-task")["main"](ids.numpy()).to_host()
    with torch.no_grad():
        want = model(ids).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
