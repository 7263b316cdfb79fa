"""Lowers kernel-IR scalar expressions to LLVM IR text for NVPTX.

The NVPTX backend aborts the process on math intrinsics it cannot select (llvm.exp, llvm.sin, ...),
and PTX's own (ex2/lg2/sin.approx) are approximations, so transcendental functions come from
``codegen/common/math_expansion`` as plain arithmetic in f32; f16 and bf16 math is done in f32 (NVPTX
converts bf16 with cvt.rn.bf16.f32 on sm_80+). f64 transcendental functions are refused with a
CompileError (they would need libdevice). A target that links a device library instead calls its
functions (``target.library_math``: rocm's ocml under ``--iree-rocm-link-bc``).
"""

from __future__ import annotations

from collections.abc import Callable

from pyree.compiler import kernel as K
from pyree.compiler.codegen.common.llvm_gpu import addressing as A
from pyree.compiler.codegen.common.llvm_gpu.llvm_text import Function, const, llvm_type
from pyree.compiler.codegen.common.math_expansion import EXACT_FMOD, GPU_EXPANDED, exact_fmod, expand
from pyree.compiler.codegen.common.normalize import affine_range
from pyree.compiler.errors import CompileError

_FCMP = {"eq": "oeq", "ne": "one", "lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge",
         "ueq": "ueq", "une": "une", "ult": "ult", "ule": "ule", "ugt": "ugt", "uge": "uge",
         "ord": "ord", "uno": "uno"}
_CAST = {"fptosi": "fptosi", "fptoui": "fptoui", "sitofp": "sitofp", "uitofp": "uitofp",
         "fpext": "fpext", "fptrunc": "fptrunc", "extsi": "sext", "extui": "zext",
         "trunci": "trunc", "bitcast": "bitcast"}
_EXPANDED_DTYPES = ("f32", "f16", "bf16")  # f64 math would need libdevice: refused
_SUFFIX = {"float": "f32", "double": "f64", "half": "f16", "bfloat": "bf16"}


def fn_backend(fn: Function) -> str:
    return fn.module.target.backend


class ScalarLowering:
    """Lowers expressions once each (a per-lane cache); loads, loop indices and accumulators come
    from the kernel template through callbacks. Gathers read binding ``%b<i>`` of ``kernel``."""

    def __init__(self, fn: Function, load: Callable[[K.Load], str],
                 loop_index: Callable[[int], str], acc: Callable[[int], str] | None = None,
                 location: str = "", kernel: K.Kernel | None = None):
        self.fn, self._load, self._loop_index, self._acc = fn, load, loop_index, acc
        self.location, self.kernel = location, kernel
        self.cache: dict = {}
        self._fault_memo: dict = {}

    def __call__(self, e: K.Expr) -> str:
        if e not in self.cache:
            for node in K.lowering_order(e, self.cache):
                if node not in self.cache:  # lowered meanwhile as a Select's arm
                    self.cache[node] = self._lower(node)
        return self.cache[e]

    def _lower(self, e: K.Expr) -> str:
        if isinstance(e, K.Load):
            return self._load(e)
        if isinstance(e, K.Gather) and self.kernel is not None:
            return self._gather(e)
        if isinstance(e, K.Const):
            return const(e.value, e.dtype)
        if isinstance(e, K.LoopIndex):
            return self._loop_index(e.dim)
        if isinstance(e, K.SizeValue) and self.fn.sizes is not None:  # a push constant's size
            v = self.fn.sizes(e.size)
            ty = llvm_type(e.dtype)
            return v if ty == "i64" else self._f(f"trunc i64 {v} to {ty}")
        if isinstance(e, (K.Acc, K.Final)):  # a phase's accumulators, its earlier phases' finals
            return self._acc(e.result)
        if isinstance(e, K.Binary) and e.op == "rem" and e.dtype in EXACT_FMOD:
            return self(exact_fmod(e))  # LLVM's GPU frem is a - b * trunc(a / b), rounded
        if isinstance(e, (K.Unary, K.Binary)) and e.op in GPU_EXPANDED:
            library = self.fn.module.target.library_math(e.op, e.dtype)
            if library is not None:
                return self._library_call(e, *library)
            if e.dtype in _EXPANDED_DTYPES:
                return self(expand(e))
        if isinstance(e, K.Unary):
            return self._unary(e.op, self(e.x), e.x.dtype, e.dtype)
        if isinstance(e, K.Binary):
            return self._binary(e.op, self(e.a), self(e.b), e.dtype)
        if isinstance(e, K.Compare):
            return self._compare(e.predicate, self(e.a), self(e.b), e.a.dtype)
        if isinstance(e, K.Select):
            ty = llvm_type(e.dtype)
            if e.lazy or self._may_fault(e.a) or self._may_fault(e.b):
                return self._branch(e, ty)
            return self.fn.op(f"select i1 {self(e.cond)}, {ty} {self(e.a)}, {ty} {self(e.b)}")
        if isinstance(e, K.Cast):
            return self._cast(e.op, self(e.x), e.x.dtype, e.dtype)
        raise CompileError(f"the {fn_backend(self.fn)} backend cannot lower {type(e).__name__}", self.location)

    def _may_fault(self, e: K.Expr) -> bool:
        """Whether ``e`` loads outside its binding anywhere in the loop box (a pad's or an
        insert_slice's load on the arm its Select does not choose there). Without the kernel,
        any load might."""
        return K.contains(e, self._faults, self._fault_memo)

    def _faults(self, x: K.Expr) -> bool:
        if not isinstance(x, K.Load):
            return False
        if self.kernel is None:
            return True
        shape = self.kernel.bindings[x.binding].shape
        if K.has_run_time_sizes(self.kernel):
            return any(K.within(ix, self.kernel.loop_ranges, n) is not True
                       for ix, n in zip(x.index, shape))
        return any(not 0 <= lo <= hi < n for lo, hi, n in (
            (*affine_range(ix, self.kernel.loop_ranges), n) for ix, n in zip(x.index, shape)))

    def _branch(self, e: K.Select, ty: str) -> str:
        """A Select that only evaluates its chosen arm (the kernel IR's contract: the other arm
        may load out of range; an LLVM ``select`` of two loads read before the buffer start and
        faulted where memory below it was unmapped). Each arm lowers with a copy of
        the cache, so values made inside it are not reused where they do not dominate."""
        fn = self.fn
        slot = fn.alloca(ty)
        yes, no, done = fn.new_label("sel_a"), fn.new_label("sel_b"), fn.new_label("sel_end")
        fn.cbr(self(e.cond), yes, no)
        outer = self.cache
        for label, arm in ((yes, e.a), (no, e.b)):
            fn.label(label)
            self.cache = dict(outer)
            fn.raw(f"store {ty} {self(arm)}, ptr {slot}")
            fn.br(done)
        self.cache = outer
        fn.label(done)
        return fn.op(f"load {ty}, ptr {slot}")

    def _gather(self, e: K.Gather) -> str:
        """A load at the clamped row-major offset of ``e``'s computed index."""
        at = K.gather_offset(e.index, self.kernel.bindings[e.binding].shape, self.kernel.loop_ranges)
        offset = self(at)
        if at.dtype != "index":
            offset = self._f(f"zext {llvm_type(at.dtype)} {offset} to i64")
        return A.load(self.fn, A.element_ptr(self.fn, f"%b{e.binding}", e.dtype, offset), e.dtype)

    def _library_call(self, e: K.Unary | K.Binary, name: str, compute: str) -> str:
        """``e`` as a call to the target's device-library function ``name`` over ``compute``
        (operands widened to it and the result rounded back, as bf16 through f32)."""
        ty = llvm_type(compute)
        operands = (e.x,) if isinstance(e, K.Unary) else (e.a, e.b)
        args = [(ty, self._cast("fpext", self(a), a.dtype, compute)) for a in operands]
        return self._cast("fptrunc", self.fn.call(ty, name, args, library=True), compute, e.dtype)

    # ---- helpers --------------------------------------------------------------------------
    def _unsupported(self, op: str, dtype: str):
        return CompileError(f"'{op}' on {dtype} is not supported by the {fn_backend(self.fn)} backend",
                            self.location)

    def _intr(self, name: str, ty: str, *args: str) -> str:
        return self.fn.call(ty, f"llvm.{name}.{_SUFFIX.get(ty, ty)}", [(ty, a) for a in args])

    def _f(self, text: str) -> str:
        return self.fn.op(text)

    # ---- ops ------------------------------------------------------------------------------
    def _unary(self, op: str, x: str, src: str, dtype: str) -> str:
        ty = llvm_type(dtype)
        f = self._f
        if K.is_float(dtype):
            if op == "neg":
                return f(f"fneg {ty} {x}")
            if op == "abs":
                return self._intr("fabs", ty, x)
            if op in ("floor", "ceil", "round", "roundeven", "trunc", "sqrt"):
                return self._intr(op, ty, x)
            if op == "rsqrt":
                return f(f"fdiv {ty} {const(1.0, dtype)}, {self._intr('sqrt', ty, x)}")
            if op == "sign":
                one = self._intr("copysign", ty, const(1.0, dtype), x)
                zero = f(f"fcmp oeq {ty} {x}, {const(0.0, dtype)}")
                nan = f(f"fcmp uno {ty} {x}, {x}")
                return f(f"select i1 {nan}, {ty} {x}, {ty} {f(f'select i1 {zero}, {ty} {x}, {ty} {one}')}")
            raise self._unsupported(op, dtype)
        if op == "neg":
            return f(f"sub {ty} 0, {x}")
        if op == "abs":
            return self.fn.call(ty, f"llvm.abs.{ty}", [(ty, x), ("i1", "false")])
        if op == "not":
            return f(f"xor {ty} {x}, {'true' if ty == 'i1' else -1}")
        if op == "sign":
            if K.is_unsigned(dtype) or dtype == "i1":
                return f(f"zext i1 {f(f'icmp ne {ty} {x}, 0')} to {ty}")
            lo = self.fn.call(ty, f"llvm.smin.{ty}", [(ty, x), (ty, "1")])
            return self.fn.call(ty, f"llvm.smax.{ty}", [(ty, lo), (ty, "-1")])
        raise self._unsupported(op, dtype)

    def _binary(self, op: str, a: str, b: str, dtype: str) -> str:
        ty = llvm_type(dtype)
        f = self._f
        if K.is_float(dtype):
            simple = {"add": "fadd", "sub": "fsub", "mul": "fmul", "div": "fdiv", "rem": "frem"}
            if op in simple:
                return f(f"{simple[op]} {ty} {a}, {b}")
            if op in ("max", "min"):
                return self._intr("maximum" if op == "max" else "minimum", ty, a, b)
            if op == "copysign":
                return self._intr("copysign", ty, a, b)
            raise self._unsupported(op, dtype)
        signed = not K.is_unsigned(dtype) and dtype != "i1"  # an i1 is 0 or 1, never -1
        simple = {"add": "add", "sub": "sub", "mul": "mul", "and": "and", "or": "or",
                  "xor": "xor", "shl": "shl", "div": "sdiv" if signed else "udiv",
                  "rem": "srem" if signed else "urem", "shr": "ashr" if signed else "lshr"}
        if op in simple:
            return f(f"{simple[op]} {ty} {a}, {b}")
        if op in ("max", "min"):
            return self.fn.call(ty, f"llvm.{'s' if signed else 'u'}{op}.{ty}", [(ty, a), (ty, b)])
        raise self._unsupported(op, dtype)

    def _compare(self, pred: str, a: str, b: str, dtype: str) -> str:
        ty = llvm_type(dtype)
        if K.is_float(dtype):
            return self._f(f"fcmp {_FCMP[pred]} {ty} {a}, {b}")
        base = pred[1:] if pred.startswith("u") and pred not in ("uno",) else pred
        if base in ("eq", "ne"):
            p = base
        elif base in ("lt", "le", "gt", "ge"):
            p = ("u" if K.is_unsigned(dtype) or dtype == "i1" else "s") + base
        else:
            raise self._unsupported(pred, dtype)
        return self._f(f"icmp {p} {ty} {a}, {b}")

    def _cast(self, op: str, x: str, src: str, dst: str) -> str:
        s, d = llvm_type(src), llvm_type(dst)
        if s == d and op != "bitcast":
            return x
        if (s, d) == ("double", "bfloat"):  # through f32, as PyTorch, XLA and llvm-cpu round
            x, s = self._f(f"fptrunc double {x} to float"), "float"
        if op in ("fptosi", "fptoui") and d in ("i8", "i16"):  # DESIGN.md, "Narrow conversions"
            return self._f(f"trunc i32 {self._f(f'fptosi {s} {x} to i32')} to {d}")
        return self._f(f"{_CAST[op]} {s} {x} to {d}")
