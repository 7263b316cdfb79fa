"""Tensor-core operand tiles gathered 16 bytes at a time: an implicit GEMM's patches.

flow/implicit_gemm.py leaves a convolution's GEMM reading its channels-last image through a
Gather whose indices are divisions and remainders of the GEMM's loops, behind a pad's condition.
K walks (taps, channels) with the channel count a multiple of the chunk's width (8 16-bit or 4
f32 elements), so a 16-byte chunk of k (that many consecutive k from a multiple of it) is
consecutive channels of one tap of one pixel: the gather's index is the same for the whole chunk
in every dim but the last, which steps by one from a multiple of the width, and so is the pad's
condition. Such a chunk is one ``cp.async`` from the address
of its first element, zero-filled where the condition or the tile's bounds say so: the index
arithmetic runs once per 8 elements and the copy stays asynchronous. ``gathered`` proves that
shape of the expression (``_along``) or returns None, and the product stays on the SIMT template.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyree.compiler import kernel as K
from pyree.compiler.codegen.common.llvm_gpu import addressing as A
from pyree.compiler.codegen.common.llvm_gpu.llvm_text import Function
from pyree.compiler.codegen.common.llvm_gpu.matmul import epilogue_lowering
from pyree.compiler.codegen.common.llvm_gpu.size_values import STATIC
from pyree.compiler.codegen.cuda.async_copy import Chunk, width


@dataclass(frozen=True)
class Gathered:
    kernel: K.Kernel
    gather: K.Gather
    cond: K.Expr | None       # the operand is the gather where this holds, zero elsewhere
    is_b: bool                # indexed by (n, k), else (m, k)
    k_major: bool = True      # chunks run along k

    # ``sizes``: the templates' ``Operand`` interface; a gathered operand's kernel is static
    # (``matmul_mma.operands`` takes loads alone where sizes are at run time)
    def aligned(self, fn: Function, sizes=STATIC) -> str:
        return A.bindings_aligned(fn, (self.gather.binding,))

    def chunk(self, fn: Function, bidx: list, outer: tuple[str, int], k: tuple[str, int], dst: str,
              exact: bool, sizes=STATIC) -> Chunk:
        """The chunk at (outer, k .. k + width - 1), as the templates' ``Operand.chunk``."""
        (o, o_n), (kk, k_n) = outer, k
        ok = "true"
        if not exact:
            ok = fn.op(f"and i1 {fn.op(f'icmp ult i64 {o}, {o_n}')}, {fn.op(f'icmp ult i64 {kk}, {k_n}')}")
            o, kk = A.clamp(fn, o, o_n), A.clamp(fn, kk, k_n)
        lower = epilogue_lowering(fn, self.kernel)(bidx + ([0, o, kk] if self.is_b else [o, 0, kk]))
        at = K.gather_offset(self.gather.index, self.kernel.bindings[self.gather.binding].shape,
                             self.kernel.loop_ranges)
        offset = lower(at)
        if at.dtype != "index":
            offset = fn.op(f"zext i32 {offset} to i64")
        src = A.element_ptr(fn, f"%b{self.gather.binding}", self.gather.dtype, offset)
        if self.cond is not None:
            ok = lower(self.cond) if ok == "true" else fn.op(f"and i1 {ok}, {lower(self.cond)}")
        w = width(self.gather.dtype)
        valid = str(w) if ok == "true" else fn.op(f"select i1 {ok}, i32 {w}, i32 0")
        return Chunk(src, valid, dst, K.itemsize(self.gather.dtype))


def gathered(kernel: K.Kernel, value: K.Expr, is_b: bool) -> Gathered | None:
    """``value`` (an operand's value, 16-bit or f32) as whole gathered chunks along k, or None."""
    cond, g = None, value
    if isinstance(value, K.Select) and value.b == K.Const(0.0, value.dtype):
        cond, g = value.cond, value.a
    if not isinstance(g, K.Gather):
        return None
    w = width(g.dtype)
    if kernel.reduction_ranges[0] % w or kernel.bindings[g.binding].shape[-1] % w:
        return None
    k, ranges = kernel.num_parallel, kernel.loop_ranges
    *rest, last = [_along(ix, k, ranges, w) for ix in g.index]
    if last != (1, 0) or any(r is None or r[0] != 0 for r in rest):
        return None
    if cond is not None and (_along(cond, k, ranges, w) or (1, None))[0] != 0:
        return None
    return Gathered(kernel, g, cond, is_b)


def _along(e: K.Expr, loop: int, ranges: tuple[int, ...], w: int) -> tuple[int, int | None] | None:
    """How integer ``e`` moves over a chunk of ``w`` elements: (step per element of ``loop``, its
    value modulo w at the chunk's first element, None where unknown), for chunks starting at a
    multiple of w; (0, _) means the same for the whole chunk; None where it is neither."""
    if isinstance(e, K.LoopIndex):
        return (1, 0) if e.dim == loop else (0, None)
    if isinstance(e, K.Const):
        return 0, int(e.value) % w if isinstance(e.value, int) else None
    if isinstance(e, K.Load):
        return (0, None) if all(ix.coeffs[loop] == 0 for ix in e.index) else None
    if isinstance(e, K.Cast) and e.op in K.INT_CASTS and not K.is_float(e.x.dtype):
        inner = _along(e.x, loop, ranges, w)
        return None if inner is None else _wrapped(e, inner, ranges)
    if isinstance(e, K.Binary) and e.op in ("add", "sub", "mul", "div", "rem"):
        a, b = _along(e.a, loop, ranges, w), _along(e.b, loop, ranges, w)
        out = None if a is None or b is None else _arith(e, a, b, ranges, w)
        return None if out is None else _wrapped(e, out, ranges)
    if isinstance(e, (K.Acc, K.Final)):
        return None
    parts = [_along(x, loop, ranges, w) for x in _children(e)]
    return (0, None) if all(p is not None and p[0] == 0 for p in parts) else None


def _wrapped(e: K.Cast | K.Binary, state: tuple[int, int | None], ranges: tuple[int, ...]):
    """``state`` of ``e`` as it is after ``e`` wraps its value into its bits (integer casts and
    arithmetic wrap, as in MLIR's arith). A value the same over the chunk stays so, with its
    residue (modulo 8 or 4) where at least 3 bits keep it; a step-1 walk from a multiple of the
    width (8 or 4) never straddles a multiple of 8, so with 4 bits or more (signed bounds at
    multiples of 8 too) it wraps as a whole; any other walk only where ``e`` provably keeps its
    value."""
    if K.is_float(e.dtype):
        return state
    narrowest = min(K.int_bits(x.dtype) for x in (e, *K.operands(e)))
    step, residue = state
    if step == 0:
        return 0, residue if narrowest >= 3 else None
    if state == (1, 0) and narrowest >= 4:
        return state
    return state if K.interval(e, ranges) != K.int_range(e.dtype) else None


def _arith(e: K.Binary, a, b, ranges: tuple[int, ...], w: int):
    (sa, ra), (sb, rb) = a, b
    known = ra is not None and rb is not None
    if e.op in ("add", "sub"):
        sign = 1 if e.op == "add" else -1
        return sa + sign * sb, (ra + sign * rb) % w if known else None
    ca, cb = (x.value if isinstance(x, K.Const) else None for x in (e.a, e.b))
    if e.op == "mul":
        residue = (ra * rb) % w if known else (
            0 if any(c is not None and c % w == 0 for c in (ca, cb)) else None)
        if sa == 0 and sb == 0:
            return 0, residue
        if sb == 0 and cb is not None:
            return sa * cb, residue
        if sa == 0 and ca is not None:
            return sb * ca, residue
        return None
    # div, rem by a constant: a step-1 walk from a multiple of w stays inside one multiple of a
    # divisor that w divides, so its quotient holds and its remainder keeps walking
    if sa == 0 and sb == 0:
        return 0, None
    if sa != 1 or ra != 0 or sb != 0 or not cb or cb % w:
        return None
    if K.interval(e.a, ranges)[0] < 0:  # truncating division steps unevenly through 0
        return None
    return (0, None) if e.op == "div" else (1, 0)


def _children(e: K.Expr) -> list[K.Expr]:
    if isinstance(e, (K.Unary, K.Cast)):
        return [e.x]
    if isinstance(e, (K.Binary, K.Compare)):
        return [e.a, e.b]
    if isinstance(e, K.Select):
        return [e.cond, e.a, e.b]
    if isinstance(e, K.Gather):
        return list(e.index)
    return []
