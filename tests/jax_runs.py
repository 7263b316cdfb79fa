"""A JAX program compiled by pyree for a driver and run beside JAX's own answer on the CPU: what
the JAX tests of several drivers share (Vulkan on lavapipe in CI, PYREE_VULKAN_TARGET naming a
GPU's target; cuda under its marker)."""

from __future__ import annotations

import os

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileOptions, compile_str

DEVICES = ["local-task", pytest.param("vulkan", marks=pytest.mark.vulkan),
           pytest.param("cuda", marks=pytest.mark.cuda)]
TARGETS = {"local-task": "llvm-cpu", "vulkan": "vulkan-spirv", "cuda": "cuda"}


def run_both(jax, device: str, f, *args, **options) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(pyree's results, JAX's) for ``f`` at ``args``; ``options``: more CompileOptions. Every
    argument stays one of the function's, used or not (``keep_unused``)."""
    text = jax.jit(f, keep_unused=True).lower(*args).as_text()
    options = CompileOptions(target_backends=[TARGETS[device]], cuda_target="sm_90",
                             vulkan_target=os.environ.get("PYREE_VULKAN_TARGET",
                                                          "cpu-lavapipe-linux"), **options)
    got = rt.load_module(compile_str(text, options), device=device)["main"](*args)
    want = jax.jit(f)(*args)
    return ([np.asarray(g) for g in (got if isinstance(got, tuple) else (got,))],
            [np.asarray(w) for w in (want if isinstance(want, (tuple, list)) else (want,))])
