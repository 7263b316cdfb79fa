"""Modules for the CLI tests, built by hand: ModuleBuilder tables plus a gcc-compiled llvm-cpu
kernel (see abi/cpu_kernel.h), so these tests depend on the runtime only, not on the compiler.

``tools_module`` exports
  @add(37x53xf32, 37x53xf32) -> (37x53xf32)     a + b
  @twice(37x53xf32) -> (37x53xf32, 37x53xf32)   (a + a, a + 0): two results
``single_module`` only @add; ``checks_module`` two argument-free tests over constants, @passes
(a + a == 2a) and @fails (a + a == 2a + 1, so its expect_eq fails); ``passing_checks_module``
only @passes.
"""

import subprocess

import numpy as np
import pytest
from pyree.compiler._fb.BindingLayout import BindingLayoutT
from pyree.compiler._fb.BufferRef import BufferRefT
from pyree.compiler._fb.Check import CheckT
from pyree.compiler._fb.Command import CommandT
from pyree.compiler._fb.Constant import ConstantT
from pyree.compiler._fb.CpuExecutable import CpuExecutableT
from pyree.compiler._fb.CpuExport import CpuExportT
from pyree.compiler._fb.Dispatch import DispatchT
from pyree.compiler._fb.Executable import ExecutableT
from pyree.compiler._fb.Function import FunctionT
from pyree.compiler._fb.TensorType import TensorTypeT
from pyree.compiler.module_writer import ModuleBuilder
from tooling import require_tool

SHAPE = (37, 53)
COUNT = SHAPE[0] * SHAPE[1]
BYTES = COUNT * 4
WORKGROUP = 256
WORKGROUPS = -(-COUNT // WORKGROUP)
F32, ARGUMENT, RESULT, TRANSIENT, CONSTANT = 0, 0, 1, 2, 3
DISPATCH, BARRIER, CHECK = 0, 3, 4
EXPECT_EQ = 3

KERNEL_C = f"""
#include <stdint.h>
typedef struct {{
  void *const *bindings; const uint64_t *binding_lengths; uint32_t binding_count;
  uint32_t push_constant_count; const uint32_t *push_constants;
}} pyree_cpu_dispatch_state_t;

int32_t add_f32(const pyree_cpu_dispatch_state_t *s, uint64_t begin, uint64_t end) {{
  if (s->binding_count != 3) return 1;
  for (int i = 0; i < 3; ++i) if (s->binding_lengths[i] < {BYTES}) return 1;
  const float *a = s->bindings[0], *b = s->bindings[1];
  float *out = s->bindings[2];
  for (uint64_t wg = begin; wg < end && wg < {WORKGROUPS}; ++wg)
    for (uint64_t i = wg * {WORKGROUP}; i < (wg + 1) * {WORKGROUP} && i < {COUNT}; ++i)
      out[i] = a[i] + b[i];
  return 0;
}}
"""


def _tensor() -> TensorTypeT:
    t = TensorTypeT()
    t.elementType, t.dims = F32, list(SHAPE)
    return t


def _ref(kind: int, index: int = 0) -> BufferRefT:
    r = BufferRefT()
    r.kind, r.index, r.offset, r.length = kind, index, 0, BYTES
    return r


def _dispatch(a: BufferRefT, b: BufferRefT, out: BufferRefT) -> CommandT:
    d = DispatchT()
    d.kernel, d.bindings, d.pushConstants = 0, [a, b, out], []
    c = CommandT()
    c.kind, c.dispatch = DISPATCH, d
    return c


def _barrier() -> CommandT:
    c = CommandT()
    c.kind = BARRIER
    return c


def _expect_eq(lhs: BufferRefT, rhs: BufferRefT, location: str) -> CommandT:
    check = CheckT()
    check.kind, check.lhs, check.lhsType, check.rhs, check.rhsType = (
        EXPECT_EQ,
        lhs,
        _tensor(),
        rhs,
        _tensor(),
    )
    check.location = location
    c = CommandT()
    c.kind, c.check = CHECK, check
    return c


def _function(
    name: str, arguments: int, results: int, commands: list, transient: int = 0
) -> FunctionT:
    f = FunctionT()
    f.name, f.location = name, f"tools_test.mlir:{arguments + 1}:1"
    f.arguments = [_tensor() for _ in range(arguments)]
    f.results = [_tensor() for _ in range(results)]
    f.resultSizes = [BYTES] * results
    f.transientSize = transient
    f.commands = commands
    return f


def _executable(builder: ModuleBuilder, library: bytes) -> ExecutableT:
    layout = []
    for access in (0, 0, 1):
        b = BindingLayoutT()
        b.access, b.minLength = access, BYTES
        layout.append(b)
    export = CpuExportT()
    export.symbol, export.bindings, export.workgroupCount = "add_f32", layout, WORKGROUPS
    cpu = CpuExecutableT()
    cpu.format, cpu.targetCpu, cpu.cpuFeatures = "elf-x86_64", "generic", []
    cpu.library, cpu.exports = builder.add_data(library), [export]
    e = ExecutableT()
    e.name, e.format, e.cpu = "add_dispatch", 0, cpu
    return e


def _add_constant(builder: ModuleBuilder, array: np.ndarray) -> int:
    c = ConstantT()
    c.type, c.data = _tensor(), builder.add_data(array)
    builder.module.constants.append(c)
    return len(builder.module.constants) - 1


@pytest.fixture(scope="session")
def kernel_library(tmp_path_factory) -> bytes:
    gcc = require_tool("gcc")  # it builds the test modules' CPU kernel
    folder = tmp_path_factory.mktemp("kernel")
    (folder / "add.c").write_text(KERNEL_C)
    subprocess.run(
        [gcc, "-shared", "-fPIC", "-O2", "-o", str(folder / "add.so"), str(folder / "add.c")],
        check=True,
    )
    return (folder / "add.so").read_bytes()


def _save(tmp_path_factory, builder: ModuleBuilder) -> str:
    path = tmp_path_factory.mktemp("modules") / f"{builder.module.name}.vmfb"
    path.write_bytes(builder.finish())
    return str(path)


def _arithmetic_module(tmp_path_factory, library: bytes, name: str, with_twice: bool) -> str:
    builder = ModuleBuilder(name, "tests/tools/conftest.py")
    builder.module.executables.append(_executable(builder, library))
    add = _dispatch(_ref(ARGUMENT, 0), _ref(ARGUMENT, 1), _ref(RESULT, 0))
    builder.module.functions.append(_function("add", 2, 1, [add]))
    if with_twice:  # results (a + a, a + 0)
        zero = _add_constant(builder, np.zeros(SHAPE, np.float32))
        twice = [
            _dispatch(_ref(ARGUMENT, 0), _ref(ARGUMENT, 0), _ref(RESULT, 0)),
            _dispatch(_ref(ARGUMENT, 0), _ref(CONSTANT, zero), _ref(RESULT, 1)),
        ]
        builder.module.functions.append(_function("twice", 1, 2, twice))
    return _save(tmp_path_factory, builder)


def _checks_module(tmp_path_factory, library: bytes, name: str, tests: list[str]) -> str:
    builder = ModuleBuilder(name, "tests/tools/conftest.py")
    builder.module.executables.append(_executable(builder, library))
    a = np.random.default_rng().standard_normal(SHAPE).astype(np.float32)
    a_index = _add_constant(builder, a)
    expected = {
        "passes": _add_constant(builder, a + a),
        "fails": _add_constant(builder, a + a + np.float32(1)),
    }
    for test in tests:
        commands = [
            _dispatch(_ref(CONSTANT, a_index), _ref(CONSTANT, a_index), _ref(TRANSIENT)),
            _barrier(),
            _expect_eq(_ref(TRANSIENT), _ref(CONSTANT, expected[test]), f"checks.mlir:{test}:7"),
        ]
        builder.module.functions.append(_function(test, 0, 0, commands, transient=BYTES))
    return _save(tmp_path_factory, builder)


@pytest.fixture(scope="session")
def tools_module(tmp_path_factory, kernel_library) -> str:
    return _arithmetic_module(tmp_path_factory, kernel_library, "tools_test", with_twice=True)


@pytest.fixture(scope="session")
def single_module(tmp_path_factory, kernel_library) -> str:
    return _arithmetic_module(tmp_path_factory, kernel_library, "single_test", with_twice=False)


@pytest.fixture(scope="session")
def checks_module(tmp_path_factory, kernel_library) -> str:
    return _checks_module(tmp_path_factory, kernel_library, "checks_test", ["passes", "fails"])


@pytest.fixture(scope="session")
def passing_checks_module(tmp_path_factory, kernel_library) -> str:
    return _checks_module(tmp_path_factory, kernel_library, "passing_test", ["passes"])
