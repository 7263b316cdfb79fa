"""Writes the module file: FlatBuffer root, 64-byte-aligned data segment, digest trailer.

The layout is documented in schemas/module.fbs. Backends and the host-program emitter build the
generated object-API tables (``pyree.compiler._fb.*T``) and hand byte payloads to ``add_data``,
which returns the ``DataRefT`` to store in them.
"""

from __future__ import annotations

import hashlib
import struct

import flatbuffers
import numpy as np
from pyree.compiler._fb.DataRef import DataRefT
from pyree.compiler._fb.KernelInfo import KernelInfoT
from pyree.compiler._fb.Module import ModuleT
from pyree.compiler._fb.SizeExpr import SizeExprT
from pyree.compiler.sizes import uses_comparisons

SCHEMA_VERSION = (1, 4)  # 1.1: branch commands; 1.2: the readback area; 1.3: parameters;
#                          1.4: each kernel's source ops (KernelInfo)
# 1.5: run-time sizes (SizeExpr, Symbol). Only a module that uses them says 1.5, so every other
# module stays byte for byte what a 1.4 reader reads.
RUN_TIME_SIZES_VERSION = (1, 5)
# 1.6: shape guards (Function.size_checks) and SizeExpr's comparisons and select; only a module
# that uses them says 1.6.
SIZE_GUARDS_VERSION = (1, 6)
# 1.7: a CPU executable's variants (CpuExecutable.variants); only a module with them says 1.7.
CPU_VARIANTS_VERSION = (1, 7)
# 1.8: branches decided by the call's sizes (Branch.condition_size); only a module with one
# says 1.8.
SIZE_BRANCHES_VERSION = (1, 8)
# 1.9: constants computed at load by the module's initializer (Constant.computed,
# Module.initializer); only a module with one says 1.9.
INITIALIZER_VERSION = (1, 9)
# 1.10: results tied to arguments (Function.tied_results); only a module with one says 1.10, and
# an older runtime refuses it (it would leave such a result's untouched bytes unset).
TIED_RESULTS_VERSION = (1, 10)
FILE_IDENTIFIER = b"PYRE"
TRAILER_MAGIC = b"PYRETRL1"
ALIGNMENT = 64


def size_expr_table(code: list[int]) -> SizeExprT:
    """The schema's SizeExpr table of a stack program (``sizes.code``), whatever its symbols
    number: a function's symbols (host program) or a kernel's push constants (exports)."""
    table = SizeExprT()
    table.code = code
    return table


class ModuleBuilder:
    def __init__(self, name: str, producer: str):
        self.module = ModuleT()
        self.module.schemaVersionMajor, self.module.schemaVersionMinor = SCHEMA_VERSION
        self.module.name = name
        self.module.producer = producer
        self.module.functions = []
        self.module.constants = []
        self.module.executables = []
        self.module.kernels = []
        self._data = bytearray()

    def add_kernel_info(self, name: str, sources: list[str]) -> None:
        """Names the next kernel ordinal and the "op @ file:line" of its source ops."""
        info = KernelInfoT()
        info.name, info.sources = name, list(sources)
        self.module.kernels.append(info)

    def add_data(self, payload: bytes | np.ndarray) -> DataRefT:
        """Appends ``payload`` to the data segment at the next 64-byte boundary."""
        raw = payload.tobytes() if isinstance(payload, np.ndarray) else bytes(payload)
        self._data.extend(b"\0" * (-len(self._data) % ALIGNMENT))
        ref = DataRefT()
        ref.offset, ref.length = len(self._data), len(raw)
        self._data.extend(raw)
        return ref

    def finish(self) -> bytes:
        versions = [(self.module.schemaVersionMajor, self.module.schemaVersionMinor)]
        if any(f.symbols for f in self.module.functions):
            guards = any(f.sizeChecks or any(uses_comparisons(e.code) for e in _size_exprs(f))
                         for f in self.module.functions)
            versions.append(SIZE_GUARDS_VERSION if guards else RUN_TIME_SIZES_VERSION)
        if any(e.cpu is not None and e.cpu.variants for e in self.module.executables):
            versions.append(CPU_VARIANTS_VERSION)
        if any(c.branch is not None and c.branch.conditionSize is not None
               for f in self.module.functions for c in f.commands or []):
            versions.append(SIZE_BRANCHES_VERSION)
        if self.module.initializer is not None:
            versions.append(INITIALIZER_VERSION)
        if any(f.tiedResults for f in self.module.functions):
            versions.append(TIED_RESULTS_VERSION)
        self.module.schemaVersionMajor, self.module.schemaVersionMinor = max(versions)
        builder = flatbuffers.Builder(1024)
        builder.Finish(self.module.Pack(builder), file_identifier=FILE_IDENTIFIER)
        out = bytearray(builder.Output())
        out.extend(b"\0" * (-len(out) % ALIGNMENT))
        data_offset = len(out)
        out.extend(self._data)
        out.extend(TRAILER_MAGIC + struct.pack("<Q", data_offset))
        out.extend(hashlib.sha256(out).digest())
        return bytes(out)


def _size_exprs(table):
    """Every SizeExpr table under ``table`` (an object-API table, or a list of them)."""
    if isinstance(table, SizeExprT):
        yield table
    elif isinstance(table, list):
        for item in table:
            yield from _size_exprs(item)
    elif hasattr(table, "__dict__"):
        for value in vars(table).values():
            if isinstance(value, list) or hasattr(value, "__dict__"):
                yield from _size_exprs(value)
