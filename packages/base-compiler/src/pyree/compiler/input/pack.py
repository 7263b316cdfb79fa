"""``tensor.pack``: ``result[o..., t...] = source[i...]`` where each tiled source dim ``d`` (the
``p``-th of ``inner_dims_pos``) is ``i_d = outer_d * tile_p + t_p`` and every other is
``i_d = outer_d``; the outer dims are the source's (tiled ones divided, rounded up) in
``outer_dims_perm`` order. A position past the source's end is the padding value (pack without
one must tile evenly, as MLIR requires). One parallel Generic, its loads affine."""

from __future__ import annotations

from pyree.compiler.errors import CompileError
from pyree.compiler.input.function import FunctionLowering
from pyree.compiler.input.inputs import Inputs
from pyree.compiler.input.parser import location_of
from pyree.compiler.input.types import tensor_type_of
from pyree.compiler.kernel import AffineExpr, Binary, Const, LoopIndex, Result, Select
from pyree.compiler.tensor_program import Generic
from xdsl.ir import Operation


def lower_pack(fn: FunctionLowering, op: Operation) -> None:
    # (input/stablehlo is imported for the programs that use it: lowering.py)
    from pyree.compiler.input.stablehlo.common import all_of, in_range

    where = location_of(op)
    source = fn.tensor(op.operands[0], where)
    dtype, shape = tensor_type_of(op.results[0].type, where)
    n = len(source.shape)
    positions = _ints(op, "inner_dims_pos")
    tiles = _ints(op, "inner_tiles")
    perm = _ints(op, "outer_dims_perm") or list(range(n))
    outer = [-(-s // tiles[positions.index(d)]) if d in positions else s
             for d, s in enumerate(source.shape)]
    expected = tuple(outer[d] for d in perm) + tuple(tiles)
    if len(positions) != len(tiles) or sorted(perm) != list(range(n)) or shape != expected:
        raise CompileError(f"tensor.pack of {source.shape} with inner_dims_pos {positions}, "
                           f"inner_tiles {tiles} and outer_dims_perm {perm} makes {expected}, "
                           f"not {shape}", where)
    padded = bool(op.properties["padded"].value.data)
    uneven = any(source.shape[d] % t for d, t in zip(positions, tiles))
    if uneven and not padded:
        raise CompileError("tensor.pack that does not tile its source evenly needs a "
                           "padding_value", where)
    rank = len(shape)
    index, conds = [], []
    for d in range(n):
        coefficients = [0] * rank
        coefficients[perm.index(d)] = tiles[positions.index(d)] if d in positions else 1
        if d in positions:
            coefficients[n + positions.index(d)] = 1
        index.append(AffineExpr(tuple(coefficients)))
        if d in positions and source.shape[d] % tiles[positions.index(d)]:
            at = Binary("add", Binary("mul", LoopIndex(perm.index(d)),
                                      Const(tiles[positions.index(d)], "index"), "index"),
                        LoopIndex(n + positions.index(d)), "index")
            conds += in_range(at, 0, source.shape[d])
    inputs = Inputs()
    value = inputs.load(source, tuple(index))
    if conds:
        value = Select(all_of(conds), value, fn.scalar(op.operands[2], inputs, where), dtype)
    result = fn.bind_value(op.results[0], dtype, shape)
    fn.emit(Generic(inputs.values, [result], (Result(0, AffineExpr.identity(rank), value),),
                    shape, rank, where, op.name))


def _ints(op: Operation, key: str) -> list[int]:
    attr = op.properties.get(key)
    return [] if attr is None else [int(v) for v in attr.get_values()]


RULES = {"tensor.pack": lower_pack, "linalg.pack": lower_pack}
