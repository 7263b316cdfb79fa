"""Export-table entries every backend writes the same way: binding layouts and GPU launch shapes."""

from __future__ import annotations

from pyree.compiler._fb.BindingAccess import BindingAccess
from pyree.compiler._fb.BindingLayout import BindingLayoutT
from pyree.compiler._fb.GpuExport import GpuExportT
from pyree.compiler.kernel import Kernel


def binding_layouts(kernel: Kernel) -> list[BindingLayoutT]:
    """What the runtime checks each binding against before a launch: access and bytes touched."""
    layouts = []
    for binding in kernel.bindings:
        layout = BindingLayoutT()
        layout.access = getattr(BindingAccess, binding.access)
        layout.minLength = binding.num_bytes
        layouts.append(layout)
    return layouts


def gpu_export(kernel: Kernel, name: str, grid, block, shared_memory_bytes: int) -> GpuExportT:
    export = GpuExportT()
    export.name = name
    export.gridSize = list(grid)
    export.blockSize = list(block)
    export.sharedMemoryBytes = shared_memory_bytes
    export.bindings = binding_layouts(kernel)
    return export
