"""Every tool answers --version, and every package has __version__, the one its distribution
was built with (pyproject reads it from the package: one source)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from importlib.metadata import version

import pytest

PACKAGES = {"pyree.compiler": "pyree-base-compiler", "pyree.runtime": "pyree-base-runtime",
            "pyree.hal.cuda": "pyree-hal-cuda", "pyree.hal.vulkan": "pyree-hal-vulkan",
            "pyree.hal.rocm": "pyree-hal-rocm", "pyree.serve": "pyree-serve"}
TOOLS = {"pyree.compiler.tools.compile": ("pyree-compile", "pyree.compiler"),
         "pyree.compiler.tools.import_onnx": ("pyree-import-onnx", "pyree.compiler"),
         "pyree.runtime.tools.run_module": ("pyree-run-module", "pyree.runtime"),
         "pyree.runtime.tools.benchmark_module": ("pyree-benchmark-module", "pyree.runtime"),
         "pyree.runtime.tools.check_module": ("pyree-check-module", "pyree.runtime"),
         "pyree.runtime.tools.dump_module": ("pyree-dump-module", "pyree.runtime")}


@pytest.mark.parametrize("module, distribution", PACKAGES.items())
def test_package_version_is_its_distributions(module, distribution):
    assert importlib.import_module(module).__version__ == version(distribution)


@pytest.mark.parametrize("tool", TOOLS)
def test_tool_prints_its_version(tool):
    name, package = TOOLS[tool]
    proc = subprocess.run([sys.executable, "-m", tool, "--version"], capture_output=True,
                          text=True)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    distribution = PACKAGES[package]
    assert proc.stdout == f"{name} {version(distribution)} ({distribution})\n"
