"""Whole JAX and TOSA programs (tests/frontends/programs.py) compiled unchanged and run on
local-task, Vulkan and CUDA, against JAX's and PyTorch's own outputs. On the GPU host the
modules come from build_modules.py (PYREE_FRONTEND_MODULE_DIR); elsewhere they are compiled here."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from programs import check  # noqa: E402

NAMES = ("jax_mlp", "jax_cnn", "jax_while", "tosa_mlp", "tosa_small_cnn")
DRIVERS = {"local-task": "llvm-cpu", "vulkan": "vulkan-spirv", "cuda": "cuda"}


@pytest.fixture(scope="module")
def programs():
    folder = os.environ.get("PYREE_FRONTEND_MODULE_DIR")
    if folder:
        return {name: _from_folder(Path(folder), name) for name in NAMES}
    from tooling import require_module
    require_module("jax")
    require_module("torch_mlir")
    from programs import all_programs
    return {p.name: p for p in all_programs()}


def _from_folder(folder: Path, name: str):
    from programs import Program
    data = np.load(folder / f"{name}.npz")
    count = int(data["count"])
    return Program(name, "", [data[f"in{i}"] for i in range(count)],
                   [data[f"out{i}"] for i in range(int(data["outputs"]))],
                   float(data["rtol"]), float(data["atol"]))


def module_bytes(program, driver: str) -> bytes:
    folder = os.environ.get("PYREE_FRONTEND_MODULE_DIR")
    if folder:
        return (Path(folder) / f"{program.name}.{DRIVERS[driver]}.vmfb").read_bytes()
    from pyree.compiler import CompileOptions, compile_str
    return compile_str(program.mlir, CompileOptions(target_backends=[DRIVERS[driver]],
                                                    cuda_target="sm_90"), program.name)


@pytest.mark.parametrize("driver", [
    "local-task", pytest.param("vulkan", marks=pytest.mark.vulkan),
    pytest.param("cuda", marks=pytest.mark.cuda)])
@pytest.mark.parametrize("name", NAMES)
def test_program_matches_its_framework(programs, name, driver, request):
    if driver == "vulkan":
        request.getfixturevalue("vulkan_device")
    import pyree.runtime as rt
    program = programs[name]
    module = rt.load_module(module_bytes(program, driver), device=driver)
    check(program, module["main"](*program.inputs))
