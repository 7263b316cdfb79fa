"""Parameter export, IREE's ``--iree-opt-export-parameters=[scope=]path``: every constant of at
least ``--iree-opt-minimum-parameter-export-size`` bytes (IREE's default: 256) leaves the module
for a parameter file, and the module keeps a (scope, key) reference that the runtime resolves
against the files given with ``--parameters`` (schemas/module.fbs, table Parameter).

The file is an IREE parameter archive (``.irpa``) or a safetensors file (``.safetensors``), by
extension. Keys are the names of the ``util.global``s the constants came from, else
``constant_N``. ``--iree-opt-splat-parameters=path.irpa`` writes an archive of zero splats for
every parameter the module reads, to run it without the real weights (export.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from pyree.compiler.errors import CompileError
from pyree.compiler.output_file import write_output
from pyree.compiler.parameters.irpa import write_irpa
from pyree.compiler.parameters.safetensors import write_safetensors

FORMATS = (".irpa", ".safetensors")

# key, pyree dtype, shape, bytes (anything with the buffer protocol: bytes, a uint8 array)
Tensor = tuple[str, str, tuple[int, ...], memoryview]


@dataclass(frozen=True)
class ExportTarget:
    scope: str
    path: Path

    @classmethod
    def parse(cls, spec: str) -> ExportTarget:
        """``[scope=]path.irpa`` or ``[scope=]path.safetensors``, as IREE spells it."""
        scope, _, path = spec.partition("=") if "=" in spec else ("", "", spec)
        if Path(path).suffix not in FORMATS:
            raise CompileError(f"--iree-opt-export-parameters={spec}: the parameter file must end "
                               f"in .irpa (IREE parameter archive) or .safetensors")
        return cls(scope, Path(path))

    def write(self, tensors: list[Tensor]) -> None:
        write_file(self.path, lambda f: write_parameters(f, self.path.suffix, tensors))


def write_file(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """Runs ``write`` on a new file that replaces ``path`` once complete (output_file.py);
    failing to write is a CompileError."""
    try:
        write_output(path, write)
    except OSError as e:
        raise CompileError(f"cannot write the parameter file '{path}': {e.strerror or e}") from None


def write_parameters(f, suffix: str, tensors: list[Tensor]) -> None:
    """Writes ``tensors`` to the binary stream ``f`` in the format ``suffix`` names."""
    if suffix == ".irpa":
        write_irpa(f, [(key, data) for key, _, _, data in tensors])
    else:
        write_safetensors(f, tensors)


__all__ = ["FORMATS", "ExportTarget", "Tensor", "write_file", "write_irpa", "write_parameters",
           "write_safetensors"]
