"""bf16 contractions on AMX tiles (codegen/llvm_cpu/amx.py): the results against numpy at odd
shapes, layouts and epilogues, with inf and NaN; on emulated tiles on every CPU (amx_on_cpu.py),
on the instruction itself where the CPU has AMX (the GPU host's Sapphire Rapids: BENCHMARKS.md).
Also which kernels take the template, the module's default Sapphire Rapids variant, and the
runtime's request for the tile state."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pyree.runtime as rt
import pytest
from amx_on_cpu import EmulatedTiles
from pyree.compiler import compile_str
from pyree.compiler.codegen.llvm_cpu import amx
from pyree.runtime.vm import executables

BF16 = ml_dtypes.bfloat16
HAS_AMX = {"amx_tile", "amx_bf16"} <= executables.host_cpu_flags()
# the emulated tiles' host code for AMX's own base (AVX-512) where this CPU has it, else AVX2:
# the tile code is the same, and an AVX-512 module refuses to load on a CPU without it
AVX512 = {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"} <= executables.host_cpu_flags()
EMULATED = [f"--iree-llvmcpu-target-cpu=x86-64-v{4 if AVX512 else 3}",
            "--iree-llvmcpu-target-cpu-features=+amx-tile,+amx-bf16"]


def ty(shape, dtype: str) -> str:
    return f"tensor<{'x'.join(map(str, shape))}x{dtype}>"


def contraction(op: str, lhs, rhs, out, out_dtype: str = "f32", epilogue: bool = False) -> str:
    """``op`` of two bf16 operands into a zero-filled ``out``; with ``epilogue``, + bias, relu
    and a bf16 result (fused into the kernel's epilogue)."""
    acc = ty(out, "f32")
    body = f"""  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : {acc}
  %f = linalg.fill ins(%z : f32) outs(%e : {acc}) -> {acc}
  %r = {op} ins(%a, %b : {ty(lhs, 'bf16')}, {ty(rhs, 'bf16')}) outs(%f : {acc}) -> {acc}"""
    if not epilogue:
        return f"""func.func @main(%a: {ty(lhs, 'bf16')}, %b: {ty(rhs, 'bf16')}) -> {acc} {{
{body}
  return %r : {acc}
}}"""
    res, bias = ty(out, out_dtype), ty(out[-1:], "f32")
    n = len(out)
    ids = ", ".join(f"d{i}" for i in range(n))
    return f"""#id = affine_map<({ids}) -> ({ids})>
#row = affine_map<({ids}) -> (d{n - 1})>
func.func @main(%a: {ty(lhs, 'bf16')}, %b: {ty(rhs, 'bf16')}, %bias: {bias}) -> {res} {{
{body}
  %o = tensor.empty() : {res}
  %y = linalg.generic {{indexing_maps = [#id, #row, #id],
      iterator_types = [{", ".join(['"parallel"'] * n)}]}}
      ins(%r, %bias : {acc}, {bias}) outs(%o : {res}) {{
  ^bb0(%x: f32, %c: f32, %out: {out_dtype}):
    %s = arith.addf %x, %c : f32
    %zero = arith.constant 0.0 : f32
    %m = arith.maximumf %s, %zero : f32
    %t = arith.truncf %m : f32 to {out_dtype}
    linalg.yield %t : {out_dtype}
  }} -> {res}
  return %y : {res}
}}"""


# (op, lhs, rhs, out, einsum): odd sizes, a K past one chunk (amx.CHUNK = 1024) and its
# remainder, a tile grid with ragged edges on both sides, each operand layout; x's rows read in
# place (K a multiple of 32) in whole blocks of 32 rows and packed in the ragged last one.
CASES = [
    ("linalg.matmul", (16, 5), (5, 3), (16, 3), "mk,kn->mn"),
    ("linalg.matmul", (37, 100), (100, 45), (37, 45), "mk,kn->mn"),
    ("linalg.matmul", (130, 300), (300, 129), (130, 129), "mk,kn->mn"),
    ("linalg.matmul", (64, 64), (64, 96), (64, 96), "mk,kn->mn"),
    ("linalg.matmul", (100, 1056), (1056, 70), (100, 70), "mk,kn->mn"),
    ("linalg.matmul", (300, 1100), (1100, 40), (300, 40), "mk,kn->mn"),
    ("linalg.matmul_transpose_b", (45, 530), (77, 530), (45, 77), "mk,nk->mn"),
    ("linalg.matmul_transpose_a", (70, 33), (70, 19), (33, 19), "km,kn->mn"),
    ("linalg.batch_matmul", (3, 17, 40), (3, 40, 23), (3, 17, 23), "bmk,bkn->bmn"),
    ("linalg.batch_matmul_transpose_b", (2, 50, 64), (2, 33, 64), (2, 50, 33), "bmk,bnk->bmn"),
]


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(31)


def _inputs(lhs, rhs, rng, special: bool):
    a = rng.standard_normal(lhs).astype(BF16)
    b = rng.standard_normal(rhs).astype(BF16)
    if special:  # one inf and one NaN in a's first row, -0 in b
        a.reshape(-1, lhs[-1])[0, 0], a.reshape(-1, lhs[-1])[0, -1] = np.inf, np.nan
        b.reshape(-1)[1] = -0.0
    return a, b


def _want(spec, a, b):
    with np.errstate(invalid="ignore"):
        return np.einsum(spec, a.astype(np.float64), b.astype(np.float64))


def _run(vmfb: bytes, *args):
    module = rt.load_module(vmfb, device="local-sync")
    return np.asarray(module["main"](*args).to_host())


@pytest.fixture
def emulated(monkeypatch):
    """Compiles the AMX template on EmulatedTiles (counted), and lets the runtime load the
    x86-64-v4 + AMX code the test builds."""
    used = []

    def tiles(b):
        used.append(b)
        return EmulatedTiles(b)
    tiles.type = EmulatedTiles.type
    monkeypatch.setattr(amx, "Tiles", tiles)
    flags = executables.host_cpu_flags() | {"amx_tile", "amx_bf16"}
    monkeypatch.setattr(executables, "host_cpu_flags", lambda: flags)
    return used


@pytest.mark.parametrize("op, lhs, rhs, out, spec", CASES, ids=lambda v: v if isinstance(v, str) else None)
def test_products_on_emulated_tiles(emulated, rng, op, lhs, rhs, out, spec):
    vmfb = compile_str(contraction(op, lhs, rhs, out), target_backends=["llvm-cpu"], extra_args=EMULATED)
    assert emulated, "the AMX template did not take the kernel"
    a, b = _inputs(lhs, rhs, rng, special=op == "linalg.matmul")
    np.testing.assert_allclose(_run(vmfb, a, b), _want(spec, a, b), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("out_dtype", ["bf16", "f32"])
def test_bias_relu_epilogue_on_emulated_tiles(emulated, rng, out_dtype):
    lhs, rhs, out = (33, 70), (70, 150), (33, 150)
    src = contraction("linalg.matmul", lhs, rhs, out, out_dtype, epilogue=True)
    vmfb = compile_str(src, target_backends=["llvm-cpu"], extra_args=EMULATED)
    assert emulated
    a, b = _inputs(lhs, rhs, rng, special=False)
    bias = rng.standard_normal(out[-1:]).astype(np.float32)
    want = np.maximum(_want("mk,kn->mn", a, b) + bias, 0)
    got = _run(vmfb, a, b, bias).astype(np.float32)
    tol = 1e-2 if out_dtype == "bf16" else 1e-5
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    assert (got[want == 0] == 0).all() and not np.signbit(got).any()


@pytest.mark.skipif(not HAS_AMX, reason="needs a CPU with AMX-BF16 (run on the GPU host's Sapphire Rapids)")
@pytest.mark.parametrize("op, lhs, rhs, out, spec", CASES, ids=lambda v: v if isinstance(v, str) else None)
def test_products_on_amx(rng, op, lhs, rhs, out, spec):
    vmfb = compile_str(contraction(op, lhs, rhs, out), target_backends=["llvm-cpu"])
    a, b = _inputs(lhs, rhs, rng, special=op == "linalg.matmul")
    module = rt.load_module(vmfb, device="local-task")
    assert module._code.targetCpu == "sapphirerapids"  # the variant this host loads
    got = np.asarray(module["main"](a, b).to_host())
    np.testing.assert_allclose(got, _want(spec, a, b), rtol=1e-5, atol=1e-4)


def _cpus(src: str, *flags: str) -> list[str]:
    cpu = rt.read_module(compile_str(src, target_backends=["llvm-cpu"], extra_args=list(flags))
                         ).tree.executables[0].cpu
    return [t.targetCpu for t in [cpu, *(cpu.variants or [])]]


def test_a_bf16_matmul_adds_the_amx_variant():
    src = contraction("linalg.matmul", (37, 100), (100, 45), (37, 45))
    assert _cpus(src) == ["x86-64", "x86-64-v3", "sapphirerapids"]
    # named variants, one target CPU, or strict float order: no CPU is added
    assert _cpus(src, "--pyree-llvmcpu-variants=generic,x86-64-v3") == ["x86-64", "x86-64-v3"]
    assert _cpus(src, "--iree-llvmcpu-target-cpu=haswell") == ["haswell"]
    assert _cpus(src, "--iree-llvmcpu-reassociate-fp-reductions=false") == ["x86-64", "x86-64-v3"]


@pytest.mark.parametrize("lhs, rhs, dtype", [
    ((37, 100), (100, 45), "f32"),
    ((37, 100), (100, 45), "f16"),
    ((15, 100), (100, 45), "bf16"),   # fewer rows than one tile: the vector kernel
])
def test_other_contractions_do_not_take_the_amx_variant(lhs, rhs, dtype):
    src = contraction("linalg.matmul", lhs, rhs, (lhs[0], rhs[1])).replace("bf16", dtype)
    assert _cpus(src) == ["x86-64", "x86-64-v3"]


@pytest.mark.parametrize("dtype, amx_listed", [("bf16", True), ("f32", False)])
def test_amx_is_needed_only_by_code_that_uses_the_tiles(dtype, amx_listed):
    """A module for Sapphire Rapids lists AMX among the extensions it needs only where a kernel
    runs on the tiles, so other code for that CPU still loads where Linux withholds them."""
    src = contraction("linalg.matmul", (37, 100), (100, 45), (37, 45)).replace("bf16", dtype)
    vmfb = compile_str(src, target_backends=["llvm-cpu"], extra_args=["--iree-llvmcpu-target-cpu=sapphirerapids"])
    needed = set(rt.read_module(vmfb).tree.executables[0].cpu.cpuFeatures)
    assert {"avx512f", "avx512_bf16"} <= needed
    assert ({"amx_tile", "amx_bf16"} <= needed) == amx_listed
    assert any(f.startswith("amx") for f in needed) == amx_listed


def test_sapphirerapids_code_uses_the_tiles(tmp_path):
    src = contraction("linalg.matmul", (37, 100), (100, 45), (37, 45))
    compile_str(src, target_backends=["llvm-cpu"], extra_args=[
        "--iree-llvmcpu-target-cpu=sapphirerapids", f"--iree-hal-dump-executable-files-to={tmp_path}"])
    asm = next(tmp_path.glob("*.s")).read_text()
    for instruction in ("ldtilecfg", "tileloadd", "tdpbf16ps", "tilestored", "tilerelease"):
        assert instruction in asm, instruction


def test_the_runtime_leaves_out_amx_it_may_not_use():
    cpuinfo = "processor : 0\nflags : fpu avx512f amx_bf16 amx_tile amx_int8\n"
    assert executables.usable_flags(cpuinfo, lambda: True) == {"fpu", "avx512f", "amx_bf16", "amx_tile",
                                                                "amx_int8"}
    assert executables.usable_flags(cpuinfo, lambda: False) == {"fpu", "avx512f"}
    asked = []
    executables.usable_flags("flags : fpu avx2\n", lambda: asked.append(1))
    assert not asked  # a CPU without AMX: nothing to ask for
