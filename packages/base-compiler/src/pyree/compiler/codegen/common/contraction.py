"""The contraction description every backend's matmul templates start from: a kernel whose one
result is ``acc + X(batch, m, k) * Y(batch, k, n)`` over the two innermost parallel loops and one
reduction loop, with X and Y any expressions of those loops; and the SIMT tile shape that the
LLVM GPU and SPIR-V matmul templates share."""

from __future__ import annotations

from dataclasses import dataclass

from pyree.compiler import kernel as K


@dataclass(frozen=True)
class Contraction:
    x: K.Expr          # depends on batch, m, k
    y: K.Expr          # depends on batch, k, n
    dtype: str         # the product/accumulator dtype


def _deps(e: K.Expr, num_loops: int) -> set[int]:
    dims: set[int] = set()
    for s in K.walk(e):
        if isinstance(s, K.Load):
            for ix in s.index:
                dims |= {l for l, c in enumerate(ix.coeffs) if c != 0}  # c may be a Size
        elif isinstance(s, K.LoopIndex):
            dims.add(s.dim)
        elif isinstance(s, K.Acc):
            dims.add(-1)
    return dims


def match(kernel: K.Kernel) -> Contraction | None:
    if len(kernel.results) != 1 or len(kernel.reduction_ranges) != 1 or kernel.num_parallel < 2:
        return None
    v = kernel.results[0].value
    prod = K.contraction_product(kernel.results[0])
    if prod is None or not K.is_float(v.dtype):
        return None
    n_loops = len(kernel.loop_ranges)
    m, n = kernel.num_parallel - 2, kernel.num_parallel - 1
    da, db = _deps(prod.a, n_loops), _deps(prod.b, n_loops)
    if -1 in da or -1 in db:
        return None
    if n not in da and m not in db:
        return Contraction(prod.a, prod.b, v.dtype)
    if m not in da and n not in db:
        return Contraction(prod.b, prod.a, v.dtype)
    return None


def contraction_of(kernel: K.Kernel) -> Contraction | None:
    """``match`` for a kernel a matmul template may take: one pass over its reduction range."""
    if not kernel.reduction_ranges or K.is_row_kernel(kernel.results):
        return None
    return match(kernel)


@dataclass(frozen=True)
class Tiling:
    """A workgroup's bm x bn output tile, bk-deep K steps, tm x tn outputs per thread (the
    SPIR-V SIMT matmul tiles the same way)."""

    bm: int
    bn: int
    bk: int
    tm: int
    tn: int

    @property
    def threads(self) -> int:
        return (self.bm // self.tm) * (self.bn // self.tn)
