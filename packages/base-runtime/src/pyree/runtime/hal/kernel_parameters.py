"""A GPU kernel's parameters, as its code declares them, against what a launch gives it.

cuLaunchKernel and hipModuleLaunchKernel read one pointer per parameter the code declares from
the argument array: a dispatch with fewer bindings or push constants than that reads past the
array and crashes the process. The CUDA and ROCm drivers pack a launch as one 8-byte slot per
binding (its address) then one per push constant, so a kernel may run only if its first
parameters are 8-byte addresses, one per binding, the rest fit a slot, and a dispatch gives
exactly as many as it declares.
"""

from __future__ import annotations

from pyree.runtime.hal.timeline import HalError

SLOT = 8  # bytes the drivers pack per parameter


def check_layout(name: str, sizes: tuple[int, ...], bindings: int) -> None:
    """At load: the export's ``bindings`` are the kernel's first parameters, all fit a slot."""
    if len(sizes) < bindings or any(size != SLOT for size in sizes[:bindings]) \
            or any(size > SLOT for size in sizes[bindings:]):
        raise HalError("INVALID_ARGUMENT", f"kernel '{name}' takes parameters of {list(sizes)} "
                                           f"bytes, but the module gives it {bindings} bindings "
                                           f"(8-byte addresses) first and push constants of at "
                                           f"most {SLOT} bytes after")


def check_dispatch(name: str, sizes: tuple[int, ...], bindings: int, push_constants: int,
                   where: str) -> None:
    """When a dispatch is recorded: it gives exactly the kernel's parameters."""
    if bindings + push_constants != len(sizes):
        raise HalError("INVALID_ARGUMENT", f"{where}: kernel '{name}' takes {len(sizes)} "
                                           f"parameters, the dispatch gives {bindings} bindings "
                                           f"and {push_constants} push constants")
