"""Decompositions that keep PyTorch's answers where torch-mlir's lowering loses them.

Each is applied while torch-mlir retraces the exported program (its ``decomposition_table``),
only for the dtypes it names; for any other call it returns ``NotImplemented`` and the op is
lowered as before. Found by comparing single ops against PyTorch (BENCHMARKS.md, twenty-ninth
session):

- ``x == x`` and ``x != x`` of floats: torch-mlir folds them to all-true / all-false, so the
  usual test for NaN (``torch.where(x != x, 0, x)``) never fired; they are ``isnan`` instead.
- ``clamp`` and ``hardtanh`` (ReLU6) of floats: lowered as ``x <u lo ? lo : x`` (an unordered
  compare), so NaN came out as the lower bound; ordered compares keep NaN as PyTorch does.
- ``isfinite``: torch-mlir has no lowering for it; ``not (isnan or isinf)``.
- ``maximum`` and ``minimum`` of floats: lowered as ``a >o b ? a : b``, so a NaN in ``a``
  came out as ``b``; a NaN in either operand gives NaN, as in PyTorch.
- indexing with int32 index tensors (``x[i]``, which PyTorch takes): torch-mlir does not
  lower it; the indices are widened to int64 first.
- floor division of integers: lowered through f64 (``sitofp``, ``divf``, ``floor``), wrong for
  int64 values past 2^53; computed as truncating division corrected by the remainder's sign.
"""

from __future__ import annotations


def decompositions() -> dict:
    import torch

    aten = torch.ops.aten
    return {aten.eq.Tensor: _self_compare(True), aten.ne.Tensor: _self_compare(False),
            aten.clamp.default: _clamp, aten.clamp.Tensor: _clamp,
            aten.hardtanh.default: _hardtanh, aten.isfinite.default: _isfinite,
            aten.maximum.default: _nan_or("gt"), aten.minimum.default: _nan_or("lt"),
            aten.floor_divide.default: _floor_divide,
            aten.index.Tensor: _index,
            aten.div.Tensor_mode: _div_mode, aten.div.Scalar_mode: _div_mode}


def _is_float(x) -> bool:
    return getattr(x, "dtype", None) is not None and x.dtype.is_floating_point


def _self_compare(equal: bool):
    def compare(a, b):
        import torch
        if a is not b or not _is_float(a):
            return NotImplemented
        nan = torch.isnan(a)
        return torch.logical_not(nan) if equal else nan
    return compare


def _bounded(x, low, high):
    """``x`` within ``low`` and ``high`` (scalars, tensors or None), NaN in any of them NaN."""
    import math

    import torch
    for bound, past in ((low, torch.lt), (high, torch.gt)):
        if bound is None:
            continue
        if isinstance(bound, torch.Tensor):
            x = torch.where(torch.isnan(bound) | past(x, bound), bound, x)
        elif math.isnan(bound):
            x = torch.full_like(x, math.nan)
        else:
            x = torch.where(past(x, bound), bound, x)
    return x


def _clamp(x, min=None, max=None):  # noqa: A002 - aten's argument names
    if not _is_float(x) or any(isinstance(v, complex) for v in (min, max)):
        return NotImplemented
    return _bounded(x, min, max)


def _hardtanh(x, min_val=-1.0, max_val=1.0):
    if not _is_float(x):
        return NotImplemented
    return _bounded(x, min_val, max_val)


def _isfinite(x):
    import torch
    if not _is_float(x):
        return torch.ones_like(x, dtype=torch.bool)
    return torch.logical_not(torch.isnan(x) | torch.isinf(x))


def _nan_or(order: str):
    def extreme(a, b):
        import torch
        if not (_is_float(a) or _is_float(b)):
            return NotImplemented
        pick = torch.where(getattr(torch, order)(a, b), a, b)
        return torch.where(torch.isnan(a) | torch.isnan(b), a + b, pick)
    return extreme


def _index(x, indices):
    import torch
    if not any(i is not None and i.dtype == torch.int32 for i in indices):
        return NotImplemented
    return torch.ops.aten.index.Tensor(x, [i.long() if i is not None and i.dtype == torch.int32
                                           else i for i in indices])


def _floor_divide(a, b):
    import torch
    if _is_float(a) or _is_float(b) or isinstance(b, float):
        return NotImplemented
    q = torch.div(a, b, rounding_mode="trunc")
    r = a - q * b
    return q - ((r != 0) & ((r < 0) != (b < 0))).to(q.dtype)


def _div_mode(a, b, *, rounding_mode=None):
    if rounding_mode != "floor":
        return NotImplemented
    return _floor_divide(a, b)
