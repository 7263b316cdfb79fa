"""External parameters through the Python API: export at compile time (.irpa, .safetensors),
load with ``load_module(..., parameters=[...])``, new weights without recompiling, the
``#stream.parameter.named`` input form, and CPU devices using the mapped file in place."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pyree.runtime as rt
import pytest
from parameter_cases import (
    BATCH,
    IN,
    SHAPES,
    assert_matches,
    dense_mlir,
    numpy_safetensors,
    parameter_mlir,
    weights,
)
from pyree.compiler import CompileError, CompileOptions, compile_str
from pyree.compiler.parameters import write_parameters
from pyree.runtime.parameters import ParameterError, ParameterIndex

DEVICES = ["local-sync", "local-task"]


def write(path, w: dict[str, np.ndarray]) -> None:
    """Weights into a parameter file with pyree's writer (format by extension)."""
    with open(path, "wb") as f:
        write_parameters(f, path.suffix, [(k, "f32", v.shape, memoryview(v).cast("B"))
                                          for k, v in w.items()])


def compile_exported(tmp_path, w, target: str, minimum: int = 0) -> tuple[str, str]:
    """(module path, parameter file path) of the MLP compiled with its weights exported."""
    params = tmp_path / target
    module = compile_str(dense_mlir(w), CompileOptions(
        export_parameters=f"model={params}", minimum_parameter_export_size=minimum))
    path = tmp_path / "mlp.vmfb"
    path.write_bytes(module)
    return str(path), str(params)


def bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


@pytest.mark.parametrize("target", ["w.irpa", "w.safetensors"])
@pytest.mark.parametrize("device", DEVICES)
def test_exported_weights_run_and_can_be_replaced(tmp_path, target, device):
    rng = np.random.default_rng()
    w = weights(rng)
    module, params = compile_exported(tmp_path, w, target)
    x = rng.standard_normal((BATCH, IN)).astype(np.float32)
    m = rt.load_module(module, device=device, parameters=[f"model={params}"])
    assert all(c.parameter is not None for c in m.module.tree.constants)  # nothing inline
    assert_matches(m.main(x).to_host(), x, w)
    # The file holds each weight bit for bit (NaN, -0.0), under its global's name.
    index = ParameterIndex([f"model={params}"])
    for key, value in w.items():
        stored = index.resolve("model", key, 0, list(value.shape), key)
        assert bytes(stored) == bits(value)
    # New weights in the same file: new results, same module.
    del m, index
    new = weights(rng, special=False)
    write(tmp_path / target, new)
    m = rt.load_module(module, device=device, parameters=[("model", params)])
    assert_matches(m.main(x).to_host(), x, new)


def test_the_minimum_export_size_keeps_small_constants_inline(tmp_path):
    """IREE's default: constants under 256 bytes stay in the module."""
    w = weights(np.random.default_rng())
    module, params = compile_exported(tmp_path, w, "w.irpa", minimum=256)
    constants = rt.load_module(module, device="local-sync",
                               parameters=[f"model={params}"]).module.tree.constants
    external = {c.parameter.key for c in constants if c.parameter is not None}
    assert external == {k for k, v in w.items() if v.nbytes >= 256} == {"w1", "w2"}


def test_inline_constants_are_exported_as_constant_n(tmp_path):
    mlir = """func.func @f(%x: tensor<70xf32>) -> tensor<70xf32> {
  %c = arith.constant dense<[%s]> : tensor<70xf32>
  %y = arith.addf %x, %c : tensor<70xf32>
  return %y : tensor<70xf32>
}""".replace("%s", ", ".join(f"{i}.5" for i in range(70)))
    params = tmp_path / "c.irpa"
    module = compile_str(mlir, CompileOptions(export_parameters=str(params)))
    m = rt.load_module(module, device="local-sync", parameters=[str(params)])
    (constant,) = m.module.tree.constants
    assert (constant.parameter.scope, constant.parameter.key) == ("", "constant_0")
    x = np.random.default_rng().standard_normal(70).astype(np.float32)
    np.testing.assert_array_equal(m.f(x).to_host(), x + (np.arange(70) + 0.5).astype(np.float32))


@pytest.mark.parametrize("spelling", ["#stream.", "#flow."])
@pytest.mark.parametrize("device", DEVICES)
def test_stream_parameter_named_globals(tmp_path, device, spelling):
    """iree-turbine's externalized form (and IREE's earlier ``#flow.parameter.named``): scoped
    and unscoped keys, from .irpa and .safetensors files given together; ``b2 * 2`` is computed
    from the file, never folded at compile time."""
    rng = np.random.default_rng()
    w = weights(rng)
    mlir = parameter_mlir({"w1": "model", "b1": "model", "w2": "", "b2": ""})
    module = compile_str(mlir.replace("#stream.", spelling))
    write(tmp_path / "model.irpa", {k: w[k] for k in ("w1", "b1")})
    write(tmp_path / "rest.safetensors", {k: w[k] for k in ("w2", "b2")})
    files = [f"model={tmp_path / 'model.irpa'}", tmp_path / "rest.safetensors"]
    x = rng.standard_normal((BATCH, IN)).astype(np.float32)
    assert_matches(rt.load_module(module, device=device, parameters=files).main(x).to_host(), x, w)
    w["b2"] = rng.standard_normal(SHAPES["b2"]).astype(np.float32)
    write(tmp_path / "rest.safetensors", {k: w[k] for k in ("w2", "b2")})
    assert_matches(rt.load_module(module, device=device, parameters=files).main(x).to_host(), x, w)


@pytest.mark.parametrize("device", DEVICES)
def test_numpy_written_safetensors_unaligned_tensors_are_copied(tmp_path, device):
    """The safetensors package pads its header to 8 bytes only: tensors off a 64-byte boundary
    are copied at load instead of used in place, with the same results."""
    rng = np.random.default_rng()
    w = weights(rng)
    module = compile_str(parameter_mlir(dict.fromkeys(SHAPES, "")))
    numpy_safetensors(tmp_path / "w.safetensors", w)
    m = rt.load_module(module, device=device, parameters=[tmp_path / "w.safetensors"])
    x = rng.standard_normal((BATCH, IN)).astype(np.float32)
    assert_matches(m.main(x).to_host(), x, w)
    assert not all(hasattr(c, "_source") for c in m.constants)


@pytest.mark.parametrize("device", DEVICES)
def test_parameters_are_the_mapped_file_on_cpu(tmp_path, device):
    """Every parameter buffer is the parameter file's own mapping (no copy)."""
    w = weights(np.random.default_rng())
    module = compile_str(parameter_mlir(dict.fromkeys(SHAPES, "m")))
    write(tmp_path / "w.irpa", w)
    m = rt.load_module(module, device=device, parameters=[f"m={tmp_path / 'w.irpa'}"])
    size = os.path.getsize(tmp_path / "w.irpa")
    assert [len(c._source) for c in m.constants] == [size] * len(SHAPES)


def test_a_large_parameter_is_in_memory_once(tmp_path):
    """Peak RSS grows by far less than a 32 MiB parameter when a call reads two slices of it:
    the untouched pages of the mapped file are never loaded, let alone copied."""
    n = 8 << 20
    data = np.random.default_rng().standard_normal(n).astype(np.float32)
    write(tmp_path / "big.irpa", {"big": data})
    mlir = f"""util.global private @big = #stream.parameter.named<"p"::"big"> : tensor<{n}xf32>
func.func @ends() -> (tensor<16xf32>, tensor<16xf32>) {{
  %b = util.global.load @big : tensor<{n}xf32>
  %head = tensor.extract_slice %b[0] [16] [1] : tensor<{n}xf32> to tensor<16xf32>
  %tail = tensor.extract_slice %b[{n - 16}] [16] [1] : tensor<{n}xf32> to tensor<16xf32>
  return %head, %tail : tensor<16xf32>, tensor<16xf32>
}}"""
    (tmp_path / "big.vmfb").write_bytes(compile_str(mlir))
    code = ("import resource, numpy as np, pyree.runtime as rt\n"
            "rt.get_device('local-sync')\n"
            "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
            f"m = rt.load_module({str(tmp_path / 'big.vmfb')!r}, device='local-sync', "
            f"parameters=['p={tmp_path / 'big.irpa'}'])\n"
            "head, tail = (r.to_host() for r in m.ends())\n"
            "after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
            "print((after - before) * 1024, head.tobytes().hex(), tail.tobytes().hex())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    grown, head, tail = done.stdout.split()
    assert bytes.fromhex(head) == data[:16].tobytes() and bytes.fromhex(tail) == data[-16:].tobytes()
    assert int(grown) < data.nbytes // 4, f"peak RSS grew by {int(grown) >> 20} MiB"


@pytest.mark.parametrize("mlir, message", [
    ('util.global private mutable @g = #stream.parameter.named<"s"::"g"> : tensor<4xf32>',
     "mutable util.global @g initialized from a parameter is not supported"),
    ("util.global private @g : tensor<4xf32>", "util.global @g has no initial value"),
    ("util.global private @h = dense<1.0> : tensor<4xf32>",
     "util.global.load of @g, which no global declares"),
    ('util.global private @g = #stream.parameter.named<"s"::"g"> : tensor<5xf32>',
     "util.global.load of @g as tensor<4xf32>, but the global holds 5xf32"),
])
def test_globals_pyree_cannot_read_as_constants_are_refused(mlir, message):
    text = mlir + """
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %g = util.global.load @g : tensor<4xf32>
  %y = arith.addf %x, %g : tensor<4xf32>
  return %y : tensor<4xf32>
}"""
    with pytest.raises(CompileError, match=re.escape(message)) as error:
        compile_str(text, source_name="g.mlir")
    assert "g.mlir:" in str(error.value)


def test_a_parameter_of_the_wrong_size_is_refused_by_name(tmp_path):
    module = compile_str(parameter_mlir(dict.fromkeys(SHAPES, "model")))
    w = weights(np.random.default_rng())
    w["w2"] = w["w2"][:, :4].copy()
    write(tmp_path / "w.irpa", w)
    with pytest.raises(ParameterError, match=r"'model::w2' in '.*w.irpa' is 208 bytes, but "
                                             r"module 'mlp' constant \d is 13x5xf32, 260 bytes"):
        rt.load_module(module, device="local-sync", parameters=[f"model={tmp_path / 'w.irpa'}"])


def test_a_torch_model_with_exported_weights(tmp_path):
    """``compile_torch`` takes the CompileOptions fields: the weights of an nn.Module go to the
    file (keys ``constant_N``: torch-mlir's blobs carry no parameter names)."""
    from tooling import require_module

    torch = require_module("torch")
    from pyree.compiler import compile_torch

    model = torch.nn.Sequential(torch.nn.Linear(IN, 13), torch.nn.ReLU(),
                                torch.nn.Linear(13, 5)).eval()
    x = torch.randn(BATCH, IN)
    module = compile_torch(model, x, export_parameters=f"model={tmp_path / 'w.irpa'}",
                           minimum_parameter_export_size=0)
    m = rt.load_module(module, device="local-sync", parameters=[f"model={tmp_path / 'w.irpa'}"])
    assert all(c.parameter is not None for c in m.module.tree.constants)
    with torch.no_grad():
        expected = model(x).double().numpy()
    np.testing.assert_allclose(m.main(x.numpy()).to_host(), expected, rtol=1e-5, atol=1e-5)


def test_a_module_with_parameters_loaded_without_files_names_what_it_needs():
    module = compile_str(parameter_mlir(dict.fromkeys(SHAPES, "model")))
    with pytest.raises(ParameterError, match="constant 0 is parameter 'model::w1', but no "
                                             "parameter file was given for scope 'model'"):
        rt.load_module(module, device="local-sync")


def test_export_flags_in_extra_args(tmp_path):
    """IREE's Python spelling: ``compile_str(..., extra_args=["--iree-opt-export-parameters=..."])``."""
    w = weights(np.random.default_rng())
    module = compile_str(dense_mlir(w), extra_args=[
        f"--iree-opt-export-parameters=model={tmp_path / 'w.safetensors'}",
        "--iree-opt-minimum-parameter-export-size=100"])
    m = rt.load_module(module, device="local-sync",
                       parameters=[f"model={tmp_path / 'w.safetensors'}"])
    external = {c.parameter.key for c in m.module.tree.constants if c.parameter is not None}
    assert external == {k for k, v in w.items() if v.nbytes >= 100} == {"w1", "w2"}
    x = np.random.default_rng().standard_normal((BATCH, IN)).astype(np.float32)
    assert_matches(m.main(x).to_host(), x, w)
