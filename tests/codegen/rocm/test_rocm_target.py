"""CPU-only: the rocm target's names (chips with their features, products) resolve to one chip and
wave size, every accepted chip links, features reach the code object; an unknown chip is refused
with the list, through the API and the real CLI (one paragraph, no traceback)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from codegen.cuda import kernel_zoo as zoo
from hsaco_reader import check_hsaco, check_module, lld, read_hsaco  # noqa: F401
from tooling import require_module

require_module("xdsl")  # the compiler

from pyree.compiler import CompileError  # noqa: E402
from pyree.compiler.codegen.rocm import generate_hsaco, resolve_target  # noqa: E402
from pyree.compiler.codegen.rocm.targets import CHIPS, PRODUCTS  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "data"


# ---- target names --------------------------------------------------------------------------------
@pytest.mark.parametrize("name, arch, wave", [
    ("gfx908", "gfx908", 64), ("MI300X", "gfx942", 64), ("mi250", "gfx90a", 64),
    ("gfx90a:xnack+", "gfx90a:xnack+", 64), ("gfx942:sramecc+:xnack-", "gfx942:sramecc+:xnack-", 64),
    ("rx7900xtx", "gfx1100", 32), ("gfx1201", "gfx1201", 32), ("mi355x", "gfx950", 64),
])
def test_target_names_resolve(name, arch, wave):
    target = resolve_target(name)
    assert target.arch == arch and target.wave_size == wave


@pytest.mark.parametrize("chip", sorted(CHIPS))
def test_every_accepted_chip_links(chip):
    kernels = [zoo.row_sum()]
    hsaco, launches = generate_hsaco(kernels, resolve_target(chip))
    check_hsaco(hsaco, chip, launches, kernels)


def test_features_reach_the_code_object():
    target = resolve_target("gfx90a:xnack+:sramecc-")
    elf = read_hsaco(generate_hsaco([zoo.add()], target)[0])
    assert elf["flags"] & 0x300 == 0x300 and elf["flags"] & 0xC00 == 0x800  # xnack on, sramecc off
    assert "gfx90a:sramecc-:xnack+" in elf["metadata"]["amdhsa.target"]


@pytest.mark.parametrize("name", ["gfx803", "gfx1150", "mi400", "gfx908:wave32+",
                                  "gfx1100:xnack+", "sm_80"])
def test_unknown_chips_are_refused_with_the_list(name):
    with pytest.raises(CompileError) as e:
        resolve_target(name)
    assert name in str(e.value) and "gfx942" in str(e.value) and "mi300x" in str(e.value)


def test_products_name_known_chips():
    assert set(PRODUCTS.values()) <= set(CHIPS)


# ---- the real CLI --------------------------------------------------------------------------------
def _cli(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "pyree.compiler.tools.compile", *args, "-o",
                           "-"], capture_output=True, input=stdin)


@pytest.mark.parametrize("flag", ["--pyree-rocm-target-chip", "--iree-rocm-target-chip",
                                  "--iree-rocm-target", "--iree-hip-target"])
def test_cli_unknown_chip_fails_without_a_traceback(flag):
    proc = _cli(str(DATA / "add.mlir"), "--iree-hal-target-backends=rocm", f"{flag}=gfx803")
    err = proc.stderr.decode()
    assert proc.returncode != 0 and "Traceback" not in err
    assert "gfx803" in err and "gfx942" in err


@pytest.mark.parametrize("backend", ["rocm", "hip"])
def test_cli_compiles_for_rocm(backend):
    proc = _cli(str(DATA / "add.mlir"), f"--iree-hal-target-backends={backend}",
                "--iree-hip-target=mi300x")
    assert proc.returncode == 0, proc.stderr.decode()
    assert check_module(proc.stdout, "gfx942") == 1


def test_cli_non_lowerable_op_fails_by_name():
    src = ("func.func @f(%x: tensor<4xf64>) -> tensor<4xf64> {\n"
           "  %y = math.exp %x : tensor<4xf64>\n  return %y : tensor<4xf64>\n}\n")
    proc = _cli("-", "--iree-hal-target-backends=rocm", stdin=src.encode())
    err = proc.stderr.decode()
    assert proc.returncode != 0 and "Traceback" not in err
    assert "'exp' on f64" in err and "rocm" in err
