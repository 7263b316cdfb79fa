"""Lowers kernel expressions to LLVM IR, as scalars or as vectors along one loop.

A ``Point`` says where an expression is evaluated: one i64 index per loop and, in vector mode,
the loop whose consecutive values fill the lanes (``lane_dim``) and an optional lane mask for
partial vectors. Loads pick the cheapest form for their stride along the lane loop: one scalar
load splatted (stride 0), one vector load (stride 1) or a gather; a ``Gather`` (computed index,
clamped into its binding) is a scalar load or a masked gather. Integer division, remainder and
shifts are guarded so that no input value can trap or produce poison.

bf16 lives in memory as its 16 bits and computes in f32: a load widens it exactly, every op that
yields bf16 rounds its f32 result to bf16 (round to nearest even, NaN stays NaN) as ml_dtypes does
(f64 through f32, as PyTorch, XLA and MLIR's arith expansion do; ml_dtypes rounds once since 0.7),
and a store keeps the top 16 bits. The rounding is
integer ops rather than an LLVM ``fptrunc`` to ``bfloat``, which x86 without AVX512-BF16 lowers
to a libgcc call that the kernel's shared object does not link.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from llvmlite import ir
from pyree.compiler.codegen.common import math_expansion
from pyree.compiler.codegen.common.normalize import unsafe_loads
from pyree.compiler.codegen.common.vecmath import BINARY as INLINE_BINARY
from pyree.compiler.codegen.common.vecmath import UNARY as INLINE_UNARY
from pyree.compiler.codegen.common.vecmath import math_function
from pyree.compiler.codegen.llvm_cpu.loops import for_range
from pyree.compiler.errors import CompileError
from pyree.compiler.kernel import (
    DTYPES,
    Acc,
    Binary,
    Cast,
    Compare,
    Const,
    Expr,
    Final,
    Gather,
    Kernel,
    Load,
    LoopIndex,
    Select,
    SizeValue,
    Unary,
    contains,
    gather_offset,
    is_float,
    is_unsigned,
    itemsize,
    lowering_order,
    operands,
)
from pyree.compiler.sizes import is_static

I1, I8, I16, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
FLOAT_TYPES = {"f16": ir.HalfType(), "f32": ir.FloatType(), "f64": ir.DoubleType(),
               "bf16": ir.FloatType()}
FAST = ("reassoc", "contract")

# Unary float ops that are LLVM intrinsics (llvm.<name>.<type>); the rest are libm calls.
# On f32 and f16, the ops in INLINE_UNARY/INLINE_BINARY are emitted inline instead (vecmath/).
_FLOAT_INTRINSICS = {
    "abs": "fabs", "exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "sqrt": "sqrt",
    "sin": "sin", "cos": "cos", "tan": "tan", "atan": "atan", "tanh": "tanh", "floor": "floor",
    "ceil": "ceil", "round": "round", "roundeven": "roundeven", "trunc": "trunc",
}
# Also, on f64 only, math_expansion.EXPANDED; on narrower floats ``expanded`` writes out
# math_expansion.CPU_EXPANDED (atan2 among them, a binary op).
_LIBM = {"erf", "expm1", "log1p"}
_FLOAT_BINARY_INTRINSICS = {"pow": "pow", "max": "maximum", "min": "minimum", "atan2": "atan2",
                            "copysign": "copysign"}
_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
# A vector load whose lanes step this many elements or fewer reads the whole span in one masked
# load and picks its lanes with a shuffle, where the target has masked vector loads (AVX): a
# gather (one load per lane) was slower on stride-2 depthwise convolutions, most with AVX-512
# (BENCHMARKS.md, issue 11). Without AVX both are scalar, the span's twice as many loads.
MAX_SPAN_STRIDE = 4


def expanded(e: Expr) -> bool:
    """Whether ``e`` is written out as math_expansion's arithmetic (which vectorizes) rather
    than an LLVM intrinsic or a libm call."""
    return (isinstance(e, (Unary, Binary)) and e.op in math_expansion.CPU_EXPANDED
            and e.dtype != "f64")


def span_stride(target) -> int:
    """The longest step a strided vector load of ``target``'s code reads as a span."""
    return MAX_SPAN_STRIDE if target.vector_bits >= 256 else 1


def scalar_type(dtype: str) -> ir.Type:
    if dtype in FLOAT_TYPES:
        return FLOAT_TYPES[dtype]
    if dtype == "index":
        return I64
    return ir.IntType(1 if dtype == "i1" else itemsize(dtype) * 8)


def storage_type(dtype: str) -> ir.Type:
    """How a value of ``dtype`` sits in memory: i1 as one byte, bf16 as its 16 bits."""
    return {"i1": I8, "bf16": I16}.get(dtype) or scalar_type(dtype)


def compute_dtype(dtype: str) -> str:
    """The dtype whose instructions compute ``dtype``'s values."""
    return "f32" if dtype == "bf16" else dtype


def bits(dtype: str) -> int:
    return 1 if dtype == "i1" else 64 if dtype == "index" else itemsize(dtype) * 8


def _mangle(t: ir.Type) -> str:
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{_mangle(t.element)}"
    if isinstance(t, ir.PointerType):
        return "p0"
    return {"half": "f16", "float": "f32", "double": "f64"}.get(str(t), str(t))


def row_lanes(kernel: Kernel, vector_bits: int) -> int:
    """Lanes of the explicit vectors that run along the innermost parallel loop (window and
    strided elementwise kernels): one register of the widest result where the target has
    masked vector loads (AVX2: 256 bits, AVX-512: 512), else 512 bits (SSE's masked loads are
    scalar either way), halved while half of them still covers the loop. LLVM's x86 backend
    splits wider vectors, and a masked load split so that a half's mask is all false while
    the whole mask is not a constant comes out wrong on AVX2 (reading the masked-off lanes:
    tests/codegen/llvm_cpu/test_llvm_cpu_windows.py)."""
    width = vector_bits if vector_bits >= 256 else 512
    lanes = width // max(32, max(bits(r.value.dtype) for r in kernel.results))
    while lanes > 4 and lanes // 2 >= kernel.parallel_ranges[-1]:
        lanes //= 2
    return lanes


def sweep_vectors(b: ir.IRBuilder, vec: ExprEmitter, lo: ir.Value, hi: ir.Value, body) -> None:
    """``body(start, mask)`` over [lo, hi) in vectors of vec.width: full ones (mask None), then
    one masked vector for the rest."""
    sweep_blocks(b, vec, lo, hi, 1, lambda start, masks: body(start, masks[0]))


def sweep_blocks(b: ir.IRBuilder, vec: ExprEmitter, lo: ir.Value, hi: ir.Value, count: int,
                 body) -> None:
    """``body(start, masks)`` over [lo, hi) in blocks of ``count`` vectors of vec.width: whole
    blocks (masks all None), then one block of masked vectors for the rest (some of its
    vectors may have no lane left)."""
    step = vec.width * count
    length = b.sub(hi, lo)
    full_end = b.add(lo, b.sub(length, b.urem(length, ir.Constant(I64, step))))
    with for_range(b, lo, full_end, step=step, name="vec") as start:
        body(start, [None] * count)
    with b.if_then(b.icmp_signed("<", full_end, hi)):
        rest = vec.splat(b.sub(hi, full_end))
        lanes = [ir.Constant(ir.VectorType(I64, vec.width), list(range(i * vec.width, (i + 1) * vec.width)))
                 for i in range(count)]
        body(full_end, [b.icmp_signed("<", lane, rest) for lane in lanes])


@dataclass
class Point:
    indices: list[ir.Value]           # i64 per loop (lane 0 for the lane loop)
    lane_dim: int | None = None
    mask: ir.Value | None = None      # <w x i1>: lanes that exist
    accs: list[ir.Value] | None = None
    finals: dict[int, ir.Value] | None = None  # Final(k) of a row kernel's finished phases


class ExprEmitter:
    """Emits expressions of one (normalized) kernel into ``builder`` at a width of 1 or more."""

    def __init__(self, builder: ir.IRBuilder, bindings: list[ir.Value], kernel: Kernel,
                 width: int = 1, span: int = 1, sizes=None):
        """``sizes``: the i64 value of an index coefficient or constant, where some are run-time
        sizes (``size_values.SizeValues``)."""
        self.b = builder
        self.bindings = bindings
        self.kernel = kernel
        self.width = width
        self.span = span  # longest lane step loaded as a span (span_stride)
        self.sizes = sizes or (lambda c: ir.Constant(I64, c))
        self.unsafe_loads = unsafe_loads(kernel)
        self._unsafe_memo: dict = {}  # node -> whether it holds an unsafe load

    # ---- types and constants ----

    def ty(self, dtype: str) -> ir.Type:
        t = scalar_type(dtype)
        return ir.VectorType(t, self.width) if self.width > 1 else t

    def const(self, value, dtype: str) -> ir.Constant:
        t = scalar_type(dtype)
        if is_float(dtype):  # rounded to the dtype first: beyond its range is ±inf, as in MLIR
            with np.errstate(over="ignore"):
                value = float(DTYPES[dtype].type(value))
        else:
            v = int(value) % (1 << bits(dtype))
            value = v - (1 << bits(dtype)) if v >= 1 << (bits(dtype) - 1) else v
        c = ir.Constant(t, value)
        return ir.Constant(ir.VectorType(t, self.width), [c] * self.width) if self.width > 1 else c

    def splat(self, scalar: ir.Value) -> ir.Value:
        if self.width == 1:
            return scalar
        vt = ir.VectorType(scalar.type, self.width)
        v = self.b.insert_element(ir.Constant(vt, ir.Undefined), scalar, ir.Constant(I32, 0))
        return self.b.shuffle_vector(v, ir.Constant(vt, ir.Undefined), _broadcast_mask(self.width))

    def iota(self) -> ir.Constant:
        return ir.Constant(ir.VectorType(I64, self.width), list(range(self.width)))

    def intrinsic(self, name: str, ret: ir.Type, args: list[ir.Type], mangle: list[ir.Type]):
        full = ".".join([f"llvm.{name}"] + [_mangle(t) for t in mangle])
        return self.function(full, ret, args)

    def function(self, name: str, ret: ir.Type, args: list[ir.Type]):
        module = self.b.module
        fn = module.globals.get(name)
        return fn if fn is not None else ir.Function(module, ir.FunctionType(ret, args), name)

    # ---- memory ----

    def offset(self, affine, pt: Point) -> ir.Value:
        """Element offset of ``affine`` at ``pt`` (lane 0 in vector mode), as i64."""
        off = self.sizes(affine.const)
        for c, ix in zip(affine.coeffs, pt.indices):
            if not is_static(c) or c:
                off = self.b.add(off, self.b.mul(ix, self.sizes(c)) if c != 1 else ix)
        return off

    def address(self, binding: int, affine, pt: Point) -> tuple[ir.Value, ir.Type, int]:
        """Pointer at lane 0, storage type, and stride in elements along the lane loop."""
        st = storage_type(self.kernel.bindings[binding].dtype)
        ptr = self.b.gep(self.bindings[binding], [self.offset(affine, pt)], source_etype=st)
        lane = affine.coeffs[pt.lane_dim] if self.width > 1 and pt.lane_dim is not None else 0
        return ptr, st, lane

    def lane_pointers(self, ptr, st, stride: int) -> ir.Value:
        offs = ir.Constant(ir.VectorType(I64, self.width), [stride * i for i in range(self.width)])
        g = self.b.gep(ptr, [offs], source_etype=st)
        g.type = ir.VectorType(ir.PointerType(), self.width)  # llvmlite types vector GEPs as ptr
        return g

    def load(self, e: Load, pt: Point, guard: ir.Value | None = None) -> ir.Value:
        """``guard``: vector lanes allowed to load (a possibly out-of-range load in a Select arm)."""
        ptr, st, lane = self.address(e.binding, e.index[0], pt)
        nbytes = max(1, bits(e.dtype) // 8)
        align = ir.Constant(I32, nbytes)
        mask = pt.mask
        if guard is not None:
            mask = guard if mask is None else self.b.and_(mask, guard)
        if self.width == 1 or (lane == 0 and guard is None):
            v = self.splat(self.b.load(ptr, align=nbytes, typ=st))
        else:
            vt = ir.VectorType(st, self.width)
            passthru = ir.Constant(vt, None)
            mask = self.all_lanes() if mask is None and lane != 1 else mask
            if lane == 1 and mask is None:
                v = self.b.load(ptr, align=nbytes, typ=vt)
            elif lane == 1:
                fn = self.intrinsic("masked.load", vt, [ir.PointerType(), I32, mask.type, vt],
                                    [vt, ptr.type])
                v = self.b.call(fn, [ptr, align, mask, passthru])
            elif 1 < lane <= self.span:
                v = self.strided_load(ptr, st, lane, mask, align)
            else:
                ptrs = self.lane_pointers(ptr, st, lane)
                fn = self.intrinsic("masked.gather", vt, [ptrs.type, I32, mask.type, vt],
                                    [vt, ptrs.type])
                v = self.b.call(fn, [ptrs, align, mask, passthru])
        return self.from_storage(v, e.dtype)

    def strided_load(self, ptr, st, stride: int, mask: ir.Value, align: ir.Constant) -> ir.Value:
        """Lanes ``ptr[stride * i]`` where ``mask``: one masked load of the span, whose elements
        are loaded only where a lane's are (so exactly what a gather reads), then a shuffle."""
        w = self.width
        span = ir.VectorType(st, w * stride)
        none = ir.Constant(ir.VectorType(I1, w), [0] * w)
        # shufflevector indices >= w pick from ``none``: element j is lane j / stride's, or off.
        picks = [j // stride if j % stride == 0 else w for j in range(w * stride)]
        span_mask = self.b.shuffle_vector(mask, none, ir.Constant(ir.VectorType(I32, w * stride), picks))
        fn = self.intrinsic("masked.load", span, [ir.PointerType(), I32, span_mask.type, span],
                            [span, ptr.type])
        wide = self.b.call(fn, [ptr, align, span_mask, ir.Constant(span, None)])
        lanes = ir.Constant(ir.VectorType(I32, w), [stride * i for i in range(w)])
        return self.b.shuffle_vector(wide, ir.Constant(span, ir.Undefined), lanes)

    def gather(self, e: Gather, offset: ir.Value, pt: Point) -> ir.Value:
        """``e`` at element ``offset`` (i64, already clamped into the binding)."""
        st = storage_type(e.dtype)
        nbytes = max(1, bits(e.dtype) // 8)
        ptr = self.b.gep(self.bindings[e.binding], [offset], source_etype=st)
        if self.width == 1:
            return self.from_storage(self.b.load(ptr, align=nbytes, typ=st), e.dtype)
        ptr.type = ir.VectorType(ir.PointerType(), self.width)  # llvmlite types vector GEPs as ptr
        vt = ir.VectorType(st, self.width)
        mask = pt.mask if pt.mask is not None else self.all_lanes()
        fn = self.intrinsic("masked.gather", vt, [ptr.type, I32, mask.type, vt], [vt, ptr.type])
        v = self.b.call(fn, [ptr, ir.Constant(I32, nbytes), mask, ir.Constant(vt, None)])
        return self.from_storage(v, e.dtype)

    def from_storage(self, v: ir.Value, dtype: str) -> ir.Value:
        if dtype == "i1":
            return self.b.icmp_unsigned("!=", v, ir.Constant(v.type, None))
        if dtype == "bf16":
            return self.from_bf16_bits(v)
        return v

    def to_storage(self, v: ir.Value, dtype: str) -> ir.Value:
        """A computed value as memory holds it (``from_storage`` undone)."""
        if dtype == "i1":
            return self.b.zext(v, ir.VectorType(I8, self.width) if self.width > 1 else I8)
        if dtype == "bf16":
            return self.to_bf16_bits(v)
        return v

    def store(self, binding: int, affine, value: ir.Value, pt: Point) -> None:
        ptr, st, lane = self.address(binding, affine, pt)
        nbytes = max(1, bits(self.kernel.bindings[binding].dtype) // 8)
        value = self.to_storage(value, self.kernel.bindings[binding].dtype)
        align = ir.Constant(I32, nbytes)
        if self.width == 1:
            self.b.store(value, ptr, align=nbytes)
            return
        mask = pt.mask if pt.mask is not None else self.all_lanes()
        if lane == 1 and pt.mask is None:
            self.b.store(value, ptr, align=nbytes)
        elif lane == 1:
            fn = self.intrinsic("masked.store", ir.VoidType(), [value.type, ir.PointerType(), I32, mask.type],
                                [value.type, ptr.type])
            self.b.call(fn, [value, ptr, align, mask])
        else:
            ptrs = self.lane_pointers(ptr, st, lane)
            fn = self.intrinsic("masked.scatter", ir.VoidType(), [value.type, ptrs.type, I32, mask.type],
                                [value.type, ptrs.type])
            self.b.call(fn, [value, ptrs, align, mask])

    def all_lanes(self) -> ir.Constant:
        return ir.Constant(ir.VectorType(I1, self.width), [1] * self.width)

    # ---- bf16 ----

    def from_bf16_bits(self, raw: ir.Value) -> ir.Value:
        """bf16 bits (i16) -> the f32 of the same value (exact)."""
        b = self.b
        return b.bitcast(b.shl(b.zext(raw, self.ty("i32")), self.const(16, "i32")), self.ty("f32"))

    def to_bf16_bits(self, x: ir.Value) -> ir.Value:
        """f32 -> bf16 bits (i16), rounded to nearest even; a NaN stays a (quiet) NaN."""
        b = self.b
        u = b.bitcast(x, self.ty("i32"))
        high = b.lshr(u, self.const(16, "i32"))
        bias = b.add(self.const(0x7FFF, "i32"), b.and_(high, self.const(1, "i32")))
        rounded = b.lshr(b.add(u, bias), self.const(16, "i32"))
        nan = b.fcmp_unordered("uno", x, x)
        bits = b.select(nan, b.or_(high, self.const(0x40, "i32")), rounded)
        return b.trunc(bits, self.ty("i16"))

    def round_bf16(self, x: ir.Value) -> ir.Value:
        """An f32 rounded to the nearest bf16 value."""
        return self.from_bf16_bits(self.to_bf16_bits(x))

    # ---- expressions ----

    def emit(self, expr: Expr, pt: Point, fast: bool = False, known: dict | None = None) -> ir.Value:
        """The value of ``expr`` at ``pt``; ``fast`` allows reassociation (reductions);
        ``known``: values of sub-expressions already emitted at ``pt`` (loads read otherwise)."""
        return self._emit(expr, pt, fast, dict(known or {}), None)

    def _emit(self, e: Expr, pt: Point, fast: bool, memo: dict, guard: ir.Value | None) -> ir.Value:
        """``guard`` (vector mode): lanes where every enclosing Select arm is the chosen one."""
        if e not in memo:
            for node in lowering_order(e, memo, self._eager):
                if node not in memo:  # emitted meanwhile inside an unguarded Select
                    memo[node] = self._emit_node(node, pt, fast, memo, guard)
        return memo[e]

    def _eager(self, e: Expr) -> tuple[Expr, ...]:
        """The operands ``_emit_node`` emits before ``e`` itself, in the current block and mode."""
        if isinstance(e, Select) and (self._guarded(e) or e.lazy):
            return (e.cond,)
        if expanded(e):
            return ()
        return operands(e)

    def _emit_node(self, e: Expr, pt: Point, fast: bool, memo: dict, guard) -> ir.Value:
        if isinstance(e, Select) and self._guarded(e):
            value = self._lazy_select(e, pt, fast, memo, guard)
        elif isinstance(e, Select) and e.lazy:
            value = self._rare_select(e, pt, fast, memo, guard)
        elif isinstance(e, Load):
            value = self.load(e, pt, guard if e in self.unsafe_loads else None)
        elif isinstance(e, Gather):  # clamped again: the emitted code never trusts its index
            at = gather_offset(e.index, self.kernel.bindings[e.binding].shape, self.kernel.loop_ranges)
            offset = self._emit(at, pt, fast, memo, guard)
            value = self.gather(e, self.int_resize(offset, at.dtype, "index", signed=False), pt)
        elif expanded(e):
            value = self._emit(math_expansion.expand(e), pt, False, memo, guard)  # not reassociated
        else:
            args = []
            for c in operands(e):
                args.append(self._emit(c, pt, fast, memo, guard))
            value = self._node(e, args, pt, fast)
        return value

    def _guarded(self, e: Select) -> bool:
        """True when an arm holds a load that may be out of range where it is not chosen."""
        return any(contains(arm, self._unsafe, self._unsafe_memo) for arm in (e.a, e.b))

    def _unsafe(self, e: Expr) -> bool:
        return isinstance(e, Load) and e in self.unsafe_loads

    def _lazy_select(self, e: Select, pt: Point, fast: bool, memo: dict, guard) -> ir.Value:
        """Evaluates only the chosen arm: by branching (scalar) or by masking loads (vector).
        Each arm gets its own copy of the memo: its values do not dominate the other arm."""
        b = self.b
        cond = self._emit(e.cond, pt, fast, memo, guard)
        if self.width > 1:
            not_cond = b.xor(cond, self.all_lanes())
            guard_a = cond if guard is None else b.and_(guard, cond)
            guard_b = not_cond if guard is None else b.and_(guard, not_cond)
            return b.select(cond, self._emit(e.a, pt, fast, dict(memo), guard_a),
                            self._emit(e.b, pt, fast, dict(memo), guard_b))
        then_block, else_block = b.append_basic_block("sel.a"), b.append_basic_block("sel.b")
        merge = b.append_basic_block("sel.end")
        b.cbranch(cond, then_block, else_block)
        incoming = []
        for block, arm in ((then_block, e.a), (else_block, e.b)):
            b.position_at_end(block)
            incoming.append((self._emit(arm, pt, fast, dict(memo), None), b.block))
            b.branch(merge)
        b.position_at_end(merge)
        phi = b.phi(incoming[0][0].type)
        for value, block in incoming:
            phi.add_incoming(value, block)
        return phi

    def _rare_select(self, e: Select, pt: Point, fast: bool, memo: dict, guard) -> ir.Value:
        """A select whose first arm is rare and dear (``lazy``: math_expansion's Payne-Hanek
        reduction for huge arguments): computed only where some lane takes it, by a branch
        around it on the whole vector; the common arm always."""
        if self.width == 1:
            return self._lazy_select(e, pt, fast, memo, guard)
        b = self.b
        cond = self._emit(e.cond, pt, fast, memo, guard)
        common = self._emit(e.b, pt, fast, memo, guard)
        any_lane = b.call(self.intrinsic("vector.reduce.or", I1, [cond.type], [cond.type]), [cond])
        rare_block, merge = b.append_basic_block("rare"), b.append_basic_block("rare.end")
        before = b.block
        b.cbranch(any_lane, rare_block, merge)
        b.position_at_end(rare_block)
        rare = self._emit(e.a, pt, fast, dict(memo), guard)
        rare_end = b.block
        b.branch(merge)
        b.position_at_end(merge)
        phi = b.phi(rare.type)
        phi.add_incoming(rare, rare_end)
        phi.add_incoming(ir.Constant(rare.type, None), before)  # no lane reads it there
        return b.select(cond, phi, common)

    def _node(self, e: Expr, args: list[ir.Value], pt: Point, fast: bool) -> ir.Value:
        if isinstance(e, Const):
            return self.const(e.value, e.dtype)
        if isinstance(e, LoopIndex):
            ix = self.splat(pt.indices[e.dim])
            if self.width > 1 and e.dim == pt.lane_dim:
                ix = self.b.add(ix, self.iota())
            return self.int_resize(ix, "index", e.dtype, signed=True)
        if isinstance(e, SizeValue):  # a push constant's size: the same in every lane
            return self.int_resize(self.splat(self.sizes(e.size)), "index", e.dtype, signed=False)
        if isinstance(e, Acc):
            return pt.accs[e.result]
        if isinstance(e, Final):  # a scalar: the same in every lane
            return self.splat(pt.finals[e.result])
        if isinstance(e, Unary):
            value = self.unary(e.op, args[0], compute_dtype(e.dtype), fast)
        elif isinstance(e, Binary):
            value = self.binary(e.op, args[0], args[1], compute_dtype(e.dtype), fast)
        elif isinstance(e, Compare):
            return self.compare(e.predicate, args[0], args[1], compute_dtype(e.a.dtype))
        elif isinstance(e, Select):
            return self.b.select(args[0], args[1], args[2])
        elif isinstance(e, Cast):
            value = self.cast(e.op, args[0], e.x.dtype, e.dtype)
        else:
            raise CompileError(f"llvm-cpu: unknown expression {e!r} in kernel '{self.kernel.name}'")
        if e.dtype == "bf16" and not (isinstance(e, Cast) and e.op == "bitcast"):
            value = self.round_bf16(value)
        return value

    def unary(self, op: str, x: ir.Value, dtype: str, fast: bool) -> ir.Value:
        b = self.b
        flags = FAST if fast else ()
        if is_float(dtype):
            if op == "neg":
                return b.fneg(x, flags=flags)
            if op in INLINE_UNARY and dtype in ("f32", "f16"):
                return self.inline_math(op, [x], dtype)
            if op in _FLOAT_INTRINSICS:
                return b.call(self.intrinsic(_FLOAT_INTRINSICS[op], x.type, [x.type], [x.type]), [x])
            if op in _LIBM or op in math_expansion.EXPANDED:
                return self.libm(op, [x], dtype)
            if op == "rsqrt":
                sqrt = b.call(self.intrinsic("sqrt", x.type, [x.type], [x.type]), [x])
                return b.fdiv(self.const(1.0, dtype), sqrt, flags=flags)
            if op == "sign":
                pos = b.fcmp_ordered(">", x, self.const(0.0, dtype))
                neg = b.fcmp_ordered("<", x, self.const(0.0, dtype))
                return b.select(pos, self.const(1.0, dtype),
                                b.select(neg, self.const(-1.0, dtype), x))
        else:
            if op == "neg":
                return b.sub(self.const(0, dtype), x)
            if op == "abs":
                if is_unsigned(dtype) or dtype == "i1":
                    return x
                return b.call(self.intrinsic("abs", x.type, [x.type, I1], [x.type]),
                              [x, ir.Constant(I1, 0)])
            if op == "not":
                return b.xor(x, self.const(-1, dtype))
            if op == "sign":
                zero = self.const(0, dtype)
                if is_unsigned(dtype) or dtype == "i1":
                    return b.zext(b.icmp_unsigned("!=", x, zero), x.type)
                return b.sub(b.zext(b.icmp_signed(">", x, zero), x.type),
                             b.zext(b.icmp_signed("<", x, zero), x.type))
        raise CompileError(f"llvm-cpu: unary '{op}' is not defined on {dtype} "
                           f"(kernel '{self.kernel.name}')")

    def binary(self, op: str, a: ir.Value, c: ir.Value, dtype: str, fast: bool) -> ir.Value:
        b = self.b
        if is_float(dtype):
            flags = FAST if fast else ()
            simple = {"add": b.fadd, "sub": b.fsub, "mul": b.fmul, "div": b.fdiv, "rem": b.frem}
            if op in simple:
                return simple[op](a, c, flags=flags)
            if op in INLINE_BINARY and dtype in ("f32", "f16"):
                return self.inline_math(op, [a, c], dtype)
            if op in _FLOAT_BINARY_INTRINSICS:
                fn = self.intrinsic(_FLOAT_BINARY_INTRINSICS[op], a.type, [a.type, a.type], [a.type])
                return b.call(fn, [a, c])
        else:
            unsigned = is_unsigned(dtype) or dtype == "i1"
            simple = {"add": b.add, "sub": b.sub, "mul": b.mul, "and": b.and_, "or": b.or_,
                      "xor": b.xor}
            if op in simple:
                return simple[op](a, c)
            if op in ("div", "rem"):
                return self.int_divide(op, a, c, dtype, unsigned)
            if op in ("max", "min"):
                name = ("u" if unsigned else "s") + op
                return b.call(self.intrinsic(name, a.type, [a.type, a.type], [a.type]), [a, c])
            if op in ("shl", "shr"):
                return self.shift(op, a, c, dtype, unsigned)
            if op == "pow":
                return self.int_power(a, c, dtype, unsigned)
        raise CompileError(f"llvm-cpu: binary '{op}' is not defined on {dtype} "
                           f"(kernel '{self.kernel.name}')")

    def int_divide(self, op, a, c, dtype, unsigned):
        """Division by zero gives 0 and MIN / -1 wraps, instead of a SIGFPE."""
        b = self.b
        zero, one = self.const(0, dtype), self.const(1, dtype)
        by_zero = b.icmp_unsigned("==", c, zero)
        safe = b.select(by_zero, one, c)
        if not unsigned:
            overflow = b.and_(b.icmp_signed("==", a, self.const(-(1 << (bits(dtype) - 1)), dtype)),
                              b.icmp_signed("==", c, self.const(-1, dtype)))
            safe = b.select(overflow, one, safe)
        fn = {("div", True): b.udiv, ("div", False): b.sdiv,
              ("rem", True): b.urem, ("rem", False): b.srem}[(op, unsigned)]
        return b.select(by_zero, zero, fn(a, safe))

    def shift(self, op, a, c, dtype, unsigned):
        """Shifts by the bit width or more give 0 (or the sign fill), as numpy does."""
        b = self.b
        width = self.const(bits(dtype), dtype) if bits(dtype) > 1 else self.const(1, dtype)
        over = b.icmp_unsigned(">=", c, width)
        if op == "shl":
            return b.select(over, self.const(0, dtype), b.shl(a, c))
        if unsigned:
            return b.select(over, self.const(0, dtype), b.lshr(a, c))
        return b.select(over, b.ashr(a, self.const(bits(dtype) - 1, dtype)), b.ashr(a, c))

    def int_power(self, a, c, dtype, unsigned):
        """Square-and-multiply over every exponent bit; a negative exponent gives 1/a truncated."""
        b = self.b
        result, base = self.const(1, dtype), a
        for i in range(bits(dtype)):
            bit = b.icmp_unsigned("!=", b.and_(c, self.const(1 << i, dtype)), self.const(0, dtype))
            result = b.select(bit, b.mul(result, base), result)
            base = b.mul(base, base)
        if unsigned:
            return result
        one, minus_one = self.const(1, dtype), self.const(-1, dtype)
        odd = b.icmp_unsigned("!=", b.and_(c, one), self.const(0, dtype))
        reciprocal = b.select(b.icmp_signed("==", a, one), one,
                              b.select(b.icmp_signed("==", a, minus_one),
                                       b.select(odd, minus_one, one), self.const(0, dtype)))
        return b.select(b.icmp_signed("<", c, self.const(0, dtype)), reciprocal, result)

    def compare(self, pred: str, a: ir.Value, c: ir.Value, dtype: str) -> ir.Value:
        b = self.b
        if is_float(dtype):
            if pred in ("ord", "uno"):
                return (b.fcmp_ordered if pred == "ord" else b.fcmp_unordered)(pred, a, c)
            if pred in _CMP:
                return b.fcmp_ordered(_CMP[pred], a, c)
            return b.fcmp_unordered(_CMP[pred[1:]], a, c)
        base = pred[1:] if pred not in _CMP and pred[1:] in _CMP else pred
        if base not in _CMP:
            raise CompileError(f"llvm-cpu: predicate '{pred}' is not defined on {dtype}")
        unsigned = is_unsigned(dtype) or dtype == "i1" or base != pred
        return (b.icmp_unsigned if unsigned else b.icmp_signed)(_CMP[base], a, c)

    def cast(self, op: str, x: ir.Value, src: str, dst: str) -> ir.Value:
        b = self.b
        t = self.ty(dst)
        if op in ("extsi", "extui", "trunci"):
            return self.int_resize(x, src, dst, signed=op == "extsi")
        if op == "bitcast":
            if bits(src) != bits(dst):
                raise CompileError(f"llvm-cpu: bitcast from {src} to {dst} changes the size")
            if src == "bf16":
                return self.to_bf16_bits(x)  # exact: x holds a bf16 value
            if dst == "bf16":
                return self.from_bf16_bits(x)
            return b.bitcast(x, t)
        src, dst = compute_dtype(src), compute_dtype(dst)
        fn = {"fptosi": b.fptosi, "fptoui": b.fptoui, "sitofp": b.sitofp, "uitofp": b.uitofp,
              "fpext": b.fpext, "fptrunc": b.fptrunc}.get(op)
        if fn is None:
            raise CompileError(f"llvm-cpu: unknown cast '{op}' from {src} to {dst}")
        if op in ("fpext", "fptrunc") and bits(src) == bits(dst):
            return x
        if op in ("fptosi", "fptoui") and bits(dst) < 32:  # DESIGN.md, "Narrow conversions"
            return b.trunc(b.fptosi(x, self.ty("i32")), t)
        return fn(x, t)

    def int_resize(self, x: ir.Value, src: str, dst: str, signed: bool) -> ir.Value:
        if bits(src) == bits(dst):
            return x
        t = self.ty(dst)
        if bits(dst) < bits(src):
            return self.b.trunc(x, t)
        return self.b.sext(x, t) if signed else self.b.zext(x, t)

    def inline_math(self, op: str, args: list[ir.Value], dtype: str) -> ir.Value:
        """An inline f32 math function (vecmath); f16 is widened to f32 and rounded back."""
        if dtype == "f32":
            return self.b.call(math_function(self.b.module, op, args[0].type), args)
        wide = self.ty("f32")
        y = self.b.call(math_function(self.b.module, op, wide), [self.b.fpext(a, wide) for a in args])
        return self.b.fptrunc(y, args[0].type)

    def libm(self, name: str, args: list[ir.Value], dtype: str) -> ir.Value:
        """A libm call lane by lane; f16 goes through the f32 function."""
        b = self.b
        scalar = scalar_type(dtype)
        call_t = ir.FloatType() if dtype == "f16" else scalar
        fn = self.function(name if dtype == "f64" else name + "f", call_t, [call_t] * len(args))

        def one(vals):
            vals = [b.fpext(v, call_t) if dtype == "f16" else v for v in vals]
            r = b.call(fn, vals)
            return b.fptrunc(r, scalar) if dtype == "f16" else r

        if self.width == 1:
            return one(args)
        out = ir.Constant(args[0].type, ir.Undefined)
        for lane in range(self.width):
            i = ir.Constant(I32, lane)
            out = b.insert_element(out, one([b.extract_element(a, i) for a in args]), i)
        return out


@functools.cache
def _broadcast_mask(width: int) -> ir.Constant:
    """shufflevector's mask that copies lane 0 to every lane: one object per width, shared."""
    return ir.Constant(ir.VectorType(I32, width), [0] * width)
