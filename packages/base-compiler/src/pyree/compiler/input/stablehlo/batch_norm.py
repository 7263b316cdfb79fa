"""``batch_norm_training`` and ``batch_norm_grad``, as the StableHLO spec decomposes them (XLA's
``batchnorm_expander``): per feature, sums over every other dim, then elementwise maps.

Training computes the mean first and the (biased) variance as the mean of squared deviations
from it, not ``E[x^2] - E[x]^2``, which cancels badly when the mean is large against the spread.
Each group of sums over the same data is one reduction Generic with a result per sum (the
feature dim its parallel loop), so grad reads ``grad_output`` and ``operand`` once for both."""

from __future__ import annotations

import math
from collections.abc import Callable

from pyree.compiler.errors import CompileError
from pyree.compiler.input.function import FunctionLowering
from pyree.compiler.input.inputs import Inputs
from pyree.compiler.input.parser import location_of
from pyree.compiler.input.scalar import zero
from pyree.compiler.input.stablehlo.common import emit_map, ints, prop
from pyree.compiler.input.stablehlo.elementwise import broadcast_load
from pyree.compiler.input.types import tensor_type_of
from pyree.compiler.kernel import Acc, AffineExpr, Binary, Const, Expr, Result, Unary
from pyree.compiler.tensor_program import Generic, Value
from xdsl.dialects.builtin import FloatAttr
from xdsl.ir import Operation, SSAValue

# (inputs, index of a tensor of the operand's shape, index of a per-feature vector) -> exprs
Terms = Callable[[Inputs, tuple, tuple], list[Expr]]


class _BatchNorm:
    def __init__(self, fn: FunctionLowering, op: Operation):
        self.fn, self.op = fn, op
        self.where = location_of(op)
        self.dtype, self.shape = tensor_type_of(op.operands[0].type, self.where)
        self.rank = len(self.shape)
        self.feature = ints(op, "feature_index")[0]
        if not 0 <= self.feature < self.rank:
            raise CompileError(f"'{op.name}': feature_index {self.feature} is not a dim of "
                               f"its {self.rank}-d operand", self.where)
        attr = prop(op, "epsilon")
        if not isinstance(attr, FloatAttr):
            raise CompileError(f"'{op.name}' needs a float 'epsilon'", self.where)
        self.epsilon = Const(float(attr.value.data), self.dtype)
        count = math.prod(self.shape) // self.shape[self.feature] if self.shape[self.feature] \
            else 0
        self.count = Const(float(count), self.dtype)

    def binary(self, kind: str, a: Expr, b: Expr) -> Expr:
        return Binary(kind, a, b, self.dtype)

    def stddev(self, variance: Expr) -> Expr:
        return Unary("sqrt", self.binary("add", variance, self.epsilon), self.dtype)

    def sums(self, terms: Terms, hint: str) -> list[Value]:
        """Per feature, the sum of each of ``terms`` over the other dims: one Generic."""
        f, rank = self.feature, self.rank
        order = [f] + [d for d in range(rank) if d != f]
        index = tuple(AffineExpr.loop(rank, order.index(d)) for d in range(rank))
        inputs = Inputs()
        exprs = terms(inputs, index, (AffineExpr.loop(rank, 0),))
        outs = [self.fn.new_value(self.dtype, (self.shape[f],), hint) for _ in exprs]
        results = tuple(Result(k, (AffineExpr.loop(rank, 0),),
                               self.binary("add", Acc(k, self.dtype), e), zero(self.dtype))
                        for k, e in enumerate(exprs))
        self.fn.emit(Generic(inputs.values, outs, results, tuple(self.shape[d] for d in order), 1,
                             self.where, self.op.name))
        return outs

    def full(self, inputs: Inputs, ssa: SSAValue) -> Expr:
        """An operand of the operand's shape, at each element of a map of that shape."""
        return broadcast_load(self.fn, inputs, ssa, self.shape, [], self.where)

    def per_feature(self, inputs: Inputs, x: SSAValue | Value) -> Expr:
        """A per-feature vector at each element of a map of the operand's shape."""
        if isinstance(x, Value):
            return inputs.load(x, (AffineExpr.loop(self.rank, self.feature),))
        return broadcast_load(self.fn, inputs, x, self.shape, [self.feature], self.where)


def lower_batch_norm_training(fn: FunctionLowering, op: Operation) -> None:
    """(output, mean, variance): variance biased (divided by the count, not count - 1)."""
    bn = _BatchNorm(fn, op)
    x, scale, offset = op.operands
    xv = fn.tensor(x, bn.where)
    [total] = bn.sums(lambda inputs, at, _: [inputs.load(xv, at)], "sum")
    mean = emit_map(fn, op, lambda inputs: bn.binary("div", inputs.load(total, (AffineExpr.loop(
        1, 0),)), bn.count), op.results[1])

    def squares(inputs: Inputs, at: tuple, at_f: tuple) -> list[Expr]:
        d = bn.binary("sub", inputs.load(xv, at), inputs.load(mean, at_f))
        return [bn.binary("mul", d, d)]

    [squared] = bn.sums(squares, "squares")
    variance = emit_map(fn, op, lambda inputs: bn.binary("div", inputs.load(
        squared, (AffineExpr.loop(1, 0),)), bn.count), op.results[2])

    def normalized(inputs: Inputs) -> Expr:
        centered = bn.binary("sub", bn.full(inputs, x), bn.per_feature(inputs, mean))
        scaled = bn.binary("mul", bn.per_feature(inputs, scale), centered)
        return bn.binary("add", bn.binary("div", scaled, bn.stddev(bn.per_feature(
            inputs, variance))), bn.per_feature(inputs, offset))

    emit_map(fn, op, normalized, op.results[0])


def lower_batch_norm_grad(fn: FunctionLowering, op: Operation) -> None:
    """(grad_operand, grad_scale, grad_offset) for the given mean and variance."""
    bn = _BatchNorm(fn, op)
    x, scale, mean, variance, grad = op.operands
    xv, gv = fn.tensor(x, bn.where), fn.tensor(grad, bn.where)
    meanv, varv = fn.tensor(mean, bn.where), fn.tensor(variance, bn.where)

    def terms(inputs: Inputs, at: tuple, at_f: tuple) -> list[Expr]:
        g = inputs.load(gv, at)
        centered = bn.binary("sub", inputs.load(xv, at), inputs.load(meanv, at_f))
        return [g, bn.binary("mul", g, centered)]

    grad_sum, grad_centered = bn.sums(terms, "grad_sum")  # XLA's i2 and i3 before broadcast
    one = (AffineExpr.loop(1, 0),)
    emit_map(fn, op, lambda inputs: inputs.load(grad_sum, one), op.results[2])
    emit_map(fn, op, lambda inputs: bn.binary("div", inputs.load(grad_centered, one), bn.stddev(
        inputs.load(varv, one))), op.results[1])

    def grad_operand(inputs: Inputs) -> Expr:
        var_eps = bn.binary("add", bn.per_feature(inputs, variance), bn.epsilon)
        centered = bn.binary("sub", bn.full(inputs, x), bn.per_feature(inputs, mean))
        i1 = bn.binary("mul", bn.full(inputs, grad), bn.count)
        i4 = bn.binary("mul", bn.per_feature(inputs, grad_centered), centered)
        i6 = bn.binary("sub", bn.binary("sub", i1, bn.per_feature(inputs, grad_sum)),
                       bn.binary("div", i4, var_eps))
        factor = bn.binary("div", bn.binary("div", bn.per_feature(inputs, scale),
                                            Unary("sqrt", var_eps, bn.dtype)), bn.count)
        return bn.binary("mul", factor, i6)

    emit_map(fn, op, grad_operand, op.results[0])
