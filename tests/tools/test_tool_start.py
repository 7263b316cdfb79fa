"""What a tool's start leaves out (issue 13: pyree-run-module on local-task within 1.2x of IREE's
start): no argparse (nor gettext and locale), no `re`, no scan of every distribution for the built-in
drivers, IREE's system API not imported, the FlatBuffer readers as one module -- checked through
the real CLI under ``python -X importtime``. The built-in drivers' names stay the runtime's."""

import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
from numpy_reference import array_text
from pyree.runtime.hal import registry
from tool_process import run_tool

ROOT = Path(__file__).resolve().parents[2]
MLIR = """
func.func @add(%a: tensor<5xf32>, %b: tensor<5xf32>) -> tensor<5xf32> {
  %s = arith.addf %a, %b : tensor<5xf32>
  return %s : tensor<5xf32>
}
"""
A = np.array([1, -2.5, np.nan, np.inf, -0.0], np.float32)
B = np.array([0.5, 2.5, 1, -np.inf, -0.0], np.float32)
INPUTS = [f"--input={array_text(A, 'f32')}", f"--input={array_text(B, 'f32')}"]
with np.errstate(invalid="ignore"):
    RESULT = array_text(A + B, "f32")


@pytest.fixture(scope="module")
def add_module(tmp_path_factory) -> str:
    from pyree.compiler import compile_str

    path = str(tmp_path_factory.mktemp("start") / "add.vmfb")
    compile_str(MLIR, output_file=path)
    return path


def test_built_in_drivers_are_the_runtimes_entry_points():
    pyproject = tomllib.loads((ROOT / "packages/base-runtime/pyproject.toml").read_text())
    assert registry.BUILT_IN == pyproject["project"]["entry-points"][registry.ENTRY_POINT_GROUP]
    scanned = {ep.name: ep.value for ep in registry._entry_points()}
    assert {name: scanned[name] for name in registry.BUILT_IN} == registry.BUILT_IN


def test_run_module_imports_only_what_it_uses(add_module):
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m",
                           "pyree.runtime.tools.run_module", "--device=local-task",
                           f"--module={add_module}", *INPUTS],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == f"EXEC @add\nresult[0]: hal.buffer_view\n{RESULT}\n"
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:") and "|" in line}
    assert "pyree.runtime.drivers.local_task" in imported and "pyree.runtime._fb" in imported
    unwanted = {"argparse", "gettext", "locale", "re", "importlib.metadata",
                "pyree.runtime.vm.system_api", "pyree.runtime.drivers.local_sync"}
    assert sorted(imported & unwanted) == []
    assert [m for m in imported if m.startswith("pyree.runtime._fb.")] == []


def test_another_distribution_cannot_take_a_built_in_name(add_module, tmp_path):
    """A distribution whose entry point claims 'local-task' is ignored: by name and in lists."""
    info = tmp_path / "pyree_impostor-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pyree-impostor\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        f"[{registry.ENTRY_POINT_GROUP}]\nlocal-task = pyree_no_such_module:driver\n")
    run = run_tool("run_module", "--device=local-task", f"--module={add_module}", *INPUTS,
                   python_path=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-1] == RESULT
    listing = run_tool("run_module", "--list_drivers", python_path=tmp_path)
    assert listing.returncode == 0, listing.stderr
    assert "local-task: available" in listing.stdout
