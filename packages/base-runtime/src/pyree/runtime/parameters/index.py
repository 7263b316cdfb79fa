"""Parameter files by scope, as ``iree-run-module --parameters=[scope=]file`` builds them, and
the lookup of a module constant's (scope, key) in them.

Only the index (the IRPA header and entry table, or the safetensors JSON header) is read at
open; a tensor is read when a module resolves it, or, for a device that reads host memory in
place, handed out as pages of the file's mapping, guarded against changes (file.py, lease.py).
Within a scope the first file holding a key provides it, as in IREE. The bytes found must be exactly what
the constant's type needs; a safetensors file also records dtype and shape, and those must agree.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from pyree.runtime.element_types import ITEMSIZES, NAMES, spell
from pyree.runtime.parameters.entry import Entry, ParameterError
from pyree.runtime.parameters.file import ParameterFile
from pyree.runtime.parameters.irpa import MAGIC, read_irpa
from pyree.runtime.parameters.safetensors import read_safetensors
from pyree.runtime.records import Record

Spec = str | os.PathLike | tuple[str, str | os.PathLike]

# Safetensors dtypes each element type accepts: integers by width (the bytes are the same).
_SAFETENSORS = {"f32": ("F32",), "f16": ("F16",), "bf16": ("BF16",), "f64": ("F64",),
                "i1": ("BOOL",), **{f"{p}{w}": (f"I{w}", f"U{w}") for p in ("i", "ui")
                                    for w in (8, 16, 32, 64)}}


class _File(Record):
    path: str
    data: ParameterFile
    entries: dict[str, Entry]


class ParameterIndex:
    """The parameter files given for each scope (the empty string: no scope)."""

    def __init__(self, specs: Iterable[Spec] = ()):
        self._scopes: dict[str, list[_File]] = {}
        for spec in specs:
            self.add(*parse_spec(spec))

    def add(self, scope: str, path: str | os.PathLike) -> None:
        self._scopes.setdefault(scope, []).append(_open(os.fspath(path)))

    def resolve(self, scope: str, key: str, element_type: int, dims: list[int],
                where: str, in_place: bool = False) -> memoryview | bytes | bytearray:
        """The bytes of parameter ``scope::key`` for a constant of that type: read from the
        file, or the expanded pattern of a splat entry; with ``in_place`` (a device that reads
        host memory in place), a 64-byte aligned tensor is the file's mapped pages where the
        file can be guarded (file.py)."""
        name = f"'{scope}::{key}'" if scope else f"'{key}'"
        files = self._scopes.get(scope)
        if not files:
            flag = f"--parameters={scope}=FILE" if scope else "--parameters=FILE"
            raise ParameterError(f"{where} is parameter {name}, but no parameter file was given "
                                 f"for scope '{scope}' ({flag}, or load_module(..., "
                                 f"parameters=[...]))")
        found = next(((f, f.entries[key]) for f in files if key in f.entries), None)
        if found is None:
            listed = ", ".join(f"'{f.path}'" for f in files)
            raise ParameterError(f"{where} is parameter {name}, which is not in the parameter "
                                 f"file(s) of scope '{scope}': {listed}")
        file, entry = found
        need = spell(element_type, dims)
        size = ITEMSIZES[element_type]
        for d in dims:
            size *= d
        if entry.dtype is not None and (entry.dtype not in _SAFETENSORS[NAMES[element_type]]
                                        or list(entry.shape) != list(dims)):
            raise ParameterError(f"parameter {name} in '{file.path}' is {entry.dtype} "
                                 f"{list(entry.shape)}, but {where} is {need}")
        if entry.length != size:
            raise ParameterError(f"parameter {name} in '{file.path}' is {entry.length} bytes, "
                                 f"but {where} is {need}, {size} bytes")
        if entry.splat is not None:
            return entry.splat * (size // len(entry.splat))
        if in_place and entry.offset % 64 == 0 and entry.length:
            mapped = file.data.in_place(entry.offset, entry.length)
            if mapped is not None:
                return mapped
        return file.data.copy(entry.offset, entry.length)


def parse_spec(spec: Spec) -> tuple[str, str | os.PathLike]:
    """(scope, path) of ``"[scope=]path"``, a path (no scope) or a (scope, path) pair."""
    if isinstance(spec, tuple):
        return spec
    if isinstance(spec, os.PathLike) or "=" not in spec:
        return "", spec
    scope, _, path = spec.partition("=")
    return scope, path


def _open(path: str) -> _File:
    data = ParameterFile(path)
    suffix = os.path.splitext(path)[1]  # (pathlib's import is not free)
    if suffix == ".gguf":
        raise ParameterError(f"parameter file '{path}': GGUF is not supported; convert it to "
                             f".irpa (iree-convert-parameters) or .safetensors")
    start = data[0:9]
    if suffix == ".irpa" or start[:4] == MAGIC:
        return _File(path, data, read_irpa(data, path))
    if suffix == ".safetensors" or start[8:9] == b"{":
        return _File(path, data, read_safetensors(data, path))
    raise ParameterError(f"parameter file '{path}' is neither an IREE parameter archive (.irpa) "
                         f"nor a safetensors file (.safetensors)")
