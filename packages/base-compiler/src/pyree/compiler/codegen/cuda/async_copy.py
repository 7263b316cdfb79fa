"""Staging 16-byte chunks of matmul operand tiles (8 f16/bf16 or 4 f32 elements) from global into
shared memory, for the tensor-core matmuls, with the tile's tails zero-filled.

A chunk is ``width(dtype)`` elements along the operand's contiguous dimension. Where the tile
reaches past the operand (a row beyond its rows, columns beyond its columns) the missing elements
are zeros: ``cp.async``'s source size copies only the elements inside and zero-fills the rest.
Zeros along k meet zeros in the other operand, so a k tail adds exactly 0, and rows or columns
past M or N are never stored. ``cp.async`` needs 16-byte-aligned global addresses; when the
operands may not be aligned (odd leading dimensions, offsets, misaligned bindings), each chunk is
loaded element by element and stored as one vector. The caller commits and waits on the async
groups.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyree.compiler import kernel as K
from pyree.compiler.codegen.common.addressing import Linear
from pyree.compiler.codegen.common.llvm_gpu import addressing as A
from pyree.compiler.codegen.common.llvm_gpu.llvm_text import Function

CHUNK_BYTES = 16


def width(dtype: str) -> int:
    """Elements of ``dtype`` in one 16-byte chunk."""
    return CHUNK_BYTES // K.itemsize(dtype)


@dataclass(frozen=True)
class Chunk:
    src: str    # ptr addrspace(1) to the chunk's first element, clamped into the operand
    valid: str  # i32: how many of the chunk's elements lie inside the operand; str(width): all, statically
    dst: str    # ptr addrspace(3), 16-byte aligned
    itemsize: int  # bytes per element

    @property
    def width(self) -> int:
        return CHUNK_BYTES // self.itemsize

    @property
    def whole(self) -> bool:
        """Every element lies inside the operand, statically."""
        return self.valid == str(self.width)


def chunk(fn: Function, binding: int, dtype: str, lin: Linear, loop_at, row: str, rows: int | str,
          col: str, cols: int | str, dst: str, exact: bool) -> Chunk:
    """The chunk at (row, col .. col + width - 1) of a rows x cols operand whose column index is
    the contiguous one (col a multiple of the width); ``loop_at(row, col)`` gives the kernel loop
    indices of an element. ``rows`` and ``cols`` may be run-time values (i64; at least 1
    wherever a chunk is copied), as ``lin``'s coefficients may (``addressing.emitted``).
    ``exact``: the tiles divide the operand, so the chunk lies inside it (no bounds arithmetic)."""
    w, size = width(dtype), K.itemsize(dtype)
    if exact:
        return Chunk(A.element_ptr(fn, f"%b{binding}", dtype, A.offset(fn, lin, loop_at(row, col))),
                     str(w), dst, size)
    inside = fn.op(f"icmp ult i64 {row}, {rows}")
    left = fn.call("i64", "llvm.smax.i64", [("i64", fn.op(f"sub i64 {cols}, {col}")), ("i64", "0")])
    left = fn.call("i64", "llvm.umin.i64", [("i64", left), ("i64", str(w))])
    valid = fn.op(f"trunc i64 {fn.op(f'select i1 {inside}, i64 {left}, i64 0')} to i32")
    last = str(rows - 1) if isinstance(rows, int) else fn.op(f"add i64 {rows}, -1")
    r = fn.call("i64", "llvm.umin.i64", [("i64", row), ("i64", last)])
    # a chunk start inside the operand, still 16-byte aligned (cp.async wants it so when empty)
    last = str((cols - 1) // w * w) if isinstance(cols, int) else \
        fn.op(f"and i64 {fn.op(f'add i64 {cols}, -1')}, {-w}")
    c = fn.call("i64", "llvm.umin.i64", [("i64", col), ("i64", last)])
    src = A.element_ptr(fn, f"%b{binding}", dtype, A.offset(fn, lin, loop_at(r, c)))
    return Chunk(src, valid, dst, size)


def prologue(fn: Function, ahead: int, num_k, load) -> None:
    """Starts a pipeline: ``load(stage, kt)`` of the tiles kt < ``ahead`` that exist (``num_k``
    of them, an int or a run-time value), one cp.async group each, committed even where empty so
    that the waits count groups alike."""
    if isinstance(num_k, int):
        for kt in range(min(ahead, num_k)):
            load(str(kt), str(kt))
            fn.call("void", "llvm.nvvm.cp.async.commit.group", [])
        for _ in range(ahead - min(ahead, num_k)):
            fn.call("void", "llvm.nvvm.cp.async.commit.group", [])
        return
    for kt in range(ahead):
        fn.if_then(fn.op(f"icmp ult i64 {kt}, {num_k}"), lambda kt=kt: load(str(kt), str(kt)))
        fn.call("void", "llvm.nvvm.cp.async.commit.group", [])


def stage_chunks(fn: Function, aligned: str, chunks: list[Chunk]) -> None:
    """Copies every chunk; ``aligned`` is an i1 value, or ``false`` where the operands' strides
    already rule ``cp.async`` out."""
    done = fn.new_label("staged")
    if aligned != "false":
        fast, slow = fn.new_label("cpasync"), fn.new_label("scalar")
        fn.cbr(aligned, fast, slow)
        fn.label(fast)
        for c in chunks:
            if c.whole:
                fn.call("void", "llvm.nvvm.cp.async.cg.shared.global.16",
                        [("ptr addrspace(3)", c.dst), ("ptr addrspace(1)", c.src)])
                continue
            size = fn.op(f"shl i32 {c.valid}, {c.itemsize.bit_length() - 1}")
            fn.call("void", "llvm.nvvm.cp.async.cg.shared.global.16.s",
                    [("ptr addrspace(3)", c.dst), ("ptr addrspace(1)", c.src), ("i32", size)])
        fn.br(done)
        fn.label(slow)
    for c in chunks:
        vec, ty = "zeroinitializer", f"i{8 * c.itemsize}"
        for i in range(c.width):
            ok = "true" if c.whole else fn.op(f"icmp ult i32 {i}, {c.valid}")
            p = fn.op(f"getelementptr {ty}, ptr addrspace(1) {c.src}, i32 "
                      f"{fn.op(f'select i1 {ok}, i32 {i}, i32 0')}")
            loaded = fn.op(f"load {ty}, ptr addrspace(1) {p}, align {c.itemsize}")
            v = fn.op(f"select i1 {ok}, {ty} {loaded}, {ty} 0")
            vec = fn.op(f"insertelement <{c.width} x {ty}> {vec}, {ty} {v}, i32 {i}")
        fn.raw(f"store <{c.width} x {ty}> {vec}, ptr addrspace(3) {c.dst}, align 16")
    fn.br(done)
    fn.label(done)
