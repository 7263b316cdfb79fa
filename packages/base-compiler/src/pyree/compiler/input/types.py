"""MLIR types -> the tensor program's (dtype, shape), refusing what pyree cannot run yet."""

from __future__ import annotations

import math

from pyree.compiler.errors import CompileError
from pyree.compiler.kernel import itemsize
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerType,
    Signedness,
    TensorType,
)
from xdsl.ir import Attribute

# The most bytes one tensor may hold: far beyond any device's memory, and small enough that
# every size, offset and loop count the compiler computes stays exact in 64-bit integers (a
# 99999999999x99999999999 type overflowed numpy's int64 products, and allocating its zeros
# raised MemoryError). Types are checked as they are read, before anything is allocated.
MAX_TENSOR_BYTES = 2**48


def dtype_of(element_type: Attribute, where: str) -> str:
    """The kernel IR dtype name (``f32``, ``i8``, ``ui16``, ``index``...) of a scalar type."""
    if isinstance(element_type, Float32Type):
        return "f32"
    if isinstance(element_type, Float16Type):
        return "f16"
    if isinstance(element_type, Float64Type):
        return "f64"
    if isinstance(element_type, BFloat16Type):
        return "bf16"
    if isinstance(element_type, IndexType):
        return "index"
    if isinstance(element_type, IntegerType):
        width = element_type.width.data
        unsigned = element_type.signedness.data == Signedness.UNSIGNED
        if width == 1 and not unsigned:
            return "i1"
        if width in (8, 16, 32, 64):
            return f"{'ui' if unsigned else 'i'}{width}"
    raise CompileError(f"unsupported element type {element_type}", where)


def tensor_type_of(t: Attribute, where: str, dynamic: bool = False) -> tuple[str, tuple]:
    """(dtype, shape) of a ranked tensor type, or of a scalar as a rank-0 tensor. A ``?`` dim is
    refused, unless ``dynamic``: then it is None, for the caller to say what size it is (the
    rules that know where a run-time size comes from ask for it; every other rule refuses)."""
    if isinstance(t, TensorType):
        shape = tuple(None if dim == DYNAMIC_INDEX else dim for dim in t.get_shape())
        if None in shape and not dynamic:
            raise CompileError(f"dynamic dimensions are not supported yet (in {t})", where)
        dtype = dtype_of(t.get_element_type(), where)
        check_tensor_bytes(shape, dtype, str(t), where)
        return dtype, shape
    return dtype_of(t, where), ()


def check_tensor_bytes(shape: tuple, dtype: str, what: str, where: str) -> None:
    """CompileError where the static dims of ``shape`` alone hold more than a tensor may (a
    run-time size that folds to a huge constant, ``max(n, 2**62)``, included)."""
    size = math.prod(d for d in shape if isinstance(d, int)) * itemsize(dtype)
    if size > MAX_TENSOR_BYTES:
        raise CompileError(f"{what} holds {size:.3g} bytes, more than the {MAX_TENSOR_BYTES:.3g} "
                           "(2^48) a pyree tensor may hold", where)


def is_tensor(t: Attribute) -> bool:
    return isinstance(t, TensorType)
