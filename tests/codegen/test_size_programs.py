"""Run-time sizes with comparisons and selects (``sizes.compare``/``select``, SizeExpr schema 1.6)
computed in kernel code as the runtime computes them: llvm-cpu's and the LLVM GPU targets'
size arithmetic against ``size_exprs.evaluate``; a backend without comparisons refuses such a
size by name instead of computing another operation (``size_program.run`` had popped a select's
two values as a division's: a wrong size, found when a kernel first computed one, on the branch
wip/split-k)."""

from __future__ import annotations

import ctypes

import pytest
from llvmlite import binding as llvm
from llvmlite import ir
from pyree.compiler import sizes
from pyree.compiler.codegen.common import size_program
from pyree.compiler.codegen.common.llvm_gpu.llvm_text import Function, Module
from pyree.compiler.codegen.common.llvm_gpu.size_values import SizeValues
from pyree.compiler.codegen.llvm_cpu.size_values import emit_size
from pyree.compiler.errors import CompileError
from pyree.compiler.kernel import size_code
from pyree.runtime.module.size_exprs import evaluate

P0, P1 = sizes.Size.symbol("p0"), sizes.Size.symbol("p1")
SIZES = [
    sizes.select(sizes.compare("le", P0, 256), 4, 1),
    sizes.select(sizes.compare("lt", P0, P1), P1 + 2 * P0, 7) * sizes.opaque("ceildiv", P0, 128),
    sizes.compare("eq", P0, 3) + 2 * sizes.compare("le", P1, P0),
    sizes.select(sizes.compare("le", P0, 256), sizes.select(sizes.compare("eq", P1, 1), P0, P1), P0 + P1),
]
VALUES = [(0, 0), (1, 1), (3, 1), (255, 300), (256, 2), (257, 1), (4096, 5000)]


def _runtime(value, p0: int, p1: int) -> int:
    return evaluate(size_code(value), [p0, p1])


@pytest.mark.parametrize("k", range(len(SIZES)))
def test_llvm_cpu_computes_comparisons_as_the_runtime(k):
    module = ir.Module(name="sizes")
    i64 = ir.IntType(64)
    fn = ir.Function(module, ir.FunctionType(i64, [i64, i64]), name="size")
    b = ir.IRBuilder(fn.append_basic_block())
    b.ret(emit_size(b, SIZES[k], list(fn.args)))
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = llvm.Target.from_default_triple().create_target_machine()
    parsed = llvm.parse_assembly(str(module))
    engine = llvm.create_mcjit_compiler(parsed, target)
    engine.finalize_object()
    call = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)(
        engine.get_function_address("size"))
    for p0, p1 in VALUES:
        assert call(p0, p1) == _runtime(SIZES[k], p0, p1), (SIZES[k], p0, p1)


class _Target:
    """The bits of a GPU target ``Function`` needs here."""


@pytest.mark.parametrize("k", range(len(SIZES)))
def test_llvm_gpu_kernels_compute_comparisons_as_the_runtime(k):
    """The LLVM GPU size text, run on the host: its entry block is the whole computation."""
    module = Module("", _Target())
    fn = Function(module)
    value = SizeValues(fn, 2)(SIZES[k])
    body = "\n".join(fn.entry_allocas + fn.lines)
    text = (f"define i64 @size(i64 %pc0, i64 %pc1) {{\nentry:\n{body}\n  ret i64 {value}\n}}\n")
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = llvm.Target.from_default_triple().create_target_machine()
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(text), target)
    engine.finalize_object()
    call = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)(
        engine.get_function_address("size"))
    for p0, p1 in VALUES:
        assert call(p0, p1) == _runtime(SIZES[k], p0, p1), (SIZES[k], p0, p1)


def test_a_backend_without_comparisons_refuses_the_size():
    with pytest.raises(CompileError, match="compares sizes"):
        size_program.run(SIZES[0], str, lambda k: f"%p{k}", lambda op, x, y: f"({op} {x} {y})")
