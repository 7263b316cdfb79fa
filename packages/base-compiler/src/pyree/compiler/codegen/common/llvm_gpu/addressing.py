"""Address arithmetic in LLVM IR text for the GPU kernel templates: element offsets, loads, stores
and index decomposition, all in i64 (``common/addressing.py`` computes the affine offsets)."""

from __future__ import annotations

from pyree.compiler import kernel as K
from pyree.compiler.codegen.common.addressing import Linear
from pyree.compiler.codegen.common.llvm_gpu.llvm_text import Function, storage_type
from pyree.compiler.codegen.common.llvm_gpu.size_values import STATIC


def offset(fn: Function, lin: Linear, loops: list) -> str:
    """i64 element offset; ``loops``, and ``lin``'s coefficients and constant, hold i64 SSA names
    or Python ints (``emitted``)."""
    total = str(lin.const)
    for c, v in zip(lin.coeffs, loops):
        if c == 0:
            continue
        term = str(c * v) if isinstance(v, int) and isinstance(c, int) \
            else fn.op(f"mul i64 {v}, {c}")
        total = fn.op(f"add i64 {total}, {term}")
    return total


def emitted(lin: Linear, sizes) -> Linear:
    """``lin`` with each run-time size among its coefficients and constant as its i64 value
    (``size_values.SizeValues``), for ``offset``."""
    return Linear(tuple(sizes(c) for c in lin.coeffs), sizes(lin.const))


def element_ptr(fn: Function, base: str, dtype: str, off: str) -> str:
    return fn.op(f"getelementptr {storage_type(dtype)}, ptr addrspace(1) {base}, i64 {off}")


def load(fn: Function, ptr: str, dtype: str) -> str:
    st = storage_type(dtype)
    v = fn.op(f"load {st}, ptr addrspace(1) {ptr}, align {K.itemsize(dtype)}")
    return fn.op(f"icmp ne i8 {v}, 0") if dtype == "i1" else v


def store(fn: Function, ptr: str, dtype: str, value: str) -> None:
    if dtype == "i1":
        value = fn.op(f"zext i1 {value} to i8")
    fn.raw(f"store {storage_type(dtype)} {value}, ptr addrspace(1) {ptr}, align {K.itemsize(dtype)}")


def bindings_aligned(fn: Function, bindings) -> str:
    """An i1 value: every binding's base address is 16-byte aligned (a vector load's, and
    ``cp.async``'s, need)."""
    aligned = "true"
    for binding in sorted(set(bindings)):
        addr = fn.op(f"ptrtoint ptr addrspace(1) %b{binding} to i64")
        low = fn.op(f"and i64 {addr}, 15")
        aligned = fn.op(f"and i1 {aligned}, {fn.op(f'icmp eq i64 {low}, 0')}")
    return aligned


def clamp(fn: Function, v: str, extent, sizes=STATIC) -> str:
    """The i64 index ``v`` clamped to at most ``extent - 1``: a tile's tail reads stay inside
    (``sizes``: a run-time extent's values; one of 0 leaves ``v`` as it is)."""
    return fn.call("i64", "llvm.umin.i64", [("i64", v), ("i64", str(sizes(extent - 1)))])


def decompose(fn: Function, linear: str, ranges: tuple[int, ...]) -> list[str]:
    """Row-major multi-index of ``linear`` over ``ranges`` (i64 values)."""
    out: list[str] = []
    q = linear
    for i, n in enumerate(reversed(ranges)):
        if i == len(ranges) - 1:
            out.append(q)
        else:
            out.append(fn.op(f"urem i64 {q}, {n}"))
            q = fn.op(f"udiv i64 {q}, {n}")
    return list(reversed(out))


def global_thread_id(fn: Function) -> str:
    cta = fn.op(f"zext i32 {fn.special('ctaid.x')} to i64")
    ntid = fn.op(f"zext i32 {fn.special('ntid.x')} to i64")
    tid = fn.op(f"zext i32 {fn.special('tid.x')} to i64")
    return fn.op(f"add i64 {fn.op(f'mul i64 {cta}, {ntid}')}, {tid}")


def kernel_params(kernel: K.Kernel, sizes=STATIC) -> list[str]:
    """The bindings, then the push constants of a kernel with run-time sizes (``sizes``)."""
    return [f"ptr addrspace(1) %b{i}" for i in range(len(kernel.bindings))] + list(sizes.params)
