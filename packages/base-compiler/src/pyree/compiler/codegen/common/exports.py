"""Export-table entries every backend writes the same way: export names, binding layouts and GPU
launch shapes."""

from __future__ import annotations

from dataclasses import dataclass

from pyree.compiler._fb.BindingAccess import BindingAccess
from pyree.compiler._fb.BindingLayout import BindingLayoutT
from pyree.compiler._fb.GpuExport import GpuExportT
from pyree.compiler._fb.SizeExpr import SizeExprT
from pyree.compiler.kernel import Kernel, itemsize, size_code
from pyree.compiler.module_writer import size_expr_table
from pyree.compiler.sizes import is_static


@dataclass(frozen=True)
class Launch:
    """What a template decided: the export's grid, block and dynamic shared-memory size."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_memory_bytes: int = 0


def export_name(index: int, kernel: Kernel) -> str:
    """Export ``index``'s entry point name: unique by its index, readable by the kernel's name."""
    safe = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in kernel.name)
    return f"k{index}_{safe}"[:120]


def binding_layouts(kernel: Kernel) -> list[BindingLayoutT]:
    """What the runtime checks each binding against before a launch: access, bytes touched
    (where that is a run-time size, ``min_length_expr`` over the push constants, with 0 the
    static floor) and the alignment its loads and stores assume (an element's size)."""
    layouts = []
    for binding in kernel.bindings:
        layout = BindingLayoutT()
        layout.access = getattr(BindingAccess, binding.access)
        layout.alignment = itemsize(binding.dtype)
        if is_static(binding.num_bytes):
            layout.minLength = binding.num_bytes
        else:
            layout.minLength = 0
            layout.minLengthExpr = size_expr(binding.num_bytes)
        layouts.append(layout)
    return layouts


def size_expr(value) -> SizeExprT:
    """A kernel's run-time size as the schema's SizeExpr, its symbol k push constant k."""
    return size_expr_table(size_code(value))


def gpu_export(kernel: Kernel, name: str, launch: Launch) -> GpuExportT:
    """A grid of run-time sizes goes to ``grid_size_expr``, its static ``grid_size`` then 0."""
    export = GpuExportT()
    export.name = name
    export.gridSize = list(launch.grid)
    if not all(is_static(g) for g in launch.grid):
        export.gridSize = [0, 0, 0]
        export.gridSizeExpr = [size_expr(g) for g in launch.grid]
    export.blockSize = list(launch.block)
    export.sharedMemoryBytes = launch.shared_memory_bytes
    export.bindings = binding_layouts(kernel)
    return export
