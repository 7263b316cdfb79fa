"""sort and chlo.top_k: the comparator region as a scalar expression, sorted by
``input/sort_scan.py`` (stable; merged where the comparator is a recognised order, counted into
a permutation whatever else it does).
top_k sorts (values, their indices) with "greater" and keeps the first k."""

from __future__ import annotations

from pyree.compiler.errors import CompileError
from pyree.compiler.input.function import FunctionLowering
from pyree.compiler.input.parser import location_of
from pyree.compiler.input.sort_scan import iota, sort_values, top_k
from pyree.compiler.input.stablehlo.common import ints
from pyree.compiler.input.stablehlo.elementwise import lower_region, total_order_key
from pyree.compiler.input.types import tensor_type_of
from pyree.compiler.kernel import Compare, is_float
from xdsl.ir import Operation


def lower_sort(fn: FunctionLowering, op: Operation) -> None:
    where = location_of(op)
    xs = [fn.tensor(v, where) for v in op.operands]
    rank = len(xs[0].shape)
    axis = ints(op, "dimension", [rank - 1])[0] % rank
    block = op.regions[0].block

    def comparator(lhs, rhs, inputs):
        pairs = [e for pair in zip(lhs, rhs) for e in pair]
        return lower_region(fn, block, pairs, inputs, where)[0]

    for result, value in zip(op.results, sort_values(fn, xs, axis, None, comparator, op.name,
                                                     where), strict=True):
        fn.env[result] = value


def lower_top_k(fn: FunctionLowering, op: Operation) -> None:
    """The k largest along the last dim, largest first, floats in XLA's total order (+NaN
    first, -NaN last, +0.0 before -0.0); ties keep index order."""
    where = location_of(op)
    x = fn.tensor(op.operands[0], where)
    axis = len(x.shape) - 1
    k = tensor_type_of(op.results[0].type, where)[1][axis]
    indices = iota(fn, x.shape, axis, tensor_type_of(op.results[1].type, where)[0], where)
    key = total_order_key if is_float(x.dtype) else (lambda v: v)
    top = top_k(fn, lambda loops: lambda lhs, rhs, inputs: Compare("gt", key(lhs[0]), key(rhs[0])),
                [x, indices], axis, k, op.name, where)
    for result, value in zip(op.results, top, strict=True):
        fn.env[result] = value


def lower_approx_top_k(fn: FunctionLowering, op: Operation) -> None:
    """``custom_call @ApproxTopK(inputs..., inits...)`` (JAX's ``approx_max_k``/``approx_min_k``):
    computed exactly, as XLA does off TPUs: the inputs sorted together along ``reduction_dim``
    by the called comparator (stable), the first k (each result's extent there) kept. An exact
    answer is one the approximate op may give; the init values only pad a reduction shorter
    than k, which the result types rule out here."""
    where = location_of(op)
    config = op.attributes.get("mhlo.backend_config")
    dim = getattr(getattr(config, "data", {}).get("reduction_dim"), "value", None)
    comparator = getattr(op.attributes.get("called_computations"), "data", ())
    inputs = len(op.results)
    if dim is None or len(comparator) != 1 or len(op.operands) != 2 * inputs:
        raise CompileError("stablehlo.custom_call @ApproxTopK needs 'reduction_dim' in "
                           "mhlo.backend_config, one called computation (its comparator) and "
                           "an init value per input", where)
    name = comparator[0].root_reference.data
    if name not in fn.functions:
        raise CompileError(f"@ApproxTopK's comparator @{name} is not a function of this module",
                           where)
    xs = [fn.tensor(v, where) for v in op.operands[:inputs]]
    axis = dim.data % len(xs[0].shape)
    k = tensor_type_of(op.results[0].type, where)[1][axis]
    if k > xs[0].shape[axis]:
        raise CompileError(f"@ApproxTopK keeps {k} of {xs[0].shape[axis]} values along dim "
                           f"{axis}: the init values' padding is not supported", where)
    block = fn.functions[name].body.block

    def compare(lhs, rhs, values):
        pairs = [e for pair in zip(lhs, rhs) for e in pair]
        return lower_region(fn, block, pairs, values, where)[0]

    for result, value in zip(op.results, top_k(fn, lambda loops: compare, xs, axis, k, "ApproxTopK",
                                               where), strict=True):
        fn.env[result] = value
