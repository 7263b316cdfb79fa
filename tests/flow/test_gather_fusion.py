"""Gathers in dispatch-region formation: a producer is inlined into a Gather's index but never
into its source, and a Gather at constant indices that are affine in the loops becomes a Load."""

import numpy as np
from pyree.compiler.flow.passes import form_dispatch_regions
from pyree.compiler.kernel import (
    Binary,
    Cast,
    Compare,
    Const,
    Gather,
    Load,
    LoopIndex,
    Result,
    Select,
    walk,
)
from pyree.compiler.tensor_program import Constant, Function, Generic, Value
from test_regions import elementwise, ident, run


def gather_rows(table: Value, ids: Value, name: str) -> Generic:
    """out[i, j] = table[ids[i], j], ids wrapped when negative as torch's aten.index does."""
    rows = table.shape[0]
    k = Load(1, ident(2, 1), ids.dtype)
    wrapped = Select(Compare("lt", k, Const(0, ids.dtype)),
                     Binary("add", k, Const(rows, ids.dtype), ids.dtype), k, ids.dtype)
    g = Gather(0, (Cast("bitcast", wrapped, "index"), LoopIndex(1)), table.dtype)
    out = Value(table.dtype, (ids.shape[0], table.shape[1]), name)
    return Generic([table, ids], [out], (Result(0, ident(2), g),), out.shape, 2)


def test_a_producer_fuses_into_the_index_but_not_the_source():
    rng = np.random.default_rng(3)
    table, bias = Value("f32", (6, 4), "table"), Value("f32", (6, 4), "bias")
    ids, shift = Value("i64", (5,), "ids"), Value("i64", (5,), "shift")
    shifted = elementwise("sub", ids, shift, "shifted")
    biased = elementwise("add", table, bias, "biased")
    g = gather_rows(biased.results[0], shifted.results[0], "g")
    f = Function("f", [table, bias, ids, shift], [shifted, biased, g], [g.results[0]])
    fused = form_dispatch_regions(f)
    generics = [op for op in fused.ops if isinstance(op, Generic)]
    assert len(generics) == 2  # the table's producer stays; the ids' producer is inlined
    (gather,) = [e for e in walk(generics[-1].outputs[0].value) if isinstance(e, Gather)]
    assert generics[-1].inputs[gather.binding] is biased.results[0]
    args = [rng.standard_normal((6, 4)).astype(np.float32), rng.standard_normal((6, 4)).astype(np.float32),
            rng.integers(-6, 9, 5), rng.integers(0, 3, 5)]
    at = args[2] - args[3]
    want = (args[0] + args[1])[np.clip(np.where(at < 0, at + 6, at), 0, 5)]
    for function in (f, fused):
        np.testing.assert_array_equal(run(function, args)[0], want)


def test_a_gather_at_constant_affine_indices_becomes_a_load():
    """torch's NHWC MobileNet: rows at arange (some written as negative, wrapped): a Load, so
    the producer of the table now fuses in; a constant permutation stays a Gather."""
    rng = np.random.default_rng(4)
    table, bias = Value("f32", (6, 4), "table"), Value("f32", (6, 4), "bias")
    biased = elementwise("add", table, bias, "biased")
    arange = Constant(Value("i64", (6,), "rows"), data=np.array([0, 1, -4, 3, 4, -1]))
    g = gather_rows(biased.results[0], arange.result, "g")
    f = Function("f", [table, bias], [biased, arange, g], [g.results[0]])
    fused = form_dispatch_regions(f)
    (op,) = [op for op in fused.ops if isinstance(op, Generic)]
    assert not any(isinstance(e, Gather) for e in walk(op.outputs[0].value))
    args = [rng.standard_normal((6, 4)).astype(np.float32) for _ in range(2)]
    np.testing.assert_array_equal(run(fused, args)[0], args[0] + args[1])

    perm = Constant(Value("i64", (6,), "perm"), data=np.array([5, 0, 1, 2, 3, 4]))
    g = gather_rows(table, perm.result, "g")
    fused = form_dispatch_regions(Function("f", [table], [perm, g], [g.results[0]]))
    (op,) = [op for op in fused.ops if isinstance(op, Generic)]
    assert any(isinstance(e, Gather) for e in walk(op.outputs[0].value))
    np.testing.assert_array_equal(run(fused, args[:1])[0], args[0][[5, 0, 1, 2, 3, 4]])
