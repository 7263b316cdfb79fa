"""Staging 16-byte chunks of f16 tiles from global into shared memory, for the tensor-core matmuls.

``cp.async`` needs 16-byte-aligned global addresses; when the operands are not aligned (odd
leading dimensions, offsets), each chunk is loaded element by element and stored as one vector.
The caller commits and waits on the async groups.
"""

from __future__ import annotations

from pyree.compiler.codegen.cuda.llvm_text import Function


def bindings_aligned(fn: Function, bindings) -> str:
    """An i1 value: every binding's base address is 16-byte aligned (what ``cp.async`` needs)."""
    aligned = "true"
    for binding in bindings:
        addr = fn.op(f"ptrtoint ptr addrspace(1) %b{binding} to i64")
        low = fn.op(f"and i64 {addr}, 15")
        aligned = fn.op(f"and i1 {aligned}, {fn.op(f'icmp eq i64 {low}, 0')}")
    return aligned


def stage_chunks(fn: Function, aligned: str, chunks: list[tuple[str, str]]) -> None:
    """Copies each (global ptr, shared ptr) chunk of 8 halves; ``aligned`` is an i1 value."""
    fast, slow, done = fn.new_label("cpasync"), fn.new_label("scalar"), fn.new_label("staged")
    fn.cbr(aligned, fast, slow)
    fn.label(fast)
    for src, dst in chunks:
        fn.call("void", "llvm.nvvm.cp.async.cg.shared.global.16",
                [("ptr addrspace(3)", dst), ("ptr addrspace(1)", src)])
    fn.br(done)
    fn.label(slow)
    for src, dst in chunks:
        vec = "undef"
        for i in range(8):
            p = fn.op(f"getelementptr half, ptr addrspace(1) {src}, i64 {i}")
            v = fn.op(f"load half, ptr addrspace(1) {p}, align 2")
            vec = fn.op(f"insertelement <8 x half> {vec}, half {v}, i32 {i}")
        fn.raw(f"store <8 x half> {vec}, ptr addrspace(3) {dst}, align 16")
    fn.br(done)
    fn.label(done)
