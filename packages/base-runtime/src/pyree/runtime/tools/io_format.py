"""IREE's textual tensor format for `--input`/`--output` and result printing.

A value is ``<dims>x<dtype>=<elements>`` (``2x3xf32=[1 2 3][4 5 6]``), or ``<dtype>=<element>``
for a scalar. Brackets, commas and whitespace all separate elements, as in IREE, so
``4xf32=1,2,3,4`` and ``2x2xf32=[[1 2][3 4]]`` are the same thing; one element is splatted over
the whole shape. An input ``@file.npy`` is a numpy file, ``<type>=@file.bin`` the raw elements
of that type (host byte order); an output ``@file.npy`` writes, ``+file.npy`` appends (a ``.bin``
path: the raw elements, as IREE writes them), ``-`` prints and an empty spec drops the result.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from pyree.runtime.element_types import dtype_spelling
from pyree.runtime.vm.formatting import format_array, format_element  # noqa: F401 (re-exported)

# IREE element type spellings; "i" is signless and taken as signed, like IREE's tools do.
DTYPES: dict[str, np.dtype] = {
    name: np.dtype(dtype)
    for name, dtype in {
        "f16": np.float16,
        "f32": np.float32,
        "f64": np.float64,
        "i1": np.bool_,
        "i8": np.int8,
        "i16": np.int16,
        "i32": np.int32,
        "i64": np.int64,
        "si8": np.int8,
        "si16": np.int16,
        "si32": np.int32,
        "si64": np.int64,
        "ui8": np.uint8,
        "ui16": np.uint16,
        "ui32": np.uint32,
        "ui64": np.uint64,
    }.items()
}

try:  # bf16 has no numpy dtype; the runtime maps it to ml_dtypes.bfloat16 when that is installed
    import ml_dtypes

    DTYPES["bf16"] = np.dtype(ml_dtypes.bfloat16)
except ImportError:
    pass

_SEPARATORS = re.compile(r"[\s,\[\]]+")


class InputError(ValueError):
    """A value string or an --output spec that cannot be used; the message says what is wrong."""


def type_string(shape: tuple[int, ...], dtype: np.dtype) -> str:
    """``4x5xf32``; ``f32`` for a scalar; dynamic dims (-1) print as ``?``."""
    return "x".join(["?" if d < 0 else str(d) for d in shape] + [dtype_spelling(dtype)])


def parse_value(text: str) -> np.ndarray:
    """Parses one ``--input`` string into a host array; ``@path.npy`` loads a numpy file."""
    if text.startswith("@"):
        return _load_npy(text[1:])
    head, has_data, data = text.strip().partition("=")
    shape, dtype = _parse_type(head.strip())
    count = int(np.prod(shape, dtype=np.int64))
    if data.strip().startswith("@"):
        return _load_raw(data.strip()[1:], shape, dtype, count)
    tokens = [t for t in _SEPARATORS.split(data) if t] if has_data else []
    if not tokens:
        return np.zeros(shape, dtype)  # IREE: a type with no elements is zero-filled
    if len(tokens) not in (1, count):
        raise InputError(f"{count} elements expected, {len(tokens)} given")
    values = np.array([_parse_element(t, dtype) for t in tokens], dtype)
    return np.full(shape, values[0], dtype) if len(tokens) == 1 else values.reshape(shape)


def _parse_type(head: str) -> tuple[tuple[int, ...], np.dtype]:
    if not head:
        raise InputError("missing the type, e.g. 4xf32=1 2 3 4 or f32=2")
    *dims, name = head.split("x")
    if name not in DTYPES:
        known = ", ".join(DTYPES)
        raise InputError(f"unknown element type '{name}' (known: {known})")
    if not all(d.isdigit() for d in dims):
        raise InputError(f"bad shape '{'x'.join(dims)}': dimensions must be non-negative integers")
    return tuple(int(d) for d in dims), DTYPES[name]


def _parse_element(token: str, dtype: np.dtype) -> object:
    if dtype == np.bool_:
        flags = {"0": False, "1": True, "false": False, "true": True}
        if token.lower() not in flags:
            raise InputError(f"'{token}' is not an i1 value (0, 1, true or false)")
        return flags[token.lower()]
    if dtype.kind not in "iu":  # f16, f32, f64, bf16
        try:
            value = float(token)
        except ValueError:
            raise InputError(f"'{token}' is not a number") from None
        with np.errstate(over="ignore"):
            overflows = np.isfinite(value) and not np.isfinite(np.float64(value).astype(dtype))
        if overflows:
            raise InputError(f"{token} is out of range for {dtype_spelling(dtype)}")
        return value
    try:
        value = int(token, 10)
    except ValueError:
        raise InputError(f"'{token}' is not an integer") from None
    info = np.iinfo(dtype)
    if not info.min <= value <= info.max:
        raise InputError(
            f"{token} is out of range for {dtype_spelling(dtype)} [{info.min}, {info.max}]"
        )
    return value


def _load_npy(path: str) -> np.ndarray:
    try:
        array = np.load(path, allow_pickle=False)
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror or e}") from None
    except (ValueError, EOFError) as e:
        raise InputError(f"{path} is not a readable .npy file ({e})") from None
    if not isinstance(array, np.ndarray):
        raise InputError(f"{path} is an .npz archive; give one .npy array")
    array = array.astype(array.dtype.newbyteorder("="), copy=False)
    if array.dtype not in DTYPES.values():
        raise InputError(f"{path} holds {array.dtype} elements, which no module takes")
    return array


def _load_raw(path: str, shape: tuple[int, ...], dtype: np.dtype, count: int) -> np.ndarray:
    try:
        data = np.fromfile(path, dtype=dtype)
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror or e}") from None
    if data.size != count:
        raise InputError(f"{path} holds {data.size} {dtype_spelling(dtype)} elements, "
                         f"{type_string(shape, dtype)} needs {count}")
    return data.reshape(shape)


@dataclass(frozen=True)
class OutputSpec:
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


def save_npy(spec: OutputSpec, array: np.ndarray) -> None:
    """Writes (or appends, so several results share one file) ``array`` at ``spec.path``: as .npy,
    or, for a ``.bin`` path, as its raw elements."""
    with open(spec.path, "ab" if spec.action == "append" else "wb") as f:
        if spec.path.endswith(".bin"):
            f.write(np.ascontiguousarray(array).tobytes())
        else:
            np.save(f, array, allow_pickle=False)
