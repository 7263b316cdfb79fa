"""vulkan-spirv kernels with run-time sizes on a Vulkan device, where the host program's sizes
cannot reach: push constants that would make an access out of bounds make the dispatch do
nothing (``codegen/spirv/sizes.py``), and a run-time grid past one dimension's workgroup limit
wraps into a second one. tests/e2e/test_dynamic_shapes.py runs whole programs."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileOptions, compile_str
from pyree.compiler.codegen.spirv import compile_executable, shader
from pyree.compiler.kernel import AffineExpr, Binding, Kernel, Load, Result
from pyree.compiler.module_writer import ModuleBuilder
from pyree.compiler.sizes import Size
from pyree.runtime.module.reader import read_module
from runtime.module_factory import ARG, BARRIER, F32, RESULT, command, dispatch, fill, function, ref, tensor

pytestmark = pytest.mark.vulkan

X, OUT = 100, 31
SEVEN = 0x40E00000  # 7.0f


def slice_module(pushes: list[tuple[int, int, int]]) -> bytes:
    """One function per push-constant triple (p0, p1, p2): out = 7.0, then out[i] = x[p2 + i] of
    x[p0] for i < p1 by a kernel whose access only its run-time guard keeps in range."""
    p0, p1, p2 = (Size.symbol(f"p{k}") for k in range(3))
    kernel = Kernel("slice", (p1,), 1, (Binding("f32", (p0,), "read"), Binding("f32", (p1,), "write")),
                    (Result(1, (AffineExpr((1,), 0),), Load(0, (AffineExpr((1,), p2),), "f32")),))
    builder = ModuleBuilder("guard", "test_vulkan_run_time_sizes")
    builder.module.executables = [compile_executable(
        [kernel], CompileOptions(target_backends=["vulkan-spirv"]), builder)]
    builder.module.functions = [
        function(f"f{i}", [tensor(F32, X)], [tensor(F32, OUT)], [
            fill(ref(RESULT, 0, 4 * OUT), SEVEN, 4), command(BARRIER),
            dispatch(0, ref(ARG, 0, 4 * X), ref(RESULT, 0, 4 * OUT), push=list(push))])
        for i, push in enumerate(pushes)]
    return builder.finish()


def test_sizes_that_would_read_past_a_binding_write_nothing(vulkan_device):
    pushes = [(X, OUT, 69), (X, OUT, 0), (X, OUT, 70), (X, OUT, 2**31 - 5), (X, 0, 5000)]
    module = rt.load_module(slice_module(pushes), device=vulkan_device)
    x = np.random.default_rng(0).standard_normal(X).astype(np.float32)
    got = [module[f"f{i}"](x).to_host() for i in range(len(pushes))]
    np.testing.assert_array_equal(got[0], x[69:])
    np.testing.assert_array_equal(got[1], x[:OUT])
    for out in got[2:]:  # past the end, an offset whose sum wraps 32 bits, nothing to read
        np.testing.assert_array_equal(out, np.float32(7.0))


def test_a_run_time_grid_past_one_dimension_wraps_into_a_second(vulkan_device, monkeypatch):
    """256 invocations a workgroup, each a 4-vector (its last one 1-3 elements), 3 workgroups
    a row: the rows' width is the dispatch's own (NumWorkgroups)."""
    monkeypatch.setattr(shader, "MAX_GROUPS_PER_DIM", 3)
    mlir = """
    func.func @f(%a: tensor<?xf32>) -> tensor<?xf32> {
      %0 = arith.mulf %a, %a : tensor<?xf32>
      return %0 : tensor<?xf32>
    }"""
    module = rt.load_module(compile_str(mlir, CompileOptions(target_backends=["vulkan-spirv"])),
                            device=vulkan_device)
    rng = np.random.default_rng(1)
    for n in (0, 1, 3 * 1024, 3 * 1024 + 1, 10 * 1024 + 37, 10 * 1024 + 4099):
        a = rng.standard_normal(n).astype(np.float32)
        np.testing.assert_array_equal(module["f"](a).to_host(), a * a)


def test_run_time_elementwise_takes_4_vectors_and_its_tail_one_by_one(vulkan_device):
    """Every remainder of the element count by 4 (0 elements too), every dim at run time, NaN,
    infinities and -0 at the ends, where the tail's elements are."""
    mlir = """
    func.func @f(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>) -> tensor<?x?xf32> {
      %m = arith.mulf %a, %b : tensor<?x?xf32>
      %0 = arith.addf %m, %a : tensor<?x?xf32>
      return %0 : tensor<?x?xf32>
    }"""
    vmfb = compile_str(mlir, CompileOptions(target_backends=["vulkan-spirv"]))
    module = rt.load_module(vmfb, device=vulkan_device)
    rng = np.random.default_rng(4)
    for shape in [(0, 3), (1, 1), (1, 2), (1, 3), (2, 2), (5, 1), (7, 13), (3, 4), (33, 1031)]:
        a = rng.standard_normal(shape).astype(np.float32)
        b = rng.standard_normal(shape).astype(np.float32)
        if a.size:
            a.flat[-1], b.flat[0] = np.nan, -np.inf
            a.flat[0], b.flat[-1] = -0.0, np.inf
        np.testing.assert_array_equal(module["f"](a, b).to_host(), a * b + a)


def test_size_chosen_versions_on_vulkan(vulkan_device):
    """A matmul with run-time rows as the GPU rules split it (flow/versions.py): K = 512 of
    4096 columns in 4 chunks up to 4 rows (the static module's plan there: Vulkan runs small
    sides on its tiled matmul), 8 up to 148, 4 up to 264, whole after; each version on both
    sides of its edges matches numpy, NaN and infinities included."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "flow"))
    from test_size_versions import matmul  # noqa: E402

    vmfb = compile_str(matmul(None, 512, 4096), CompileOptions(target_backends=["vulkan-spirv"]))
    (fn,) = read_module(vmfb).tree.functions
    assert sum(c.kind == 5 and c.branch.conditionSize is not None for c in fn.commands) == 6
    module = rt.load_module(vmfb, device=vulkan_device)
    rng = np.random.default_rng(8)
    b = (rng.standard_normal((512, 4096)) / 8).astype(np.float32)
    b[1, 2] = np.inf
    for rows in (1, 4, 5, 148, 149, 264, 265, 301, 0):
        a = rng.standard_normal((rows, 512)).astype(np.float32)
        if rows > 3:
            a[3, 1], a[2, 0] = np.nan, -0.0
        got = module.mm(a, b).to_host()
        with np.errstate(invalid="ignore"):
            ref = a.astype(np.float64) @ b.astype(np.float64)
        assert got.shape == (rows, 4096)
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-3)
        assert np.array_equal(np.isnan(got), np.isnan(ref))


@pytest.mark.parametrize("target", [None, "turing"])
def test_run_time_edges_of_the_tiled_matmul_keep_nan_and_inf_in_their_rows(target, vulkan_device):
    """Past a run-time M or N the SIMT tiled matmul stages the last row (column) again instead
    of zeros (codegen/spirv/matmul.py): what a tile computes there is never stored, so NaN and
    inf in A's last row and B's last column reach exactly the outputs that read them, on the
    tiles' edges and off them, one row (the fold) included. ``turing`` (48 KB of workgroup
    memory, no feature lavapipe lacks for this kernel) adds the 128 x 128 tiles that the kernel
    takes from 512 rows and columns on (codegen/spirv/dynamic.py)."""
    from e2e.test_dynamic_shapes import MATMUL
    options = CompileOptions(target_backends=["vulkan-spirv"], vulkan_target=target)
    module = rt.load_module(compile_str(MATMUL, options), device=vulkan_device)
    rng = np.random.default_rng(5)
    for m, k, n in ((5, 7, 3), (64, 33, 65), (67, 16, 64), (130, 100, 129), (1, 9, 70),
                    (520, 24, 515), (512, 9, 640), (511, 8, 700)):
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        a[-1, 0], a[-1, -1], a[0, -1] = np.nan, np.inf, -np.inf
        b[0, -1] = -np.inf
        got = module.mm(a, b).to_host()
        with np.errstate(invalid="ignore"):
            want = a.astype(np.float64) @ b.astype(np.float64)
        for mask in (np.isnan, np.isposinf, np.isneginf):
            np.testing.assert_array_equal(mask(got), mask(want), err_msg=f"{m}x{k}x{n}")
        finite = np.isfinite(want)
        np.testing.assert_allclose(got[finite], want[finite], rtol=1e-4, atol=1e-4,
                                   err_msg=f"{m}x{k}x{n}")
