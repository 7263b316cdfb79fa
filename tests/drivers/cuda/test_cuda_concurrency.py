"""On an NVIDIA GPU: one loaded module called from 8 threads x 100 calls at once, in each cuda
command-buffer mode and on Vulkan, every result equal bit for bit to the single-threaded one for
the same input (tests/stress.py). The programs of tests/concurrency_cases.py, and real models
(ResNet-18, MobileNet v2, a GPT-2 block) whose weights are made here from the recipe
build_modules.py wrote (random_parameters.py). A race in the driver gave ResNet-18 on cuda's graph
mode another thread's answer for up to a quarter of the calls, with no error."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[2])]
from concurrency_cases import PROGRAMS, inputs  # noqa: E402
from random_parameters import regenerate  # noqa: E402
from stress import hammer  # noqa: E402

pytestmark = pytest.mark.cuda
DEVICES = ("cuda://0?command_buffer=direct", "cuda://0?command_buffer=stream",
           "cuda://0?command_buffer=graph", "vulkan")
MODELS = ("resnet18", "mobilenet_v2", "gpt2_block")
FOLDER = os.environ.get("PYREE_CUDA_MODULE_DIR")


def _device(uri: str) -> str:
    import pyree.runtime as rt
    if uri == "vulkan":
        info = next((d for d in rt.list_drivers() if d.name == "vulkan"), None)
        if info is None or not info.available:
            pytest.skip(f"no Vulkan device here: {info.reason if info else 'no vulkan driver'}")
    return uri


def _program_module(name: str) -> bytes:
    if FOLDER:
        return (Path(FOLDER) / f"concurrency_{name}.vmfb").read_bytes()
    from pyree.compiler import CompileOptions, compile_str
    return compile_str(PROGRAMS[name].mlir,
                       CompileOptions(target_backends=["cuda", "vulkan-spirv"], cuda_target="sm_90"))


@pytest.mark.parametrize("uri", DEVICES)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_programs_from_eight_threads(name, uri):
    import pyree.runtime as rt
    module = rt.load_module(_program_module(name), device=_device(uri))
    program = PROGRAMS[name]
    assert hammer(module, program.function, inputs(program, 8), threads=8, calls=100) == []


@pytest.fixture(scope="module")
def model_weights(tmp_path_factory):
    """model name -> its weight file, made from the recipe (None without a module folder)."""
    if not FOLDER:
        return {}
    out = tmp_path_factory.mktemp("weights")
    made = {}
    for name in MODELS:
        recipe = Path(FOLDER) / f"model_{name}.recipe.json"
        if recipe.exists():
            made[name] = out / f"{name}.safetensors"
            regenerate(json.loads(recipe.read_text()), made[name], seed=5)
    return made


@pytest.mark.parametrize("uri", DEVICES)
@pytest.mark.parametrize("name", MODELS)
def test_models_from_eight_threads(name, uri, model_weights):
    if name not in model_weights:
        pytest.skip("the models are built by tests/drivers/cuda/build_modules.py (PYREE_CUDA_MODULE_DIR)")
    import pyree.runtime as rt
    module = rt.load_module(Path(FOLDER) / f"model_{name}.vmfb", device=_device(uri),
                            parameters=[str(model_weights[name])])
    function = module.function_names[0]
    (argument,) = module[function].argument_types
    rng = np.random.default_rng(9)
    cases = [(rng.standard_normal(argument.shape).astype(argument.dtype),) for _ in range(8)]
    assert hammer(module, function, cases, threads=8, calls=100) == []
