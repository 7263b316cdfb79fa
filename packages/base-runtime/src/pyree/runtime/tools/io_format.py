"""IREE's textual tensor format for `--input`/`--output` and result printing.

A value is ``<dims>x<dtype>=<elements>`` (``2x3xf32=[1 2 3][4 5 6]``), or ``<dtype>=<element>``
for a scalar. Brackets, commas and whitespace all separate elements, as in IREE, so
``4xf32=1,2,3,4`` and ``2x2xf32=[[1 2][3 4]]`` are the same thing; one element is splatted over
the whole shape. An input ``@file.npy`` is a numpy file, ``<type>=@file.bin`` the raw elements
of that type (host byte order); an output ``@file.npy`` writes, ``+file.npy`` appends (a ``.bin``
path: the raw elements, as IREE writes them), ``-`` prints and an empty spec drops the result.

Values are HostArrays (vm/host_array.py): text in and out needs no numpy, and neither do .npy
files of numpy's plain dtypes (tools/npy.py); bf16, Fortran-order or big-endian ones import it.
"""

from __future__ import annotations

import math

from pyree.runtime.element_types import (
    BF16,
    BY_NAME,
    FLOAT_TYPES,
    I1,
    ITEMSIZES,
    NAMES,
    integer_range,
    pack,
    spell,
)
from pyree.runtime.errors import InvocationError
from pyree.runtime.records import Record
from pyree.runtime.vm.formatting import format_array, format_element  # noqa: F401 (re-exported)
from pyree.runtime.vm.host_array import HostArray
from pyree.runtime.vm.tensor_type import TensorType

_SEPARATORS = str.maketrans(",[]", "   ")  # then split on whitespace (no ``re`` to import)
_I1_VALUES = {"0": False, "1": True, "false": False, "true": True}


class InputError(ValueError):
    """A value string or an --output spec that cannot be used; the message says what is wrong."""


def parse_value(text: str) -> HostArray:
    """Parses one ``--input`` string into a host array; ``@path.npy`` loads a numpy file."""
    if text.startswith("@"):
        return _load_npy(text[1:])
    head, has_data, data = text.strip().partition("=")
    shape, element_type = _parse_type(head.strip())
    count = math.prod(shape)
    if data.strip().startswith("@"):
        return _load_raw(data.strip()[1:], shape, element_type, count)
    tokens = data.translate(_SEPARATORS).split() if has_data else []
    if tokens and len(tokens) not in (1, count):  # none: zero-filled, as IREE does
        raise InputError(f"{count} elements expected, {len(tokens)} given")
    values = [_parse_element(t, element_type) for t in tokens]
    try:
        return HostArray.from_values(values, shape, element_type)
    except OverflowError:  # a float past the type's largest: name the first such
        token = next(t for t, v in zip(tokens, values) if _overflows(v, element_type))
        raise InputError(f"{token} is out of range for {NAMES[element_type]}") from None


def _overflows(value: float, element_type: int) -> bool:
    try:
        pack([value], element_type)
    except OverflowError:
        return True
    return False


def _parse_type(head: str) -> tuple[tuple[int, ...], int]:
    if not head:
        raise InputError("missing the type, e.g. 4xf32=1 2 3 4 or f32=2")
    *dims, name = head.split("x")
    if name not in BY_NAME:
        known = ", ".join(BY_NAME)
        raise InputError(f"unknown element type '{name}' (known: {known})")
    if not all(d.isascii() and d.isdigit() for d in dims):
        raise InputError(f"bad shape '{'x'.join(dims)}': dimensions must be non-negative integers")
    return tuple(int(d) for d in dims), BY_NAME[name]


def _plain(token: str) -> bool:
    """Numbers as IREE's tools spell them: ASCII without '_' or spaces (Python's int() and float()
    also take "1_000", " 7" and Arabic-Indic digits). No `re`: the tool's start-up stays lean."""
    return token.isascii() and "_" not in token and token == token.strip()


def _parse_element(token: str, element_type: int) -> bool | int | float:
    if element_type == I1:
        if token.lower() not in _I1_VALUES:
            raise InputError(f"'{token}' is not an i1 value (0, 1, true or false)")
        return _I1_VALUES[token.lower()]
    if element_type in FLOAT_TYPES:
        try:
            value = float(token) if _plain(token) else None
        except ValueError:
            value = None
        if value is None:
            raise InputError(f"'{token}' is not a number")
        if math.isinf(value) and "inf" not in token.lower():  # 1e400: past even f64
            raise InputError(f"{token} is out of range for {NAMES[element_type]}")
        return value
    try:
        value = int(token, 10) if _plain(token) else None
    except ValueError:
        value = None
    if value is None:
        raise InputError(f"'{token}' is not an integer")
    low, high = integer_range(element_type)
    if not low <= value <= high:
        raise InputError(f"{token} is out of range for {NAMES[element_type]} [{low}, {high}]")
    return value


def _load_npy(path: str) -> HostArray:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror or e}") from None
    from pyree.runtime.tools import npy

    try:
        array = npy.parse(data)
    except ValueError as e:
        raise InputError(f"{path} is not a readable .npy file ({e})") from None
    if array is not None:
        return array
    import io

    import numpy as np

    try:
        array = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, EOFError, OSError) as e:
        raise InputError(f"{path} is not a readable .npy file ({e})") from None
    if not isinstance(array, np.ndarray):
        raise InputError(f"{path} is an .npz archive; give one .npy array")
    if array.dtype.kind == "V" and array.dtype.itemsize == 2 and array.dtype.names is None:
        # bf16, which numpy lacks: --output's .npy of a bf16 result and ml_dtypes' both say V2
        raw = np.ascontiguousarray(array).view(np.uint16).astype("<u2", copy=False)
        return HostArray(raw.tobytes(), TensorType.of(BF16, tuple(array.shape)))
    try:
        return HostArray.from_numpy(array)
    except InvocationError:
        raise InputError(f"{path} holds {array.dtype} elements, which no module takes") from None


def _load_raw(path: str, shape: tuple[int, ...], element_type: int, count: int) -> HostArray:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror or e}") from None
    size = ITEMSIZES[element_type]
    if len(data) // size != count:
        raise InputError(f"{path} holds {len(data) // size} {NAMES[element_type]} elements, "
                         f"{spell(element_type, shape)} needs {count}")
    return HostArray(data[:count * size], TensorType.of(element_type, shape))


class OutputSpec(Record):
    """What to do with one result: ``print``, ``ignore``, or ``write``/``append`` to ``path``."""

    action: str
    path: str = ""


def parse_output_spec(text: str) -> OutputSpec:
    if text == "":
        return OutputSpec("ignore")
    if text == "-":
        return OutputSpec("print")
    if text[0] in "@+" and len(text) > 1:
        return OutputSpec("write" if text[0] == "@" else "append", text[1:])
    raise InputError(
        f"'{text}' is not an output spec: use @file.npy (write), +file.npy (append), - (print) "
        "or an empty value (ignore)"
    )


def save_npy(spec: OutputSpec, array: HostArray) -> None:
    """Writes (or appends, so several results share one file) ``array`` at ``spec.path``: as .npy,
    or, for a ``.bin`` path, as its raw elements; atomically (runtime/output_file.py)."""
    from pyree.runtime.output_file import write_output
    from pyree.runtime.tools import npy

    if spec.path.endswith(".bin"):
        data = bytes(array.data)
    elif (data := npy.serialize(array)) is None:
        import io

        import numpy as np

        stream = io.BytesIO()
        np.save(stream, array.to_numpy(), allow_pickle=False)
        data = stream.getvalue()
    write_output(spec.path, data, append=spec.action == "append")
