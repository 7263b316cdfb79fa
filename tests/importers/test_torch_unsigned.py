"""PyTorch uint8 arguments and results keep their type through the import (importers/unsigned.py):
torch-mlir's linalg output is signless, and the results had come back as int8 (255 read as
-1); now the module's signature says ui8, the runtime returns uint8 arrays, and the values are
PyTorch's, with a dim at run time too and through pyree-run-module's printing."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import tooling
from pyree.compiler import CompileOptions, compile_str, import_torch

torch = tooling.require_module("torch")
tooling.require_module("torch_mlir")

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")


class Mixed(torch.nn.Module):
    """uint8 in, uint8 out (wrapping), an f32 result beside it, and a uint8 made from floats."""

    def forward(self, a, b, x):
        return a - b, (a.float() * x).sum(-1), (x.abs() * 40).to(torch.uint8)


def _inputs(n: int):
    rng = np.random.default_rng(n)
    a = torch.from_numpy(rng.integers(0, 256, (3, n), dtype=np.uint8))
    b = torch.from_numpy(rng.integers(0, 256, (3, n), dtype=np.uint8))
    x = torch.from_numpy(rng.standard_normal((3, n)).astype(np.float32))
    a[0, 0], b[0, 0] = 0, 1   # 0 - 1 wraps to 255
    return a, b, x


@pytest.mark.parametrize("dynamic", [False, True])
def test_uint8_arguments_and_results_match_pytorch(dynamic):
    import pyree.runtime as rt
    a, b, x = _inputs(5)
    n = torch.export.Dim("n", min=1, max=64)
    shapes = {"a": {1: n}, "b": {1: n}, "x": {1: n}} if dynamic else None
    text = import_torch(Mixed(), a, b, x, dynamic_shapes=shapes)
    module = rt.load_module(compile_str(text, CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    for size in ((5, 1, 37) if dynamic else (5,)):
        a, b, x = _inputs(size)
        got = [r.to_host() for r in module["main"](a.numpy(), b.numpy(), x.numpy())]
        want = [t.numpy() for t in Mixed()(a, b, x)]
        assert [g.dtype for g in got] == [np.uint8, np.float32, np.uint8]
        np.testing.assert_array_equal(got[0], want[0])
        assert got[0][0, 0] == 255
        np.testing.assert_allclose(got[1], want[1], rtol=1e-5)
        np.testing.assert_array_equal(got[2], want[2])


def test_run_module_prints_uint8_results(tmp_path):
    a, b, x = _inputs(4)
    module = tmp_path / "m.vmfb"
    module.write_bytes(compile_str(import_torch(Mixed(), a, b, x),
                                   CompileOptions(target_backends=["llvm-cpu"])))
    values = lambda t: " ".join(map(str, t.numpy().ravel().tolist()))  # noqa: E731
    out = subprocess.run([sys.executable, "-m", "pyree.runtime.tools.run_module",
                          f"--module={module}", "--function=main",
                          f"--input=3x4xui8={values(a)}", f"--input=3x4xui8={values(b)}",
                          f"--input=3x4xf32={values(x)}"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "result[0]: hal.buffer_view\n3x4xui8=[255 " in out.stdout
