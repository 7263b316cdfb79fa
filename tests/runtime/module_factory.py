"""Builds module files for runtime tests with the compiler's ModuleBuilder and `_fb` object API,
and CPU kernel libraries from C (abi/cpu_kernel.h) with gcc, until the compiler pipeline lands.
"""

from __future__ import annotations

import hashlib
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pyree.runtime
from pyree.compiler._fb.BindingLayout import BindingLayoutT
from pyree.compiler._fb.BufferRef import BufferRefT
from pyree.compiler._fb.Check import CheckT
from pyree.compiler._fb.Command import CommandT
from pyree.compiler._fb.Constant import ConstantT
from pyree.compiler._fb.Copy import CopyT
from pyree.compiler._fb.CpuExecutable import CpuExecutableT
from pyree.compiler._fb.CpuExport import CpuExportT
from pyree.compiler._fb.CudaExecutable import CudaExecutableT
from pyree.compiler._fb.Dispatch import DispatchT
from pyree.compiler._fb.Executable import ExecutableT
from pyree.compiler._fb.Fill import FillT
from pyree.compiler._fb.Function import FunctionT
from pyree.compiler._fb.GpuExport import GpuExportT
from pyree.compiler._fb.SizeExpr import SizeExprT
from pyree.compiler._fb.Symbol import SymbolT
from pyree.compiler._fb.TensorType import TensorTypeT
from pyree.compiler.module_writer import ModuleBuilder

F32, I32, I1 = 0, 7, 4
ARG, RESULT, TRANSIENT, CONST, READBACK = 0, 1, 2, 3, 4
DISPATCH, COPY, FILL, BARRIER, CHECK, BRANCH = 0, 1, 2, 3, 4, 5
EXPECT_TRUE, EXPECT_FALSE, EXPECT_ALL_TRUE, EXPECT_EQ, EXPECT_ALMOST_EQ = 0, 1, 2, 3, 4

ROWS, COLS = 37, 53          # odd sizes: the workgroup size (64) does not divide them
N = ROWS * COLS
WORKGROUP = 64
WORKGROUPS = -(-N // WORKGROUP)
SCALE = 2.5

KERNELS_C = r"""
#include <stdint.h>
#include <string.h>
#include "cpu_kernel.h"

static int lengths_ok(const pyree_cpu_dispatch_state_t *s, uint32_t count, uint64_t bytes) {
  if (s->binding_count != count) return 0;
  for (uint32_t i = 0; i < count; ++i) if (s->binding_lengths[i] < bytes) return 0;
  return 1;
}

static void clamp(uint64_t *end) { if (*end > WORKGROUPS) *end = WORKGROUPS; }

int32_t add_f32(const pyree_cpu_dispatch_state_t *s, uint64_t begin, uint64_t end) {
  if (!lengths_ok(s, 3, N * 4)) return 1;
  const float *x = s->bindings[0], *y = s->bindings[1];
  float *out = s->bindings[2];
  clamp(&end);
  for (uint64_t i = begin * WG; i < end * WG && i < N; ++i) out[i] = x[i] + y[i];
  return 0;
}

int32_t scale_f32(const pyree_cpu_dispatch_state_t *s, uint64_t begin, uint64_t end) {
  if (!lengths_ok(s, 2, N * 4) || s->push_constant_count != 1) return 1;
  float factor;
  memcpy(&factor, &s->push_constants[0], 4);
  const float *x = s->bindings[0];
  float *out = s->bindings[1];
  clamp(&end);
  for (uint64_t i = begin * WG; i < end * WG && i < N; ++i) out[i] = x[i] * factor;
  return 0;
}

int32_t always_fails(const pyree_cpu_dispatch_state_t *s, uint64_t begin, uint64_t end) {
  return 7;
}

/* out[i] = x[i] * factor for i < n, with n (push constant 0) and the factor's bits (push
   constant 1) given per dispatch: a kernel of run-time size, WG elements per workgroup. */
int32_t scale_n_f32(const pyree_cpu_dispatch_state_t *s, uint64_t begin, uint64_t end) {
  if (s->binding_count != 2 || s->push_constant_count != 2) return 1;
  uint64_t n = s->push_constants[0];
  if (s->binding_lengths[0] < n * 4 || s->binding_lengths[1] < n * 4) return 1;
  float factor;
  memcpy(&factor, &s->push_constants[1], 4);
  const float *x = s->bindings[0];
  float *out = s->bindings[1];
  for (uint64_t i = begin * WG; i < end * WG && i < n; ++i) out[i] = x[i] * factor;
  return 0;
}
"""
EXPORTS = [("add_f32", 3), ("scale_f32", 2), ("always_fails", 1)]
ADD, SCALE_KERNEL, FAIL_KERNEL = 0, 1, 2


def compile_kernels(out_dir: Path) -> bytes:
    """The test kernel library as ELF bytes (gcc -O2 -shared -fPIC)."""
    source = out_dir / "kernels.c"
    source.write_text(KERNELS_C)
    library = out_dir / "kernels.so"
    abi = Path(pyree.runtime.__file__).parent / "abi"
    subprocess.run([shutil.which("gcc"), "-O2", "-shared", "-fPIC", f"-I{abi}",
                    f"-DN={N}", f"-DWG={WORKGROUP}", f"-DWORKGROUPS={WORKGROUPS}",
                    str(source), "-o", str(library)], check=True)
    return library.read_bytes()


# -- object-API helpers ------------------------------------------------------------------------

def tensor(element_type: int, *dims: int) -> TensorTypeT:
    t = TensorTypeT()
    t.elementType, t.dims = element_type, list(dims)
    return t


def ref(kind: int, index: int, length, offset=0) -> BufferRefT:
    """A buffer range; ``length`` and ``offset`` are bytes, or SizeExpr programs (lists)."""
    r = BufferRefT()
    r.kind, r.index = kind, index
    r.length, r.lengthExpr = (0, expr(length)) if isinstance(length, list) else (length, None)
    r.offset, r.offsetExpr = (0, expr(offset)) if isinstance(offset, list) else (offset, None)
    return r


# -- run-time sizes (schema 1.5) ---------------------------------------------------------------

def expr(code: list[int]) -> SizeExprT:
    e = SizeExprT()
    e.code = list(code)
    return e


def sym(k: int) -> list[int]:
    """The program of symbol k, bare (a dim that binds it)."""
    return [1, k]


def times(code: list[int], c: int) -> list[int]:
    return [*code, 0, c, 4]


def symbol(name: str, low: int = 0, high: int = -1, divisor: int = 1) -> SymbolT:
    s = SymbolT()
    s.name, s.min, s.max, s.divisor = name, low, high, divisor
    return s


def sized(element_type: int, *dims) -> TensorTypeT:
    """A tensor type whose dims are sizes (ints) or SizeExpr programs (lists: dynamic dims)."""
    t = tensor(element_type, *(-1 if isinstance(d, list) else d for d in dims))
    t.dynamicDims = [expr(d) for d in dims if isinstance(d, list)] or None
    return t


def sized_function(name: str, symbols, arguments, results, result_sizes, commands,
                   transient=None) -> FunctionT:
    """A function with run-time sizes: ``result_sizes`` and ``transient`` are programs."""
    f = function(name, arguments, results, commands, result_sizes=[0] * len(results))
    f.symbols = list(symbols)
    f.resultSizeExprs = [expr(code) for code in result_sizes]
    f.transientSizeExpr = expr(transient) if transient is not None else None
    return f


def sized_dispatch(kernel: int, *bindings: BufferRefT, push=()) -> CommandT:
    """A dispatch whose push constants are programs."""
    c = dispatch(kernel, *bindings)
    c.dispatch.pushConstants = None
    c.dispatch.pushConstantExprs = [expr(code) for code in push]
    return c


def command(kind: int, **members) -> CommandT:
    c = CommandT()
    c.kind = kind
    for name, value in members.items():
        setattr(c, name, value)
    return c


def dispatch(kernel: int, *bindings: BufferRefT, push=()) -> CommandT:
    d = DispatchT()
    d.kernel, d.bindings, d.pushConstants = kernel, list(bindings), list(push)
    return command(DISPATCH, dispatch=d)


def copy(source: BufferRefT, target: BufferRefT) -> CommandT:
    c = CopyT()
    c.source, c.target = source, target
    return command(COPY, copy=c)


def fill(target: BufferRefT, pattern: int, pattern_length: int) -> CommandT:
    f = FillT()
    f.target, f.pattern, f.patternLength = target, pattern, pattern_length
    return command(FILL, fill=f)


def check(kind: int, lhs: BufferRefT, lhs_type: TensorTypeT, rhs: BufferRefT | None = None,
          rhs_type: TensorTypeT | None = None, atol: float = 1e-4, location: str = "") -> CommandT:
    c = CheckT()
    c.kind, c.lhs, c.lhsType, c.rhs, c.rhsType = kind, lhs, lhs_type, rhs, rhs_type
    c.atol, c.rtol, c.location = atol, 0.0, location
    return command(CHECK, check=c)


def function(name: str, arguments, results, commands, transient: int = 0,
             result_sizes=None) -> FunctionT:
    f = FunctionT()
    f.name, f.arguments, f.results, f.commands = name, list(arguments), list(results), list(commands)
    f.resultSizes = result_sizes if result_sizes is not None else [
        int(np.prod(t.dims)) * (1 if t.elementType == I1 else 4) for t in results]
    f.transientSize, f.location = transient, f"test.mlir:{name}"
    return f


def constant(builder: ModuleBuilder, values: np.ndarray, element_type: int) -> ConstantT:
    c = ConstantT()
    c.type, c.data = tensor(element_type, *values.shape), builder.add_data(values)
    return c


def cpu_executable(builder: ModuleBuilder, library: bytes, features=(),
                   exports=EXPORTS) -> ExecutableT:
    cpu = CpuExecutableT()
    cpu.format, cpu.targetCpu, cpu.cpuFeatures = "elf-x86_64", "generic", list(features)
    cpu.library = builder.add_data(library)
    cpu.exports = []
    for name, binding_count, *workgroups in exports:
        export = CpuExportT()
        export.symbol, export.workgroupCount = name, workgroups[0] if workgroups else WORKGROUPS
        export.bindings = [BindingLayoutT() for _ in range(binding_count)]
        for b in export.bindings:
            b.minLength = N * 4 if name not in ("always_fails", "scale_n_f32") else 0
            b.alignment = 4  # the kernels' floats
        if name != "always_fails":  # the kernels write their last binding, as the C says
            export.bindings[-1].access = 1
        if name == "scale_n_f32":  # of run-time size: push constant 0 is n
            for b in export.bindings:
                b.minLengthExpr = expr(times(sym(0), 4))
            if not workgroups:  # ceildiv(n, 64) workgroups, no bound
                export.workgroupCount, export.workgroupCountExpr = 0, expr(N_GROUPS)
        cpu.exports.append(export)
    e = ExecutableT()
    e.name, e.format, e.cpu = "kernels", 0, cpu
    return e


def cuda_executable(builder: ModuleBuilder) -> ExecutableT:
    cuda = CudaExecutableT()
    cuda.targetArch, cuda.cubinArch = "sm_90", ""
    cuda.ptx, cuda.cubin = builder.add_data(b"// ptx\n"), builder.add_data(b"")
    cuda.exports = []
    for symbol, binding_count in EXPORTS:
        export = GpuExportT()
        fails = symbol == "always_fails"
        export.name, export.blockSize = symbol, [64, 1, 1]
        export.gridSize = [1 if fails else WORKGROUPS, 1, 1]
        export.bindings = [BindingLayoutT() for _ in range(binding_count)]
        for b in export.bindings:
            b.minLength = 0 if fails else N * 4
        cuda.exports.append(export)
    e = ExecutableT()
    e.name, e.format, e.cuda = "kernels_cuda", 1, cuda
    return e


# -- the test module ---------------------------------------------------------------------------

def arith_builder(library: bytes, offset_constant: np.ndarray, features=(),
                  cuda_only: bool = False) -> ModuleBuilder:
    """The module most runtime tests use. Functions:
    add(a, b) = a + b;  add_scaled(a, b) = (a + b + C) * 2.5 with constant C (a transient arena);
    fill_copy() = (4xi32 filled with 0x01020304, C copied);  fail() dispatches a failing kernel;
    fail_checked() does too, then checks its result on the host (a host step after the failure);
    checked_add(a, b, expected): add into a result, then check it equals ``expected``;
    flags(x: i32, v: 4xi1): expect_true(x), expect_all_true(v);
    near(a: 4xf32, b: 4xf32): expect_almost_eq(a, b, atol=1e-3)."""
    b = ModuleBuilder("arith", "module_factory")
    b.module.executables = [cuda_executable(b)] if cuda_only else [cpu_executable(b, library,
                                                                                   features)]
    b.module.constants = [constant(b, offset_constant, F32)]
    m = tensor(F32, ROWS, COLS)
    size = N * 4
    scale_bits = struct.unpack("<I", struct.pack("<f", SCALE))[0]
    b.module.functions = [
        function("add", [m, m], [m], [dispatch(ADD, ref(ARG, 0, size), ref(ARG, 1, size),
                                               ref(RESULT, 0, size))]),
        function("add_scaled", [m, m], [m], [
            dispatch(ADD, ref(ARG, 0, size), ref(ARG, 1, size), ref(TRANSIENT, 0, size)),
            command(BARRIER),
            dispatch(ADD, ref(TRANSIENT, 0, size), ref(CONST, 0, size),
                     ref(TRANSIENT, 0, size, offset=size)),
            command(BARRIER),
            dispatch(SCALE_KERNEL, ref(TRANSIENT, 0, size, offset=size), ref(RESULT, 0, size),
                     push=[scale_bits]),
        ], transient=2 * size),
        function("fill_copy", [], [tensor(I32, 4), m], [
            fill(ref(RESULT, 0, 16), 0x01020304, 4),
            copy(ref(CONST, 0, size), ref(RESULT, 1, size)),
        ]),
        function("fail", [], [tensor(F32, 1)], [dispatch(FAIL_KERNEL, ref(RESULT, 0, 4))]),
        function("fail_checked", [], [tensor(F32, 1)], [
            dispatch(FAIL_KERNEL, ref(RESULT, 0, 4)),
            check(EXPECT_TRUE, ref(RESULT, 0, 4), tensor(I32), location="checks.mlir:3:3"),
        ]),
        function("checked_add", [m, m, m], [m], [
            dispatch(ADD, ref(ARG, 0, size), ref(ARG, 1, size), ref(RESULT, 0, size)),
            check(EXPECT_EQ, ref(RESULT, 0, size), m, ref(ARG, 2, size), m,
                  location="checks.mlir:7:3"),
        ]),
        function("flags", [tensor(I32), tensor(I1, 4)], [], [
            check(EXPECT_TRUE, ref(ARG, 0, 4), tensor(I32), location="checks.mlir:12:3"),
            check(EXPECT_ALL_TRUE, ref(ARG, 1, 4), tensor(I1, 4), location="checks.mlir:13:3"),
        ]),
        function("near", [tensor(F32, 4), tensor(F32, 4)], [], [
            check(EXPECT_ALMOST_EQ, ref(ARG, 0, 16), tensor(F32, 4), ref(ARG, 1, 16),
                  tensor(F32, 4), atol=1e-3, location="checks.mlir:20:3"),
        ]),
    ]
    return b


def restamp(data: bytes | bytearray) -> bytes:
    """Recomputes the trailer digest after a deliberate change to the bytes before it."""
    body = bytes(data[:-32])
    return body + hashlib.sha256(body).digest()


SIZED_EXPORTS = [("scale_n_f32", 2), ("scale_n_f32", 2, 1)]  # the second: one workgroup
SCALE_N, SCALE_N_ONE = 0, 1
N_GROUPS = [*sym(0), 0, WORKGROUP, 6]  # ceildiv(push constant 0, 64)
BOUNDS = {"batch": (1, 64), "seq": (0, 512, 8)}  # rows(): batch in [1, 64], seq in [0, 512] by 8


def sized_builder(library: bytes) -> ModuleBuilder:
    """Functions with run-time sizes (schema 1.5), each checked against numpy by the tests:
    copy(x: ?xf32) = x;  scale(x: ?xf32) = x * 2.5 by the scale_n kernel, whose export runs
    ceildiv(n, 64) workgroups (none for n = 0);  staged(x: ?xf32) = scale(x) through the
    transient arena;  concat(a: ?x3xf32, b: ?x3xf32) = [a; b], a (2 * batch)x3 result, batch in
    [1, 64];
    outer_fill(a: ?xi32, b: ?xi32) = an (m * n)-element fill of 7;  rows(x: ?x?xf32) = x with
    batch in [1, 64] and seq in [0, 512] a multiple of 8;  diff(a: ?xf32, b: ?xf32) = a's first
    n - m elements;  ratio(a: ?xf32, b: ?xf32) = a's first n floordiv m elements;
    same(a: ?xf32, b: ?xf32): expect_eq(a, b);  huge(x: ?xf32): a result of n * 2^50 elements
    (past 2^53 bytes from n = 2 on);  overreach(x: ?xf32) = scale with n * 2^31 for its push
    constant n (the kernel then needs more bytes than its bindings have from n = 1 on, and the
    push constant is past 32 bits from n = 2 on);  scale4(x: 4xf32), the static twin of
    scale at n = 4 (one workgroup, as scale's ceildiv(4, 64))."""
    b = ModuleBuilder("sized", "module_factory")
    b.module.executables = [cpu_executable(b, library, exports=SIZED_EXPORTS)]
    n, m = sym(0), sym(1)
    bytes_n = times(n, 4)
    scale_bits = struct.unpack("<I", struct.pack("<f", SCALE))[0]
    row = sized(F32, n)

    def copy_of(length, offset=0):
        return copy(ref(ARG, 0, length), ref(RESULT, 0, length, offset))

    b.module.functions = [
        sized_function("copy", [symbol("n")], [row], [row], [bytes_n], [copy_of(bytes_n)]),
        sized_function("scale", [symbol("n", 0, 1 << 20)], [row], [row], [bytes_n], [
            sized_dispatch(SCALE_N, ref(ARG, 0, bytes_n), ref(RESULT, 0, bytes_n),
                           push=[n, [0, scale_bits]])]),
        sized_function("staged", [symbol("n")], [row], [row], [bytes_n], [
            copy(ref(ARG, 0, bytes_n), ref(TRANSIENT, 0, bytes_n)),
            command(BARRIER),
            sized_dispatch(SCALE_N, ref(TRANSIENT, 0, bytes_n), ref(RESULT, 0, bytes_n),
                           push=[n, [0, scale_bits]])], transient=bytes_n),
        sized_function("concat", [symbol("batch", 1, 64)], [sized(F32, n, 3), sized(F32, n, 3)],
                       [sized(F32, times(n, 2), 3)], [times(n, 24)], [
                           copy_of(times(n, 12)),
                           copy(ref(ARG, 1, times(n, 12)),
                                ref(RESULT, 0, times(n, 12), times(n, 12)))]),
        sized_function("outer_fill", [symbol("m"), symbol("n")], [sized(I32, n), sized(I32, m)],
                       [sized(I32, [*n, *m, 4])], [times([*n, *m, 4], 4)], [
                           fill(ref(RESULT, 0, times([*n, *m, 4], 4)), 7, 4)]),
        sized_function("rows", [symbol("batch", *BOUNDS["batch"]), symbol("seq", *BOUNDS["seq"])],
                       [sized(F32, n, m)], [sized(F32, n, m)], [times([*n, *m, 4], 4)],
                       [copy_of(times([*n, *m, 4], 4))]),
        sized_function("diff", [symbol("n"), symbol("m")], [row, sized(F32, m)],
                       [sized(F32, [*n, *m, 3])], [times([*n, *m, 3], 4)],
                       [copy_of(times([*n, *m, 3], 4))]),
        sized_function("ratio", [symbol("n"), symbol("m")], [row, sized(F32, m)],
                       [sized(F32, [*n, *m, 5])], [times([*n, *m, 5], 4)],
                       [copy_of(times([*n, *m, 5], 4))]),
        sized_function("same", [symbol("n")], [row, row], [], [], [
            check(EXPECT_EQ, ref(ARG, 0, bytes_n), row, ref(ARG, 1, bytes_n), row,
                  location="sized.mlir:9:3")]),
        sized_function("huge", [symbol("n")], [row], [sized(F32, times(n, 1 << 50))],
                       [times(n, 1 << 52)], [fill(ref(RESULT, 0, times(n, 1 << 52)), 0, 4)]),
        sized_function("overreach", [symbol("n")], [row], [row], [bytes_n], [
            sized_dispatch(SCALE_N, ref(ARG, 0, bytes_n), ref(RESULT, 0, bytes_n),
                           push=[times(n, 1 << 31), [0, scale_bits]])]),
        function("scale4", [tensor(F32, 4)], [tensor(F32, 4)], [
            dispatch(SCALE_N_ONE, ref(ARG, 0, 16), ref(RESULT, 0, 16), push=[4, scale_bits])]),
    ]
    return b
