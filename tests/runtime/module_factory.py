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


def ref(kind: int, index: int, length: int, offset: int = 0) -> BufferRefT:
    r = BufferRefT()
    r.kind, r.index, r.offset, r.length = kind, index, offset, length
    return r


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


def cpu_executable(builder: ModuleBuilder, library: bytes, features=()) -> ExecutableT:
    cpu = CpuExecutableT()
    cpu.format, cpu.targetCpu, cpu.cpuFeatures = "elf-x86_64", "generic", list(features)
    cpu.library = builder.add_data(library)
    cpu.exports = []
    for symbol, binding_count in EXPORTS:
        export = CpuExportT()
        export.symbol, export.workgroupCount = symbol, WORKGROUPS
        export.bindings = [BindingLayoutT() for _ in range(binding_count)]
        for b in export.bindings:
            b.minLength = N * 4 if symbol != "always_fails" else 0
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
