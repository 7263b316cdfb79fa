"""Values of parameters computed once at load (parameters/load_time.py, schema 1.9): a region
that reads only parameters moves to the module's initializer, which the runtime runs when it
loads the module; the functions read its result. Checked against numpy with NaN, +-inf and -0
among the weights, through the Python API and the CLI, on the CPU drivers and Vulkan."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
from parameter_cases import run
from pyree.compiler import CompileOptions, compile_str
from pyree.compiler.parameters import write_parameters
from pyree.runtime.module import read_module

R, C, B = 37, 29, 5  # w: R x C; x: B x C


def mlir(w: str, v: str) -> str:
    """``main(x) = (x * colsum(w)) @ transpose(v)``, ``colsum(w)`` and ``transpose(v)`` each
    of parameters only; ``wsum()`` returns ``colsum(w)`` itself."""
    t = f"tensor<{R}x{C}xf32>"
    return f"""module @load_time {{
  util.global private @w = {w} : {t}
  util.global private @v = {v} : {t}
  func.func @main(%x: tensor<{B}x{C}xf32>) -> tensor<{B}x{R}xf32> {{
    %w = util.global.load @w : {t}
    %v = util.global.load @v : {t}
    %s = call @colsum(%w) : ({t}) -> tensor<{C}xf32>
    %e = tensor.empty() : tensor<{B}x{C}xf32>
    %xs = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}} ins(%x, %s : tensor<{B}x{C}xf32>, tensor<{C}xf32>) outs(%e : tensor<{B}x{C}xf32>) {{
    ^bb0(%a: f32, %b: f32, %o: f32):
      %m = arith.mulf %a, %b : f32
      linalg.yield %m : f32
    }} -> tensor<{B}x{C}xf32>
    %et = tensor.empty() : tensor<{C}x{R}xf32>
    %vt = linalg.transpose ins(%v : {t}) outs(%et : tensor<{C}x{R}xf32>) permutation = [1, 0]
    %z = arith.constant 0.0 : f32
    %ey = tensor.empty() : tensor<{B}x{R}xf32>
    %f = linalg.fill ins(%z : f32) outs(%ey : tensor<{B}x{R}xf32>) -> tensor<{B}x{R}xf32>
    %y = linalg.matmul ins(%xs, %vt : tensor<{B}x{C}xf32>, tensor<{C}x{R}xf32>) outs(%f : tensor<{B}x{R}xf32>) -> tensor<{B}x{R}xf32>
    return %y : tensor<{B}x{R}xf32>
  }}
  func.func @wsum() -> tensor<{C}xf32> {{
    %w = util.global.load @w : {t}
    %s = call @colsum(%w) : ({t}) -> tensor<{C}xf32>
    return %s : tensor<{C}xf32>
  }}
  func.func private @colsum(%w: {t}) -> tensor<{C}xf32> {{
    %z = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<{C}xf32>
    %f = linalg.fill ins(%z : f32) outs(%e : tensor<{C}xf32>) -> tensor<{C}xf32>
    %s = linalg.generic {{indexing_maps = [affine_map<(j, i) -> (i, j)>, affine_map<(j, i) -> (j)>], iterator_types = ["parallel", "reduction"]}} ins(%w : {t}) outs(%f : tensor<{C}xf32>) {{
    ^bb0(%a: f32, %o: f32):
      %r = arith.addf %o, %a : f32
      linalg.yield %r : f32
    }} -> tensor<{C}xf32>
    return %s : tensor<{C}xf32>
  }}
}}
"""


def weights(rng) -> dict[str, np.ndarray]:
    w = {k: rng.standard_normal((R, C)).astype(np.float32) for k in ("w", "v")}
    w["w"][3, 4], w["w"][:, 6] = np.nan, -0.0  # a NaN column sum; a -0 one
    w["w"][7, 8], w["w"][9, 10] = np.inf, -np.inf
    w["v"][2, 1] = -0.0
    return w


def reference(x: np.ndarray, w: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    s = 0.0 + w["w"].astype(np.float64).sum(0)  # the fold starts at the fill's +0
    with np.errstate(all="ignore"):
        return (x * s) @ w["v"].T.astype(np.float64), s


def build(tmp_path, target: str = "llvm-cpu", exported: bool = True, flags: tuple = ()):
    """(module path, parameter file) of the program with its weights in a file, (and the
    weights)."""
    params = tmp_path / "w.safetensors"
    w = weights(np.random.default_rng(7))
    with open(params, "wb") as f:
        write_parameters(f, ".safetensors", [(k, "f32", a.shape, a) for k, a in w.items()])
    if exported:
        source = mlir('#stream.parameter.named<"model"::"w">', '#stream.parameter.named<"model"::"v">')
    else:
        source = mlir(*(f'dense<"0x{a.tobytes().hex().upper()}">' for a in w.values()))
    module = tmp_path / "m.vmfb"
    module.write_bytes(compile_str(source, CompileOptions(target_backends=[target]),
                                   extra_args=list(flags)))
    return module, params, w


def check(m, w, rng) -> None:
    x = rng.standard_normal((B, C)).astype(np.float32)
    x[1, 2] = -0.0
    want, s = reference(x, w)
    np.testing.assert_allclose(m.main(x).to_host(), want, rtol=2e-5, atol=2e-4, equal_nan=True)
    got = m.wsum().to_host()
    np.testing.assert_allclose(got, s, rtol=1e-5, atol=1e-4, equal_nan=True)
    assert got[6] == 0 and not np.signbit(got[6])  # +0 + -0 + ... is +0
    assert np.isnan(got[4]) and got[8] == np.inf and got[10] == -np.inf


@pytest.mark.parametrize("device", ["local-sync", "local-task"])
def test_parameter_regions_run_once_at_load_and_match_numpy(tmp_path, device):
    module, params, w = build(tmp_path)
    tree = read_module(module.read_bytes()).tree
    assert tree.initializer is not None and tree.schemaVersionMinor == 9
    assert [c.computed for c in tree.constants].count(True) >= 1
    assert [f.name for f in tree.functions] == ["main", "wsum"]  # the initializer is not one
    m = rt.load_module(str(module), device=device, parameters=[f"model={params}"])
    assert m.function_names == ["main", "wsum"]
    rng = np.random.default_rng(1)
    for _ in range(3):  # every call reads what the load computed
        check(m, w, rng)


def test_each_load_computes_from_its_own_parameter_file(tmp_path):
    module, params, w = build(tmp_path)
    first = rt.load_module(str(module), device="local-task", parameters=[f"model={params}"])
    other = {k: np.random.default_rng(3).standard_normal((R, C)).astype(np.float32) for k in w}
    with open(params, "wb") as f:  # rewritten after the first load
        write_parameters(f, ".safetensors", [(k, "f32", a.shape, a) for k, a in other.items()])
    second = rt.load_module(str(module), device="local-task", parameters=[f"model={params}"])
    rng = np.random.default_rng(2)
    check(first, w, rng)
    check_other = reference(np.ones((B, C), np.float32), other)[1]
    np.testing.assert_allclose(second.wsum().to_host(), check_other, rtol=1e-5, atol=1e-4)


def test_inline_weights_fold_or_stay_and_need_no_initializer(tmp_path):
    module, _, w = build(tmp_path, exported=False)
    assert read_module(module.read_bytes()).tree.initializer is None
    check(rt.load_module(str(module), device="local-task"), w, np.random.default_rng(4))


def test_const_expr_hoisting_false_keeps_the_regions_in_the_functions(tmp_path):
    module, params, w = build(tmp_path, flags=("--iree-opt-const-expr-hoisting=false",))
    tree = read_module(module.read_bytes()).tree
    assert tree.initializer is None and not any(c.computed for c in tree.constants)
    check(rt.load_module(str(module), device="local-task", parameters=[f"model={params}"]), w,
          np.random.default_rng(9))


def test_the_cli_runs_a_module_with_an_initializer(tmp_path):
    module, params, w = build(tmp_path)
    x = np.random.default_rng(5).standard_normal((B, C)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    done = run("pyree.runtime.tools.run_module", f"--module={module}", "--device=local-task",
               "--function=main", f"--input=@{tmp_path / 'x.npy'}",
               f"--output=@{tmp_path / 'y.npy'}", f"--parameters=model={params}")
    assert done.returncode == 0, done.stderr
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), reference(x, w)[0], rtol=2e-5,
                               atol=2e-4, equal_nan=True)
    dump = run("pyree.runtime.tools.dump_module", str(module))
    assert dump.returncode == 0, dump.stderr
    assert "initializer" in dump.stdout and "computed at load" in dump.stdout


def test_a_missing_parameter_file_fails_the_load_by_name(tmp_path):
    module, _, _ = build(tmp_path)
    with pytest.raises(rt.PyreeError, match="model"):
        rt.load_module(str(module), device="local-task")


@pytest.mark.parametrize("target, device", [
    pytest.param("vulkan-spirv", "vulkan", marks=pytest.mark.vulkan),
    pytest.param("cuda", "cuda", marks=pytest.mark.cuda)])
def test_on_a_gpu(tmp_path, target, device):
    module, params, w = build(tmp_path, target)
    assert read_module(module.read_bytes()).tree.initializer is not None
    check(rt.load_module(str(module), device=device, parameters=[f"model={params}"]), w,
          np.random.default_rng(6))
