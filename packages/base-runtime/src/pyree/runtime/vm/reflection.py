"""IREE's function reflection, from a function's declared types: what a loaded Function and a
not yet loaded VmFunction (system_api.py) both answer to ``.reflection``; and what a function
with run-time sizes declares about them (its symbols, each dim's formula), which ``?`` alone
cannot say: whether two ``?`` dims are one size, and its bounds."""

from __future__ import annotations

from collections.abc import Sequence

from pyree.runtime.module.size_exprs import spell
from pyree.runtime.records import Record
from pyree.runtime.vm.tensor_type import TensorType


class SizeSymbol(Record):
    """A function's run-time size (schema 1.5): its name and declared bounds; every value it
    takes is in [min, max] (max None: unbounded) and a multiple of divisor."""
    name: str
    min: int
    max: int | None
    divisor: int

    @classmethod
    def from_fb(cls, s) -> SizeSymbol:
        return cls(s.name, s.min, None if s.max == -1 else s.max, s.divisor)


def declared_dims(t, names: Sequence[str]) -> tuple[int | str, ...]:
    """A declared (FlatBuffer) type's dims: a static dim's size, a dynamic one's formula over
    the symbols' ``names`` (``batch``, ``batch * 2``). Equal formulas are one size."""
    programs = iter(t.dynamicDims or [])
    return tuple(d if d >= 0 else spell([int(v) for v in next(programs).code], names)
                 for d in t.dims or [])


def reflection(name: str, argument_types: Sequence[TensorType],
               result_types: Sequence[TensorType]) -> dict[str, str]:
    """What IREE's ``vm_function.reflection`` holds for a function of tensors: the declaration
    (newer IREE) and the ``iree.abi`` JSON of ndarray descriptors (older IREE, read by its
    FunctionInvoker): ``["ndarray", "f32", rank, *dims]``. A dynamic dim is ``?`` in the one
    and null in the other, as IREE writes them."""
    import json

    def declared(prefix: str, types) -> str:
        return ", ".join(f"%{prefix}{i}: tensor<{t}>" for i, t in enumerate(types))

    def ndarray(t: TensorType) -> list:
        return ["ndarray", t.element_name, len(t.shape), *(None if d < 0 else d for d in t.shape)]

    return {
        "iree.abi.declaration": f"sync func @{name}({declared('input', argument_types)}) -> "
                                f"({declared('output', result_types)})",
        "iree.abi": json.dumps({"a": [ndarray(t) for t in argument_types],
                                "r": [ndarray(t) for t in result_types], "v": 1}),
    }
