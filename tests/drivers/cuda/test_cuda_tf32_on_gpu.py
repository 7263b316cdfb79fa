"""On an NVIDIA GPU (sm_80+): f32 matmuls and convolutions compiled with
``--pyree-cuda-f32-matmul=tf32|3xtf32`` (tf32_cases.py: odd M, N and K, batches, [N, K] and
[K, N] weights, ResNet-like convolutions) against float64, relative to sum |a| |b|: tf32 within
1e-3 and visibly coarser than f32, 3xtf32 within 1e-5; NaN and +-inf land where IEEE puts them.
Modules from PYREE_CUDA_MODULE_DIR (build_tf32_modules.py, on a CPU machine) or compiled here."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tf32_cases import BOUND, CASES, MODES, SPECIALS, flags, module_name  # noqa: E402

pytestmark = pytest.mark.cuda


def module_bytes(name: str, mode: str) -> bytes:
    folder = os.environ.get("PYREE_CUDA_MODULE_DIR")
    if folder:
        return (Path(folder) / f"{module_name(name, mode)}.vmfb").read_bytes()
    from pyree.compiler import CompileOptions, compile_str
    return compile_str(CASES[name].mlir, CompileOptions(target_backends=["cuda"], cuda_target="sm_90a"),
                       extra_args=flags(mode))


def _run(name: str, mode: str, args: list[np.ndarray]) -> np.ndarray:
    import pyree.runtime as rt
    module = rt.load_module(module_bytes(name, mode), device="cuda")
    return module[module.function_names[0]](*args).to_host()


def _args(name: str, rng) -> list[np.ndarray]:
    return [rng.standard_normal(s).astype(np.float32) for s in CASES[name].shapes]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_tf32_case_matches_float64(name, mode):
    case, rng = CASES[name], np.random.default_rng()
    args = _args(name, rng)
    got = _run(name, mode, args)
    wide = [a.astype(np.float64) for a in args]
    want, scale = case.reference(*wide), case.scale(*[np.abs(a) for a in wide])
    assert got.shape == want.shape
    error = np.max(np.abs(got - want) / np.maximum(scale, np.finfo(np.float32).tiny))
    assert error <= BOUND[mode], (name, mode, error)
    if mode == "tf32" and name != "mm_1x1000x129":  # the matrix-vector product stays strict
        assert error > 1e-5, (name, error)      # TF32 really ran: f32 products would be ~1e-7


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", SPECIALS)
def test_nan_and_infinities_land_where_ieee_puts_them(name, mode):
    case, rng = CASES[name], np.random.default_rng()
    a, b = _args(name, rng)
    a[3, 5], a[7, 0], a[11, 9], a[12, 4] = np.inf, -np.inf, np.nan, -0.0
    b[2, 6], b[9, 20], b[100, 3] = np.inf, np.nan, -np.inf
    a[20] = np.float32(1 - 2 ** -12)  # TF32 rounds it up: 3xtf32's lo is negative
    got = _run(name, mode, [a, b])
    with np.errstate(invalid="ignore"):
        want = case.reference(a.astype(np.float64), b.astype(np.float64))
    scale = case.scale(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
    special = ~np.isfinite(want)
    assert np.isnan(want).any() and np.isinf(want).any()
    np.testing.assert_array_equal(got[special], want[special].astype(np.float32))
    assert np.max(np.abs(got[~special] - want[~special]) / scale[~special]) <= BOUND[mode]
