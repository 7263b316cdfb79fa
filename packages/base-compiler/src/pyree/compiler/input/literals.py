"""MLIR's reading of float literals in attributes, where xDSL's differs.

In MLIR a hexadecimal literal of a float type is the bit pattern of that type: ``0xFF800000 : f32``
and ``dense<0xFF800000>`` are -inf (PyTorch exports its causal mask so), and a decimal literal beyond
the type's range rounds to ±inf (``1.0e5 : f16``). xDSL reads a hex element of a float tensor as the
number 4286578688.0 and refuses out-of-range decimals, so the parser (``parser.py``) builds these
attributes here instead. Integer literals and ``dense<"0x...">`` blobs xDSL already reads as MLIR does.
"""

from __future__ import annotations

import math

import numpy as np
from pyree.compiler.kernel.ir import DTYPES
from xdsl.dialects.builtin import (
    BFloat16Type,
    BytesAttr,
    DenseIntOrFPElementsAttr,
    Float16Type,
    Float32Type,
    Float64Type,
)
from xdsl.ir import Attribute

_FLOATS = {Float16Type: "f16", Float32Type: "f32", Float64Type: "f64", BFloat16Type: "bf16"}


def float_dtype(element_type: Attribute) -> np.dtype | None:
    """The numpy dtype of a float type read here; None for the types left to xDSL."""
    name = _FLOATS.get(type(element_type))
    return None if name is None else DTYPES[name]


def float_value(value: int | float, spelling: str, dtype: np.dtype) -> np.generic:
    """The ``dtype`` value of a literal spelled ``spelling`` that xDSL read as ``value``."""
    if _is_hex(spelling):
        if value < 0:
            raise ValueError("a hexadecimal float literal cannot be negative")
        if value >> (8 * dtype.itemsize):
            raise ValueError(f"hexadecimal float literal {spelling} does not fit in {dtype.itemsize} bytes")
        return np.array(value, np.dtype(f"<u{dtype.itemsize}")).view(dtype)[()]
    with np.errstate(over="ignore"):
        return np.array(_wide(value)).astype(dtype)[()]


def _is_hex(spelling: str) -> bool:
    return spelling.lower().startswith(("0x", "-0x"))


def _wide(value: int | float) -> float:
    """A decimal literal as a float64 (a hex one is replaced afterwards)."""
    try:
        return float(value)
    except OverflowError:  # an integer literal beyond any float
        return math.copysign(math.inf, value)


def dense_floats(type: Attribute, values: list[tuple[int | float, str]],
                 shape: list[int]) -> DenseIntOrFPElementsAttr:
    """``dense<...>`` of a float tensor from its literal's elements (value, spelling) and shape
    (``[]`` for a splat)."""
    dtype = float_dtype(type.get_element_type())
    type_shape = list(type.get_shape())
    if shape and shape != type_shape:
        raise ValueError(f"Shape mismatch in dense literal. Expected {type_shape} shape from "
                         f"the type, but got {shape} shape.")
    hexadecimal = [k for k, (_, spelling) in enumerate(values) if _is_hex(spelling)]
    with np.errstate(over="ignore"):  # out of range: ±inf, as in MLIR
        data = np.array([_wide(v) for v, _ in values], np.float64).astype(dtype)
    for k in hexadecimal:
        data[k] = float_value(*values[k], dtype)
    if not shape and not compact_splat(type):
        data = np.broadcast_to(data, (math.prod(type_shape),))
    return DenseIntOrFPElementsAttr(type, BytesAttr(data.tobytes()))  # little-endian hosts only


# Splat literals of at least this many elements keep their one element: xDSL repeats it for
# every element (4 GB for dense<1.0> : tensor<1000000000xf32>), and constants read one stored
# element as a splat (input/constants.py). Smaller ones are expanded as xDSL does, for the
# attributes (strides, dimensions) that are read element by element.
COMPACT_SPLAT = 1 << 16


def compact_splat(type: Attribute) -> bool:
    """Whether a splat literal of ``type`` keeps one stored element."""
    return math.prod(type.get_shape()) >= COMPACT_SPLAT
