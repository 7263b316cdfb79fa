"""Programs compiled by pyree for a driver, and JAX programs run beside JAX's own answer on the
CPU: what the tests of several drivers share (Vulkan on lavapipe in CI, PYREE_VULKAN_TARGET
naming a GPU's target; cuda under its marker)."""

from __future__ import annotations

import functools
import os

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileOptions, compile_str

DEVICES = ["local-task", pytest.param("vulkan", marks=pytest.mark.vulkan),
           pytest.param("cuda", marks=pytest.mark.cuda)]
TARGETS = {"local-task": "llvm-cpu", "vulkan": "vulkan-spirv", "cuda": "cuda"}


def options_for(device: str, **options) -> CompileOptions:
    """The CompileOptions of ``device``'s target (``options``: more of them)."""
    return CompileOptions(target_backends=[TARGETS[device]], cuda_target="sm_90",
                          vulkan_target=os.environ.get("PYREE_VULKAN_TARGET",
                                                       "cpu-lavapipe-linux"), **options)


@functools.cache
def module_for(text: str, device: str):
    """MLIR ``text`` compiled for ``device`` and loaded there, once per test process."""
    return rt.load_module(compile_str(text, options_for(device)), device=device)


def run_both(jax, device: str, f, *args, **options) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(pyree's results, JAX's) for ``f`` at ``args``; ``options``: more CompileOptions. Every
    argument stays one of the function's, used or not (``keep_unused``)."""
    text = jax.jit(f, keep_unused=True).lower(*args).as_text()
    got = rt.load_module(compile_str(text, options_for(device, **options)),
                         device=device)["main"](*args)
    want = jax.jit(f)(*args)
    return ([np.asarray(g) for g in (got if isinstance(got, tuple) else (got,))],
            [np.asarray(w) for w in (want if isinstance(want, (tuple, list)) else (want,))])
