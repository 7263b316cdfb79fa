"""Reads a module file: trailer, digest, identifier, schema version, then the unpack into the
object API's tree (unpack.py).

File layout (schemas/module.fbs): [FlatBuffer root] [padding] [data segment] [48-byte trailer:
"PYRETRL1", u64 data offset, SHA-256 of every preceding byte -- as ModuleBuilder writes it, the
digest also covers the magic and the data offset, so those are protected too]. Nothing is unpacked before the
digest matches and the bounds walk passes; any exception from the generated code is a ModuleError.
"""

from __future__ import annotations

import mmap
import struct

from pyree.runtime.errors import ModuleError
from pyree.runtime.module.bounds import check_bounds
from pyree.runtime.module.verifier import verify
from pyree.runtime.records import Record

TYPE_CHECKING = False  # (typing's import is not free)
if TYPE_CHECKING:
    from pyree.runtime._fb import ModuleT

TRAILER_MAGIC = b"PYRETRL1"
TRAILER_SIZE = 48
FILE_IDENTIFIER = b"PYRE"
ALIGNMENT = 64
SUPPORTED_MAJOR = 1
# The newest minor this runtime reads. A module says a newer minor only where it uses what that
# minor added (module_writer.py), which an older reader would misread (a 1.8 size branch has no
# `condition`, which 1.7 reads as a jump), so such a module is refused by name.
SUPPORTED_MINOR = 10


class Module(Record):
    """A verified module: the ``_fb`` object tree (strings as str, scalar vectors as lists of int)
    and the data segment that its DataRefs index."""

    tree: ModuleT
    data: memoryview
    digest: str  # SHA-256 of the file before the trailer, hex

    @property
    def name(self) -> str:
        return self.tree.name

    def bytes_of(self, ref) -> memoryview:
        """The data-segment bytes a (verified) DataRef names."""
        return self.data[ref.offset:ref.offset + ref.length]


def read_trailer(data: bytes) -> tuple[int, bytes]:
    """Checks size, magic, digest and data offset; returns (data offset, digest)."""
    if len(data) < TRAILER_SIZE + 8:
        raise ModuleError(f"module file is too small ({len(data)} bytes) to be a pyree module")
    trailer = bytes(data[-TRAILER_SIZE:])
    if trailer[:8] != TRAILER_MAGIC:
        raise ModuleError("module file has no pyree trailer (magic 'PYRETRL1' missing): "
                          "not a pyree module, or truncated")
    digest = trailer[16:]
    if _sha256(memoryview(data)[:-32]) != digest:
        raise ModuleError("module file is damaged (checksum mismatch): truncated or modified")
    data_offset = struct.unpack_from("<Q", trailer, 8)[0]
    if data_offset > len(data) - TRAILER_SIZE or data_offset % ALIGNMENT or data_offset < 8:
        raise ModuleError(f"module file is malformed: data segment offset {data_offset} is not a "
                          f"64-byte-aligned offset inside the file")
    return data_offset, digest


# Below this, Python's own SHA-256 digests the file: hashlib's (OpenSSL) is several times faster
# but maps libcrypto, which costs a process time and resident memory; at 1 MiB the two cost the
# same (measured).
OPENSSL_DIGEST_MIN_BYTES = 1 << 20


def _sha256(data: memoryview) -> bytes:
    if len(data) < OPENSSL_DIGEST_MIN_BYTES:
        try:
            from _sha256 import sha256  # CPython 3.11
        except ImportError:
            try:
                from _sha2 import sha256  # CPython 3.12+
            except ImportError:
                from hashlib import sha256
    else:
        from hashlib import sha256
    return sha256(data).digest()


def read_module(data: bytes | bytearray | memoryview | mmap.mmap) -> Module:
    """Reads and verifies a module file's bytes; raises ModuleError naming the first problem.
    An mmap is used in place: its owner vouches that nothing changes it (``load_module`` reads
    files into anonymous memory of their own; a mapping of the file itself would follow the
    file). Other bytes are copied once, so that what was verified cannot change."""
    # The generated readers load with the first module, not with the runtime.
    from pyree.runtime._fb import Module as _FbModule
    from pyree.runtime.module.unpack import unpack

    data = memoryview(data) if isinstance(data, mmap.mmap) else bytes(data)
    data_offset, digest = read_trailer(data)
    root = memoryview(data)[:data_offset]
    if bytes(root[4:8]) != FILE_IDENTIFIER:
        raise ModuleError(f"module file is malformed: FlatBuffer identifier is "
                          f"{bytes(root[4:8])!r}, expected b'PYRE'")
    check_bounds(root)
    try:
        fb = _FbModule.GetRootAs(root, 0)
        major, minor = fb.SchemaVersionMajor(), fb.SchemaVersionMinor()
    except Exception as e:
        raise ModuleError(f"module file is malformed: {e}") from None
    if major != SUPPORTED_MAJOR:
        raise ModuleError(f"module schema version {major}.{minor} is not supported by this runtime "
                          f"(supports {SUPPORTED_MAJOR}.x); recompile with a matching pyree-compile")
    if minor > SUPPORTED_MINOR:
        raise ModuleError(f"module schema version {major}.{minor} is newer than this runtime reads "
                          f"({SUPPORTED_MAJOR}.0 to {SUPPORTED_MAJOR}.{SUPPORTED_MINOR}): the "
                          f"module uses what a newer pyree-base-runtime added; upgrade the runtime "
                          f"or recompile with a matching pyree-compile")
    try:
        tree = unpack(root)
    except Exception as e:
        raise ModuleError(f"module file is malformed: {type(e).__name__}: {e}") from None
    module = Module(tree, memoryview(data)[data_offset:len(data) - TRAILER_SIZE], digest.hex())
    verify(module)
    return module
