"""Reading and verifying module files: nothing else in the runtime touches raw module bytes."""

from pyree.runtime.module.reader import Module, read_module

__all__ = ["Module", "read_module"]
