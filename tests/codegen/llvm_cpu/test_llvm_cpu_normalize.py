"""normalize(): flattening, loop order and coalescing keep evaluate() semantics; bad accesses fail."""

import numpy as np
import pytest
from llvmcpu_harness import affine, identity, random_array
from pyree.compiler.codegen.common.normalize import normalize
from pyree.compiler.errors import CompileError
from pyree.compiler.kernel import (
    Acc,
    Binary,
    Binding,
    Cast,
    Const,
    Kernel,
    Load,
    LoopIndex,
    Result,
    evaluate,
)


def test_contiguous_loops_merge_and_transposes_do_not():
    ix = identity(3)
    shape = (3, 5, 7)
    k = Kernel("ew", shape, 3, (Binding("f32", shape, "read"), Binding("f32", shape, "write")),
               (Result(1, ix, Load(0, ix, "f32")),))
    assert normalize(k).loop_ranges == (105,)
    t = (affine(0, 0, 1), affine(0, 1, 0), affine(1, 0, 0))
    k = Kernel("t", shape, 3, (Binding("f32", shape[::-1], "read"), Binding("f32", shape, "write")),
               (Result(1, ix, Load(0, t, "f32")),))
    assert normalize(k).loop_ranges == shape


def test_rewrites_preserve_semantics():
    """A transposed store, a broadcast, a loop index and a reduction over two mergeable loops."""
    rng = np.random.default_rng(50)
    x = random_array("f32", (4, 6, 3, 5), rng)   # reduce over the last two dims
    b = random_array("f32", (6,), rng)
    loops = (4, 6, 3, 5)
    value = Binary("add", Acc(0, "f32"), Load(0, identity(4), "f32"), "f32")
    epilogue = Binary("add", Binary("add", Acc(0, "f32"), Load(1, (affine(0, 1, 0, 0),), "f32"), "f32"),
                      Const(0.5, "f32"), "f32")
    k = Kernel("r", loops, 2, (Binding("f32", x.shape, "read"), Binding("f32", (6,), "read"),
                               Binding("f32", (6, 4), "write"), Binding("i64", (6, 4), "write")),
               (Result(2, (affine(0, 1, 0, 0), affine(1, 0, 0, 0)), value, init=Const(0.0, "f32"),
                       epilogue=epilogue),
                Result(3, (affine(0, 1, 0, 0), affine(1, 0, 0, 0)), LoopIndex(0, "i64"), init=Const(0, "i64"))))
    flat = normalize(k)
    assert flat.loop_ranges == (6, 4, 15)  # stored-contiguous loop innermost; reduction merged
    outs = [np.zeros((6, 4), np.float32), np.zeros((6, 4), np.int64)]
    evaluate(k, [x, b] + outs)
    flat_outs = [np.zeros(24, np.float32), np.zeros(24, np.int64)]
    evaluate(flat, [x.ravel(), b] + flat_outs)
    np.testing.assert_allclose(flat_outs[0].reshape(6, 4), outs[0], rtol=1e-6)
    np.testing.assert_array_equal(flat_outs[1].reshape(6, 4), outs[1])


@pytest.mark.parametrize("load,message", [
    (Load(0, (affine(1, 0, const=1), affine(0, 1)), "f32"), "reaches index"),
    (Load(0, (affine(1, 0), affine(0, 1)), "f64"), "reads f32 binding 0 as f64"),
    (Load(3, (affine(1, 0), affine(0, 1)), "f32"), "binding 3, which does not exist"),
    (Load(0, (affine(1, 0),), "f32"), "malformed index"),
])
def test_bad_accesses_are_compile_errors(load, message):
    ix = identity(2)
    k = Kernel("bad", (4, 5), 2, (Binding("f32", (4, 5), "read"), Binding("f32", (4, 5), "write")),
               (Result(1, ix, load),), location="model.mlir:3:7")
    with pytest.raises(CompileError, match=f"{message}.*kernel 'bad' \\(model.mlir:3:7\\)"):
        normalize(k)


def test_store_into_read_only_binding_is_a_compile_error():
    ix = identity(1)
    k = Kernel("ro", (4,), 1, (Binding("f32", (4,), "read"),), (Result(0, ix, Const(1.0, "f32")),))
    with pytest.raises(CompileError, match="read-only"):
        normalize(k)


def test_unsupported_dtype_is_a_compile_error():
    ix = identity(1)
    k = Kernel("f8", (4,), 1, (Binding("f32", (4,), "read"), Binding("f32", (4,), "write")),
               (Result(1, ix, Cast("fpext", Cast("fptrunc", Load(0, ix, "f32"), "f8E4M3"), "f32")),))
    with pytest.raises(CompileError, match="does not support dtype f8E4M3.*kernel 'f8'"):
        normalize(k)


def test_loop_index_of_a_dropped_unit_loop_is_zero():
    k = Kernel("unit", (1, 5), 2, (Binding("i64", (1, 5), "write"),),
               (Result(0, identity(2), Cast("extsi", Binary("add", LoopIndex(0), LoopIndex(1), "index"), "i64")),))
    flat = normalize(k)
    assert flat.loop_ranges == (5,)
    out = np.zeros(5, np.int64)
    evaluate(flat, [out])
    np.testing.assert_array_equal(out, np.arange(5))
