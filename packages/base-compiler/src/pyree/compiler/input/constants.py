"""Constant attributes -> numpy arrays and kernel IR scalars."""

from __future__ import annotations

import math

import numpy as np
from pyree.compiler.errors import CompileError
from pyree.compiler.kernel import DTYPES, Const
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, FloatAttr, IntegerAttr
from xdsl.ir import Attribute


def dense_array(attr: Attribute, dtype: str, shape: tuple[int, ...], where: str) -> np.ndarray:
    """The elements of a dense attribute as an array of ``shape`` (a splat is expanded)."""
    flat = _stored(attr, dtype, where)
    count = math.prod(shape)
    if flat.size == 1 and count != 1:
        flat = np.broadcast_to(flat, (count,))
    if flat.size != count:
        raise CompileError(f"a dense literal of {flat.size} elements for a {count}-element "
                           f"tensor", where)
    return flat.reshape(shape).copy()


def dense_contents(attr: Attribute, dtype: str, shape: tuple[int, ...],
                   where: str) -> tuple[np.ndarray | None, float | int | bool | None]:
    """A dense constant as ``(None, element)`` when every element has the same bits, else
    ``(array, None)``. A splat literal is never expanded: ``dense<1.0>`` of 10^9 elements would
    be 4 GB of copies of one number, before anything used it."""
    flat = _stored(attr, dtype, where)
    if flat.size == 1 and math.prod(shape) > 1:
        return None, python_scalar(flat[0], dtype)
    data = dense_array(attr, dtype, shape, where)
    return (None, python_scalar(data.reshape(-1)[0], dtype)) if is_splat(data) else (data, None)


def is_splat(data: np.ndarray) -> bool:
    """Every element has the same bits (so [0.0, -0.0] is not a splat, and a NaN splat is)."""
    flat = data.reshape(-1)
    if flat.size <= 1:
        return False
    bits = flat.view(np.dtype(f"u{flat.dtype.itemsize}")) if flat.dtype != np.bool_ else flat
    return bool(np.all(bits == bits[0]))


def _stored(attr: Attribute, dtype: str, where: str) -> np.ndarray:
    """The elements the attribute stores (one for a splat literal), flat."""
    if not isinstance(attr, DenseIntOrFPElementsAttr):
        raise CompileError(f"unsupported constant attribute {attr}", where)
    raw = attr.data.data
    if dtype == "i1":  # stored one byte per element, any non-zero byte is true
        return np.frombuffer(raw, np.uint8) != 0
    return np.frombuffer(raw, DTYPES[dtype])


def scalar_const(attr: Attribute, dtype: str, where: str) -> Const:
    """An ``arith.constant`` of scalar type as a kernel IR constant."""
    if isinstance(attr, FloatAttr):
        return Const(float(attr.value.data), dtype)
    if isinstance(attr, IntegerAttr):
        value = int(attr.value.data)
        return Const(value != 0 if dtype == "i1" else value, dtype)
    raise CompileError(f"unsupported scalar constant {attr}", where)


def python_scalar(value: np.generic, dtype: str):
    """A numpy scalar as the Python value a ``Const`` holds."""
    if dtype == "i1":
        return bool(value)
    return value.item()
