"""Runs a tensor program Function on numpy arrays, each Generic through kernel.evaluate.

A test-only reference: it checks that the front end's Generics, Constants and Views mean what
the MLIR meant. A Generic becomes a Kernel whose bindings are its inputs, then its results.
"""

from __future__ import annotations

import numpy as np
from pyree.compiler.kernel import DTYPES, Binding, Kernel, Result, evaluate
from pyree.compiler.tensor_program import Check, Constant, Function, Generic, View


def kernel_of(op: Generic) -> Kernel:
    n = len(op.inputs)
    bindings = tuple(Binding(v.dtype, v.shape, "read") for v in op.inputs) + tuple(
        Binding(v.dtype, v.shape, "write") for v in op.results)
    results = tuple(Result(r.binding + n, r.index, r.value, r.init, r.epilogue)
                    for r in op.outputs)
    return Kernel(op.origin, op.loop_ranges, op.num_parallel, bindings, results, op.location)


def run(fn: Function, *args: np.ndarray) -> list[np.ndarray]:
    """The function's results for ``args``; failed checks raise AssertionError."""
    env = {}
    assert len(args) == len(fn.arguments)
    for value, arg in zip(fn.arguments, args):
        arg = np.asarray(arg)
        assert arg.shape == value.shape and arg.dtype == DTYPES[value.dtype], (arg, value)
        env[value] = arg
    for op in fn.ops:
        if isinstance(op, Constant):
            dtype = DTYPES[op.result.dtype]
            env[op.result] = (np.full(op.result.shape, op.splat, dtype) if op.data is None
                              else op.data)
        elif isinstance(op, View):
            raw = np.ascontiguousarray(env[op.source]).tobytes()
            dtype = DTYPES[op.result.dtype]
            count = int(np.prod(op.result.shape, dtype=np.int64))
            chunk = raw[op.byte_offset: op.byte_offset + count * dtype.itemsize]
            env[op.result] = np.frombuffer(chunk, dtype).reshape(op.result.shape).copy()
        elif isinstance(op, Generic):
            outs = [np.zeros(v.shape, DTYPES[v.dtype]) for v in op.results]
            evaluate(kernel_of(op), [env[v] for v in op.inputs] + outs)
            env.update(zip(op.results, outs))
        elif isinstance(op, Check):
            _check(op, env)
    return [env[v] for v in fn.results]


def _check(op: Check, env) -> None:
    lhs = env[op.lhs]
    if op.kind == "expect_true":
        assert lhs != 0
    elif op.kind == "expect_false":
        assert lhs == 0
    elif op.kind == "expect_all_true":
        assert np.all(lhs != 0)
    elif op.kind == "expect_eq":
        np.testing.assert_array_equal(lhs, env[op.rhs])
    else:
        np.testing.assert_allclose(lhs, env[op.rhs], atol=op.atol, rtol=op.rtol)
