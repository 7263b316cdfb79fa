"""linalg ops -> Generics: loop normalization, outs handling, contractions; against numpy."""

import numpy as np
import pytest
from program_interpreter import run
from pyree.compiler.input import import_mlir
from pyree.compiler.kernel import Const, Load
from pyree.compiler.tensor_program import Constant, Generic

ID2 = "affine_map<(i, j) -> (i, j)>"


def _f32(rng, *shape):
    return rng.uniform(-2, 2, shape).astype(np.float32)


def _generics(fn):
    return [op for op in fn.ops if isinstance(op, Generic)]


def test_matmul_with_zero_fill_folds_the_fill_into_init(rng):
    text = """
func.func @mm(%a: tensor<37x53xf32>, %b: tensor<53x29xf32>) -> tensor<37x29xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<37x29xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<37x29xf32>) -> tensor<37x29xf32>
  %r = linalg.matmul ins(%a, %b : tensor<37x53xf32>, tensor<53x29xf32>)
                     outs(%acc : tensor<37x29xf32>) -> tensor<37x29xf32>
  return %r : tensor<37x29xf32>
}"""
    fn = import_mlir(text).functions[0]
    (mm,) = fn.ops
    assert mm.loop_ranges == (37, 29, 53) and mm.num_parallel == 2
    assert mm.outputs[0].init == Const(0.0, "f32") and len(mm.inputs) == 2
    a, b = _f32(rng, 37, 53), _f32(rng, 53, 29)
    (out,) = run(fn, a, b)
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def test_matmul_accumulates_into_its_outs_and_casts_mixed_types(rng):
    text = """
func.func @mm(%a: tensor<5x7xi8>, %b: tensor<7x3xi8>, %c: tensor<5x3xi32>) -> tensor<5x3xi32> {
  %r = linalg.matmul ins(%a, %b : tensor<5x7xi8>, tensor<7x3xi8>)
                     outs(%c : tensor<5x3xi32>) -> tensor<5x3xi32>
  return %r : tensor<5x3xi32>
}"""
    fn = import_mlir(text).functions[0]
    assert isinstance(fn.ops[0].outputs[0].init, Load)
    a = rng.integers(-128, 128, (5, 7)).astype(np.int8)
    b = rng.integers(-128, 128, (7, 3)).astype(np.int8)
    c = rng.integers(-1000, 1000, (5, 3)).astype(np.int32)
    (out,) = run(fn, a, b, c)
    np.testing.assert_array_equal(out, c + a.astype(np.int32) @ b.astype(np.int32))


@pytest.mark.parametrize("op, a_shape, b_shape, out_shape, ref", [
    ("linalg.batch_matmul", (3, 5, 7), (3, 7, 4), (3, 5, 4), np.matmul),
    ("linalg.matvec", (5, 7), (7,), (5,), np.matmul),
    ("linalg.vecmat", (7,), (7, 5), (5,), np.matmul),
    ("linalg.dot", (11,), (11,), (), np.dot),
])
def test_contractions(op, a_shape, b_shape, out_shape, ref, rng):
    ty = lambda s: f"tensor<{''.join(f'{d}x' for d in s)}f32>"
    text = f"""
func.func @f(%a: {ty(a_shape)}, %b: {ty(b_shape)}, %c: {ty(out_shape)}) -> {ty(out_shape)} {{
  %r = {op} ins(%a, %b : {ty(a_shape)}, {ty(b_shape)}) outs(%c : {ty(out_shape)}) -> {ty(out_shape)}
  return %r : {ty(out_shape)}
}}"""
    a, b, c = _f32(rng, *a_shape), _f32(rng, *b_shape), _f32(rng, *out_shape)
    (out,) = run(import_mlir(text).functions[0], a, b, c)
    np.testing.assert_allclose(out, c + ref(a.astype(np.float64), b), rtol=1e-5, atol=1e-5)


def test_matmul_with_transposing_indexing_maps(rng):
    text = """
func.func @f(%a: tensor<7x5xf32>, %b: tensor<3x7xf32>, %c: tensor<5x3xf32>) -> tensor<5x3xf32> {
  %r = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (k, m)>,
                                      affine_map<(m, n, k) -> (n, k)>,
                                      affine_map<(m, n, k) -> (m, n)>]
       ins(%a, %b : tensor<7x5xf32>, tensor<3x7xf32>) outs(%c : tensor<5x3xf32>) -> tensor<5x3xf32>
  return %r : tensor<5x3xf32>
}"""
    a, b, c = _f32(rng, 7, 5), _f32(rng, 3, 7), _f32(rng, 5, 3)
    (out,) = run(import_mlir(text).functions[0], a, b, c)
    np.testing.assert_allclose(out, c + a.T.astype(np.float64) @ b.T, rtol=1e-5, atol=1e-5)


def test_generic_reduction_first_is_normalized_parallel_first(rng):
    # Sum over rows written with the reduction loop first; the init comes from the outs.
    text = """
func.func @f(%x: tensor<13x6xf32>, %init: tensor<6xf32>) -> tensor<6xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(r, p) -> (r, p)>, affine_map<(r, p) -> (p)>],
                       iterator_types = ["reduction", "parallel"]}
      ins(%x : tensor<13x6xf32>) outs(%init : tensor<6xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %in, %acc : f32
    linalg.yield %s : f32
  } -> tensor<6xf32>
  return %r : tensor<6xf32>
}"""
    fn = import_mlir(text).functions[0]
    (g,) = fn.ops
    assert g.loop_ranges == (6, 13) and g.num_parallel == 1
    x, init = _f32(rng, 13, 6), _f32(rng, 6)
    (out,) = run(fn, x, init)
    np.testing.assert_allclose(out, init + x.astype(np.float64).sum(0), rtol=1e-5, atol=1e-5)


def test_generic_with_index_broadcast_map_and_outs_read(rng):
    # out = in[i, j] * row[0, j] + out[i, j] + i - j : a size-1 broadcast map, linalg.index
    # and an elementwise op reading its outs.
    text = f"""
func.func @f(%x: tensor<7x9xf32>, %row: tensor<1x9xf32>, %o: tensor<7x9xf32>) -> tensor<7x9xf32> {{
  %r = linalg.generic {{indexing_maps = [{ID2}, affine_map<(i, j) -> (0, j)>, {ID2}],
                       iterator_types = ["parallel", "parallel"]}}
      ins(%x, %row : tensor<7x9xf32>, tensor<1x9xf32>) outs(%o : tensor<7x9xf32>) {{
  ^bb0(%a: f32, %b: f32, %c: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %d = arith.subi %i, %j : index
    %di = arith.index_cast %d : index to i32
    %df = arith.sitofp %di : i32 to f32
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %m, %c : f32
    %t = arith.addf %s, %df : f32
    linalg.yield %t : f32
  }} -> tensor<7x9xf32>
  return %r : tensor<7x9xf32>
}}"""
    fn = import_mlir(text).functions[0]
    assert len(fn.ops[0].inputs) == 3  # the outs tensor became an input
    x, row, o = _f32(rng, 7, 9), _f32(rng, 1, 9), _f32(rng, 7, 9)
    (out,) = run(fn, x, row, o)
    i, j = np.indices((7, 9))
    np.testing.assert_allclose(out, x * row + o + (i - j), rtol=1e-5, atol=1e-5)


def test_reduce_over_empty_init_reads_zero_and_max_reduce(rng):
    text = """
func.func @f(%x: tensor<5x11x3xf32>) -> (tensor<5x3xf32>, tensor<11xf32>) {
  %e = tensor.empty() : tensor<5x3xf32>
  %sum = linalg.reduce ins(%x : tensor<5x11x3xf32>) outs(%e : tensor<5x3xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %0 = arith.addf %in, %acc : f32
      linalg.yield %0 : f32
    }
  %ninf = arith.constant -3.0e38 : f32
  %e2 = tensor.empty() : tensor<11xf32>
  %init = linalg.fill ins(%ninf : f32) outs(%e2 : tensor<11xf32>) -> tensor<11xf32>
  %max = linalg.reduce ins(%x : tensor<5x11x3xf32>) outs(%init : tensor<11xf32>) dimensions = [0, 2]
    (%in: f32, %acc: f32) {
      %0 = arith.maximumf %in, %acc : f32
      linalg.yield %0 : f32
    }
  return %sum, %max : tensor<5x3xf32>, tensor<11xf32>
}"""
    fn = import_mlir(text).functions[0]
    assert [g.outputs[0].init for g in fn.ops] == [
        Const(0.0, "f32"), Const(float(np.float32(-3.0e38)), "f32")]
    x = _f32(rng, 5, 11, 3)
    s, m = run(fn, x)
    np.testing.assert_allclose(s, x.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(m, x.max((0, 2)))


def test_transpose_broadcast_copy_and_runtime_fill(rng):
    text = """
func.func @f(%x: tensor<3x5x7xf32>, %v: tensor<5xf32>, %s: f32)
    -> (tensor<7x3x5xf32>, tensor<4x5x2xf32>, tensor<3x5x7xf16>, tensor<2x3xf32>) {
  %e1 = tensor.empty() : tensor<7x3x5xf32>
  %t = linalg.transpose ins(%x : tensor<3x5x7xf32>) outs(%e1 : tensor<7x3x5xf32>)
         permutation = [2, 0, 1]
  %e2 = tensor.empty() : tensor<4x5x2xf32>
  %b = linalg.broadcast ins(%v : tensor<5xf32>) outs(%e2 : tensor<4x5x2xf32>) dimensions = [0, 2]
  %e3 = tensor.empty() : tensor<3x5x7xf16>
  %c = linalg.copy ins(%x : tensor<3x5x7xf32>) outs(%e3 : tensor<3x5x7xf16>) -> tensor<3x5x7xf16>
  %e4 = tensor.empty() : tensor<2x3xf32>
  %f = linalg.fill ins(%s : f32) outs(%e4 : tensor<2x3xf32>) -> tensor<2x3xf32>
  return %t, %b, %c, %f : tensor<7x3x5xf32>, tensor<4x5x2xf32>, tensor<3x5x7xf16>, tensor<2x3xf32>
}"""
    x, v, s = _f32(rng, 3, 5, 7), _f32(rng, 5), np.array(rng.uniform(-1, 1), np.float32)
    t, b, c, f = run(import_mlir(text).functions[0], x, v, s)
    np.testing.assert_array_equal(t, x.transpose(2, 0, 1))
    np.testing.assert_array_equal(b, np.broadcast_to(v[None, :, None], (4, 5, 2)))
    np.testing.assert_array_equal(c, x.astype(np.float16))
    np.testing.assert_array_equal(f, np.full((2, 3), s))


@pytest.mark.parametrize("op, arity, ref, positive", [
    ("add", 2, np.add, False), ("sub", 2, np.subtract, False), ("mul", 2, np.multiply, False),
    ("div", 2, np.divide, False), ("max", 2, np.maximum, False), ("min", 2, np.minimum, False),
    ("powf", 2, np.power, True), ("exp", 1, np.exp, False), ("log", 1, np.log, True),
    ("sqrt", 1, np.sqrt, True), ("abs", 1, np.abs, False), ("negf", 1, np.negative, False),
    ("floor", 1, np.floor, False), ("ceil", 1, np.ceil, False), ("tanh", 1, np.tanh, False),
    ("rsqrt", 1, lambda x: 1 / np.sqrt(x), True), ("reciprocal", 1, lambda x: 1 / x, True),
    ("square", 1, np.square, False),
])
def test_named_elementwise(op, arity, ref, positive, rng):
    ty = "tensor<7x13xf32>"
    args = ", ".join(f"%a{i}" for i in range(arity))
    text = f"""
func.func @f({", ".join(f"%a{i}: {ty}" for i in range(arity))}) -> {ty} {{
  %e = tensor.empty() : {ty}
  %r = linalg.{op} ins({args} : {", ".join([ty] * arity)}) outs(%e : {ty}) -> {ty}
  return %r : {ty}
}}"""
    xs = [rng.uniform(0.1 if positive else -2, 2, (7, 13)).astype(np.float32) for _ in range(arity)]
    fn = import_mlir(text).functions[0]
    (g,) = _generics(fn)
    assert g.origin == f"linalg.{op}" and len(g.inputs) == arity
    (out,) = run(fn, *xs)
    np.testing.assert_allclose(out, ref(*[x.astype(np.float64) for x in xs]), rtol=2e-6, atol=1e-6)


BOOLEAN_NAMED = {
    "matmul": ("ins(%a, %b : tensor<5x7xi1>, tensor<7x3xi1>)", "5x3",
               lambda a, b: a.astype(int) @ b.astype(int) > 0),
    "add": ("ins(%a, %c : tensor<5x7xi1>, tensor<5x7xi1>)", "5x7", lambda a, b: a | b),
    "mul": ("ins(%a, %c : tensor<5x7xi1>, tensor<5x7xi1>)", "5x7", lambda a, b: a & b),
    "pooling_nhwc_sum": ("{strides = dense<[1, 2]> : tensor<2xi64>, dilations = dense<1> : "
                         "tensor<2xi64>} ins(%p, %w : tensor<1x5x7x1xi1>, tensor<2x3xi1>)",
                         "1x4x3x1", lambda a, b: np.lib.stride_tricks.sliding_window_view(
                             a, (2, 3))[:, ::2].any(axis=(2, 3))[None, :, :, None]),
}


@pytest.mark.parametrize("op", list(BOOLEAN_NAMED))
def test_named_ops_sum_booleans_with_or(op, rng):
    """OpDSL builds a named op's sum of booleans as ``or`` and product as ``and`` (``addi`` on
    i1 wraps: a parity); through the public compile and run."""
    from pyree.compiler import CompileOptions, compile_str
    from pyree.runtime import load_module
    ins, out, ref = BOOLEAN_NAMED[op]
    a, b, c = rng.random((5, 7)) < 0.25, rng.random((7, 3)) < 0.25, rng.random((5, 7)) < 0.5
    a[0], b[:, 0] = [1, 1, 0, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0, 0]  # two true products: a parity of 0
    a[1:3, 2:5], a[3:] = True, False  # two true elements in a pooling window; false windows
    text = f"""
func.func @main(%a: tensor<5x7xi1>, %b: tensor<7x3xi1>, %c: tensor<5x7xi1>) -> tensor<{out}xi1> {{
  %f = arith.constant false
  %p = tensor.expand_shape %a [[0, 1], [2, 3]] output_shape [1, 5, 7, 1]
    : tensor<5x7xi1> into tensor<1x5x7x1xi1>
  %w = tensor.empty() : tensor<2x3xi1>
  %e = tensor.empty() : tensor<{out}xi1>
  %z = linalg.fill ins(%f : i1) outs(%e : tensor<{out}xi1>) -> tensor<{out}xi1>
  %r = linalg.{op} {ins} outs(%z : tensor<{out}xi1>) -> tensor<{out}xi1>
  return %r : tensor<{out}xi1>
}}"""
    module = load_module(compile_str(text, CompileOptions(target_backends=["llvm-cpu"])),
                         device="local-task")
    got = module["main"](a, b, c).to_host()
    want = ref(a, c if op in ("add", "mul") else b)
    assert got.dtype == np.bool_ and got.any() and not got.all()
    np.testing.assert_array_equal(got, want)


def test_fill_with_constant_is_a_splat():
    text = """
func.func @f() -> tensor<4x3xi32> {
  %c = arith.constant 7 : i32
  %e = tensor.empty() : tensor<4x3xi32>
  %f = linalg.fill ins(%c : i32) outs(%e : tensor<4x3xi32>) -> tensor<4x3xi32>
  return %f : tensor<4x3xi32>
}"""
    (op,) = import_mlir(text).functions[0].ops
    assert isinstance(op, Constant) and op.splat == 7 and op.data is None
