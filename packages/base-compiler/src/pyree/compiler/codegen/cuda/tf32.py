"""f32 products on tensor cores: ``mma.sync.m16n8k8`` with TF32 operands (sm_80+), for
``--pyree-cuda-f32-matmul=tf32|3xtf32`` (the template is matmul_mma.py's, its fragments f32 bits).

TF32 keeps f32's 8 exponent bits and 10 of its 23 mantissa bits. ``tf32`` is PyTorch's
``allow_tf32``: each operand rounded to nearest (ties away, ``cvt.rna.tf32.f32``), the exact
products summed in f32, so each product is off by at most about 2^-10 of |a b| and a dot
product by about that much of sum |a b|.

``3xtf32`` (CUTLASS's "fast f32") splits each operand into two TF32 numbers, x = hi + lo with
hi = tf32(x) and lo = tf32(x - hi), and sums lo_a hi_b + hi_a lo_b + hi_a hi_b, the small
terms first so that they are not lost under the large one; the dropped lo_a lo_b is about
2^-22 of the product, so the result is about as accurate as f32's own fma. Specials: an
infinite hi (x is one, or a finite x beyond TF32's largest number rounds to one) would make the
small terms NaN (lo = inf - inf, and inf times a lo of 0), so the small terms take lo = 0 and,
in place of hi, hc = 0 for such an x (hc = hi otherwise): an infinite operand then reaches the
sum through hi hi alone, as in IEEE f32, and a NaN stays NaN through every term.
"""

from __future__ import annotations

from pyree.compiler.codegen.common.llvm_gpu.llvm_text import Function

MMA = "llvm.nvvm.mma.m16n8k8.row.col.tf32"
ACC = "{float, float, float, float}"


def _round(fn: Function, x: str) -> str:
    """The f32 value x (as float) rounded to TF32: i32 bits, the low 13 mantissa bits zero."""
    return fn.call("i32", "llvm.nvvm.f2tf32.rna", [("float", x)])


def split(fn: Function, bits: list[str], mode: str) -> list[tuple[str, ...]]:
    """Per fragment register (i32 bits of an f32 operand element) its TF32 terms: (hi,) for
    ``tf32``, (hi, lo, hc) for ``3xtf32``."""
    out = []
    for reg in bits:
        x = fn.op(f"bitcast i32 {reg} to float")
        hi = _round(fn, x)
        if mode == "tf32":
            out.append((hi,))
            continue
        hi_f = fn.op(f"bitcast i32 {hi} to float")
        lo = _round(fn, fn.op(f"fsub float {x}, {hi_f}"))
        inf = fn.op(f"fcmp oeq float {fn.call('float', 'llvm.fabs.f32', [('float', hi_f)])}, "
                    "0x7FF0000000000000")
        out.append((hi, fn.op(f"select i1 {inf}, i32 0, i32 {lo}"),
                    fn.op(f"select i1 {inf}, i32 0, i32 {hi}")))
    return out


def mma(fn: Function, a: list[tuple[str, ...]], b: list[tuple[str, ...]], acc: list[str]) -> list[str]:
    """``acc`` + A B for one m16n8k8 tile, A's four and B's two fragment registers given as
    ``split``'s terms; the four f32 accumulators after."""
    terms = [(0, 0)] if len(a[0]) == 1 else [(1, 2), (2, 1), (0, 0)]  # lo hc, hc lo, hi hi
    for i, j in terms:
        args = [("i32", x[i]) for x in a] + [("i32", x[j]) for x in b] + [("float", v) for v in acc]
        d = fn.call(ACC, MMA, args)
        acc = [fn.op(f"extractvalue {ACC} {d}, {k}") for k in range(4)]
    return acc
