"""Turns a module compiled for cuda into one the rocm driver runs on the HIP-on-CUDA shim: every
executable becomes a RocmExecutable whose code object is the PTX (which the shim hands to
cuModuleLoadDataEx) and whose target_arch is the CUDA arch; exports, launch shapes and host
programs are unchanged. The file is rewritten through the compiler's own module writer, so its
data segment, alignment, trailer and digest are what the runtime's verifier expects.

    python3 tests/drivers/rocm/hip_on_cuda/relabel.py IN.vmfb OUT.vmfb
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Callable
from pathlib import Path

from pyree.compiler._fb.Executable import ExecutableT
from pyree.compiler._fb.ExecutableFormat import ExecutableFormat
from pyree.compiler._fb.Module import Module, ModuleT
from pyree.compiler._fb.RocmExecutable import RocmExecutableT
from pyree.compiler.module_writer import TRAILER_MAGIC, ModuleBuilder

TRAILER_SIZE = len(TRAILER_MAGIC) + 8 + 32  # magic, data segment offset, SHA-256


def data_segment(vmfb: bytes) -> memoryview:
    trailer = vmfb[-TRAILER_SIZE:]
    if trailer[:len(TRAILER_MAGIC)] != TRAILER_MAGIC:
        raise ValueError("not a pyree module file: the trailer magic is missing")
    (offset,) = struct.unpack_from("<Q", trailer, len(TRAILER_MAGIC))
    return memoryview(vmfb)[offset:len(vmfb) - TRAILER_SIZE]


def relabel(vmfb: bytes, edit_code: Callable[[bytes], bytes] = bytes) -> bytes:
    """The module with its cuda executables as rocm ones; ``edit_code`` may change the PTX (a
    test damages it)."""
    data = data_segment(vmfb)
    module = ModuleT.InitFromObj(Module.GetRootAs(vmfb, 0))
    builder = ModuleBuilder("", "")
    builder.module = module

    def moved(ref):
        return builder.add_data(bytes(data[ref.offset:ref.offset + ref.length]))

    for constant in module.constants or []:
        constant.data = moved(constant.data)
    executables = []
    for executable in module.executables or []:
        if executable.format != ExecutableFormat.cuda:
            raise ValueError(f"executable '{executable.name.decode()}' is not a cuda executable; "
                             "compile with --pyree-hal-target-backends=cuda only")
        cuda = executable.cuda
        rocm = RocmExecutableT()
        rocm.targetArch, rocm.exports = cuda.targetArch, cuda.exports
        ptx = bytes(data[cuda.ptx.offset:cuda.ptx.offset + cuda.ptx.length])
        rocm.codeObject = builder.add_data(edit_code(ptx))
        relabelled = ExecutableT()
        relabelled.name, relabelled.format, relabelled.rocm = (
            executable.name, ExecutableFormat.rocm, rocm)
        executables.append(relabelled)
    module.executables = executables
    return builder.finish()


if __name__ == "__main__":
    Path(sys.argv[2]).write_bytes(relabel(Path(sys.argv[1]).read_bytes()))
