"""The exceptions pyree.runtime raises; every message names the problem and where it is.

Tools print ``str(error)`` without a traceback, so each message is written to stand alone.
"""

from __future__ import annotations


class PyreeError(Exception):
    """Base of every error the runtime raises on purpose."""


class ModuleError(PyreeError):
    """The module file is damaged, malformed, from an unsupported schema, or cannot run here."""


class DriverError(PyreeError):
    """A HAL driver call failed; ``status`` is the ABI status code, ``status_name`` its name."""

    def __init__(self, message: str, status: int, status_name: str):
        super().__init__(message)
        self.status = status
        self.status_name = status_name


class InvocationError(PyreeError):
    """A function was called wrongly: unknown name, wrong argument count, shape or dtype."""


class CheckError(PyreeError):
    """A check op (IREE's check dialect) failed while the function ran; ``failures`` says which."""

    def __init__(self, failures: list):
        super().__init__("\n".join(f"{f.location}: {f.message}" if f.location else f.message
                                   for f in failures))
        self.failures = failures
