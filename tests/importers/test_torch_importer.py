"""pyree.compiler.import_torch / compile_torch: PyTorch modules -> MLIR -> .vmfb, run on
local-task and compared with the module itself (fp32, relative error <= 1e-4)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import tooling
from pyree.compiler import CompileError, CompileOptions, compile_str, compile_torch, import_torch

# The [torch] extra: a test skips without it on a developer's machine and fails in CI.
torch = tooling.require_module("torch")
tooling.require_module("torch_mlir")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
import definitions  # noqa: E402

# torch.export / torch.onnx.export (TorchScript) deprecation notices, not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")

MODELS = {  # name -> (factory, input shape)
    "mlp": (definitions.mlp, (5, 37)),
    "small_cnn": (definitions.small_cnn, (2, 3, 33, 29)),
    "gpt2_block": (definitions.gpt2_block, (1, 128, 256)),
}


def run(vmfb: bytes, function: str, x: torch.Tensor) -> np.ndarray:
    import pyree.runtime as rt
    return rt.load_module(vmfb, device="local-task")[function](x.numpy()).to_host()


def relative_error(got, ref) -> float:
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    assert got.shape == ref.shape and np.all(np.isfinite(got))
    return float(np.linalg.norm(got - ref) / np.linalg.norm(ref))


def example(shape, seed: int) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("name", MODELS)
def test_import_compile_run(name):
    factory, shape = MODELS[name]
    model = factory()
    mlir = import_torch(model, example(shape, 0))
    assert "func.func @main(" in mlir and "torch.aten" not in mlir and "!torch" not in mlir
    vmfb = compile_str(mlir, CompileOptions(target_backends=["llvm-cpu"]))
    x = example(shape, 1)  # not the tracing input: the module must not have baked it in
    with torch.no_grad():
        ref = model(x).numpy()
    assert relative_error(run(vmfb, "main", x), ref) <= 1e-4


def test_compile_torch_one_call_with_options():
    """nn.Module -> .vmfb in one call (iree-turbine's aot.export(...).compile()), with a
    function name and CompileOptions fields as keywords."""
    model, x = definitions.mlp(), example((5, 37), 2)
    lines = []
    vmfb = compile_torch(model, x, function_name="predict", target_backends=["llvm-cpu"],
                         llvmcpu_target_cpu="generic", progress=lines.append)
    assert lines[0].startswith("parsing <torch MLP>") and lines[-1] == "writing the module"
    with torch.no_grad():
        assert relative_error(run(vmfb, "predict", x), model(x).numpy()) <= 1e-4


def test_an_exported_program_is_accepted():
    model, x = definitions.mlp(), example((5, 37), 3)
    program = torch.export.export(model, (x,))
    assert "func.func @main(" in import_torch(program)


def test_arguments_updated_in_place_add_no_results():
    """torch.export lists updated arguments as outputs ahead of forward's; the function
    returns forward's results alone, in order (the updates had shifted them)."""
    import pyree.runtime as rt

    class Updates(torch.nn.Module):
        def forward(self, x, y):
            x.add_(1.0)
            y[1:3] = 7.0
            return x * 2, y.sum(), y

    x, y = torch.randn(4), torch.randn(5)
    module = rt.load_module(compile_str(import_torch(Updates(), x.clone(), y.clone()),
                                        CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    got = module.main(x.numpy(), y.numpy())
    want = Updates()(x.clone(), y.clone())
    assert len(got) == len(want) == 3
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w.numpy(), rtol=1e-6)


def test_unknown_compile_option_is_a_type_error():
    with pytest.raises(TypeError, match="no_such_option"):
        compile_torch(definitions.mlp(), example((5, 37), 0), no_such_option=1)


def test_missing_extra_names_the_pip_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch_mlir", None)
    with pytest.raises(CompileError, match=r"pip install pyree-base-compiler\[torch\]"):
        import_torch(definitions.mlp(), example((5, 37), 0))


class _Buffers(torch.nn.Module):
    """Weights of every kind the importer copies: f32 (one of them a transposed view, one used
    twice), f16, bf16, a bool mask, int64 indices, and a one-element scale."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(7)
        self.w = torch.nn.Parameter(torch.randn(6, 5, generator=g).t())
        self.register_buffer("h", torch.randn(5, 6, generator=g).half())
        self.register_buffer("b", torch.randn(5, 6, generator=g).bfloat16())
        self.register_buffer("mask", torch.rand(5, 6, generator=g) > 0.5)
        self.register_buffer("idx", torch.randperm(6, generator=g))
        self.register_buffer("scale", torch.tensor([1.5]))

    def forward(self, x):
        y = (x * self.w + self.h.float() - self.b.float()) * self.scale
        return torch.where(self.mask, y, x * self.w).index_select(1, self.idx)


def test_weights_match_torch_mlirs_own_import():
    """import_torch hands weights to torch-mlir as raw bytes instead of its Python-list copy
    (importers/torch.py): the MLIR must be exactly what torch-mlir writes on its own, for every
    dtype, a non-contiguous weight and a weight read twice."""
    from torch_mlir import fx
    model, x = _Buffers().eval(), example((5, 6), 4)
    program = torch.export.export(model, (x,))
    ours = import_torch(program, x)
    theirs = str(fx.export_and_import(program, x, output_type="linalg-on-tensors"))
    assert ours == theirs
    assert "torch_tensor_5_6_torch.bfloat16" in ours and "torch_tensor_5_6_torch.float16" in ours
    vmfb = compile_str(ours, CompileOptions(target_backends=["llvm-cpu"]))
    with torch.no_grad():
        assert relative_error(run(vmfb, "main", x), model(x).numpy()) <= 1e-4


@pytest.mark.parametrize("approximate", ["tanh", "none"])
def test_gelu_keeps_its_constants(approximate):
    """GELU through PyTorch's own decomposition: torch-mlir's lowering of the tanh form took
    sqrt(2/pi) as 0.797724, a relative error of 1e-3 at x = -2.55 (GPT-2's activation)."""
    x = torch.linspace(-3, 3, 601, dtype=torch.float32)
    vmfb = compile_str(import_torch(torch.nn.GELU(approximate=approximate), x),
                       CompileOptions(target_backends=["llvm-cpu"]))
    want = torch.nn.functional.gelu(x.double(), approximate=approximate).numpy()
    np.testing.assert_allclose(run(vmfb, "main", x), want, rtol=5e-5, atol=1e-7)


class _Masked(torch.nn.Module):
    def __init__(self, form: str):
        super().__init__()
        self.form = form

    def forward(self, a):
        if self.form == "index":
            return a[a > 0].sum()
        if self.form == "nonzero":
            return torch.nonzero(a).float().sum()
        return torch.masked_select(a, a > 0)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("form", ["index", "nonzero", "masked_select"])
def test_data_dependent_shapes_are_refused_at_the_models_line(form):
    """A size computed from tensor contents is refused by name, at the model's own line
    (torch-mlir's lowering of ``a[a > 0]`` never returned)."""
    with pytest.raises(CompileError, match=r"\(File .*test_torch_importer.py\", line \d+, in "
                                           r"forward\) .*a data-dependent shape"):
        compile_torch(_Masked(form), torch.randn(4, 5))
