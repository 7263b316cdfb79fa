"""IREE's function reflection, from a function's declared types: what a loaded Function and a
not yet loaded VmFunction (system_api.py) both answer to ``.reflection``."""

from __future__ import annotations

from collections.abc import Sequence

from pyree.runtime.vm.tensor_type import TensorType


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
