"""numpy's ``.npy`` files for the tools, without numpy: little-endian, C-order arrays of the
element types numpy has a plain dtype for. Importing numpy to read a small input would cost
more than the rest of a ``pyree-run-module``; IREE's tools read and write .npy natively. Anything
else (bf16, Fortran order, big-endian, an .npz archive) returns None: the caller then goes
through numpy, for the same result or error.
"""

from __future__ import annotations

import re
import sys

from pyree.runtime.element_types import BF16, ITEMSIZES
from pyree.runtime.vm.host_array import HostArray
from pyree.runtime.vm.tensor_type import TensorType

_MAGIC = b"\x93NUMPY"
_DESCR = {0: "<f4", 1: "<f2", 3: "<f8", 4: "|b1", 5: "|i1", 6: "<i2", 7: "<i4", 8: "<i8",
          9: "|u1", 10: "<u2", 11: "<u4", 12: "<u8"}  # element type -> numpy's descr
_TYPE_OF = {descr: element_type for element_type, descr in _DESCR.items()}
_HEADER = re.compile(r"""\{\s*'descr':\s*'([^']*)',\s*'fortran_order':\s*(True|False),\s*"""
                     r"""'shape':\s*\(([0-9,\s]*)\),?\s*\}\s*$""")
_ALIGN = 64  # numpy pads the header so that the data starts at a multiple of this
_NATIVE = sys.byteorder == "little"


def parse(data: bytes) -> HostArray | None:
    """The array in a .npy file's bytes, or None (not one this reader takes). ValueError names
    what is wrong with a .npy file whose data does not match its header."""
    if not _NATIVE or data[:6] != _MAGIC or len(data) < 10:
        return None
    size_bytes = 2 if data[6] == 1 else 4
    start = 8 + size_bytes
    header_len = int.from_bytes(data[8:start], "little")
    match = _HEADER.match(data[start:start + header_len].decode("latin-1"))
    if match is None or match.group(2) == "True" or match.group(1) not in _TYPE_OF:
        return None
    element_type = _TYPE_OF[match.group(1)]
    shape = tuple(int(d) for d in match.group(3).replace(",", " ").split())
    count = 1
    for d in shape:
        count *= d
    body = data[start + header_len:]
    if len(body) != count * ITEMSIZES[element_type]:
        raise ValueError(f"its header says {count} elements of {match.group(1)}, its data "
                         f"holds {len(body)} bytes")
    return HostArray(body, TensorType.of(element_type, shape))


def serialize(array: HostArray) -> bytes | None:
    """The .npy bytes of ``array``, as ``numpy.save`` writes them; None for bf16."""
    element_type = array.type.element_type
    if not _NATIVE or element_type == BF16:
        return None
    dims = array.type.shape
    shape = f"({dims[0]},)" if len(dims) == 1 else f"({', '.join(map(str, dims))})"
    header = f"{{'descr': '{_DESCR[element_type]}', 'fortran_order': False, 'shape': {shape}, }}"
    padding = _ALIGN - (len(_MAGIC) + 4 + len(header) + 1) % _ALIGN  # numpy's: never 0
    header = (header + " " * padding + "\n").encode("latin-1")
    return _MAGIC + b"\x01\x00" + len(header).to_bytes(2, "little") + header + bytes(array.data)
