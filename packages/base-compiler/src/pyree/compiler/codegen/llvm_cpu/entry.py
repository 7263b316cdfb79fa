"""The exported entry point: checks the dispatch state, then runs the body per workgroup.

``int32_t fn(const pyree_cpu_dispatch_state_t *, uint64_t wg_begin, uint64_t wg_end)``
(pyree/runtime/abi/cpu_kernel.h). Every binding count and length is checked before any binding
is touched, so a damaged host program gets a nonzero status instead of an out-of-bounds access.
The body is a separate function whose binding pointers are ``noalias``: that is what lets LLVM
vectorize loads and stores of different bindings freely.

A kernel with run-time sizes reads them from the push constants (symbol pk is push constant k):
the entry point checks there are enough, loads them once (zero-extended to i64) and passes them
to the body. It then checks what the sizes of this dispatch imply, with overflow detection, before
any binding is touched: every loop range and binding dim is non-negative, every binding is at
least its ``num_bytes`` long, every access not proven in range for all sizes
(``normalize.run_time_checks``) stays in its binding, and the workgroup count is computed from
them. So a host program that passes wrong sizes still cannot make the kernel read or write out
of bounds; it gets a nonzero status.
"""

from __future__ import annotations

from llvmlite import ir
from pyree.compiler.codegen.common.normalize import run_time_checks
from pyree.compiler.codegen.llvm_cpu.loops import I64, for_range, i64, umin
from pyree.compiler.codegen.llvm_cpu.size_values import SizeValues, emit_size
from pyree.compiler.kernel import Kernel, has_run_time_sizes, push_constant_count
from pyree.compiler.sizes import is_static

I1 = ir.IntType(1)
I32 = ir.IntType(32)
PTR = ir.PointerType()
# pyree_cpu_dispatch_state_t
STATE = ir.LiteralStructType([PTR, PTR, I32, I32, PTR])
STATUS_BAD_BINDINGS = 1
# The data symbol beside each kernel that records its export (pyree/runtime/hal/images/cpu_library.py)
RECORD_SUFFIX = ".pyree_export"
RECORD_VERSION = 1


def emit_kernel(module: ir.Module, symbol: str, kernel: Kernel, workgroup_count,
                emit_workgroup) -> None:
    """Defines ``symbol``; ``emit_workgroup(builder, binding_ptrs, wg)`` emits one workgroup,
    and for a kernel with run-time sizes ``emit_workgroup(builder, binding_ptrs, wg, sizes)``,
    ``sizes`` its ``SizeValues``; ``workgroup_count`` may then be a size."""
    n = len(kernel.bindings)
    params = push_constant_count(kernel) if has_run_time_sizes(kernel) else None
    body = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR] * n + [I64] * (2 + (params or 0))),
                       f"{symbol}.body")
    body.linkage = "internal"
    for arg in body.args[:n]:
        arg.add_attribute("noalias")
    b = ir.IRBuilder(body.append_basic_block("entry"))
    sizes = () if params is None else (SizeValues(b, list(body.args[n + 2:])),)
    with for_range(b, body.args[n], body.args[n + 1], name="wg") as wg:
        emit_workgroup(b, list(body.args[:n]), wg, *sizes)
    b.ret_void()

    fn = ir.Function(module, ir.FunctionType(I32, [PTR, I64, I64]), symbol)
    state, begin, end = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    bad = fn.append_basic_block("bad_bindings")
    field = lambda i, t: b.load(b.gep(state, [ir.Constant(I32, 0), ir.Constant(I32, i)],
                                      source_etype=STATE), typ=t)
    ok = b.icmp_unsigned(">=", field(2, I32), ir.Constant(I32, n))
    if params is not None:
        ok = b.and_(ok, b.icmp_unsigned(">=", field(3, I32), ir.Constant(I32, params)))
    lengths_block = fn.append_basic_block("lengths")
    b.cbranch(ok, lengths_block, bad)
    b.position_at_end(lengths_block)
    lengths, bases = field(1, PTR), field(0, PTR)
    ok = ir.Constant(ir.IntType(1), 1)
    values, overflow, count = [], [], i64(workgroup_count) if params is None else None
    if params is not None:
        constants = field(4, PTR)
        values = [b.zext(b.load(b.gep(constants, [i64(k)], source_etype=I32), typ=I32), I64)
                  for k in range(params)]
        ok = _sizes_hold(b, kernel, values, overflow)
        count = emit_size(b, workgroup_count, values, overflow)
    for i, binding in enumerate(kernel.bindings):
        length = b.load(b.gep(lengths, [i64(i)], source_etype=i64(0).type), typ=i64(0).type)
        ok = b.and_(ok, b.icmp_unsigned(">=", length, emit_size(b, binding.num_bytes, values, overflow)))
    for flag in overflow:
        ok = b.and_(ok, b.not_(flag))
    run = fn.append_basic_block("run")
    b.cbranch(ok, run, bad)
    b.position_at_end(run)
    ptrs = [b.load(b.gep(bases, [i64(i)], source_etype=PTR), typ=PTR) for i in range(n)]
    end = umin(b, end, count)
    b.call(body, ptrs + [umin(b, begin, end), end] + values)
    b.ret(ir.Constant(I32, 0))
    b.position_at_end(bad)
    b.ret(ir.Constant(I32, STATUS_BAD_BINDINGS))


def _sizes_hold(b: ir.IRBuilder, kernel: Kernel, params: list[ir.Value], overflow: list) -> ir.Value:
    """i1: every run-time loop range and binding dim is non-negative, and every access that
    ``run_time_checks`` lists stays inside its binding (or its loop box is empty)."""
    size = lambda value: emit_size(b, value, params, overflow)
    ok = ir.Constant(I1, 1)
    dims = {d for d in (*kernel.loop_ranges, *(d for x in kernel.bindings for d in x.shape))
            if not is_static(d)}
    for d in sorted(dims, key=repr):
        ok = b.and_(ok, b.icmp_signed(">=", size(d), i64(0)))
    for check in run_time_checks(kernel):
        inside = b.and_(b.icmp_signed(">=", size(check.lo), i64(0)),
                        b.icmp_signed("<", size(check.hi), size(check.length)))
        empty = ir.Constant(I1, 0)
        for n in check.ranges:
            if not is_static(n):
                empty = b.or_(empty, b.icmp_signed("==", size(n), i64(0)))
        ok = b.and_(ok, b.or_(empty, inside))
    return ok


def emit_export_record(module: ir.Module, symbol: str, workgroup_count, layouts) -> None:
    """Defines ``<symbol>.pyree_export``, the kernel's export as compiled: {version, workgroup
    count, binding count, then access and byte length per binding}. The runtime holds the
    module's export table to it, so a rewritten table cannot claim writes or workgroups the code
    does not do. A kernel with run-time sizes records a workgroup count of 0 and min lengths of
    0 where they are sizes (as its export does): the runtime cannot hold per-dispatch values to
    a static record, and the kernel checks them itself on every call (``emit_kernel``)."""
    words = [RECORD_VERSION, workgroup_count if is_static(workgroup_count) else 0, len(layouts)]
    for layout in layouts:
        words += [layout.access, layout.minLength]
    record = ir.GlobalVariable(module, ir.ArrayType(i64(0).type, len(words)), symbol + RECORD_SUFFIX)
    record.global_constant = True
    record.initializer = ir.Constant(record.value_type, [i64(w) for w in words])
