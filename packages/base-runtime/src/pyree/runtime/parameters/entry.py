"""What a parameter file's index says about one key, and the error every reader raises."""

from __future__ import annotations

from pyree.runtime.errors import PyreeError
from pyree.runtime.records import Record


class ParameterError(PyreeError):
    """A parameter file is missing, damaged, or does not hold what the module needs."""


class Entry(Record):
    """``length`` bytes at ``offset`` in the file, or a repeated ``splat`` pattern (IRPA splat
    entries: no bytes on disk). ``dtype`` (a safetensors dtype name) and ``shape`` where the
    format records them."""

    offset: int
    length: int
    splat: bytes | None = None
    dtype: str | None = None
    shape: tuple[int, ...] | None = None
