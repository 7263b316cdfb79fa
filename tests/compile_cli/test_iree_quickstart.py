"""IREE's Python quickstart (iree.dev, "Python bindings": "Compile a program" and "Run a compiled
program") with only the imports renamed: the same calls in the same order, each form of import
IREE users write, run in a fresh interpreter so that nothing a test imported before helps
(``ireec.tools`` without ``import pyree.compiler.tools``), and its result checked against numpy.
And the vmvx target those docs compile for: a module for the baseline CPU that local-sync and
local-task run, refused beside a CPU choice that would not run everywhere."""

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import compile_str
from pyree.compiler.errors import CompileError

ADD = Path(__file__).parent.parent / "data" / "add.mlir"
rng = np.random.default_rng()

# The quickstart's calls, in its order: compile for vmvx through ``ireec.tools``, register the
# module with a local-task SystemContext, call ``simple_mul`` of ``module @arithmetic``. The
# arguments are fresh random values (with IEEE specials) instead of the page's constants, read
# from files; the script saves the result for the test to compare.
QUICKSTART = '''
{compiler_import}
{runtime_import}
import numpy as np

INPUT_MLIR = """
module @arithmetic {{
  func.func @simple_mul(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {{
    %0 = arith.mulf %arg0, %arg1 : tensor<4xf32>
    return %0 : tensor<4xf32>
  }}
}}
"""
compiled_flatbuffer = ireec.tools.compile_str(INPUT_MLIR, target_backends=["vmvx"])

config = ireert.Config("local-task")
ctx = ireert.SystemContext(config=config)
vm_module = ireert.VmModule.copy_buffer(ctx.instance, compiled_flatbuffer)
ctx.add_vm_module(vm_module)

arg0 = np.array(np.load("{arg0}"), dtype=np.float32)
arg1 = np.array(np.load("{arg1}"), dtype=np.float32)
f = ctx.modules.arithmetic["simple_mul"]
results = f(arg0, arg1).to_host()
np.save("{out}", results)
'''

IMPORTS = {
    "from": ("from pyree import compiler as ireec", "from pyree import runtime as ireert"),
    "import-as": ("import pyree.compiler as ireec", "import pyree.runtime as ireert"),
}


@pytest.mark.parametrize("form", IMPORTS)
def test_quickstart_runs_with_renamed_imports(form, tmp_path):
    arg0 = rng.standard_normal(4).astype(np.float32)
    arg1 = rng.standard_normal(4).astype(np.float32)
    arg0[:2] = [np.inf, -0.0]
    arg1[1] = 3.0
    out = tmp_path / "result.npy"
    np.save(tmp_path / "arg0.npy", arg0)
    np.save(tmp_path / "arg1.npy", arg1)
    script = QUICKSTART.format(compiler_import=IMPORTS[form][0], runtime_import=IMPORTS[form][1],
                               arg0=tmp_path / "arg0.npy", arg1=tmp_path / "arg1.npy", out=out)
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    got = np.load(out)
    np.testing.assert_array_equal(got, (arg0.astype(np.float64) * arg1).astype(np.float32))
    assert np.signbit(got[1]) and got[0] == (np.inf if arg1[0] > 0 else -np.inf)


ODD = """func.func @add(%a: tensor<5x13xf32>, %b: tensor<5x13xf32>) -> tensor<5x13xf32> {
  %0 = arith.addf %a, %b : tensor<5x13xf32>
  return %0 : tensor<5x13xf32>
}"""


@pytest.mark.parametrize("device", ["local-sync", "local-task"])
def test_vmvx_is_a_baseline_cpu_module_both_cpu_drivers_run(device):
    vmfb = compile_str(ODD, target_backends=["vmvx"])
    (executable,) = rt.read_module(vmfb).tree.executables
    # generic: baseline x86-64, no ISA extension a deploy host could lack
    assert executable.cpu.targetCpu == "x86-64" and not executable.cpu.cpuFeatures
    a = rng.standard_normal((5, 13)).astype(np.float32)
    b = rng.standard_normal((5, 13)).astype(np.float32)
    a.flat[:4] = [np.nan, np.inf, -np.inf, -0.0]
    b.flat[:4] = [1.0, 2.0, 3.0, -0.0]
    got = rt.load_module(vmfb, device=device)["add"](a, b).to_host()
    np.testing.assert_array_equal(got, (a.astype(np.float64) + b).astype(np.float32))
    assert np.signbit(got.flat[3])


def test_vmvx_beside_llvm_cpu_is_one_executable():
    (executable,) = rt.read_module(compile_str(ODD, target_backends=["llvm-cpu", "vmvx"])
                                   ).tree.executables
    assert executable.cpu.targetCpu == "x86-64"


@pytest.mark.parametrize("flag", ["--iree-llvmcpu-target-cpu=host",
                                  "--iree-llvmcpu-target-cpu-features=+avx2"])
def test_vmvx_with_a_cpu_choice_is_refused_by_the_cli(flag, tmp_path):
    out = tmp_path / "m.vmfb"
    run = subprocess.run([sys.executable, "-m", "pyree.compiler.tools.compile", str(ADD), "-o",
                          str(out), "--iree-hal-target-backends=vmvx", flag,
                          "--no-pyree-progress"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and not out.exists()
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr
    assert f"the vmvx target cannot be combined with {flag}" in run.stderr


def test_vmvx_through_the_cli_runs_in_the_run_tool(tmp_path):
    out = tmp_path / "add.vmfb"
    compiled = subprocess.run([sys.executable, "-m", "pyree.compiler.tools.compile", str(ADD),
                               "-o", str(out), "--iree-hal-target-device=local",
                               "--iree-hal-local-target-device-backends=vmvx",
                               "--no-pyree-progress"], capture_output=True, text=True, timeout=120)
    assert compiled.returncode == 0, compiled.stderr
    a, b = rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    ran = subprocess.run([sys.executable, "-m", "pyree.runtime.tools.run_module",
                          "--device=local-sync", f"--module={out}", "--function=add",
                          f"--input=@{tmp_path / 'a.npy'}", f"--input=@{tmp_path / 'b.npy'}",
                          f"--output=@{tmp_path / 'sum.npy'}"], capture_output=True, text=True,
                         timeout=120)
    assert ran.returncode == 0, ran.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "sum.npy"),
                                  (a.astype(np.float64) + b).astype(np.float32))


def test_vmvx_is_listed_as_iree_lists_it():
    import pyree.compiler as ireec

    assert "vmvx" in ireec.query_available_targets()
    listing = subprocess.run([sys.executable, "-m", "pyree.compiler.tools.compile",
                              "--iree-hal-list-target-backends"], capture_output=True, text=True,
                             timeout=60)
    assert "  vmvx\n" in listing.stdout


def test_an_unknown_backend_still_names_the_known_ones():
    with pytest.raises(CompileError, match="unknown target backend 'vmvx2'; known backends: "
                                           "llvm-cpu, cuda, rocm, vulkan-spirv, vmvx"):
        compile_str(ODD, target_backends=["vmvx2"])
