"""Evaluates check ops (IREE's check dialect) on the host, with IREE's failure messages.

On the operands' Python values (HostArray), as IREE's float64 comparisons: no numpy.
"""

from __future__ import annotations

import math

from pyree.runtime.records import Record
from pyree.runtime.vm.formatting import format_array
from pyree.runtime.vm.host_array import HostArray
from pyree.runtime.vm.tensor_type import TensorType


class CheckFailure(Record):
    location: str    # "file:line:col" of the check op, or ""
    kind: str        # "expect_eq", ...
    message: str


class Operand(Record):
    kind: str        # buffer kind: "argument", "result", "transient", "constant"
    index: int
    offset: int
    length: int
    type: TensorType


class CheckStep(Record):
    kind: str
    location: str
    lhs: Operand
    rhs: Operand | None
    atol: float
    rtol: float
    message: str = ""  # cf.assert's: the failure's text


def _assertion(step: CheckStep, lhs: HostArray) -> CheckFailure | None:
    """cf.assert: fails with its own message when its condition is false."""
    return None if lhs.values(1)[0] else CheckFailure(step.location, "assert", step.message)


def evaluate(step: CheckStep, lhs: HostArray, rhs: HostArray | None) -> CheckFailure | None:
    """Returns the failure of one check given its operands' values, or None when it holds."""
    if step.message:
        return _assertion(step, lhs)
    shown = format_array(lhs)
    if step.kind in ("expect_true", "expect_false"):
        value = lhs.values(1)[0]
        if bool(value) == (step.kind == "expect_true"):
            return None
        wanted = "nonzero" if step.kind == "expect_true" else "zero"
        return CheckFailure(step.location, step.kind, f"Expected {shown} to be {wanted}.")
    if step.kind == "expect_all_true":
        if all(lhs.values()):
            return None
        return CheckFailure(step.location, step.kind,
                            f"Expected all elements to be nonzero. Contents: {shown}")
    rhs_shown = format_array(rhs)
    if step.kind == "expect_eq":
        if bytes(lhs.data) == bytes(rhs.data):
            return None
        return CheckFailure(step.location, step.kind,
                            f"Expected equality of these values. Contents does not match. "
                            f"lhs: {shown} rhs: {rhs_shown}")
    if all(_close(float(a), float(b), step.atol, step.rtol)
           for a, b in zip(lhs.values(), rhs.values())):
        return None
    return CheckFailure(step.location, step.kind,
                        f"Expected near equality of these values. Contents does not match to "
                        f"tolerance parameters atol={step.atol:g}, rtol={step.rtol:g}. "
                        f"lhs: {shown} rhs: {rhs_shown}")


def _close(a: float, b: float, atol: float, rtol: float) -> bool:
    """IREE's expect_almost_eq per element, in float64; NaN matches NaN (inf - inf is NaN, so an
    infinity matches nothing, as in IREE's)."""
    return abs(a - b) <= atol + rtol * abs(b) or (math.isnan(a) and math.isnan(b))
