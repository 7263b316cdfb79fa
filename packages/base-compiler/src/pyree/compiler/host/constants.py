"""The module's constant table: each distinct constant once, as bytes in the data segment, as
a parameter reference (schema 1.3) or as a value the initializer computes at load (schema 1.9).
Constants loaded from one ``util.global`` share an array and so one entry; a parameter's entry
is its (scope, key); a computed one's, its name."""

from __future__ import annotations

from pyree.compiler._fb.Constant import ConstantT
from pyree.compiler._fb.Parameter import ParameterT
from pyree.compiler.host.program import tensor_type
from pyree.compiler.module_writer import ModuleBuilder
from pyree.compiler.tensor_program import Constant, Function, Value, walk_ops


def add_constants(functions: list[Function], builder: ModuleBuilder) -> dict[Value, int]:
    """Appends the module constants the functions read; returns each Constant result's index."""
    index: dict[Value, int] = {}
    entries: dict[object, int] = {}  # id(array) or (scope, key) -> module constant index
    for function in functions:
        for op in walk_ops(function.ops):
            if not isinstance(op, Constant) or op.splat is not None:
                continue
            source = ("computed", op.name) if op.computed else op.parameter or id(op.data)
            if source not in entries:
                constant = ConstantT()
                constant.type = tensor_type(op.result)
                if op.parameter is not None:
                    constant.parameter = ParameterT()
                    constant.parameter.scope, constant.parameter.key = op.parameter
                elif not op.computed:
                    constant.data = builder.add_data(op.data)
                constant.mutable = op.mutable
                constant.computed = op.computed
                entries[source] = len(builder.module.constants)
                builder.module.constants.append(constant)
            index[op.result] = entries[source]
    return index
