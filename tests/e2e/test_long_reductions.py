"""Long reductions with few outputs (split into partial folds and a fold of the partials,
flow/split_reduction.py) and multi-result reductions with unread results (torch's amax: a max with
indices nobody reads, flow/regions.py), compiled for llvm-cpu and run on local-task against numpy
at odd extents, with NaN, +-inf and -0 among the inputs."""

from __future__ import annotations

import numpy as np
import pytest
from compiled import compiled
from pyree.compiler import CompileOptions, compile_str
from pyree.compiler.flow.passes import form_dispatch_regions
from pyree.compiler.flow.split_reduction import LONG_REDUCTION, split_reduction, split_reductions
from pyree.compiler.input import import_mlir
from pyree.compiler.tensor_program import Generic

FOLDS = {  # name -> (MLIR body op, element type, numpy reference along an axis)
    "addf": ("arith.addf", "f32", lambda x, axis: np.sum(x.astype(np.float64), axis=axis)),
    "maximumf": ("arith.maximumf", "f32", lambda x, axis: np.max(x, axis=axis)),
    "minimumf": ("arith.minimumf", "f32", lambda x, axis: np.min(x, axis=axis)),
    "addi": ("arith.addi", "i32", lambda x, axis: np.sum(x, axis=axis, dtype=np.int32)),
    "ori": ("arith.ori", "i32", lambda x, axis: np.bitwise_or.reduce(x, axis=axis)),
    "maxsi": ("arith.maxsi", "i32", lambda x, axis: np.max(x, axis=axis)),
}
IDENTITY = {"addf": "0.0", "maximumf": "0xFF800000", "minimumf": "0x7F800000", "addi": "0",
            "ori": "0", "maxsi": "-2147483648"}
# (input shape, reduced dims): one output, a few rows, a reduction over the first dim, two dims
SHAPES = [((100003,), (0,)), ((3, 40001), (1,)), ((70001, 3), (0,)), ((5, 7, 4099), (1, 2))]


def reduction_mlir(fold: str, shape: tuple[int, ...], reduced: tuple[int, ...]) -> str:
    op, ty, _ = FOLDS[fold]
    rank = len(shape)
    dims = ", ".join(f"d{i}" for i in range(rank))
    kept = [i for i in range(rank) if i not in reduced]
    out_shape = [shape[i] for i in kept]
    tensor = f"tensor<{'x'.join(map(str, shape))}x{ty}>"
    out = f"tensor<{''.join(f'{n}x' for n in out_shape)}{ty}>"
    iterators = ", ".join('"reduction"' if i in reduced else '"parallel"' for i in range(rank))
    return f"""
#in = affine_map<({dims}) -> ({dims})>
#out = affine_map<({dims}) -> ({', '.join(f'd{i}' for i in kept)})>
func.func @main(%x: {tensor}) -> {out} {{
  %c = arith.constant {IDENTITY[fold]} : {ty}
  %e = tensor.empty() : {out}
  %init = linalg.fill ins(%c : {ty}) outs(%e : {out}) -> {out}
  %r = linalg.generic {{indexing_maps = [#in, #out], iterator_types = [{iterators}]}}
      ins(%x : {tensor}) outs(%init : {out}) {{
  ^bb0(%a: {ty}, %acc: {ty}):
    %s = {op} %a, %acc : {ty}
    linalg.yield %s : {ty}
  }} -> {out}
  return %r : {out}
}}
"""


def run(mlir: str, *args):
    import pyree.runtime as rt
    module = rt.load_module(compiled(mlir, CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    return module["main"](*args).to_host()


def special_input(shape, dtype: str, rng, specials: bool):
    if dtype == "i32":
        return rng.integers(-1000, 1000, shape, dtype=np.int32)
    x = rng.standard_normal(shape).astype(np.float32)
    if specials:
        flat = x.reshape(-1)
        flat[rng.integers(0, flat.size, 4)] = [np.nan, np.inf, -np.inf, -0.0]
    return x


@pytest.mark.parametrize("shape, reduced", SHAPES, ids=lambda v: "x".join(map(str, v)))
@pytest.mark.parametrize("fold", sorted(FOLDS))
def test_long_fold_matches_numpy(fold, shape, reduced):
    rng = np.random.default_rng(7)
    dtype = FOLDS[fold][1]
    for specials in (False, True):
        x = special_input(shape, dtype, rng, specials)
        got = run(reduction_mlir(fold, shape, reduced), x)
        ref = FOLDS[fold][2](x, reduced)
        if dtype == "i32":
            np.testing.assert_array_equal(got, ref)
        else:  # a sum is reassociated: error relative to the sum of magnitudes
            scale = np.sum(np.abs(np.where(np.isfinite(x), x, 0)).astype(np.float64), axis=reduced)
            np.testing.assert_allclose(got, ref, rtol=0, atol=1e-5 * np.max(scale) + 1e-6)


def generics(mlir: str, gpu: bool = False) -> list[Generic]:
    """The dispatch regions of the one function in ``mlir`` (``gpu``: for GPU targets only)."""
    (function,) = import_mlir(mlir).functions
    return [op for op in split_reductions(form_dispatch_regions(function), gpu).ops
            if isinstance(op, Generic)]


def test_a_long_fold_with_few_outputs_becomes_partial_and_final_folds():
    ops = generics(reduction_mlir("addf", (100003,), (0,)))
    assert [op.loop_ranges for op in ops] == [(97, 1030), (97,)]  # whole chunks of >= MIN_CHUNK
    assert ops[0].num_parallel == 1 and ops[1].num_parallel == 0
    assert split_reduction(ops[0]) == [ops[0]]  # many outputs, short: stays


def test_short_or_wide_reductions_are_not_split():
    assert len(generics(reduction_mlir("addf", (LONG_REDUCTION - 1,), (0,)))) == 1
    assert len(generics(reduction_mlir("addf", (300, 20000), (1,)))) == 1  # 300 outputs


AMAX = """
#in = affine_map<(d0, d1) -> (d0, d1)>
#out = affine_map<(d0, d1) -> (d0)>
func.func @main(%x: tensor<3x40001xf32>) -> {results} {{
  %c0 = arith.constant 0 : i64
  %ninf = arith.constant 0xFF800000 : f32
  %e0 = tensor.empty() : tensor<3xi64>
  %i0 = linalg.fill ins(%c0 : i64) outs(%e0 : tensor<3xi64>) -> tensor<3xi64>
  %e1 = tensor.empty() : tensor<3xf32>
  %m0 = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<3xf32>) -> tensor<3xf32>
  %r:2 = linalg.generic {{indexing_maps = [#in, #out, #out], iterator_types = ["parallel", "reduction"]}}
      ins(%x : tensor<3x40001xf32>) outs(%m0, %i0 : tensor<3xf32>, tensor<3xi64>) {{
  ^bb0(%in: f32, %m: f32, %i: i64):
    %k = linalg.index 1 : index
    %ki = arith.index_cast %k : index to i64
    %mx = arith.maximumf %in, %m : f32
    %gt = arith.cmpf ogt, %in, %m : f32
    %sel = arith.select %gt, %ki, %i : i64
    linalg.yield %mx, %sel : f32, i64
  }} -> (tensor<3xf32>, tensor<3xi64>)
  return {returned}
}}
"""


def test_max_with_unread_indices_is_a_plain_split_fold():
    """torch.amax as torch-mlir imports it: the indices are dropped, the max is split."""
    mlir = AMAX.format(results="tensor<3xf32>", returned="%r#0 : tensor<3xf32>")
    ops = generics(mlir)
    assert len(ops) == 2 and all(len(op.results) == 1 for op in ops)
    x = special_input((3, 40001), "f32", np.random.default_rng(3), specials=True)
    np.testing.assert_array_equal(run(mlir, x), np.max(x, axis=1))


def test_max_with_read_indices_keeps_both():
    mlir = AMAX.format(results="(tensor<3xf32>, tensor<3xi64>)", returned="%r#0, %r#1 : tensor<3xf32>, tensor<3xi64>")
    (op,) = generics(mlir)
    assert len(op.results) == 2
    x = np.random.default_rng(4).standard_normal((3, 40001)).astype(np.float32)
    import pyree.runtime as rt
    module = rt.load_module(compile_str(mlir, CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    values, indices = module["main"](x)
    np.testing.assert_array_equal(values.to_host(), np.max(x, axis=1))
    np.testing.assert_array_equal(indices.to_host(), np.argmax(x, axis=1))


MATMUL = """
func.func @main(%a: tensor<{m}x{k}xf32>, %b: tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32> {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{m}x{n}xf32>
  %c = linalg.fill ins(%zero : f32) outs(%e : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %r = linalg.matmul ins(%a, %b : tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>)
                     outs(%c : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  return %r : tensor<{m}x{n}xf32>
}}
"""


@pytest.mark.parametrize("m, k, n, loops", [
    (32, 2048, 1000, [(8, 32, 1000, 256), (32, 1000, 8)]),   # 31 tiles: K split 8 ways
    (33, 2052, 97, [(6, 33, 97, 342), (33, 97, 6)]),         # chunks divide K exactly
    (37, 4099, 53, [(37, 53, 4099)]),                        # a prime K: no exact chunks
    (512, 4096, 512, [(16, 512, 512, 256), (512, 512, 16)]),  # 16 tiles of 128x128: split
    (1000, 1500, 700, [(5, 1000, 700, 300), (1000, 700, 5)]),  # 48 tiles, K >= 1024
    (2048, 1024, 1100, [(2048, 1100, 1024)]),                # 138 tiles: enough already
    (100, 1000, 100, [(100, 100, 1000)]),                    # K < LONG_K
])
def test_a_contraction_with_few_tiles_splits_k(m, k, n, loops):
    mlir = MATMUL.format(m=m, k=k, n=n)
    assert [op.loop_ranges for op in generics(mlir)] == loops
    if m * n * k > 1e8:
        return
    rng = np.random.default_rng(5)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    a[0, 1], a[2, 3], b[4, 0] = np.nan, np.inf, -np.inf
    expected = a.astype(np.float64) @ b
    got = run(mlir, a, b)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(expected))
    finite = np.isfinite(expected)
    np.testing.assert_allclose(got[finite], expected[finite], rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("m, k, n, loops", [
    (128, 256, 256, [(4, 128, 256, 64), (128, 256, 4)]),    # GPT-2's 128-row linear: 4 x 64
    (160, 960, 49, [(15, 160, 49, 64), (160, 49, 15)]),      # a 7x7 pointwise conv's GEMM
    (100, 1000, 100, [(10, 100, 100, 100), (100, 100, 10)]),  # below the CPU's LONG_K
    (128, 255, 256, [(128, 256, 255)]),                      # K < GPU_LONG_K
    (1, 768, 3072, [(3, 1, 3072, 256), (1, 3072, 3)]),      # matrix-vector: >= 264 blocks of 32 columns
    (3, 2310, 500, [(21, 3, 500, 110), (3, 500, 21)]),       # ... the fewest chunks dividing K
    (4, 8192, 96, [(128, 4, 96, 64), (4, 96, 128)]),         # ... of at least 64
    (1, 4096, 16384, [(1, 16384, 4096)]),                    # 512 blocks already: whole
    (2048, 1024, 1100, [(2048, 1100, 1024)]),                # 138 tiles: enough already
    (1024, 576, 1568, [(1024, 1568, 576)]),                  # 98: over GPU_MOST_TILES
    (1024, 576, 1024, [(4, 1024, 1024, 144), (1024, 1024, 4)]),  # 64: split
    (1000, 1500, 700, [(5, 1000, 700, 300), (1000, 700, 5)]),  # K >= LONG_K: as on a CPU
])
def test_gpu_modules_split_shorter_k(m, k, n, loops):
    """Where every target is a GPU, LONG_K > K >= GPU_LONG_K splits into chunks of
    GPU_MIN_K_CHUNK; a matrix-vector product (at most GPU_GEMV_ROWS rows) into
    GPU_VECTOR_BLOCKS blocks of its template; the same product for a CPU stays whole. The cuda tests run such splits on the
    GPU."""
    mlir = MATMUL.format(m=m, k=k, n=n)
    assert [op.loop_ranges for op in generics(mlir, gpu=True)] == loops
    if k < 1024:
        assert [op.loop_ranges for op in generics(mlir)] == [(m, n, k)]


@pytest.mark.parametrize("m, k, n, loops", [
    (1024, 1024, 768, [(1024, 768, 1024)]),                        # 96 tensor-core tiles: whole
    (512, 1024, 512, [(4, 512, 512, 256), (512, 512, 4)]),         # 32: split
    (1024, 576, 1568, [(1024, 1568, 576)]),                        # 196: whole
    (64, 576, 3136, [(3, 64, 3136, 192), (64, 3136, 3)]),          # 25: three 3-step chunks
    (128, 256, 768, [(4, 128, 768, 64), (128, 768, 4)]),           # K = 256: 64-deep chunks
])
def test_gpu_modules_count_tensor_core_tiles_for_narrow_operands(m, k, n, loops):
    """f16 operands (extended to f32) are counted in the tensor-core templates' 128 x 64 tiles,
    at any K: over GPU_MOST_TILES of them the product stays whole; below LONG_K its chunks are
    at least GPU_TENSOR_K_CHUNK deep where K holds two of them."""
    mlir = MATMUL.replace("xf32>, tensor<{k}x{n}xf32>", "xf16>, tensor<{k}x{n}xf16>").replace(
        "%a: tensor<{m}x{k}xf32>, %b: tensor<{k}x{n}xf32>", "%a: tensor<{m}x{k}xf16>, %b: tensor<{k}x{n}xf16>")
    assert "xf16>, tensor<{k}x{n}xf16>)" in mlir
    assert [op.loop_ranges for op in generics(mlir.format(m=m, k=k, n=n), gpu=True)] == loops


def test_the_pipeline_uses_the_gpu_limits_only_without_a_cpu_target():
    import pyree.runtime as rt
    mlir = MATMUL.format(m=128, k=256, n=256)
    kernels = {backends: rt.read_module(compile_str(mlir, CompileOptions(
        target_backends=list(backends)))).tree.functions[0].commands
        for backends in (("cuda",), ("cuda", "llvm-cpu"))}
    dispatches = {b: sum(c.kind == 0 for c in cs) for b, cs in kernels.items()}
    assert dispatches == {("cuda",): 2, ("cuda", "llvm-cpu"): 1}


@pytest.mark.parametrize("device", ["local-sync", "local-task"])
def test_queued_calls_of_a_split_fold_bind_the_same_buffers_each_time(device, monkeypatch):
    """A split fold's partials live in the function's transient arena, which is its own: calls
    queued back to back, each result dropped, hand the driver the same few binding tables (a new
    arena per call would be a new table, on cuda a new CUDA graph, for every call in flight)."""
    import pyree.runtime as rt
    from pyree.runtime.hal.device import Device

    module = rt.load_module(compile_str(reduction_mlir("addf", (100003,), (0,)),
                                        CompileOptions(target_backends=["llvm-cpu"])), device=device)
    x = np.random.default_rng(7).standard_normal(100003).astype(np.float32)
    x[:3] = [-0.0, 1e3, -1e3]
    dx = rt.asdevicearray(module.device, x)
    tables = set()
    submit = Device.queue_submit
    monkeypatch.setattr(Device, "queue_submit", lambda self, cb, table, wait, signal: (
        tables.add(tuple(map(id, table))), submit(self, cb, table, wait, signal))[1])
    for _ in range(40):
        result = module.main(dx)
    np.testing.assert_allclose(result.to_host(), np.sum(x.astype(np.float64)), rtol=1e-5)
    assert 1 <= len(tables) <= 2, len(tables)
