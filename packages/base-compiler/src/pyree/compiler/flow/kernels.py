"""Outline each dispatch region (a fused Generic) as a kernel, sharing identical kernels."""

from __future__ import annotations

import dataclasses

from pyree.compiler.kernel import Binding, Kernel
from pyree.compiler.tensor_program import Generic


def outline(generic: Generic, name: str) -> Kernel:
    """Bindings are the inputs (read) then the results (written), in that order."""
    n = len(generic.inputs)
    bindings = tuple([Binding(v.dtype, v.shape, "read") for v in generic.inputs]
                     + [Binding(v.dtype, v.shape, "write") for v in generic.results])
    results = tuple(dataclasses.replace(r, binding=n + r.binding) for r in generic.outputs)
    return Kernel(name=name, loop_ranges=tuple(generic.loop_ranges), num_parallel=generic.num_parallel,
                  bindings=bindings, results=results, location=generic.location)


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
