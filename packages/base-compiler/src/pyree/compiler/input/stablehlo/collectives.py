"""``replica_id``, ``partition_id`` and the collectives, for the one device a pyree module runs
on: the ids are 0 and a collective whose every group is that one participant is what it
computes for itself (IREE does the same with one device). ``all_reduce`` of one value is the
value (its reducer never runs); ``all_gather``, ``reduce_scatter``, ``all_to_all`` and
``collective_broadcast`` over a group of one return their operands; ``collective_permute``
returns the operand where the pairs send 0 to itself and zeros where nothing is sent to it, as
the spec says. Groups, pairs or a module (``mhlo.num_replicas``/``num_partitions``) that name
another device are refused: pyree runs single-device programs."""

from __future__ import annotations

from pyree.compiler.errors import CompileError
from pyree.compiler.input.function import Empty, FunctionLowering
from pyree.compiler.input.parser import location_of
from pyree.compiler.input.stablehlo.common import ints, prop
from pyree.compiler.input.types import tensor_type_of
from pyree.compiler.kernel import Const
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, IntegerAttr, ModuleOp
from xdsl.ir import Operation


def _refuse(op: Operation, detail: str) -> CompileError:
    return CompileError(f"unsupported op '{op.name}' over more than one device ({detail}): "
                        "pyree runs single-device programs (one replica, one partition)",
                        location_of(op))


def _check_module(op: Operation) -> None:
    module = op.parent_op()
    while module is not None and not isinstance(module, ModuleOp):
        module = module.parent_op()
    for key in ("mhlo.num_replicas", "mhlo.num_partitions"):
        attr = module.attributes.get(key) if module is not None else None
        if isinstance(attr, IntegerAttr) and attr.value.data > 1:
            raise _refuse(op, f"the module says {key} = {attr.value.data}")


def _ids(op: Operation, name: str) -> tuple[tuple[int, ...], list[int]]:
    """The shape and the ids of an integer matrix attribute (``replica_groups``, pairs)."""
    attr = prop(op, name)
    if attr is None:
        return (0, 0), []
    if not isinstance(attr, DenseIntOrFPElementsAttr):
        raise CompileError(f"'{op.name}': '{name}' should be a dense integer matrix",
                           location_of(op))
    shape = tuple(attr.get_shape() or ())
    return shape, ints(op, name)


def _one_device(op: Operation) -> None:
    """Every replica group is this device alone (or there are none: all devices, one)."""
    _check_module(op)
    shape, ids = _ids(op, "replica_groups")
    members = [i for i in ids if i >= 0]  # -1 pads short groups
    if any(i != 0 for i in members) or len(members) > 1:
        groups = [ids[k:k + shape[1]] for k in range(0, len(ids), shape[1])] if \
            len(shape) == 2 and shape[1] else ids
        raise _refuse(op, f"replica_groups {groups}")


def _same(fn: FunctionLowering, op: Operation) -> None:
    """Each result is its operand (whose type it must have)."""
    where = location_of(op)
    if len(op.results) != len(op.operands):
        raise CompileError(f"'{op.name}' has {len(op.operands)} operands and "
                           f"{len(op.results)} results", where)
    for operand, result in zip(op.operands, op.results):
        if tensor_type_of(operand.type, where) != tensor_type_of(result.type, where):
            raise _refuse(op, f"{operand.type} becomes {result.type}")
        fn.env[result] = fn.entry(operand, where)


def lower_device_id(fn: FunctionLowering, op: Operation) -> None:
    """replica_id, partition_id: 0."""
    _check_module(op)
    dtype = tensor_type_of(op.results[0].type, location_of(op))[0]
    fn.env[op.results[0]] = Const(0, dtype)


def lower_one_participant(fn: FunctionLowering, op: Operation) -> None:
    """all_reduce, all_gather, reduce_scatter, all_to_all, collective_broadcast."""
    _one_device(op)
    if op.name == "stablehlo.all_to_all" and prop(op, "split_count") is not None \
            and ints(op, "split_count")[0] != 1:
        raise _refuse(op, f"split_count {ints(op, 'split_count')[0]}")
    _same(fn, op)


def lower_collective_permute(fn: FunctionLowering, op: Operation) -> None:
    _check_module(op)
    shape, ids = _ids(op, "source_target_pairs")
    if any(i != 0 for i in ids):
        pairs = [ids[k:k + 2] for k in range(0, len(ids), 2)]
        raise _refuse(op, f"source_target_pairs {pairs}")
    if ids:  # [0, 0]: this device sends to itself
        return _same(fn, op)
    where = location_of(op)
    for result in op.results:
        fn.env[result] = Empty(*tensor_type_of(result.type, where))


RULES = {
    "stablehlo.replica_id": lower_device_id,
    "stablehlo.partition_id": lower_device_id,
    **{f"stablehlo.{name}": lower_one_participant for name in (
        "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "collective_broadcast")},
    "stablehlo.collective_permute": lower_collective_permute,
}
