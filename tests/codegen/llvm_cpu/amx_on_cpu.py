"""The AMX template's tile operations computed on stack arrays, so that its packing, indexing and
epilogues run (and are checked against numpy) on CPUs without AMX: ``emulated_tiles``
swaps ``amx.Tiles`` for ``EmulatedTiles`` while a test compiles.

A tile is a pointer to a 16 x 64-byte array; ``dot`` is TDPBF16PS as Intel's pseudo-code
states it (per output, per pair of k: two products of bf16 widened to f32, added in turn), in
f32 without the instruction's flushing of subnormals (the tests use none).
"""

from __future__ import annotations

from contextlib import contextmanager

from llvmlite import ir
from pyree.compiler.codegen.llvm_cpu import amx
from pyree.compiler.codegen.llvm_cpu.loops import entry_alloca, for_range, i64

I8, I16, I32, F32 = ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.FloatType()
PTR = ir.PointerType()
ROW = ir.VectorType(I32, 16)   # one tile row: 64 bytes
DOT = "pyree.amx.emulated.dpbf16ps"


class EmulatedTiles:
    type = PTR

    def __init__(self, b: ir.IRBuilder):
        self.b = b

    def _row(self, base, r: int, stride) -> ir.Value:
        ptr = self.b.gep(base, [self.b.mul(i64(r), stride) if stride is not None else i64(64 * r)],
                         source_etype=I8)
        ptr.type = PTR
        return ptr

    def load(self, ptr, stride) -> ir.Value:
        tile = entry_alloca(self.b, I8, 1024, align=64)
        for r in range(16):
            row = self.b.load(self._row(ptr, r, stride), typ=ROW, align=4)
            self.b.store(row, self._row(tile, r, None), align=64)
        return tile

    def store(self, ptr, stride, tile) -> None:
        for r in range(16):
            row = self.b.load(self._row(tile, r, None), typ=ROW, align=64)
            self.b.store(row, self._row(ptr, r, stride), align=4)

    def dot(self, c, a, bt) -> ir.Value:
        module = self.b.module
        fn = module.globals.get(DOT) or _define_dot(module)
        self.b.call(fn, [c, a, bt])
        return c


def _define_dot(module: ir.Module) -> ir.Function:
    """c[m][n] += a[m][2p] * bt[p][n][0] + a[m][2p + 1] * bt[p][n][1] for p < 16, in order."""
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR] * 3), DOT)
    fn.linkage = "internal"
    c, a, bt = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))

    def bf16(ptr, index):
        raw = b.load(b.gep(ptr, [index], source_etype=I16), typ=I16)
        return b.bitcast(b.shl(b.zext(raw, I32), ir.Constant(I32, 16)), F32)

    with for_range(b, i64(0), i64(16), name="m", unroll=False) as m:
        with for_range(b, i64(0), i64(16), name="n", unroll=False) as n:
            out = b.gep(c, [b.add(b.mul(m, i64(16)), n)], source_etype=F32)
            total = entry_alloca(b, F32)
            b.store(b.load(out, typ=F32), total)
            with for_range(b, i64(0), i64(16), name="p", unroll=False) as p:
                for half in range(2):
                    x = bf16(a, b.add(b.mul(m, i64(32)), b.add(b.mul(p, i64(2)), i64(half))))
                    y = bf16(bt, b.add(b.mul(p, i64(32)), b.add(b.mul(n, i64(2)), i64(half))))
                    b.store(b.fadd(b.load(total, typ=F32), b.fmul(x, y)), total)
            b.store(b.load(total, typ=F32), out)
    b.ret_void()
    return fn


@contextmanager
def emulated_tiles(monkeypatch):
    """Compiles within run the AMX template on ``EmulatedTiles``."""
    with monkeypatch.context() as patch:
        patch.setattr(amx, "Tiles", EmulatedTiles)
        yield
