"""Affine accesses as element offsets into a flat binding, the arithmetic every GPU template
(LLVM text and SPIR-V alike) addresses its loads and stores with."""

from __future__ import annotations

from dataclasses import dataclass

from pyree.compiler import kernel as K


@dataclass(frozen=True)
class Linear:
    """An access's element offset: ``sum(coeffs[l] * loop[l]) + const`` over the kernel's loops."""

    coeffs: tuple[int, ...]
    const: int

    def contiguous(self, inner: int, width: int, loops: range) -> bool:
        """True when ``width`` consecutive values of loop ``inner`` hit ``width`` consecutive,
        ``width``-aligned elements, for every value of the other ``loops``."""
        return (self.coeffs[inner] == 1 and self.const % width == 0
                and all(self.coeffs[l] % width == 0 for l in loops if l != inner))


def linearize(binding: K.Binding, index: tuple[K.AffineExpr, ...], num_loops: int) -> Linear:
    strides, s = [], 1
    for n in reversed(binding.shape):
        strides.append(s)
        s *= n
    strides.reverse()
    coeffs = [0] * num_loops
    c = 0
    for stride, ix in zip(strides, index):
        for l, v in enumerate(ix.coeffs):
            coeffs[l] += stride * v
        c += stride * ix.const
    return Linear(tuple(coeffs), c)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)
