"""--pyree-llvmcpu-variants: what a module's llvm-cpu executable carries code for. By default the
baseline, AVX2 and AVX-512 x86-64 CPUs (schema 1.7), the most portable as the executable's own
table; one CPU where a target CPU or features are named, or with ``none``; refused mixes."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pyree.runtime as rt
import pytest
from pyree.compiler import CompileError, compile_str

ODD = """func.func @add(%a: tensor<5x13xf32>, %b: tensor<5x13xf32>) -> tensor<5x13xf32> {
  %0 = arith.addf %a, %b : tensor<5x13xf32>
  %1 = math.exp %0 : tensor<5x13xf32>
  return %1 : tensor<5x13xf32>
}"""


def _tables(vmfb: bytes) -> list:
    cpu = rt.read_module(vmfb).tree.executables[0].cpu
    return [cpu, *(cpu.variants or [])]


def _cpus(*flags: str) -> list[str]:
    return [t.targetCpu for t in _tables(compile_str(ODD, target_backends=["llvm-cpu"],
                                                     extra_args=list(flags)))]


def test_the_default_carries_baseline_and_avx2_code():
    assert _cpus() == ["x86-64", "x86-64-v3"]


def test_variants_carry_baseline_avx2_and_avx512_code():
    vmfb = compile_str(ODD, target_backends=["llvm-cpu"],
                       extra_args=["--pyree-llvmcpu-variants=generic,x86-64-v3,x86-64-v4"])
    module = rt.read_module(vmfb)
    assert (module.tree.schemaVersionMajor, module.tree.schemaVersionMinor) == (1, 7)
    baseline, v3, v4 = _tables(vmfb)
    assert [t.targetCpu for t in (baseline, v3, v4)] == ["x86-64", "x86-64-v3", "x86-64-v4"]
    assert baseline.cpuFeatures == []  # the executable's own table runs on any x86-64
    assert {"avx2", "fma"} <= set(v3.cpuFeatures) and "avx512f" not in v3.cpuFeatures
    assert set(v3.cpuFeatures) < set(v4.cpuFeatures) and "avx512f" in v4.cpuFeatures
    for table in (v3, v4):  # the same kernels, each in a library of its own
        assert [e.symbol for e in table.exports] == [e.symbol for e in baseline.exports]
        assert table.library.offset != baseline.library.offset


@pytest.mark.parametrize("flags, cpus", [
    (["--iree-llvmcpu-target-cpu=generic"], ["x86-64"]),
    (["--iree-llvmcpu-target-cpu=haswell"], ["haswell"]),
    (["--iree-llvmcpu-target-cpu-features=+avx2"], ["x86-64"]),
    (["--pyree-llvmcpu-variants=none"], ["x86-64"]),
    (["--pyree-llvmcpu-variants=x86-64-v4,generic"], ["x86-64", "x86-64-v4"]),  # portable first
    (["--pyree-llvmcpu-variants=sapphirerapids,x86-64-v3,generic"],
     ["x86-64", "x86-64-v3", "sapphirerapids"]),
])
def test_a_chosen_cpu_is_one_variant_and_a_list_is_sorted_most_portable_first(flags, cpus):
    assert _cpus(*flags) == cpus


def test_one_variant_writes_the_schema_it_always_did():
    module = rt.read_module(compile_str(ODD, target_backends=["llvm-cpu"],
                                        extra_args=["--iree-llvmcpu-target-cpu=generic"]))
    assert (module.tree.schemaVersionMajor, module.tree.schemaVersionMinor) == (1, 4)
    assert module.tree.executables[0].cpu.variants is None


def test_vmvx_is_the_baseline_alone():
    assert _cpus("--iree-hal-target-backends=vmvx") == ["x86-64"]
    with pytest.raises(CompileError, match="vmvx target cannot be combined with "
                                           "--pyree-llvmcpu-variants=x86-64-v3"):
        compile_str(ODD, target_backends=["vmvx"],
                    extra_args=["--pyree-llvmcpu-variants=x86-64-v3"])


@pytest.mark.parametrize("flags, message", [
    (["--pyree-llvmcpu-variants=generic,x86-64-v3", "--iree-llvmcpu-target-cpu=host"],
     "--pyree-llvmcpu-variants=generic,x86-64-v3 cannot be combined with "
     "--iree-llvmcpu-target-cpu=host"),
    (["--pyree-llvmcpu-variants=x86-64-v3", "--iree-llvmcpu-target-cpu-features=+avx2"],
     "cannot be combined with --iree-llvmcpu-target-cpu-features=+avx2"),
    (["--pyree-llvmcpu-variants=generic,x86-64"],
     "'x86-64' has the same CPU features as 'generic'"),
    (["--pyree-llvmcpu-variants=generic,pentium9"],
     "unknown CPU 'pentium9' in --pyree-llvmcpu-variants"),
])
def test_refused_variant_lists(flags, message):
    with pytest.raises(CompileError, match=re.escape(message)):
        compile_str(ODD, target_backends=["llvm-cpu"], extra_args=flags)


def test_the_cli_refuses_a_bad_list_in_one_line(tmp_path):
    source = tmp_path / "m.mlir"
    source.write_text(ODD)
    proc = subprocess.run([sys.executable, "-m", "pyree.compiler.tools.compile", str(source),
                           "-o", str(tmp_path / "m.vmfb"), "--pyree-llvmcpu-variants=znver9"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "unknown CPU 'znver9' in --pyree-llvmcpu-variants" in proc.stderr


def test_dumped_files_name_each_variants_code(tmp_path):
    vmfb = compile_str(ODD, target_backends=["llvm-cpu"],
                       extra_args=[f"--iree-hal-dump-executable-binaries-to={tmp_path}"])
    module = rt.read_module(vmfb)
    assert len(_tables(vmfb)) == 2
    for table, name in zip(_tables(vmfb), ["", "_x86-64-v3"]):
        dumped = Path(tmp_path, f"module_system_elf_x86_64{name}.so").read_bytes()
        assert dumped == bytes(module.bytes_of(table.library))
