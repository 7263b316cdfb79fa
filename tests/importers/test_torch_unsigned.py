"""PyTorch uint8 and int8 programs: uint8 arguments and results keep their type through the import
(importers/unsigned.py), and 8-bit values are computed on int16 (importers/torch_small_ints.py):
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


U8_OPS = {  # computations on uint8 tensors that torch-mlir read as signed (or crashed on)
    "sum": lambda a, b: a.sum(1),
    "compare_with_128": lambda a, b: torch.where(a > 128, a, b),
    "equal_255": lambda a, b: a == 255,
    "true_division": lambda a, b: a / (b + 1),
    "floor_division_and_remainder": lambda a, b: a // (b + 1) * 7 + a % (b + 1),
    "sort_and_topk": lambda a, b: torch.sort(a, 1).values[:, :5] + torch.topk(b, 5, 1).values,
    "abs_max_min": lambda a, b: torch.abs(a) + torch.maximum(a, b) - a.amin(1, keepdim=True),
    "min_of_all": lambda a, b: a.min(),   # crashed the process
    "wrapping_arithmetic": lambda a, b: a * b - (a << 3) + ~b + (-a),
    "float_to_uint8": lambda a, b: (a.float() * 1.7 - 60).to(torch.uint8),
    "mixed_with_int8": lambda a, b: a + b.to(torch.int8),   # promotes to int16
    "cumsum_and_argmax": lambda a, b: a.cumsum(1) + a.argmax(1, keepdim=True),
}


@pytest.mark.parametrize("name", list(U8_OPS))
def test_uint8_computation_matches_pytorch(name):
    """importers/torch_small_ints.py: uint8 values computed on int16, masked where PyTorch's uint8
    arithmetic wraps; every value past 127 included, results of PyTorch's dtype."""
    import pyree.runtime as rt
    fn = U8_OPS[name]

    class Fn(torch.nn.Module):
        def forward(self, a, b):
            return fn(a, b)
    rng = np.random.default_rng(3)
    a = torch.from_numpy(rng.integers(0, 256, (3, 9), dtype=np.uint8))
    b = torch.from_numpy(rng.integers(0, 256, (3, 9), dtype=np.uint8))
    a[0, :4] = torch.tensor([0, 127, 128, 255], dtype=torch.uint8)
    module = rt.load_module(compile_str(import_torch(Fn(), a, b),
                                        CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    got = module["main"](a.numpy(), b.numpy()).to_host()
    want = fn(a, b).numpy()
    assert got.dtype == want.dtype
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-6)
    else:
        np.testing.assert_array_equal(got, want)


def test_uint32_computation_matches_pytorch():
    """uint32 (which torch-mlir reads as a signed i32) computed on int64: a stable sort puts
    values past 2**31 last, products wrap modulo 2**32, equality and a float conversion keep
    every value. (PyTorch computes little else on uint32: comparisons, sums, max are refused.)"""
    import pyree.runtime as rt
    x = np.random.default_rng(5).integers(0, 2**32, (2, 700), dtype=np.uint32)
    x[:, ::9] = np.uint32(2**32 - 1)
    x[:, 1::11] = 0
    x[:, 2::13] = np.uint32(2**31)
    fns = [lambda t: torch.sort(t, dim=-1, stable=True), lambda t: t * t,
           lambda t: t == t[:, :1], lambda t: t.to(torch.float64)]
    for fn in fns:
        class Fn(torch.nn.Module):
            def forward(self, t, fn=fn):
                return fn(t)
        t = torch.from_numpy(x)
        module = rt.load_module(compile_str(import_torch(Fn(), t),
                                            CompileOptions(target_backends=["llvm-cpu"])),
                                device="local-task")
        got = module["main"](x)
        want = fn(t)
        for g, w in zip(got if isinstance(got, (tuple, list)) else [got],
                        want if isinstance(want, tuple) else [want], strict=True):
            g = np.asarray(g.to_host() if hasattr(g, "to_host") else g)
            assert g.dtype == w.numpy().dtype
            np.testing.assert_array_equal(g, w.numpy())


def test_a_program_without_8_bit_integers_is_left_as_it_is():
    from pyree.compiler.importers.torch_small_ints import widen_small_ints

    class Fn(torch.nn.Module):
        def forward(self, x):
            return (x * 2).to(torch.int16)
    program = torch.export.export(Fn(), (torch.randn(4),), strict=False)
    before = str(program.graph)
    assert widen_small_ints(program, caller_owned=False) is program and str(program.graph) == before


class Preprocess(torch.nn.Module):
    """A uint8 image through a uint8 lookup-table buffer, then normalised into a convolution;
    a count and a maximum of the raw pixels beside it."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.register_buffer("lut", torch.arange(256, dtype=torch.uint8).flip(0))

    def forward(self, image):
        x = self.lut[image.long()]
        return self.conv((x.float() / 255 - 0.5) / 0.25), (image > 200).sum(), image.max()


def test_a_uint8_image_model_with_a_uint8_buffer_and_a_run_time_batch():
    import pyree.runtime as rt
    torch.manual_seed(0)
    model = Preprocess().eval()
    image = torch.randint(0, 256, (2, 3, 9, 9), dtype=torch.uint8)
    batch = torch.export.Dim("batch", min=1, max=8)
    text = import_torch(model, image, dynamic_shapes={"image": {0: batch}})
    module = rt.load_module(compile_str(text, CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    for n in (1, 3):
        image = torch.randint(0, 256, (n, 3, 9, 9), dtype=torch.uint8)
        got = [r.to_host() for r in module["main"](image.numpy())]
        with torch.no_grad():
            want = [t.numpy() for t in model(image)]
        assert [g.dtype for g in got] == [w.dtype for w in want]
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(got[1], want[1])
        np.testing.assert_array_equal(got[2], want[2])


I8_OPS = {  # int8 ops that crashed the process in torch-mlir (segmentation faults), and a few more
    "times_a_scalar": lambda a: a * 3,
    "floor_division_and_remainder": lambda a: a // 3 * 10 + a % 3,
    "max_of_all": lambda a: a.max(),
    "wrapping": lambda a: a * a - (a << 2) + (-a),
    "abs_sort": lambda a: torch.sort(torch.abs(a), 1).values,   # abs(-128) wraps to -128
}


@pytest.mark.parametrize("name", list(I8_OPS))
def test_int8_computation_matches_pytorch(name):
    """importers/torch_small_ints.py computes int8 on int16 too, wrapped into int8's range."""
    import pyree.runtime as rt
    fn = I8_OPS[name]

    class Fn(torch.nn.Module):
        def forward(self, a):
            return fn(a)
    a = torch.tensor([[-128, 127, -1, 5, 0, 64], [100, -100, 64, -64, 1, -7]], dtype=torch.int8)
    module = rt.load_module(compile_str(import_torch(Fn(), a),
                                        CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    got, want = module["main"](a.numpy()).to_host(), fn(a).numpy()
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
