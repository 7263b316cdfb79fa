"""CPU-only: every model of tests/models (PyTorch, imported with pyree's torch importer) compiles for
the rocm target on a CDNA chip (gfx942, wave64) and an RDNA chip (gfx1100, wave32), and each code
object is checked structurally (hsaco_reader's ELF and metadata reader). Nothing runs: there is
no AMD GPU here; the same dispatch regions run, and are checked against PyTorch, on the other targets.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import pytest
import torch  # noqa: F401 - CI installs it: a missing torch fails there, never skips

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "models"))
import definitions  # noqa: E402
from hsaco_reader import check_module, lld  # noqa: E402, F401
from pyree.compiler import CompileOptions, compile_str, import_torch  # noqa: E402


@functools.cache
def imported(name: str) -> str:
    factory, _, _, function = definitions.MODELS[name]
    return import_torch(factory(), definitions.example_input(name), function_name=function)


# Each model for one of the two chip families (CDNA's wave64, RDNA's wave32), alternating, so
# both families see every kind of kernel without compiling every model twice in CI.
@pytest.mark.parametrize("name, chip", [(name, ("gfx942", "gfx1100")[k % 2])
                                        for k, name in enumerate(sorted(definitions.MODELS))])
def test_model_compiles_for_rocm(name, chip):
    vmfb = compile_str(imported(name), CompileOptions(target_backends=["rocm"], rocm_target=chip))
    assert check_module(vmfb, chip) >= 1
