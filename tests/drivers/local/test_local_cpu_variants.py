"""An llvm-cpu module's code variants on the local drivers (generic, x86-64-v3 and x86-64-v4, the
last opt-in): the runtime loads the best one
this host runs, PYREE_LLVMCPU_VARIANT forces any one by name (each variant the host runs gives
numpy's answers at odd shapes, with NaN, infinities and -0), a variant the host or the module
lacks is refused by name, and a damaged variant table is a load error."""

from __future__ import annotations

import copy

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import compile_str
from pyree.compiler.module_writer import ModuleBuilder
from pyree.runtime.vm.executables import VARIANT_VARIABLE, host_cpu_flags
from runtime.module_mutations import _pack, _unpack
from tools.tool_process import assert_clean_error, run_tool

M, K, N = 37, 53, 29
MLIR = f"""func.func @main(%a: tensor<{M}x{K}xf32>, %b: tensor<{K}x{N}xf32>,
                     %c: tensor<{M}x{K}xf32>)
    -> (tensor<{M}x{N}xf32>, tensor<{M}x{K}xf32>, tensor<{M}xf32>) {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{M}x{N}xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<{M}x{N}xf32>) -> tensor<{M}x{N}xf32>
  %p = linalg.matmul ins(%a, %b : tensor<{M}x{K}xf32>, tensor<{K}x{N}xf32>)
                     outs(%z : tensor<{M}x{N}xf32>) -> tensor<{M}x{N}xf32>
  %q = arith.mulf %a, %c : tensor<{M}x{K}xf32>
  %s = arith.maximumf %q, %c : tensor<{M}x{K}xf32>
  %r = tensor.empty() : tensor<{M}xf32>
  %r0 = linalg.fill ins(%zero : f32) outs(%r : tensor<{M}xf32>) -> tensor<{M}xf32>
  %t = linalg.reduce ins(%c : tensor<{M}x{K}xf32>) outs(%r0 : tensor<{M}xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {{
      %v = arith.addf %in, %acc : f32
      linalg.yield %v : f32
    }}
  return %p, %s, %t : tensor<{M}x{N}xf32>, tensor<{M}x{K}xf32>, tensor<{M}xf32>
}}"""

# The variants as the module names them (generic is LLVM's x86-64).
VARIANTS = ("x86-64", "x86-64-v3", "x86-64-v4")
WITH_V4 = ["--pyree-llvmcpu-variants=generic,x86-64-v3,x86-64-v4"]


@pytest.fixture(scope="module")
def vmfb() -> bytes:
    return compile_str(MLIR, target_backends=["llvm-cpu"], extra_args=WITH_V4)


def _features(vmfb: bytes) -> dict[str, frozenset[str]]:
    cpu = rt.read_module(vmfb).tree.executables[0].cpu
    return {v.targetCpu: frozenset(v.cpuFeatures) for v in [cpu, *cpu.variants]}


def _runnable(vmfb: bytes) -> list[str]:
    return [name for name, needs in _features(vmfb).items() if needs <= host_cpu_flags()]


def _inputs(rng) -> list[np.ndarray]:
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    c = rng.standard_normal((M, K)).astype(np.float32)
    c.flat[:4] = [np.nan, np.inf, -np.inf, -0.0]  # (a's row 0 meets them in a * c)
    a.flat[3] = 0.0                               # 0 * -0 = -0, max(-0, -0) = -0
    return [a, b, c]


def _check(module, rng) -> None:
    a, b, c = _inputs(rng)
    product, elementwise, sums = (r.to_host() for r in module.main(a, b, c))
    np.testing.assert_allclose(product, a.astype(np.float64) @ b, rtol=2e-5, atol=2e-5)
    expected = np.maximum(a * c, c)  # f32 product, then max: what the kernel computes
    np.testing.assert_array_equal(elementwise, expected)
    assert np.signbit(elementwise.flat[3]) and np.isnan(elementwise.flat[0])
    expected_sums = c.astype(np.float64).sum(axis=1)
    np.testing.assert_allclose(sums[1:], expected_sums[1:], rtol=2e-5, atol=2e-5)
    assert np.isnan(sums[0])  # nan + inf + -inf + ...


def test_a_default_module_loads_the_best_variant_this_host_runs(vmfb, rng, monkeypatch):
    monkeypatch.delenv(VARIANT_VARIABLE, raising=False)
    features = _features(vmfb)
    assert tuple(features) == VARIANTS
    best = max(_runnable(vmfb), key=lambda name: len(features[name]))
    if {"avx2", "fma"} <= host_cpu_flags() and "avx512f" not in host_cpu_flags():
        assert best == "x86-64-v3"  # (this project's 2-core build VM: AVX2, no AVX-512)
    for device in ("local-sync", "local-task"):
        module = rt.load_module(vmfb, device=device)
        assert module.target_cpu == best
        _check(module, rng)


@pytest.mark.parametrize("name", ["generic", *VARIANTS])
def test_each_variant_forced_by_name_gives_numpys_answers(vmfb, rng, monkeypatch, name):
    monkeypatch.setenv(VARIANT_VARIABLE, name)
    cpu = "x86-64" if name == "generic" else name
    if cpu not in _runnable(vmfb):
        with pytest.raises(rt.ModuleError, match=rf"{VARIANT_VARIABLE}={name}: executable "
                                                 r"'llvm_cpu' of module '\w+' needs CPU features "
                                                 r"this host lacks: .*avx512f.*unset "
                                                 rf"{VARIANT_VARIABLE}"):
            rt.load_module(vmfb, device="local-task")
        return
    module = rt.load_module(vmfb, device="local-task")
    assert module.target_cpu == cpu
    _check(module, rng)


def test_a_variant_the_host_lacks_is_passed_over_and_refused_when_forced(vmfb, monkeypatch):
    """x86-64-v4's code made to need an extension no CPU has: the loader takes the best other
    variant, and forcing it is refused naming what is missing (on any host, AVX-512 or not)."""
    def impossible(cpu):
        cpu.variants[1].cpuFeatures = [*cpu.variants[1].cpuFeatures, "pyree_imaginary"]

    module = _damaged(vmfb, impossible)
    monkeypatch.delenv(VARIANT_VARIABLE, raising=False)
    assert rt.load_module(module, device="local-sync").target_cpu in ("x86-64", "x86-64-v3")
    monkeypatch.setenv(VARIANT_VARIABLE, "x86-64-v4")
    with pytest.raises(rt.ModuleError, match=r"needs CPU features this host lacks: .*"
                                             r"pyree_imaginary \(compiled for target CPU "
                                             r"'x86-64-v4'\)"):
        rt.load_module(module, device="local-sync")


def test_a_variant_the_module_lacks_is_refused_by_name(vmfb, monkeypatch, tmp_path):
    monkeypatch.setenv(VARIANT_VARIABLE, "znver4")
    with pytest.raises(rt.ModuleError, match=r"PYREE_LLVMCPU_VARIANT=znver4: executable "
                                             r"'llvm_cpu' of module '\w+' has no code for that "
                                             r"CPU; its variants: x86-64, x86-64-v3, x86-64-v4"):
        rt.load_module(vmfb, device="local-task")
    path = tmp_path / "m.vmfb"
    path.write_bytes(vmfb)
    proc = run_tool("run_module", f"--module={path}", "--function=main",
                    f"--input={M}x{K}xf32=1", f"--input={K}x{N}xf32=1", f"--input={M}x{K}xf32=1")
    assert_clean_error(proc, 1, "has no code for that CPU; its variants: x86-64, x86-64-v3")


def test_pyree_dump_module_lists_the_variants_and_the_one_this_host_loads(vmfb, tmp_path,
                                                                          monkeypatch):
    monkeypatch.delenv(VARIANT_VARIABLE, raising=False)
    path = tmp_path / "m.vmfb"
    path.write_bytes(vmfb)
    proc = run_tool("dump_module", str(path))
    assert proc.returncode == 0, proc.stderr
    assert "schema version: 1.7" in proc.stdout
    assert "target: elf-x86_64, cpu x86-64, features: none" in proc.stdout
    assert "variant: cpu x86-64-v3, features: abm, avx, avx2, bmi1, bmi2" in proc.stdout
    assert "variant: cpu x86-64-v4, features: abm, avx, avx2, avx512bw" in proc.stdout
    best = rt.load_module(vmfb, device="local-sync").target_cpu
    assert f"this host loads: {best}\n" in proc.stdout


def _damaged(vmfb: bytes, edit) -> bytes:
    tree, segment = _unpack(vmfb)
    edit(tree.executables[0].cpu)
    return _pack(tree, segment)


def _cut_library(cpu):
    cpu.variants[0].library.length -= 4096


def _drop_export(cpu):
    cpu.variants[1].exports.pop()


def _widen_binding(cpu):
    cpu.variants[0].exports[0].bindings[0].minLength += 4


def _halve_workgroups(cpu):
    export = cpu.variants[1].exports[0]
    export.workgroupCount = max(export.workgroupCount // 2, 0)


def _nest(cpu):
    cpu.variants[0].variants = [cpu.variants[1]]


def _rename_symbol(cpu):
    cpu.variants[0].exports[0].symbol = "abort"


@pytest.mark.parametrize("edit, message", [
    (_cut_library, r"variant 0 \('x86-64-v3'\) library: .*cut short"),
    (_drop_export, r"variant 1 \('x86-64-v4'\): has 2 exports but the executable has 3"),
    (_widen_binding, r"variant 0 \('x86-64-v3'\) export 0 .*declares .* but its kernel was "
                     r"compiled for"),
    (_halve_workgroups, r"variant 1 \('x86-64-v4'\) export 0 .*declares \d+ workgroups .* but "
                        r"its kernel was compiled for"),
    (_nest, r"variant 0 \('x86-64-v3'\): has variants of its own"),
    (_rename_symbol, r"variant 0 \('x86-64-v3'\) library: export 0 names 'abort', which is not"),
])
def test_a_damaged_variant_table_is_a_load_error(vmfb, edit, message, tmp_path):
    damaged = _damaged(vmfb, edit)
    with pytest.raises(rt.ModuleError, match=r"module file is invalid: executable 0 "
                                             rf"\('llvm_cpu'\) {message}"):
        rt.load_module(damaged, device="local-task")
    path = tmp_path / "damaged.vmfb"
    path.write_bytes(damaged)
    assert_clean_error(run_tool("run_module", f"--module={path}", "--function=main"), 1,
                       "module file is invalid")


def test_a_variant_with_other_bindings_than_the_executables_is_refused(vmfb):
    """A variant whose library and table agree, but for other shapes (another module's code):
    the host program is one for every variant, so each must declare the executable's bindings."""
    other = compile_str(MLIR.replace(f"{M}x", "41x").replace(f"<{M}xf32>", "<41xf32>"),
                        target_backends=["llvm-cpu"], extra_args=["--pyree-llvmcpu-variants=x86-64-v3"])
    theirs, their_segment = _unpack(other)
    variant = theirs.executables[0].cpu
    library = their_segment[variant.library.offset:variant.library.offset + variant.library.length]
    tree, segment = _unpack(vmfb)
    builder = ModuleBuilder("", "")
    builder.module, builder._data = tree, bytearray(segment)
    variant.library = builder.add_data(library)
    tree.executables[0].cpu.variants[0] = variant
    with pytest.raises(rt.ModuleError, match=r"variant 0 \('x86-64-v3'\) export \d: declares "
                                             r"bindings \(access, bytes, SizeExpr, alignment\) .* but the "
                                             r"executable's export \d declares"):
        rt.read_module(builder.finish())


def test_variants_nested_deeper_than_the_bounds_walk_allows_are_refused_before_unpacking(vmfb):
    """Variants of variants could nest as deep as the file allows, past Python's recursion
    limit in the unpack: the bounds walk stops them first."""
    def nest(cpu):
        table = cpu.variants[0]
        for _ in range(40):
            inner = copy.copy(cpu.variants[1])
            table.variants, table = [inner], inner
        table.variants = None

    with pytest.raises(rt.ModuleError, match=r"module file is malformed: tables nested more "
                                             r"than 16 deep"):
        rt.read_module(_damaged(vmfb, nest))
