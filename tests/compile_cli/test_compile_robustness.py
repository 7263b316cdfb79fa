"""Inputs at the edges: very long op chains, deep expressions, huge types, giant splats and
malformed ops. Each either compiles (and computes what numpy computes) or is refused with a
CompileError naming the problem at its ``file:line:col``; never a traceback or an exhausted
machine."""

from __future__ import annotations

import math
import subprocess
import sys
import tracemalloc

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileError, compile_str


def _run(text: str, *args: np.ndarray, function: str = "f") -> list[np.ndarray]:
    module = rt.load_module(compile_str(text, target_backends=["llvm-cpu"]), device="local-task")
    out = module[function](*args)
    return [r.to_host() for r in (out if isinstance(out, (list, tuple)) else [out])]


def _error(text: str, **kwargs) -> CompileError:
    with pytest.raises(CompileError) as info:
        compile_str(text, source_name="edge.mlir", **({"target_backends": ["llvm-cpu"]} | kwargs))
    return info.value


def _chain(n: int, shape: str = "37") -> str:
    """v = (v * 0.75) + a, or - a, n times: values stay bounded, every step rounds."""
    t = f"tensor<{shape}xf32>"
    lines = [f"func.func @f(%a: {t}, %s: {t}) -> {t} {{", "  %v0 = arith.addf %a, %a : " + t]
    for i in range(1, n):
        op = "arith.mulf" if i % 2 else ("arith.addf" if i % 4 == 2 else "arith.subf")
        rhs = "%s" if op == "arith.mulf" else "%a"
        lines.append(f"  %v{i} = {op} %v{i - 1}, {rhs} : {t}")
    return "\n".join(lines + [f"  return %v{n - 1} : {t}", "}"])


def test_a_chain_of_600_elementwise_ops_compiles_and_computes():
    """Fusing the whole chain once made one expression 600 levels deep (RecursionError while
    forming regions); fusion now stops at ``kernel.MAX_DEPTH`` levels per kernel."""
    rng = np.random.default_rng()
    a = rng.standard_normal(37).astype(np.float32)
    s = np.full(37, 0.75, np.float32)
    want = a + a
    for i in range(1, 600):
        want = want * s if i % 2 else (want + a if i % 4 == 2 else want - a)
    (got,) = _run(_chain(600), a, s)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["math.sin", "math.erf"])
def test_a_deep_math_chain_compiles_for_every_target(op):
    """The GPU targets expand each of these into ~40 levels of arithmetic: 32 of them fused
    are 1,300 levels, which lowering by recursion took past Python's limit. (An odd
    innermost dim keeps the kernels scalar, and their code small.)"""
    t = "tensor<7x5xf32>"
    body = [f"  %v{i} = {op} {'%a' if i == 0 else f'%v{i - 1}'} : {t}" for i in range(32)]
    text = "\n".join([f"func.func @f(%a: {t}) -> {t} {{", *body, f"  return %v31 : {t}", "}"])
    compile_str(text, target_backends=["cuda", "vulkan-spirv"])
    x = np.random.default_rng().uniform(-2, 2, (7, 5)).astype(np.float32)
    fn = {"math.sin": np.sin, "math.erf": np.vectorize(math.erf)}[op]
    want = x.astype(np.float64)
    for _ in range(32):
        want = fn(want)
    (got,) = _run(text, x)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)


def _deep_body(n: int) -> str:
    body = [f"      %b{i} = arith.mulf {'%x' if i == 0 else f'%b{i - 1}'}, %k : f32"
            for i in range(n)]
    return f"""#m = affine_map<(d0) -> (d0)>
func.func @f(%a: tensor<13xf32>) -> tensor<13xf32> {{
  %e = tensor.empty() : tensor<13xf32>
  %k = arith.constant 0.999 : f32
  %r = linalg.generic {{indexing_maps = [#m, #m], iterator_types = ["parallel"]}}
      ins(%a : tensor<13xf32>) outs(%e : tensor<13xf32>) {{
    ^bb0(%x: f32, %o: f32):
{chr(10).join(body)}
      linalg.yield %b{n - 1} : f32
  }} -> tensor<13xf32>
  return %r : tensor<13xf32>
}}"""


def test_a_linalg_body_120_ops_deep_compiles_and_computes():
    text = _deep_body(120)
    compile_str(text, target_backends=["cuda", "vulkan-spirv"])
    a = np.random.default_rng().standard_normal(13).astype(np.float32)
    want = a.copy()
    for _ in range(120):
        want = want * np.float32(0.999)
    (got,) = _run(text, a)
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_a_linalg_body_deeper_than_an_op_may_be_is_refused_at_the_op():
    err = _error(_deep_body(1000))
    assert err.location == "edge.mlir:5:3", str(err)
    assert "through 1001 levels" in err.message and "at most 128 in one op" in err.message


HUGE = "tensor<99999999999x99999999999xf32>"


@pytest.mark.parametrize("what, text, line", [
    ("argument", f"func.func @f(%a: {HUGE}) -> {HUGE} {{\n  return %a : {HUGE}\n}}", 1),
    ("tensor.empty", f"func.func @f() -> {HUGE} {{\n  %e = tensor.empty() : {HUGE}\n"
     f"  return %e : {HUGE}\n}}", 2),
    ("splat", f"func.func @f(%x: f32) -> {HUGE} {{\n  %c = tensor.splat %x : {HUGE}\n"
     f"  return %c : {HUGE}\n}}", 2),
    ("fill", f"func.func @f() -> {HUGE} {{\n  %z = arith.constant 0.0 : f32\n"
     f"  %e = tensor.empty() : {HUGE}\n"
     f"  %c = linalg.fill ins(%z : f32) outs(%e : {HUGE}) -> {HUGE}\n  return %c : {HUGE}\n}}", 3),
    ("result", f"func.func @f(%a: tensor<4xf32>) -> {HUGE} {{\n"
     f"  %r = stablehlo.broadcast_in_dim %a, dims = [1] : (tensor<4xf32>) -> {HUGE}\n"
     f"  return %r : {HUGE}\n}}", 2),
    ("constant", f"func.func @f() -> {HUGE} {{\n  %c = arith.constant dense<1.0> : {HUGE}\n"
     f"  return %c : {HUGE}\n}}", 2),
])
def test_a_huge_type_is_refused_before_anything_is_allocated(what, text, line):
    tracemalloc.start()
    try:
        err = _error(text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert err.location.startswith(f"edge.mlir:{line}:"), (what, str(err))
    assert HUGE in err.message and "2^48" in err.message
    assert peak < 200e6


def test_a_huge_type_through_the_cli_is_one_paragraph_and_exit_1(tmp_path):
    path = tmp_path / "huge.mlir"
    path.write_text(f"func.func @f(%a: {HUGE}) -> {HUGE} {{\n  %r = arith.addf %a, %a : {HUGE}\n"
                    f"  return %r : {HUGE}\n}}\n")
    proc = subprocess.run([sys.executable, "-m", "pyree.compiler.tools.compile", str(path),
                           "-o", str(tmp_path / "m.vmfb"), "--no-pyree-progress"],
                          capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"{path}:1:") and HUGE in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_a_giant_splat_literal_is_never_materialized():
    """dense<1.5> of 10^9 floats took 8 GB and a minute before; it stays one element from the
    parser to the module (a fill), here as a function result and a kernel's immediate."""
    text = """func.func @f(%a: tensor<1000000000xf32>) -> (tensor<1000000000xf32>, tensor<1000000000xi32>) {
  %c = arith.constant dense<1.5> : tensor<1000000000xf32>
  %i = arith.constant dense<"0x07000000"> : tensor<1000000000xi32>
  %r = arith.addf %a, %c : tensor<1000000000xf32>
  return %r, %i : tensor<1000000000xf32>, tensor<1000000000xi32>
}"""
    tracemalloc.start()
    try:
        vmfb = compile_str(text, target_backends=["llvm-cpu"])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 200e6 and len(vmfb) < 1e6


def test_splat_literals_of_every_spelling_keep_their_value():
    """Large splats stay one stored element (``literals.compact_splat``), small ones are
    expanded: both read back as the same constant, bit for bit (-0.0, NaN payloads)."""
    n = 1 << 16
    text = f"""util.global private @g = dense<-3> : tensor<{n}xi16>
func.func @f() -> (tensor<{n}xf32>, tensor<{n}xi16>, tensor<{n}xi8>, tensor<3xf32>, tensor<{n}xi1>) {{
  %a = arith.constant dense<-0.0> : tensor<{n}xf32>
  %b = util.global.load @g : tensor<{n}xi16>
  %c = arith.constant dense<"0xF9"> : tensor<{n}xi8>
  %d = arith.constant dense<0x7FC00001> : tensor<3xf32>
  %e = arith.constant dense<true> : tensor<{n}xi1>
  return %a, %b, %c, %d, %e : tensor<{n}xf32>, tensor<{n}xi16>, tensor<{n}xi8>, tensor<3xf32>, tensor<{n}xi1>
}}"""
    a, b, c, d, e = _run(text)
    assert a.shape == (n,) and np.all(np.signbit(a)) and np.all(a == 0)
    assert np.all(b == -3) and np.all(c == -7) and np.all(e)
    assert np.all(d.view(np.uint32) == 0x7FC00001)


def test_a_stablehlo_op_missing_an_operand_is_named():
    err = _error("""func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %r = "stablehlo.add"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}""")
    assert err.location == "edge.mlir:2:3"
    assert "'stablehlo.add'" in err.message and "takes 2 operands, not 1" in err.message


@pytest.mark.parametrize("op, what", [
    ('%r = stablehlo.iota dim = 5 : tensor<2x4xi32>', "loop 5 of 2"),
    ('%r = "stablehlo.reduce_window"(%x, %z) ({\n  ^bb0(%p: tensor<i32>, %q: tensor<i32>):\n'
     '    %s = stablehlo.add %p, %q : tensor<i32>\n    stablehlo.return %s : tensor<i32>\n'
     '  }) {window_dimensions = array<i64: 2, 1>, window_strides = array<i64: 1, 1>} : '
     '(tensor<2x4xi32>, tensor<i32>) -> tensor<2x4xi32>', "reads elements [0, 2] of a dim of size 2"),
])
def test_attributes_that_contradict_the_types_are_refused_at_the_op(op, what):
    err = _error(f"""func.func @f(%x: tensor<2x4xi32>) -> tensor<2x4xi32> {{
  %z = stablehlo.constant dense<0> : tensor<i32>
  {op}
  return %r : tensor<2x4xi32>
}}""")
    assert err.location == "edge.mlir:3:3" and what in err.message, str(err)


def test_a_concat_of_too_many_parts_is_refused_by_name():
    parts = 102
    args = ", ".join(f"%a{i}: tensor<2xf32>" for i in range(parts))
    text = (f"func.func @f({args}) -> tensor<{2 * parts}xf32> {{\n"
            f"  %r = tensor.concat dim(0) {', '.join(f'%a{i}' for i in range(parts))} : "
            f"({', '.join(['tensor<2xf32>'] * parts)}) -> tensor<{2 * parts}xf32>\n"
            f"  return %r : tensor<{2 * parts}xf32>\n}}")
    err = _error(text)
    assert err.location == "edge.mlir:2:3" and "'tensor.concat' nests more than 100 selects" \
        in err.message
