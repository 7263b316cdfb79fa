"""End to end through the public APIs: compile MLIR text, run it on both CPU drivers, compare with
numpy (float64 references) on fresh random inputs at odd shapes: the numerics programs every device
runs (tests/numerics_cases.py), and what only the CPU drivers check (bit-equal drivers, zero-size
tensors, device arrays)."""

import numpy as np
import pyree.runtime as rt
import pytest
from compiled import compiled
from numerics_cases import CASES, check, rand, results, t
from pyree.compiler import CompileOptions, compile_str

DRIVERS = ["local-sync", "local-task"]


def run(mlir: str, function: str, *args, device: str):
    # compiled(): the program is compiled once for both drivers
    module = rt.load_module(compiled(mlir, CompileOptions()), device=device)
    return results(module[function](*args))


def assert_close(actual, expected, tol=1e-5):
    assert actual.shape == expected.shape
    denom = max(np.linalg.norm(expected), 1e-30)
    assert np.linalg.norm(actual.astype(np.float64) - expected) / denom < tol


@pytest.fixture(params=DRIVERS)
def device(request):
    return request.param


# Entries of the shared table the CPU drivers leave out: shapes that exist to pick a GPU template
# (the CPU code generator's own shapes are tested in tests/codegen/llvm_cpu), and the forms these
# programs already cover on the CPU; running them here would only add CI time.
GPU_TEMPLATE_CASES = {
    "add_37x53", "add_f16_1000", "add_52x37",  # the SPIR-V elementwise / 4-vector grid-stride templates
    "fused_chain_12x53", "math_chain_37x53",   # (math on the CPU: tests/e2e/test_math_ops.py)
    "reduce_long_5x1001", "reduce_long_axis0_777x3",  # the SPIR-V long fold reductions
    "matmul_130x67x259", "matmul_517x45x530",  # the 64- and 128-wide SPIR-V matmul tiles
    "matmul_f16_67x129x45", "matmul_f16_128x48x192",  # f16 and cooperative-matrix matmul tiles
    "padded_windows",  # the guarded pad loads (pads in CPU windows: tests/e2e/test_conv_pool_numerics.py)
}


@pytest.mark.parametrize("name", sorted(set(CASES) - GPU_TEMPLATE_CASES))
def test_case_matches_numpy(device, name):
    """The programs of the shared table (tests/numerics_cases.py) that every device runs."""
    case = CASES[name]()
    inputs = case.inputs(np.random.default_rng())
    check(case, run(case.mlir, case.function, *inputs, device=device), inputs)


def test_both_local_drivers_agree_bit_for_bit():
    rng = np.random.default_rng()
    mlir = f"""
    func.func @f(%a: {t((37, 53))}, %b: {t((53, 29))}) -> {t((37, 29))} {{
      %zero = arith.constant 0.0 : f32
      %e = tensor.empty() : {t((37, 29))}
      %init = linalg.fill ins(%zero : f32) outs(%e : {t((37, 29))}) -> {t((37, 29))}
      %r = linalg.matmul ins(%a, %b : {t((37, 53))}, {t((53, 29))}) outs(%init : {t((37, 29))}) -> {t((37, 29))}
      %s = math.tanh %r : {t((37, 29))}
      return %s : {t((37, 29))}
    }}"""
    a, b = rand(rng, (37, 53)), rand(rng, (53, 29))
    results = [run(mlir, "f", a, b, device=d) for d in DRIVERS]
    np.testing.assert_array_equal(results[0], results[1])
    assert_close(results[0], np.tanh(a.astype(np.float64) @ b), tol=1e-5)


def test_zero_size_tensor(device):
    mlir = f"""
    func.func @f(%a: {t((0, 3))}, %b: {t((0, 3))}) -> {t((0, 3))} {{
      %r = arith.addf %a, %b : {t((0, 3))}
      return %r : {t((0, 3))}
    }}"""
    a = np.zeros((0, 3), np.float32)
    assert run(mlir, "f", a, a, device=device).shape == (0, 3)


def test_device_arrays_go_in_and_results_chain_without_host_copies(device):
    rng = np.random.default_rng()
    ty = t((37, 53))
    mlir = f"""
    func.func @f(%a: {ty}, %b: {ty}) -> {ty} {{
      %r = arith.mulf %a, %b : {ty}
      return %r : {ty}
    }}"""
    module = rt.load_module(compile_str(mlir), device=device)
    a, b = rand(rng, (37, 53)), rand(rng, (37, 53))
    da = rt.asdevicearray(module.device, a)
    assert da.shape == (37, 53) and da.dtype == np.float32
    once = module["f"](da, rt.asdevicearray(module.device, b))
    twice = module["f"](once, da)  # a result fed back in as an argument
    np.testing.assert_allclose(twice.to_host(), a * b * a, rtol=1e-6)
    with pytest.raises(rt.InvocationError, match="argument 1: expected 37x53xf32, got 37x53xf64"):
        module["f"](da, rt.asdevicearray(module.device, b.astype(np.float64)))
