"""--pyree-llvmcpu-target-cpu: host, generic and named CPUs; the ISA they record; vector code."""


import numpy as np
import pytest
from llvmcpu_harness import Compiled, host_flags, identity, random_array
from pyree.compiler.codegen.llvm_cpu import compile_executable
from pyree.compiler.codegen.llvm_cpu.lowering import lower_kernels
from pyree.compiler.codegen.llvm_cpu.object_file import optimize
from pyree.compiler.codegen.llvm_cpu.targets import resolve_target
from pyree.compiler.errors import CompileError
from pyree.compiler.kernel import Binary, Binding, Const, Kernel, Load, Result, Unary
from pyree.compiler.module_writer import ModuleBuilder
from pyree.compiler.options import CompileOptions

SHAPE = (37, 53)
IX = identity(2)


def relu_scale():
    x = Load(0, IX, "f32")
    return Kernel("relu_scale", SHAPE, 2, (Binding("f32", SHAPE, "read"), Binding("f32", SHAPE, "write")),
                  (Result(1, IX, Binary("max", Binary("mul", x, Const(3.0, "f32"), "f32"),
                                        Unary("neg", x, "f32"), "f32")),))


def assembly(cpu: str) -> str:
    target = resolve_target(cpu)
    module, _ = lower_kernels([relu_scale()], target)
    return target.machine.emit_assembly(optimize(str(module), target))


def test_generic_host_and_named_cpus_compile_and_run():
    rng = np.random.default_rng(40)
    x = random_array("f32", SHAPE, rng)
    for cpu in ("generic", "host", "haswell", "skylake-avx512", "znver4"):
        compiled = Compiled([relu_scale()], cpu)
        if compiled.unsupported:
            continue  # compiled for a CPU this machine is not; the runtime would refuse it
        out = np.zeros(SHAPE, np.float32)
        assert compiled.call(0, [x, out]) == 0
        np.testing.assert_array_equal(out, np.maximum(3 * x, -x))


def test_recorded_features():
    assert resolve_target("generic").cpu == "x86-64"
    assert resolve_target("generic").cpuinfo_flags == []
    haswell = set(resolve_target("haswell").cpuinfo_flags)
    assert {"avx", "avx2", "fma", "f16c"} <= haswell and not any(f.startswith("avx512") for f in haswell)
    assert {"avx512f", "avx512bw", "avx512vl"} <= set(resolve_target("skylake-avx512").cpuinfo_flags)
    host = set(resolve_target("host").cpuinfo_flags)
    if host_flags():
        assert host <= host_flags()


def test_unknown_cpu_is_a_compile_error():
    with pytest.raises(CompileError, match="unknown --pyree-llvmcpu-target-cpu 'pentium9'.*skylake-avx512"):
        compile_executable([relu_scale()], CompileOptions(llvmcpu_target_cpu="pentium9"),
                           ModuleBuilder("m", "t"))


def test_f32_elementwise_is_vectorized():
    assert "ymm" in assembly("haswell") and "zmm" not in assembly("haswell")
    avx512 = assembly("skylake-avx512")
    assert "ymm" in avx512 or "zmm" in avx512
    generic = assembly("generic")
    assert "xmm" in generic and "ymm" not in generic
