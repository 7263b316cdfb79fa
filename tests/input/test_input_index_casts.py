"""Integer casts and narrow arithmetic in the indices of ``tensor.extract`` in a linalg body.

MLIR's casts act on bits and its integer arithmetic wraps: an index is a Load (affine in the
loops) only where every cast and add/sub/mul keeps its value over the whole loop box, else a
Gather that computes it exactly. The kernel IR's reference interpreter (``kernel.evaluate``, also
what folds scalars at compile time) and its bounds (``kernel.interval``) follow the same bits.
Run end to end on every backend by the ``cast_*`` cases of tests/gather_cases.py."""

import numpy as np
import pytest
from program_interpreter import run
from pyree.compiler.input import import_mlir
from pyree.compiler.kernel import (
    DTYPES,
    Binary,
    Binding,
    Cast,
    Const,
    Gather,
    Kernel,
    Load,
    LoopIndex,
    Result,
    evaluate,
    interval,
    walk,
)


def _program(n: int, table: int, body: str) -> str:
    """out[i] = t[%k] with %k computed by ``body`` from %i (index) and %ii (i32)."""
    return f"""func.func @f(%t: tensor<{table}xf32>) -> tensor<{n}xf32> {{
  %e = tensor.empty() : tensor<{n}xf32>
  %r = linalg.generic {{indexing_maps = [affine_map<(i) -> (i)>], iterator_types = ["parallel"]}}
      outs(%e : tensor<{n}xf32>) {{
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %ii = arith.index_cast %i : index to i32
    {body}
    %v = tensor.extract %t[%k] : tensor<{table}xf32>
    linalg.yield %v : f32
  }} -> tensor<{n}xf32>
  return %r : tensor<{n}xf32>
}}"""


NARROW = """%n = arith.trunci %ii : i32 to i8
    %k = arith.index_castui %n : i8 to index"""
I8_ADD = """%n = arith.trunci %ii : i32 to i8
    %c = arith.constant 100 : i8
    %s = arith.addi %n, %c : i8
    %k = arith.index_cast %s : i8 to index"""
NEGATIVE = """%c5 = arith.constant 5 : i32
    %d = arith.subi %ii, %c5 : i32
    %x = arith.index_cast %d : i32 to index
    %c5i = arith.constant 5 : index
    %k = arith.addi %x, %c5i : index"""
NEGATIVE_UNSIGNED = NEGATIVE.replace("arith.index_cast %d", "arith.index_castui %d")


@pytest.mark.parametrize("body, n, table, kind, reference", [
    # i < 128 truncates to itself: affine
    (NARROW, 128, 128, Load, lambda i: i),
    # i = 128 .. 199 wrap to -128 .. -57, read unsigned as 128 .. 199: a Gather, same values
    (NARROW, 200, 200, Gather, lambda i: i.astype(np.int8).astype(np.uint8)),
    # i + 100 in i8 stays in range up to i = 27, wraps negative (clamped to 0) after
    (I8_ADD, 27, 128, Load, lambda i: i + 100),
    (I8_ADD, 40, 128, Gather, lambda i: i.astype(np.int8) + np.int8(100)),
    # a negative i32 sign-extends: (i - 5) + 5 is i
    (NEGATIVE, 9, 9, Load, lambda i: i),
    # zero-extended, i - 5 < 0 is near 2**32: the last element
    (NEGATIVE_UNSIGNED, 9, 9, Gather,
     lambda i: (i.astype(np.int32) - 5).astype(np.uint32).astype(np.int64) + 5),
])
def test_an_index_is_affine_only_where_no_cast_or_step_wraps(rng, body, n, table, kind, reference):
    fn = import_mlir(_program(n, table, body)).functions[0]
    (op,) = fn.ops
    reads = [e for e in walk(op.outputs[0].value) if isinstance(e, (Load, Gather))]
    assert [type(e) for e in reads] == [kind]
    t = rng.standard_normal(table).astype(np.float32)
    with np.errstate(over="ignore"):
        at = np.clip(np.asarray(reference(np.arange(n)), np.int64), 0, table - 1)
    np.testing.assert_array_equal(run(fn, t)[0], t[at])


def _value(expr):
    out = np.zeros((), DTYPES[expr.dtype])
    evaluate(Kernel("k", (), 0, (Binding(expr.dtype, (), "write"),), (Result(0, (), expr),)), [out])
    return out[()]


@pytest.mark.parametrize("op, x, dtype, want", [
    ("extsi", Const(True, "i1"), "i32", -1),
    ("extui", Const(True, "i1"), "i32", 1),
    ("trunci", Const(2, "i32"), "i1", False),
    ("trunci", Const(3, "i32"), "i1", True),
    ("trunci", Const(300, "i32"), "i8", 44),
    ("trunci", Const(-129, "i32"), "i8", 127),
    ("extsi", Const(200, "ui8"), "i32", -56),   # sign-extends the bits of an unsigned source
    ("extui", Const(-1, "i8"), "i32", 255),     # zero-extends the bits of a signed source
    ("sitofp", Const(True, "i1"), "f32", -1.0),
])
def test_the_reference_interpreter_casts_bits(op, x, dtype, want):
    got = _value(Cast(op, x, dtype))
    assert got == want and (not isinstance(want, float) or np.signbit(got) == np.signbit(want))


def test_integer_division_is_exact_at_64_bits():
    big = 2**62 + 1
    assert _value(Binary("div", Const(big, "i64"), Const(1, "i64"), "i64")) == big
    assert _value(Binary("div", Const(-7, "i32"), Const(2, "i32"), "i32")) == -3
    assert _value(Binary("rem", Const(-7, "i32"), Const(2, "i32"), "i32")) == -1


def test_bounds_of_casts_that_reinterpret_are_the_whole_range():
    i = LoopIndex(0)
    narrow = Cast("trunci", i, "ui8")              # 0 .. 199 fits ui8
    assert interval(narrow, (200,)) == (0, 199)
    assert interval(Cast("extsi", narrow, "i32"), (200,)) == (-2**31, 2**31 - 1)  # 128+ negative
    assert interval(Cast("extsi", narrow, "i32"), (128,)) == (0, 127)
    assert interval(Cast("trunci", i, "i8"), (200,)) == (-128, 127)
    assert interval(Cast("extui", Cast("trunci", i, "i8"), "i32"), (200,)) == (-2**31, 2**31 - 1)
