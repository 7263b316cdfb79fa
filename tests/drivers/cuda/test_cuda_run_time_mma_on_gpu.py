"""On an NVIDIA GPU: products with run-time sizes (linear layers with run-time rows, attention's
batched products over a run-time sequence), on tensor cores with the tile chosen per dispatch
(codegen/cuda/run_time_mma.py; mma.sync for sm_80, wgmma for sm_90a), one module per case
called at every size of tests/run_time_mma_cases.py (0, 1, odd, the tiles' edges, large) with
NaN, inf and -0 rows, against float64; in direct and graph modes, the sizes changing between
calls (graph mode records each size's launches).

Modules come from PYREE_RUN_TIME_MMA_MODULE_DIR (``python3 tests/run_time_mma_cases.py DIR`` on the
CPU machine), or are compiled here when that is unset."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pyree.runtime as rt
import pytest
import run_time_mma_cases as cases

pytestmark = pytest.mark.cuda


@functools.cache
def module_bytes(name: str, arch: str) -> bytes:
    folder = os.environ.get("PYREE_RUN_TIME_MMA_MODULE_DIR")
    if folder:
        return (Path(folder) / cases.module_file(name, arch)).read_bytes()
    return cases.module(name, arch)


@pytest.mark.parametrize("mode", ["direct", "graph"])
@pytest.mark.parametrize("arch", cases.ARCHS)
@pytest.mark.parametrize("name", cases.NAMES)
def test_products_with_run_time_sizes_on_tensor_cores(name, arch, mode):
    module = rt.load_module(module_bytes(name, arch), device=f"cuda://0?command_buffer={mode}")
    fn = module[cases.function(name)]
    for rows in (*cases.ROWS, *reversed(cases.ROWS)):  # each size twice, the order changing
        args = cases.inputs(name, rows, rows)
        cases.check(name, fn(*args).to_host(), args)
