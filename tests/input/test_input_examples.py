"""The example models under tests/data, which the end-to-end tests compile and run."""

from pathlib import Path

import numpy as np
from program_interpreter import run
from pyree.compiler.input import import_mlir
from pyree.compiler.tensor_program import Constant, Generic

DATA = Path(__file__).parent.parent / "data"


def _load(name: str):
    path = DATA / name
    return import_mlir(path.read_text(), str(path))


def test_add_example(rng):
    program = _load("add.mlir")
    (fn,) = program.functions
    assert fn.name == "add" and [a.name for a in fn.arguments] == ["lhs", "rhs"]
    assert len(fn.ops) == 1 and isinstance(fn.ops[0], Generic)
    assert fn.ops[0].location.endswith("add.mlir:2:3")
    lhs, rhs = rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    (out,) = run(fn, lhs, rhs)
    np.testing.assert_array_equal(out, lhs + rhs)


def test_mlp_example(rng):
    (fn,) = _load("mlp.mlir").functions
    constants = [op for op in fn.ops if isinstance(op, Constant)]
    weights = {op.result.name: op.data for op in constants if op.data is not None}
    assert sorted(weights) == ["b1", "b2", "w1", "w2"]
    # The zero fills folded into the matmuls' inits; the relu's zeros stay a splat.
    assert [op.result.name for op in constants if op.splat is not None] == ["zeros1"]
    x = rng.standard_normal((37, 53)).astype(np.float32)
    (out,) = run(fn, x)
    w1, b1, w2, b2 = (weights[k].astype(np.float64) for k in ("w1", "b1", "w2", "b2"))
    expected = np.maximum(x @ w1 + b1, 0) @ w2 + b2
    assert out.shape == (37, 11) and out.dtype == np.float32
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)
