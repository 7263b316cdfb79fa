"""Lowers kernel-IR scalar expressions to LLVM IR text for NVPTX.

The NVPTX backend aborts the process on math intrinsics it cannot select (llvm.exp, llvm.sin, ...),
so transcendental functions are written here from the PTX approximations (ex2/lg2/sin/cos.approx)
plus range reduction; f16 and bf16 math is done in f32 (NVPTX converts bf16 with cvt.rn.bf16.f32
on sm_80+). f64 transcendental functions are refused with a
CompileError (they would need libdevice).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from pyree.compiler import kernel as K
from pyree.compiler.codegen.cuda import addressing as A
from pyree.compiler.codegen.cuda.llvm_text import Function, const, llvm_type
from pyree.compiler.errors import CompileError

_FCMP = {"eq": "oeq", "ne": "one", "lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge",
         "ueq": "ueq", "une": "une", "ult": "ult", "ule": "ule", "ugt": "ugt", "uge": "uge",
         "ord": "ord", "uno": "uno"}
_CAST = {"fptosi": "fptosi", "fptoui": "fptoui", "sitofp": "sitofp", "uitofp": "uitofp",
         "fpext": "fpext", "fptrunc": "fptrunc", "extsi": "sext", "extui": "zext",
         "trunci": "trunc", "bitcast": "bitcast"}
_SUFFIX = {"float": "f32", "double": "f64", "half": "f16", "bfloat": "bf16"}


class ScalarLowering:
    """Lowers expressions once each (a per-lane cache); loads, loop indices and accumulators come
    from the kernel template through callbacks. Gathers read binding ``%b<i>`` of ``kernel``."""

    def __init__(self, fn: Function, load: Callable[[K.Load], str],
                 loop_index: Callable[[int], str], acc: Callable[[int], str] | None = None,
                 location: str = "", kernel: K.Kernel | None = None):
        self.fn, self._load, self._loop_index, self._acc = fn, load, loop_index, acc
        self.location, self.kernel = location, kernel
        self.cache: dict = {}

    def __call__(self, e: K.Expr) -> str:
        if e not in self.cache:
            self.cache[e] = self._lower(e)
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
        if isinstance(e, K.Acc):
            return self._acc(e.result)
        if isinstance(e, K.Unary):
            return self._unary(e.op, self(e.x), e.x.dtype, e.dtype)
        if isinstance(e, K.Binary):
            return self._binary(e.op, self(e.a), self(e.b), e.dtype)
        if isinstance(e, K.Compare):
            return self._compare(e.predicate, self(e.a), self(e.b), e.a.dtype)
        if isinstance(e, K.Select):
            ty = llvm_type(e.dtype)
            return self.fn.op(f"select i1 {self(e.cond)}, {ty} {self(e.a)}, {ty} {self(e.b)}")
        if isinstance(e, K.Cast):
            return self._cast(e.op, self(e.x), e.x.dtype, e.dtype)
        raise CompileError(f"the cuda backend cannot lower {type(e).__name__}", self.location)

    def _gather(self, e: K.Gather) -> str:
        """A load at the clamped row-major offset of ``e``'s computed index."""
        at = K.gather_offset(e.index, self.kernel.bindings[e.binding].shape, self.kernel.loop_ranges)
        offset = self(at)
        if at.dtype != "index":
            offset = self._f(f"zext {llvm_type(at.dtype)} {offset} to i64")
        return A.load(self.fn, A.element_ptr(self.fn, f"%b{e.binding}", e.dtype, offset), e.dtype)

    # ---- helpers --------------------------------------------------------------------------
    def _unsupported(self, op: str, dtype: str):
        return CompileError(f"'{op}' on {dtype} is not supported by the cuda backend", self.location)

    def _intr(self, name: str, ty: str, *args: str) -> str:
        return self.fn.call(ty, f"llvm.{name}.{_SUFFIX.get(ty, ty)}", [(ty, a) for a in args])

    def _f(self, text: str) -> str:
        return self.fn.op(text)

    # f32 primitives ------------------------------------------------------------------------
    def _c(self, v: float) -> str:
        return const(v, "f32")

    def _ex2(self, x: str) -> str:
        return self.fn.call("float", "llvm.nvvm.ex2.approx.f", [("float", x)])

    def _lg2(self, x: str) -> str:
        return self.fn.call("float", "llvm.nvvm.lg2.approx.f", [("float", x)])

    def _exp(self, x: str) -> str:
        return self._ex2(self._f(f"fmul float {x}, {self._c(1 / math.log(2))}"))

    def _log(self, x: str) -> str:
        return self._f(f"fmul float {self._lg2(x)}, {self._c(math.log(2))}")

    def _poly(self, x: str, coeffs: list[float]) -> str:
        """coeffs[0] + coeffs[1] x + ... by Horner."""
        acc = self._c(coeffs[-1])
        for c in reversed(coeffs[:-1]):
            prod = self._f(f"fmul float {acc}, {x}")
            acc = self._f(f"fadd float {prod}, {self._c(c)}")
        return acc

    def _select(self, cond: str, a: str, b: str, ty: str = "float") -> str:
        return self._f(f"select i1 {cond}, {ty} {a}, {ty} {b}")

    def _fabs(self, x: str) -> str:
        return self._intr("fabs", "float", x)

    def _reduce_2pi(self, x: str) -> str:
        k = self._intr("roundeven", "float",
                       self._f(f"fmul float {x}, {self._c(1 / (2 * math.pi))}"))
        hi, lo = 6.28125, 2 * math.pi - 6.28125
        r = self._f(f"fsub float {x}, {self._f(f'fmul float {k}, {self._c(hi)}')}")
        return self._f(f"fsub float {r}, {self._f(f'fmul float {k}, {self._c(lo)}')}")

    def _f32_unary(self, op: str, x: str) -> str:
        f = self._f
        if op == "exp":
            return self._exp(x)
        if op == "exp2":
            return self._ex2(x)
        if op == "log":
            return self._log(x)
        if op == "log2":
            return self._lg2(x)
        if op == "expm1":  # Kahan: (u - 1) * x / log(u), exact near 0
            u = self._exp(x)
            um1 = f(f"fsub float {u}, {self._c(1.0)}")
            r = f(f"fdiv float {f(f'fmul float {um1}, {x}')}, {self._log(u)}")
            small = f(f"fcmp oeq float {u}, {self._c(1.0)}")
            big = f(f"fcmp ogt float {x}, {self._c(80.0)}")
            return self._select(big, u, self._select(small, x, r))
        if op == "log1p":  # Kahan: log(u) * x / (u - 1)
            u = f(f"fadd float {x}, {self._c(1.0)}")
            um1 = f(f"fsub float {u}, {self._c(1.0)}")
            r = f(f"fdiv float {f(f'fmul float {self._log(u)}, {x}')}, {um1}")
            return self._select(f(f"fcmp oeq float {um1}, {self._c(0.0)}"), x, r)
        if op == "tanh":
            a = self._fabs(x)
            t = self._exp(f(f"fmul float {a}, {self._c(-2.0)}"))
            big = f(f"fdiv float {f(f'fsub float {self._c(1.0)}, {t}')}, "
                    f"{f(f'fadd float {self._c(1.0)}, {t}')}")
            x2 = f(f"fmul float {x}, {x}")
            small = f(f"fmul float {x}, {self._poly(x2, [1, -1 / 3, 2 / 15, -17 / 315, 62 / 2835])}")
            r = self._intr("copysign", "float", big, x)
            return self._select(f(f"fcmp olt float {a}, {self._c(0.125)}"), small, r)
        if op in ("sin", "cos"):
            return self.fn.call("float", f"llvm.nvvm.{op}.approx.f",
                                [("float", self._reduce_2pi(x))])
        if op == "tan":
            r = self._reduce_2pi(x)
            s = self.fn.call("float", "llvm.nvvm.sin.approx.f", [("float", r)])
            c = self.fn.call("float", "llvm.nvvm.cos.approx.f", [("float", r)])
            return f(f"fdiv float {s}, {c}")
        if op == "erf":
            a = self._fabs(x)
            x2 = f(f"fmul float {x}, {x}")
            taylor = [2 / math.sqrt(math.pi) * c for c in (1, -1 / 3, 1 / 10, -1 / 42, 1 / 216, -1 / 1320)]
            small = f(f"fmul float {x}, {self._poly(x2, taylor)}")
            at = f(f"fmul float {a}, {self._c(0.3275911)}")
            t = f(f"fdiv float {self._c(1.0)}, {f(f'fadd float {self._c(1.0)}, {at}')}")
            abramowitz_stegun = [0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429]
            p = f(f"fmul float {t}, {self._poly(t, abramowitz_stegun)}")
            e = self._exp(f(f"fneg float {x2}"))
            pe = f(f"fmul float {p}, {e}")
            big = self._intr("copysign", "float", f(f"fsub float {self._c(1.0)}, {pe}"), x)
            return self._select(f(f"fcmp olt float {a}, {self._c(0.5)}"), small, big)
        raise self._unsupported(op, "f32")

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
            if ty == "double":
                raise self._unsupported(op, dtype)
            if ty in ("half", "bfloat"):
                wide = f(f"fpext {ty} {x} to float")
                return f(f"fptrunc float {self._f32_unary(op, wide)} to {ty}")
            return self._f32_unary(op, x)
        if op == "neg":
            return f(f"sub {ty} 0, {x}")
        if op == "abs":
            return self.fn.call(ty, f"llvm.abs.{ty}", [(ty, x), ("i1", "false")])
        if op == "not":
            return f(f"xor {ty} {x}, {'true' if ty == 'i1' else -1}")
        if op == "sign":
            if K.is_unsigned(dtype):
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
            if op == "pow" and ty != "double":
                if ty in ("half", "bfloat"):
                    wa, wb = f(f"fpext {ty} {a} to float"), f(f"fpext {ty} {b} to float")
                    return f(f"fptrunc float {self._pow(wa, wb)} to {ty}")
                return self._pow(a, b)
            raise self._unsupported(op, dtype)
        signed = not K.is_unsigned(dtype)
        simple = {"add": "add", "sub": "sub", "mul": "mul", "and": "and", "or": "or",
                  "xor": "xor", "shl": "shl", "div": "sdiv" if signed else "udiv",
                  "rem": "srem" if signed else "urem", "shr": "ashr" if signed else "lshr"}
        if op in simple:
            return f(f"{simple[op]} {ty} {a}, {b}")
        if op in ("max", "min"):
            return self.fn.call(ty, f"llvm.{'s' if signed else 'u'}{op}.{ty}", [(ty, a), (ty, b)])
        raise self._unsupported(op, dtype)

    def _pow(self, a: str, b: str) -> str:
        """a**b = 2**(b log2|a|), negated for a<0 with odd integer b, NaN for a<0 with fractional b."""
        f = self._f
        r = self._ex2(f(f"fmul float {b}, {self._lg2(self._fabs(a))}"))
        b_int = self._intr("trunc", "float", b)
        bint = f(f"fcmp oeq float {b_int}, {b}")
        half = f(f"fmul float {b}, {self._c(0.5)}")
        half_int = self._intr("trunc", "float", half)
        odd = f(f"and i1 {bint}, {f(f'fcmp one float {half_int}, {half}')}")
        neg = f(f"fcmp olt float {a}, {self._c(0.0)}")
        signed = self._select(odd, f(f"fneg float {r}"), r)
        res = self._select(neg, self._select(bint, signed, self._c(float("nan"))), r)
        return self._select(f(f"fcmp oeq float {b}, {self._c(0.0)}"), self._c(1.0), res)

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
        if (s, d) == ("double", "bfloat"):  # through f32, as ml_dtypes, PyTorch and llvm-cpu round
            x, s = self._f(f"fptrunc double {x} to float"), "float"
        return self._f(f"{_CAST[op]} {s} {x} to {d}")
