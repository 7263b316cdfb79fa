"""PyTorch ops that reach the compiler in forms few models produce: ``F.fold`` (col2im: a
scatter-add, then a ``tensor.pad`` with negative widths that crops) and ``torch.kthvalue``
(``tm_tensor.topk``), on local-task against PyTorch in float64, NaN (the largest value to
kthvalue, as to torch) and infinities included."""

from __future__ import annotations

import numpy as np
import pytest
import tooling
from pyree.compiler import CompileOptions, compile_str, import_torch

torch = tooling.require_module("torch")
tooling.require_module("torch_mlir")
F = torch.nn.functional

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")


class Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


CASES = {  # name -> (function, example inputs)
    "fold_padded": (lambda x: F.fold(x, (7, 9), 3, padding=1), (torch.randn(2, 27, 63),)),
    "fold_strided": (lambda x: F.fold(x, (8, 11), (2, 3), padding=(1, 0), stride=(2, 3)),
                     (torch.randn(1, 12, 15),)),
    "kthvalue_3rd": (lambda x: torch.kthvalue(x, 3, dim=-1).values, (torch.randn(5, 9),)),
    "kthvalue_dim0": (lambda x: torch.kthvalue(x, 2, dim=0).values, (torch.randn(7, 4),)),
}


def run(fn, args):
    import pyree.runtime as rt

    module = rt.load_module(compile_str(import_torch(Fn(fn), *args),
                                        CompileOptions(target_backends=["llvm-cpu"])), device="local-task")
    return np.asarray(module["main"](*[a.numpy() for a in args]).to_host())


@pytest.mark.parametrize("name", CASES)
def test_matches_pytorch(name):
    fn, args = CASES[name]
    got = run(fn, args)
    with torch.no_grad():
        want = fn(*[a.double() for a in args]).numpy()
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["fold_padded", "kthvalue_3rd"])
def test_special_values(name):
    fn, args = CASES[name]
    x = args[0].clone()
    flat = x.view(-1)
    flat[[1, 12, 30, 40]] = torch.tensor([float("inf"), -float("inf"), -0.0, float("nan")])
    got = run(fn, (x,))
    with torch.no_grad():
        want = fn(x).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert (np.signbit(got) == np.signbit(want)).all()


class IndexedByABuffer(torch.nn.Module):
    """A learned table indexed by a buffer of positions (Swin's relative position bias):
    torch-mlir's importer put the buffer's tensor itself into ``index``'s list of indices and
    refused it ("Heterogeneous lists are not supported")."""

    def __init__(self):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(13, 2))
        self.register_buffer("positions", torch.randint(0, 13, (4, 4)))

    def forward(self, x):
        return x + self.table[self.positions].permute(2, 0, 1)


def test_a_table_indexed_by_a_buffer():
    torch.manual_seed(0)
    model, x = IndexedByABuffer().eval(), torch.randn(2, 4, 4)
    got = run(model, (x,))
    with torch.no_grad():
        want = model(x).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6)
