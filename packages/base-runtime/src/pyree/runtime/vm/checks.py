"""Evaluates check ops (IREE's check dialect) on the host, with IREE's failure messages."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pyree.runtime.vm.formatting import format_array
from pyree.runtime.vm.tensor_type import TensorType


@dataclass(frozen=True)
class CheckFailure:
    location: str    # "file:line:col" of the check op, or ""
    kind: str        # "expect_eq", ...
    message: str


@dataclass(frozen=True)
class Operand:
    kind: str        # buffer kind: "argument", "result", "transient", "constant"
    index: int
    offset: int
    length: int
    type: TensorType


@dataclass(frozen=True)
class CheckStep:
    kind: str
    location: str
    lhs: Operand
    rhs: Operand | None
    atol: float
    rtol: float


def evaluate(step: CheckStep, lhs: np.ndarray, rhs: np.ndarray | None) -> CheckFailure | None:
    """Returns the failure of one check given its operands' values, or None when it holds."""
    shown = format_array(lhs)
    if step.kind in ("expect_true", "expect_false"):
        value = lhs.reshape(-1)[0]
        if bool(value) == (step.kind == "expect_true"):
            return None
        wanted = "nonzero" if step.kind == "expect_true" else "zero"
        return CheckFailure(step.location, step.kind, f"Expected {shown} to be {wanted}.")
    if step.kind == "expect_all_true":
        if lhs.astype(bool).all():
            return None
        return CheckFailure(step.location, step.kind,
                            f"Expected all elements to be nonzero. Contents: {shown}")
    rhs_shown = format_array(rhs)
    if step.kind == "expect_eq":
        if lhs.tobytes() == rhs.tobytes():
            return None
        return CheckFailure(step.location, step.kind,
                            f"Expected equality of these values. Contents does not match. "
                            f"lhs: {shown} rhs: {rhs_shown}")
    a, b = lhs.astype(np.float64), rhs.astype(np.float64)
    close = (np.abs(a - b) <= step.atol + step.rtol * np.abs(b)) | (np.isnan(a) & np.isnan(b))
    if close.all():
        return None
    return CheckFailure(step.location, step.kind,
                        f"Expected near equality of these values. Contents does not match to "
                        f"tolerance parameters atol={step.atol:g}, rtol={step.rtol:g}. "
                        f"lhs: {shown} rhs: {rhs_shown}")
