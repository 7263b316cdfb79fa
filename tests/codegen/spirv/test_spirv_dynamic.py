"""CPU-only: vulkan-spirv kernels with run-time sizes (issue 29). Every shape of kernel the
dynamic template takes passes spirv-val, reads its sizes from a PushConstant block, and exports
its grid and binding lengths as SizeExprs whose values at given sizes are the launch the shader
expects; static kernels never reach it. tests/e2e/test_dynamic_shapes.py runs them on a Vulkan
device (``-m vulkan``: lavapipe in CI)."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from pyree.compiler.codegen.common.exports import gpu_export
from pyree.compiler.codegen.common.normalize import normalize
from pyree.compiler.codegen.interface import choose
from pyree.compiler.codegen.spirv import (
    TEMPLATES,
    dynamic,
    elementwise,
    generate_spirv,
    matmul,
    reduction,
    resolve_target,
    vectorized,
)
from pyree.compiler.codegen.spirv.assembler import PUSH_CONSTANT, OpVariable
from pyree.compiler.codegen.spirv.shader import MAX_GROUPS_PER_DIM
from pyree.compiler.errors import CompileError
from pyree.compiler.kernel import (
    Acc,
    Binary,
    Binding,
    Compare,
    Const,
    Final,
    Gather,
    Kernel,
    Load,
    LoopIndex,
    Result,
    Select,
    Unary,
    bind_sizes,
)
from pyree.compiler.sizes import Size
from spirv_modules import validate

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "llvm_cpu"))
from llvmcpu_harness import affine, identity, size_expr_value  # noqa: E402
from llvmcpu_harness import matmul as matmul_kernel  # noqa: E402

pytestmark = pytest.mark.vulkan

P = [Size.symbol(f"p{k}") for k in range(40)]
P0, P1, P2 = P[:3]
TRIPLES = ["", "cpu-lavapipe-linux", "hopper-h100-linux"]


def broadcast_add(dtype="f32") -> Kernel:
    ix = identity(2)
    return Kernel("bcast_add", (P0, P1), 2,
                  (Binding(dtype, (P0, P1), "read"), Binding(dtype, (P1,), "read"),
                   Binding(dtype, (P0, P1), "write")),
                  (Result(2, ix, Binary("add", Load(0, ix, dtype), Load(1, (affine(0, 1),), dtype),
                                        dtype)),))


def contiguous_mul() -> Kernel:
    """A contiguous elementwise kernel: the 4-vector template, with its tail."""
    ix = identity(2)
    return Kernel("mul", (P0, P1), 2,
                  (Binding("f32", (P0, P1), "read"), Binding("f32", (P0, P1), "read"),
                   Binding("f32", (P0, P1), "write")),
                  (Result(2, ix, Binary("mul", Load(0, ix, "f32"), Load(1, ix, "f32"), "f32")),))


def transpose() -> Kernel:
    return Kernel("transpose", (P0, P1), 2,
                  (Binding("f16", (P1, P0), "read"), Binding("f16", (P0, P1), "write")),
                  (Result(1, identity(2), Load(0, (affine(0, 1), affine(1, 0)), "f16")),))


def row_sum(n=P1) -> Kernel:
    x = Load(0, identity(2), "f32")
    return Kernel("row_sum", (P0, n), 1, (Binding("f32", (P0, n), "read"), Binding("f32", (P0,), "write")),
                  (Result(1, (affine(1, 0),), Binary("add", Acc(0, "f32"), x, "f32"), init=Const(0.0, "f32")),))


def column_max() -> Kernel:
    x = Load(0, (affine(0, 1), affine(1, 0)), "i32")
    return Kernel("col_max", (P1, P0), 1, (Binding("i32", (P0, P1), "read"), Binding("i32", (P1,), "write")),
                  (Result(1, (affine(1, 0),), Binary("max", Acc(0, "i32"), x, "i32"),
                          init=Const(-2**31, "i32")),))


def softmax(n=P1) -> Kernel:
    x = Load(0, identity(2), "f32")
    shifted = Unary("exp", Binary("sub", x, Final(0, "f32"), "f32"), "f32")
    row = (affine(1, 0),)
    return Kernel("softmax", (P0, n), 1,
                  (Binding("f32", (P0, n), "read"), Binding("f32", (P0,), "write"),
                   Binding("f32", (P0,), "write"), Binding("f32", (P0, n), "write")),
                  (Result(1, row, Binary("max", Acc(0, "f32"), x, "f32"), init=Const(-np.inf, "f32")),
                   Result(2, row, Binary("add", Acc(1, "f32"), shifted, "f32"), init=Const(0.0, "f32")),
                   Result(3, identity(2), Binary("div", shifted, Final(1, "f32"), "f32"), row=True)))


def gather() -> Kernel:
    ids = Load(0, (affine(1, 0),), "i32")
    return Kernel("embed", (P0, 16), 2,
                  (Binding("i32", (P0,), "read"), Binding("f32", (10, 16), "read"),
                   Binding("f32", (P0, 16), "write")),
                  (Result(2, identity(2), Gather(1, (ids, LoopIndex(1)), "f32")),))


def causal() -> Kernel:
    x = Load(0, identity(2), "f32")
    keep = Compare("le", LoopIndex(1), LoopIndex(0))
    return Kernel("causal", (P0, P1), 2, (Binding("f32", (P0, P1), "read"), Binding("f32", (P0, P1), "write")),
                  (Result(1, identity(2), Select(keep, x, Const(-np.inf, "f32"), "f32")),))


def slice_kernel() -> Kernel:
    """out[p1] = x[p2 + i] of x[p0]: an access only the run-time guard keeps in range."""
    return Kernel("slice", (P1,), 1, (Binding("f32", (P0,), "read"), Binding("f32", (P1,), "write")),
                  (Result(1, (affine(1),), Load(0, (affine(1, const=P2),), "f32")),))


KERNELS = {
    "broadcast": (broadcast_add, elementwise), "transpose": (transpose, elementwise),
    "contiguous": (contiguous_mul, vectorized),
    "row_sum": (row_sum, reduction), "short_static_row_sum": (lambda: row_sum(7), elementwise),
    "column_max": (column_max, reduction), "softmax": (softmax, reduction),
    "softmax_short_rows": (lambda: softmax(5), elementwise), "gather": (gather, elementwise),
    "causal": (causal, elementwise), "slice": (slice_kernel, elementwise),
    "matmul": (lambda: matmul_kernel(P0, P1, P2), matmul),
    "batched_matmul": (lambda: matmul_kernel(P0, 24, P1, batch=5), matmul),
}


def compile_kernels(kernels: list[Kernel], triple: str = ""):
    """(SPIR-V, exports) as ``compile_executable`` writes them."""
    code, launches = generate_spirv(kernels, resolve_target(triple))
    return code, [gpu_export(k, name, launch) for k, (name, launch) in zip(kernels, launches)]


def push_constant_blocks(code: bytes) -> int:
    """How many PushConstant variables the module declares."""
    words = np.frombuffer(code, np.uint32)
    at = np.flatnonzero(words[:-3] == (4 << 16 | OpVariable))
    return int(np.sum(words[at + 3] == PUSH_CONSTANT))


@pytest.mark.parametrize("triple", TRIPLES)
@pytest.mark.parametrize("name", KERNELS)
def test_dynamic_shaders_pass_spirv_val(name, triple, tmp_path):
    make, template = KERNELS[name]
    kernel = make()
    chosen, plan = choose(TEMPLATES, normalize(kernel), resolve_target(triple))
    assert chosen is dynamic and plan[0] is template
    code, exports = compile_kernels([kernel], triple)
    assert validate(code, tmp_path) == ""
    assert push_constant_blocks(code) == 1
    assert list(exports[0].gridSize) == [0, 0, 0] and len(exports[0].gridSizeExpr) == 3


def test_one_module_of_static_and_dynamic_kernels(tmp_path):
    """Entry points with different push-constant counts, and static ones without any."""
    static = bind_sizes(broadcast_add(), {"p0": 3, "p1": 5})
    code, exports = compile_kernels([softmax(), static, slice_kernel(), matmul_kernel(P0, P1, P2)])
    assert validate(code, tmp_path) == ""
    assert push_constant_blocks(code) == 2  # 2 sizes (softmax), 3 (slice and matmul)
    assert exports[1].gridSizeExpr is None and list(exports[1].gridSize) != [0, 0, 0]
    assert [e.gridSizeExpr is None for e in exports] == [False, True, False, False]


@pytest.mark.parametrize("sizes", [(0, 5), (5, 0), (1, 1), (7, 13), (131, 257), (70000, 3)])
def test_the_exported_grid_covers_every_element_once(sizes):
    """The grid SizeExprs at the dispatch's sizes: enough workgroups of the block size for every
    output point, no dimension past Vulkan's guaranteed 65535, 0 workgroups for 0 elements; the
    binding lengths are the bytes each binding spans."""
    (_, exports) = compile_kernels([broadcast_add()])
    export = exports[0]
    grid = [size_expr_value(list(e.code), list(sizes)) for e in export.gridSizeExpr]
    m, n = sizes
    assert all(g <= MAX_GROUPS_PER_DIM for g in grid)
    assert np.prod(grid) * export.blockSize[0] >= m * n
    assert (np.prod(grid) == 0) == (m * n == 0)
    assert np.prod(grid) * export.blockSize[0] < m * n + export.blockSize[0] * (grid[1] + 1)
    lengths = [size_expr_value(list(b.minLengthExpr.code), list(sizes)) for b in export.bindings]
    assert lengths == [4 * m * n, 4 * n, 4 * m * n]


@pytest.mark.parametrize("sizes", [(0, 5, 3), (7, 0, 2), (3, 2, 0), (129, 65, 17)])
def test_the_matmul_grid_has_one_workgroup_per_output_tile(sizes):
    (_, exports) = compile_kernels([matmul_kernel(P0, P1, P2)])
    grid = [size_expr_value(list(e.code), list(sizes)) for e in exports[0].gridSizeExpr]
    m, n, _ = sizes
    assert np.prod(grid) == -(-m // 64) * -(-n // 64)


@pytest.mark.parametrize("triple", TRIPLES)
@pytest.mark.parametrize("m, n, k", [(1, 65, 17), (129, 1, 300), (1, 1, 5), (1, 3, 300), (2, 65, 17)])
def test_a_run_time_matmul_of_one_row_or_column_launches_the_static_kernels_grid(m, n, k, triple,
                                                                                tmp_path):
    """At M = 1 or N = 1 the dispatch takes the fold the static kernel of that size compiles to
    (no contraction left to tile once the unit loop is dropped; a short K one invocation an
    output, a long one a workgroup): the same grid and block; at other sizes the tiled grid.
    Both bodies are in one shader."""
    kernel = matmul_kernel(P0, P1, k)
    code, exports = compile_kernels([kernel], triple)
    assert validate(code, tmp_path) == ""
    grid = [size_expr_value(list(e.code), [m, n]) for e in exports[0].gridSizeExpr]
    _, (static,) = compile_kernels([bind_sizes(kernel, {"p0": m, "p1": n})], triple)
    if 1 in (m, n):
        assert np.prod(grid) == np.prod(list(static.gridSize))
    else:
        assert np.prod(grid) == -(-m // 64) * -(-n // 64)
    assert list(exports[0].blockSize) == list(static.blockSize)


def test_static_kernels_never_reach_the_dynamic_template():
    for make, _ in KERNELS.values():
        kernel = make()
        static = bind_sizes(kernel, {"p0": 31, "p1": 9, "p2": 11})
        assert dynamic.plan(normalize(static), resolve_target("")) is None


def test_a_target_without_64_bit_integers_is_refused_by_name():
    target = replace(resolve_target(""), int64=False)
    with pytest.raises(CompileError, match="kernel 'bcast_add'.*run-time sizes.*shaderInt64"):
        generate_spirv([broadcast_add()], target)


def test_more_sizes_than_push_constants_hold_are_refused_by_name():
    ix = identity(1)
    total = P[0]
    for p in P[1:33]:
        total = total + p
    kernel = Kernel("many", (total,), 1, (Binding("f32", (total,), "read"), Binding("f32", (total,), "write")),
                    (Result(1, ix, Load(0, ix, "f32")),))
    with pytest.raises(CompileError, match="kernel 'many' reads 33 run-time sizes.*at most 32"):
        compile_kernels([kernel])


@pytest.mark.parametrize("triple", TRIPLES)
@pytest.mark.parametrize("m, n, k", [(512, 512, 7), (1024, 700, 33), (511, 4096, 9),
                                     (4096, 511, 9), (3, 600, 300)])
def test_a_run_time_matmul_takes_the_large_tiles_where_the_static_kernel_would(m, n, k, triple,
                                                                               tmp_path):
    """Where M and N both reach 512 a static f32 kernel takes 128 x 128 tiles; the run-time
    kernel holds that body too, chosen per dispatch (the same grid and block as the static
    kernel), on targets whose workgroup memory holds both tilings; on the others (16 KB) it
    keeps its 64 x 64 tiles."""
    kernel = matmul_kernel(P0, P1, k)
    code, exports = compile_kernels([kernel], triple)
    assert validate(code, tmp_path) == ""
    grid = [size_expr_value(list(e.code), [m, n]) for e in exports[0].gridSizeExpr]
    _, (static,) = compile_kernels([bind_sizes(kernel, {"p0": m, "p1": n})], triple)
    if resolve_target(triple).max_shared_memory_bytes > 16384:
        assert np.prod(grid) == np.prod(list(static.gridSize))
        assert list(exports[0].blockSize) == list(static.blockSize)
    else:
        assert np.prod(grid) == -(-m // 64) * -(-n // 64)
