"""The op tests of tests/e2e/ops (IREE's check format: linalg, StableHLO, TOSA, control flow,
sort/scan/scatter) on the GPU drivers, as tests/e2e/test_check_modules.py runs them on the CPU:
Vulkan (lavapipe in CI) and CUDA. On the GPU host the modules come from build_modules.py
(PYREE_FRONTEND_MODULE_DIR, as ops_<name>.<target>.vmfb); elsewhere they are compiled here."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

OPS = sorted((Path(__file__).resolve().parents[1] / "e2e" / "ops").glob("*.mlir"))
TARGETS = {"vulkan": "vulkan-spirv", "cuda": "cuda"}


def module_bytes(path: Path, driver: str) -> bytes:
    folder = os.environ.get("PYREE_FRONTEND_MODULE_DIR")
    if folder:
        return (Path(folder) / f"ops_{path.stem}.{TARGETS[driver]}.vmfb").read_bytes()
    from pyree.compiler import CompileOptions, compile_str
    return compile_str(path.read_text(), CompileOptions(target_backends=[TARGETS[driver]],
                                                        cuda_target="sm_90"), str(path))


@pytest.mark.parametrize("driver", [pytest.param("vulkan", marks=pytest.mark.vulkan),
                                    pytest.param("cuda", marks=pytest.mark.cuda)])
@pytest.mark.parametrize("path", OPS, ids=[p.stem for p in OPS])
def test_op_checks_pass_on_device(path, driver, request):
    if driver == "vulkan":
        request.getfixturevalue("vulkan_device")
    import pyree.runtime as rt
    module = rt.load_module(module_bytes(path, driver), device=driver)
    failures = {f: module[f].run_checks() for f in module.function_names}
    assert not any(failures.values()), {f: [x.message for x in v] for f, v in failures.items() if v}
