"""Outline each dispatch region (a fused Generic) as a kernel, sharing identical kernels."""

from __future__ import annotations

import dataclasses

from pyree.compiler.kernel import (
    AffineExpr,
    Binary,
    Binding,
    Const,
    Kernel,
    Load,
    SizeValue,
    map_result,
)
from pyree.compiler.sizes import Size, signed_parts
from pyree.compiler.tensor_program import (
    Generic,
    index_sizes,
    parameters_of,
    size_value_parts,
    size_values,
)


def outline(generic: Generic, name: str) -> Kernel:
    """Bindings are the inputs (read) then the results (written; a scatter's read-modify-written),
    in that order; run-time sizes become the parameters ``tensor_program.parameters_of`` lists."""
    n = len(generic.inputs)
    scattered = {r.binding for r in generic.outputs if r.scatter is not None}
    params = {size: Size.symbol(f"p{k}") for k, size in enumerate(parameters_of(generic))}
    local = lambda shape: tuple(params.get(d, d) if isinstance(d, Size) else d for d in shape)
    bindings = tuple([Binding(v.dtype, local(v.shape), "read") for v in generic.inputs]
                     + [Binding(v.dtype, local(v.shape), "read_write" if k in scattered else "write")
                        for k, v in enumerate(generic.results)])
    results = tuple(dataclasses.replace(r, binding=n + r.binding) for r in generic.outputs)
    if size_values(generic) or index_sizes(generic):
        # the sizes the body reads and its indices' run-time offsets become push constants too
        def term(v):
            if not isinstance(v, Size):
                return v
            parts = signed_parts(v)
            if parts is None:
                return params.get(v, v)
            plus, minus = (params.get(p, p) if isinstance(p, Size) else p for p in parts)
            return plus - minus

        def index(ix: tuple[AffineExpr, ...]) -> tuple[AffineExpr, ...]:
            return tuple(AffineExpr(tuple(term(c) for c in i.coeffs), term(i.const)) for i in ix)

        def value(e):
            if isinstance(e, SizeValue):
                parts = size_value_parts(e)
                if parts is None:
                    return SizeValue(params[e.size], e.dtype)
                plus, minus = (SizeValue(params[p], e.dtype) if isinstance(p, Size)
                               else Const(p, e.dtype) for p in parts)
                return Binary("sub", plus, minus, e.dtype)
            return dataclasses.replace(e, index=index(e.index)) if isinstance(e, Load) else None
        results = tuple(map_result(r, value, index=index(r.index)) for r in results)
    return Kernel(name=name, loop_ranges=local(generic.loop_ranges),
                  num_parallel=generic.num_parallel, bindings=bindings, results=results,
                  location=generic.location, attention=generic.attention,
                  line=generic.line)


class KernelTable:
    """The module's kernels in export order; a kernel equal to an earlier one reuses its ordinal."""

    def __init__(self):
        self.kernels: list[Kernel] = []
        self._index: dict[Kernel, int] = {}

    def add(self, kernel: Kernel) -> int:
        key = dataclasses.replace(kernel, name="")
        if key not in self._index:
            self._index[key] = len(self.kernels)
            self.kernels.append(kernel)
        return self._index[key]
