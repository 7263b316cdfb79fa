"""Dispatch-region formation: fewer kernels, same numbers (checked by a reference interpreter)."""

import numpy as np
import pytest
from pyree.compiler.flow.kernels import outline
from pyree.compiler.flow.passes import form_dispatch_regions
from pyree.compiler.kernel import (
    DTYPES,
    Acc,
    AffineExpr,
    Binary,
    Const,
    Load,
    LoopIndex,
    Result,
    Unary,
    evaluate,
)
from pyree.compiler.tensor_program import Check, Constant, Function, Generic, Value, View


def ident(n, rank=None, offset=0):
    """Identity index over the first `rank` of n loops."""
    rank = n if rank is None else rank
    return tuple(AffineExpr(tuple(int(j == i + offset) for j in range(n))) for i in range(rank))


def elementwise(op, a: Value, b: Value | None, name: str) -> Generic:
    n = len(a.shape)
    out = Value(a.dtype, a.shape, name)
    x = Load(0, ident(n), a.dtype)
    inputs = [a]
    if b is None:
        body = Unary(op, x, a.dtype)
    else:
        inputs.append(b)
        body = Binary(op, x, Load(1, ident(n), b.dtype), a.dtype)
    return Generic(inputs, [out], (Result(0, ident(n), body),), a.shape, n, origin=f"linalg.{op}")


def matmul(a: Value, b: Value, init: Value, name: str) -> Generic:
    m, k = a.shape
    n = b.shape[1]
    out = Value("f32", (m, n), name)
    loops = 3
    ia = (AffineExpr((1, 0, 0)), AffineExpr((0, 0, 1)))
    ib = (AffineExpr((0, 0, 1)), AffineExpr((0, 1, 0)))
    io = ident(loops, 2)
    value = Binary("add", Acc(0, "f32"),
                   Binary("mul", Load(0, ia, "f32"), Load(1, ib, "f32"), "f32"), "f32")
    return Generic([a, b, init], [out], (Result(0, io, value, init=Load(2, io, "f32")),),
                   (m, n, k), 2, origin="linalg.matmul")


def broadcast_rows(v: Value, rows: int, name: str) -> Generic:
    out = Value(v.dtype, (rows, v.shape[0]), name)
    return Generic([v], [out], (Result(0, ident(2), Load(0, (AffineExpr((0, 1)),), v.dtype)),),
                   out.shape, 2, origin="linalg.broadcast")


def run(function: Function, args: list[np.ndarray]) -> list[np.ndarray]:
    env = dict(zip(function.arguments, args))
    for op in function.ops:
        if isinstance(op, Constant):
            env[op.result] = (op.data if op.data is not None
                              else np.full(op.result.shape, op.splat, DTYPES[op.result.dtype]))
        elif isinstance(op, View):
            env[op.result] = env[op.source].reshape(op.result.shape)
        elif isinstance(op, Generic):
            outs = [np.zeros(v.shape, DTYPES[v.dtype]) for v in op.results]
            evaluate(outline(op, "k"), [env[v] for v in op.inputs] + outs)
            env.update(zip(op.results, outs))
    return [env[v] for v in function.results]


def mlp_function():
    x = Value("f32", (5, 7), "x")
    w = Value("f32", (7, 3), "w")
    bias = Value("f32", (3,), "bias")
    zero = Constant(Value("f32", (5, 3), "zero"), splat=0.0)
    mm = matmul(x, w, zero.result, "mm")
    bb = broadcast_rows(bias, 5, "bb")
    add = elementwise("add", mm.results[0], bb.results[0], "sum")
    relu_zero = Constant(Value("f32", (5, 3), "z"), splat=0.0)
    relu = elementwise("max", add.results[0], relu_zero.result, "relu")
    ops = [zero, mm, bb, add, relu_zero, relu]
    return Function("mlp", [x, w, bias], ops, [relu.results[0]])


def test_matmul_bias_relu_becomes_one_kernel_with_same_numbers():
    rng = np.random.default_rng(0)
    f = mlp_function()
    args = [rng.standard_normal(v.shape).astype(np.float32) for v in f.arguments]
    fused = form_dispatch_regions(f)
    generics = [op for op in fused.ops if isinstance(op, Generic)]
    assert len(generics) == 1
    assert generics[0].outputs[0].epilogue is not None
    expected = np.maximum(args[0].astype(np.float64) @ args[1] + args[2], 0)
    for function in (f, fused):
        np.testing.assert_allclose(run(function, args)[0], expected, rtol=1e-5, atol=1e-5)


def test_elementwise_chain_fuses_into_one_kernel():
    rng = np.random.default_rng(1)
    a, b, c = (Value("f32", (3, 5), n) for n in "abc")
    g1 = elementwise("add", a, b, "t1")
    g2 = elementwise("mul", g1.results[0], c, "t2")
    g3 = elementwise("exp", g2.results[0], None, "t3")
    g4 = elementwise("sub", g3.results[0], a, "t4")
    f = Function("chain", [a, b, c], [g1, g2, g3, g4], [g4.results[0]])
    fused = form_dispatch_regions(f)
    assert len(fused.ops) == 1
    assert {id(v) for v in fused.ops[0].inputs} == {id(a), id(b), id(c)}
    args = [rng.standard_normal((3, 5)).astype(np.float32) for _ in range(3)]
    np.testing.assert_allclose(run(fused, args)[0], np.exp((args[0] + args[1]) * args[2]) - args[0],
                               rtol=1e-5)


def test_values_read_twice_or_checked_or_returned_stay_materialized():
    a, b = Value("f32", (4,), "a"), Value("f32", (4,), "b")
    g1 = elementwise("add", a, b, "t1")
    g2 = elementwise("neg", g1.results[0], None, "t2")
    g3 = elementwise("mul", g1.results[0], g2.results[0], "t3")
    check = Check("expect_true", g2.results[0])
    f = Function("f", [a, b], [g1, g2, g3, check], [g3.results[0], g1.results[0]])
    fused = form_dispatch_regions(f)
    assert sum(isinstance(op, Generic) for op in fused.ops) == 3


def test_transposed_producer_inlines_into_consumer_with_composed_index():
    rng = np.random.default_rng(2)
    a = Value("f32", (3, 4), "a")
    t = Value("f32", (4, 3), "t")
    transpose = Generic([a], [t], (Result(0, ident(2), Load(0, (AffineExpr((0, 1)), AffineExpr((1, 0))),
                                                            "f32")),), (4, 3), 2)
    b = Value("f32", (4, 3), "b")
    add = elementwise("add", t, b, "s")
    idx = Generic([add.results[0]], [Value("f32", (4, 3), "i")],
                  (Result(0, ident(2), Binary("add", Load(0, ident(2), "f32"),
                                              Unary("neg", Const(0.0, "f32"), "f32"), "f32")),), (4, 3), 2)
    f = Function("t", [a, b], [transpose, add, idx], [idx.results[0]])
    fused = form_dispatch_regions(f)
    assert len(fused.ops) == 1
    args = [rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((4, 3)).astype(np.float32)]
    np.testing.assert_allclose(run(fused, args)[0], args[0].T + args[1], rtol=1e-6)


@pytest.mark.parametrize("shape", [(2, 3), (1, 1)])
def test_loop_index_survives_inlining(shape):
    """linalg.index in a producer reads the consumer's matching loop after fusion."""
    a = Value("f32", shape, "a")
    from pyree.compiler.kernel import Cast
    idx = Generic([a], [Value("f32", shape, "i")],
                  (Result(0, ident(2), Binary("add", Load(0, ident(2), "f32"),
                                              Cast("sitofp", LoopIndex(1), "f32"), "f32")),), shape, 2)
    neg = elementwise("neg", idx.results[0], None, "n")
    f = Function("i", [a], [idx, neg], [neg.results[0]])
    fused = form_dispatch_regions(f)
    assert len(fused.ops) == 1
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    np.testing.assert_allclose(run(fused, [x])[0], -(x + np.arange(shape[1])[None, :]), rtol=1e-6)


def test_a_slice_of_a_reduction_is_not_its_epilogue():
    """A consumer that reads only the first rows and columns of a matmul (the slice a pooling
    window takes of a convolution with odd sizes) has a smaller loop space: fusing it as the
    matmul's epilogue wrote past the slice (found on a TOSA CNN at 11x9)."""
    rng = np.random.default_rng(1)
    x, w = Value("f32", (7, 5), "x"), Value("f32", (5, 9), "w")
    zero = Constant(Value("f32", (7, 9), "zero"), splat=0.0)
    mm = matmul(x, w, zero.result, "mm")
    sliced = Value("f32", (6, 8), "sliced")
    take = Generic([mm.results[0]], [sliced], (Result(0, ident(2), Load(0, ident(2), "f32")),),
                   (6, 8), 2, origin="tensor.extract_slice")
    f = Function("f", [x, w], [zero, mm, take], [sliced])
    args = [rng.standard_normal(v.shape).astype(np.float32) for v in f.arguments]
    fused = form_dispatch_regions(f)
    assert all(op.outputs[0].epilogue is None for op in fused.ops if isinstance(op, Generic))
    expected = (args[0].astype(np.float64) @ args[1])[:6, :8]
    np.testing.assert_allclose(run(fused, args)[0], expected, rtol=1e-5, atol=1e-5)


INDEX_MASK = """
func.func @main(%pos: tensor<i32>, {args}) -> ({types}) {{
  %i = stablehlo.iota dim = 1 : tensor<3x37xi32>
  %p = stablehlo.broadcast_in_dim %pos, dims = [] : (tensor<i32>) -> tensor<3x37xi32>
  %m = stablehlo.compare GE, %i, %p : (tensor<3x37xi32>, tensor<3x37xi32>) -> tensor<3x37xi1>
  %z = stablehlo.constant dense<0.0> : tensor<3x37xf32>
  {body}
  return {results} : {types}
}}
"""


def test_index_arithmetic_is_recomputed_in_every_reader():
    """A mask of loop indices and a scalar (a decode step's rows past its position) read by six
    ops is recomputed in each (MAX_INDEX_COPIES), no kernel of its own; the numbers are
    numpy's at positions before, inside and past the rows."""
    import pyree.runtime as rt
    from pyree.compiler import CompileOptions, compile_str

    k = 6
    text = INDEX_MASK.format(
        args=", ".join(f"%x{j}: tensor<3x37xf32>" for j in range(k)),
        types=", ".join(["tensor<3x37xf32>"] * k),
        body="\n  ".join(f"%r{j} = stablehlo.select %m, %x{j}, %z : tensor<3x37xi1>, "
                         "tensor<3x37xf32>" for j in range(k)),
        results=", ".join(f"%r{j}" for j in range(k)))
    options = CompileOptions(target_backends=["llvm-cpu"])
    sources = compile_str(text, options, extra_args=["--compile-to=executable-sources"]).decode()
    # one kernel (the six selects share it), the mask recomputed in it from d1 and the scalar
    assert sources.count("kernel @") == 1 and ">= b1[]" in sources, sources
    module = rt.load_module(compile_str(text, options), device="local-task")
    rng = np.random.default_rng(2)
    xs = [rng.standard_normal((3, 37)).astype(np.float32) for _ in range(k)]
    for pos in (-3, 0, 20, 36, 99):
        got = module.main(np.int32(pos), *xs)
        keep = np.arange(37)[None, :] >= pos
        for g, x in zip(got, xs):
            np.testing.assert_array_equal(g.to_host(), np.where(keep, x, np.float32(0)))
