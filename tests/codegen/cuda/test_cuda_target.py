"""CPU-only: the cuda target's names (architectures, products, ``sm_XX``) resolve to one arch;
an unknown one is refused with the list of those accepted."""

from __future__ import annotations

import pytest
from tooling import require_module

require_module("xdsl")  # the compiler

from pyree.compiler import CompileError  # noqa: E402
from pyree.compiler.codegen.cuda import resolve_target  # noqa: E402


@pytest.mark.parametrize("name, arch", [
    ("hopper", "sm_90a"), ("h100", "sm_90a"), ("H100", "sm_90a"), ("h200", "sm_90a"),
    ("sm_90a", "sm_90a"), ("sm_90", "sm_90"),
    ("ampere", "sm_80"), ("a100", "sm_80"), ("rtx3090", "sm_86"), ("rtx4090", "sm_89"),
    ("ada", "sm_89"), ("volta", "sm_70"), ("pascal", "sm_60"), ("p100", "sm_60"),
    ("turing", "sm_75"), ("sm_60", "sm_60"),
])
def test_target_names_resolve(name, arch):
    assert resolve_target(name).arch == arch


def test_unknown_target_lists_the_accepted_names():
    with pytest.raises(CompileError) as e:
        resolve_target("sm_42")
    assert "sm_42" in str(e.value) and "sm_90" in str(e.value) and "hopper" in str(e.value)
    assert "rtx4090" in str(e.value) and "default sm_80" in str(e.value)
