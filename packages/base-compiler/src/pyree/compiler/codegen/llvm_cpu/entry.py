"""The exported kernel entry point: checks the dispatch state, then runs the body per workgroup.

``int32_t fn(const pyree_cpu_dispatch_state_t *, uint64_t wg_begin, uint64_t wg_end)``
(pyree/runtime/abi/cpu_kernel.h). Every binding count and length is checked before any binding
is touched, so a damaged host program gets a nonzero status instead of an out-of-bounds access.
The body is a separate function whose binding pointers are ``noalias``: that is what lets LLVM
vectorize loads and stores of different bindings freely.
"""

from __future__ import annotations

from llvmlite import ir
from pyree.compiler.codegen.llvm_cpu.loops import for_range, i64, umin
from pyree.compiler.kernel import Kernel

I32 = ir.IntType(32)
PTR = ir.PointerType()
# pyree_cpu_dispatch_state_t
STATE = ir.LiteralStructType([PTR, PTR, I32, I32, PTR])
STATUS_BAD_BINDINGS = 1
# The data symbol beside each kernel that records its export (pyree/runtime/hal/images/cpu_library.py)
RECORD_SUFFIX = ".pyree_export"
RECORD_VERSION = 1


def emit_kernel(module: ir.Module, symbol: str, kernel: Kernel, workgroup_count: int,
                emit_workgroup) -> None:
    """Defines ``symbol``; ``emit_workgroup(builder, binding_ptrs, wg)`` emits one workgroup."""
    n = len(kernel.bindings)
    body = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR] * n + [i64(0).type] * 2),
                       f"{symbol}.body")
    body.linkage = "internal"
    for arg in body.args[:n]:
        arg.add_attribute("noalias")
    b = ir.IRBuilder(body.append_basic_block("entry"))
    with for_range(b, body.args[n], body.args[n + 1], name="wg") as wg:
        emit_workgroup(b, list(body.args[:n]), wg)
    b.ret_void()

    fn = ir.Function(module, ir.FunctionType(I32, [PTR, i64(0).type, i64(0).type]), symbol)
    state, begin, end = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    bad = fn.append_basic_block("bad_bindings")
    field = lambda i, t: b.load(b.gep(state, [ir.Constant(I32, 0), ir.Constant(I32, i)],
                                      source_etype=STATE), typ=t)
    ok = b.icmp_unsigned(">=", field(2, I32), ir.Constant(I32, n))
    lengths_block = fn.append_basic_block("lengths")
    b.cbranch(ok, lengths_block, bad)
    b.position_at_end(lengths_block)
    lengths, bases = field(1, PTR), field(0, PTR)
    ok = ir.Constant(ir.IntType(1), 1)
    for i, binding in enumerate(kernel.bindings):
        length = b.load(b.gep(lengths, [i64(i)], source_etype=i64(0).type), typ=i64(0).type)
        ok = b.and_(ok, b.icmp_unsigned(">=", length, i64(binding.num_bytes)))
    run = fn.append_basic_block("run")
    b.cbranch(ok, run, bad)
    b.position_at_end(run)
    ptrs = [b.load(b.gep(bases, [i64(i)], source_etype=PTR), typ=PTR) for i in range(n)]
    end = umin(b, end, i64(workgroup_count))
    b.call(body, ptrs + [umin(b, begin, end), end])
    b.ret(ir.Constant(I32, 0))
    b.position_at_end(bad)
    b.ret(ir.Constant(I32, STATUS_BAD_BINDINGS))


def emit_export_record(module: ir.Module, symbol: str, workgroup_count: int, layouts) -> None:
    """Defines ``<symbol>.pyree_export``, the kernel's export as compiled: {version, workgroup
    count, binding count, then access and byte length per binding}. The runtime holds the
    module's export table to it, so a rewritten table cannot claim writes or workgroups the code
    does not do."""
    words = [RECORD_VERSION, workgroup_count, len(layouts)]
    for layout in layouts:
        words += [layout.access, layout.minLength]
    record = ir.GlobalVariable(module, ir.ArrayType(i64(0).type, len(words)), symbol + RECORD_SUFFIX)
    record.global_constant = True
    record.initializer = ir.Constant(record.value_type, [i64(w) for w in words])
