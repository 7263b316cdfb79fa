"""Compiles kernels with the llvm-cpu backend, loads the shared object with ctypes and runs
exports over their workgroups on numpy buffers (no runtime involved)."""

from __future__ import annotations

import ctypes
import os
import struct
import tempfile
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from pyree.compiler.codegen.llvm_cpu import compile_executable
from pyree.compiler.kernel import (
    DTYPES,
    Acc,
    AffineExpr,
    Binary,
    Binding,
    Cast,
    Const,
    Kernel,
    Load,
    Result,
)
from pyree.compiler.module_writer import ModuleBuilder
from pyree.compiler.options import CompileOptions


class DispatchState(ctypes.Structure):
    _fields_ = [("bindings", ctypes.POINTER(ctypes.c_void_p)),
                ("binding_lengths", ctypes.POINTER(ctypes.c_uint64)),
                ("binding_count", ctypes.c_uint32),
                ("push_constant_count", ctypes.c_uint32),
                ("push_constants", ctypes.POINTER(ctypes.c_uint32))]


KERNEL_FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.POINTER(DispatchState),
                             ctypes.c_uint64, ctypes.c_uint64)


def library_bytes(module_file: bytes, ref) -> bytes:
    """The payload ``ref`` points at, read back through the module file's trailer."""
    (data_offset,) = struct.unpack_from("<Q", module_file, len(module_file) - 40)
    start = data_offset + ref.offset
    return module_file[start:start + ref.length]


@cache
def host_flags() -> frozenset[str]:
    """This machine's ISA extensions as /proc/cpuinfo spells them (empty where it has none)."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("flags"):
                return frozenset(line.split(":", 1)[1].split())
    return frozenset()


class Compiled:
    def __init__(self, kernels: list[Kernel], cpu: str = "host"):
        self.kernels = kernels
        builder = ModuleBuilder("test", "tests/codegen/llvm_cpu")
        self.executable = compile_executable(kernels, CompileOptions(llvmcpu_target_cpu=cpu), builder)
        self.so = so = library_bytes(builder.finish(), self.executable.cpu.library)
        fd, path = tempfile.mkstemp(suffix=".so")
        with os.fdopen(fd, "wb") as f:
            f.write(so)
        self.lib = ctypes.CDLL(path)
        os.unlink(path)
        recorded = {f.decode() if isinstance(f, bytes) else f
                    for f in self.executable.cpu.cpuFeatures}
        # what this machine cannot run (the runtime refuses such a module by name)
        self.unsupported = sorted(recorded - host_flags()) if host_flags() else []

    def export(self, k: int):
        return self.executable.cpu.exports[k]

    def function(self, k: int):
        return KERNEL_FN((self.export(k).symbol.decode() if isinstance(self.export(k).symbol, bytes)
                          else self.export(k).symbol, self.lib))

    def workgroup_count(self, k: int, push_constants: list[int] = ()) -> int:
        """Export k's workgroup count: static, or its SizeExpr over the push constants."""
        expr = self.export(k).workgroupCountExpr
        return self.export(k).workgroupCount if expr is None else size_expr_value(
            list(expr.code), push_constants)

    def call(self, k: int, buffers: list[np.ndarray], begin: int = 0, end: int | None = None,
             lengths: list[int] | None = None, threads: int = 1,
             push_constants: list[int] = ()) -> int:
        """Runs workgroups [begin, end) of export k; with threads > 1, in interleaved chunks.
        Code for extensions this CPU lacks compiled above but cannot run here: that case skips
        (it is hardware, as a GPU test's device is, not a tool CI must install)."""
        if self.unsupported:
            pytest.skip(f"compiled for a CPU with {', '.join(self.unsupported)}, which this "
                        "machine lacks")
        fn = self.function(k)
        n = len(buffers)
        ptrs = (ctypes.c_void_p * max(1, n))(*[b.ctypes.data for b in buffers])
        lens = (ctypes.c_uint64 * max(1, n))(*(lengths or [b.nbytes for b in buffers]))
        consts = (ctypes.c_uint32 * max(1, len(push_constants)))(*push_constants)
        state = DispatchState(ptrs, lens, n, len(push_constants), consts)
        end = self.workgroup_count(k, push_constants) if end is None else end
        if threads == 1:
            return fn(ctypes.byref(state), begin, end)
        chunk = max(1, -(-(end - begin) // threads))
        with ThreadPoolExecutor(threads) as pool:
            codes = pool.map(lambda s: fn(ctypes.byref(state), s, min(end, s + chunk)),
                             range(begin, end, chunk))
        return max(codes, default=0)


def size_expr_value(code: list[int], symbols: list[int]) -> int:
    """A SizeExpr program's value (schemas/common.fbs), as the runtime computes it."""
    stack, at = [], 0
    while at < len(code):
        op = code[at]
        if op in (0, 1):
            stack.append(code[at + 1] if op == 0 else symbols[code[at + 1]])
            at += 2
            continue
        if op == 13:  # select
            b, a, c = stack.pop(), stack.pop(), stack.pop()
            stack.append(a if c else b)
            at += 1
            continue
        y, x = stack.pop(), stack.pop()
        assert op not in (5, 6, 7) or (x >= 0 and y > 0), "an invocation error"
        stack.append({2: x + y, 3: x - y, 4: x * y, 5: x // max(y, 1), 6: -(-x // max(y, 1)),
                      7: x % max(y, 1), 8: min(x, y), 9: max(x, y), 10: int(x == y),
                      11: int(x < y), 12: int(x <= y)}[op])
        at += 1
    assert len(stack) == 1
    return stack[0]


def random_array(dtype: str, shape, rng: np.random.Generator, low=-2.0, high=2.0) -> np.ndarray:
    dt = DTYPES[dtype]
    if dt == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dt, np.integer):
        info = np.iinfo(dt)
        return rng.integers(max(info.min, -100), min(info.max, 100), size=shape, endpoint=True).astype(dt)
    return rng.uniform(low, high, size=shape).astype(dt)


def run(kernel: Kernel, inputs: dict[int, np.ndarray], cpu: str = "host", threads: int = 2,
        compiled: Compiled | None = None) -> list[np.ndarray]:
    """Compiles ``kernel`` (alone), fills every binding (inputs given, outputs garbage) and runs it."""
    compiled = compiled or Compiled([kernel], cpu)
    rng = np.random.default_rng(7)
    buffers = [inputs[i] if i in inputs else random_array(b.dtype, b.shape, rng, 1e3, 2e3)
               for i, b in enumerate(kernel.bindings)]
    buffers = [np.ascontiguousarray(b) for b in buffers]
    assert compiled.call(0, buffers, threads=threads) == 0
    return buffers


def affine(*coeffs: int, const: int = 0) -> AffineExpr:
    return AffineExpr(tuple(coeffs), const)


def identity(rank: int, loops: int | None = None) -> tuple[AffineExpr, ...]:
    """Index d = loop d, over ``loops`` loops (default ``rank``)."""
    loops = rank if loops is None else loops
    return tuple(affine(*[int(i == d) for i in range(loops)]) for d in range(rank))


def matmul(M, N, K, batch=0, in_dtype="f32", acc="f32", b_transposed=False, bias=False, relu=False,
           init_from=False):
    """C[b?, m, n] = epilogue(init + sum_k cast(A[b?, m, k]) * cast(B[b?, k, n] or B[b?, n, k]))."""
    nb = 0 if isinstance(batch, int) and batch == 0 else 1  # batch may be a run-time size
    loops = (batch,) * nb + (M, N, K)
    n = len(loops)

    def ix(*dims):  # dims: loop numbers (b=0 when batched, m, n, k offset by nb)
        return tuple(affine(*[int(loop == d) for loop in range(n)]) for d in dims)

    b_, m, nn, k = (0, nb, nb + 1, nb + 2)
    pre = (b_,) if nb else ()
    a_shape, b_shape = (batch,) * nb + (M, K), (batch,) * nb + ((N, K) if b_transposed else (K, N))
    c_shape = (batch,) * nb + (M, N)
    a = Load(0, ix(*pre, m, k), in_dtype)
    b = Load(1, ix(*pre, nn, k) if b_transposed else ix(*pre, k, nn), in_dtype)
    if in_dtype != acc:
        op = "fpext" if in_dtype.startswith(("f", "bf")) else "extsi"
        a, b = Cast(op, a, acc), Cast(op, b, acc)
    bindings = [Binding(in_dtype, a_shape, "read"), Binding(in_dtype, b_shape, "read")]
    epilogue = Acc(0, acc)
    if bias:
        bindings.append(Binding(acc, (N,), "read"))
        epilogue = Binary("add", epilogue, Load(2, ix(nn), acc), acc)
    if relu:
        epilogue = Binary("max", epilogue, Const(0, acc), acc)
    init = Const(0, acc)
    if init_from:
        bindings.append(Binding(acc, c_shape, "read"))
        init = Load(len(bindings) - 1, ix(*pre, m, nn), acc)
    bindings.append(Binding(acc, c_shape, "write"))
    value = Binary("add", Acc(0, acc), Binary("mul", a, b, acc), acc)
    result = Result(len(bindings) - 1, ix(*pre, m, nn), value, init=init,
                    epilogue=None if epilogue == Acc(0, acc) else epilogue)
    return Kernel(f"mm{M}x{N}x{K}", loops, n - 1, tuple(bindings), (result,))
